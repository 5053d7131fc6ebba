// The 16-bit output dither (src/dsp/dither.ts): level, spectrum, chunk independence, and what it is for: rounding
// a signal below one 16-bit step without the distortion plain rounding gives it.
import { LowFrequencyDither } from '../../src/dsp/dither';
import { decodeFrames, encodeInt16 } from '../../src/dsp/pcm';

const LSB = 1 / 32768;
const round16 = (x: Float32Array) => decodeFrames(encodeInt16([x]), { format: 's16', channels: 1, blockAlign: 2 })[0];

/** Amplitude of the component at `hz` (least-squares fit of a sine and a cosine over whole periods). */
function amplitudeAt(x: Float32Array, hz: number, rate: number): number {
  let re = 0;
  let im = 0;
  for (let i = 0; i < x.length; i++) {
    re += x[i] * Math.cos((2 * Math.PI * hz * i) / rate);
    im += x[i] * Math.sin((2 * Math.PI * hz * i) / rate);
  }
  return (2 * Math.hypot(re, im)) / x.length;
}

/** Share of the power above `fromHz` (Welch: Hann-windowed 256-sample segments, periodograms averaged). */
function shareAbove(x: Float32Array, rate: number, fromHz: number): number {
  const N = 256;
  const win = Float64Array.from({ length: N }, (_, i) => 0.5 - 0.5 * Math.cos((2 * Math.PI * i) / N));
  const cos = Float64Array.from({ length: N }, (_, i) => Math.cos((2 * Math.PI * i) / N));
  const power = new Float64Array(N / 2 + 1);
  for (let start = 0; start + N <= x.length; start += N) {
    for (let k = 0; k <= N / 2; k++) {
      let re = 0;
      let im = 0;
      for (let i = 0; i < N; i++) {
        const v = x[start + i] * win[i];
        re += v * cos[(k * i) % N];
        im += v * cos[(k * i + (3 * N) / 4) % N];
      }
      power[k] += re * re + im * im;
    }
  }
  let high = 0;
  let all = 0;
  power.forEach((p, k) => {
    all += p;
    if ((k * rate) / N >= fromHz) high += p;
  });
  return high / all;
}

function rms(x: Float32Array): number {
  let s = 0;
  for (const v of x) s += v * v;
  return Math.sqrt(s / x.length);
}

describe('LowFrequencyDither', () => {
  it.each([16000, 48000])('adds about 1 LSB RMS at %i Hz, almost all of it below 1 kHz', (rate) => {
    const d = new LowFrequencyDither(rate, 1).process([new Float32Array(rate * 4)])[0];
    expect(rms(d) / LSB).toBeGreaterThan(0.85);
    expect(rms(d) / LSB).toBeLessThan(1.15);
    // The one-pole low-pass at 270 Hz leaves about 15 % of the power above 1 kHz and 3 % above 4 kHz (measured
    // 16 % / 3 % at 16 kHz, 14 % / 4 % at 48 kHz); white dither has 88 % / 50 % there at 16 kHz, 96 % / 83 % at 48 kHz.
    expect(shareAbove(d, rate, 1000)).toBeLessThan(0.2);
    expect(shareAbove(d, rate, 4000)).toBeLessThan(0.06);
  });

  it('gives the same samples whatever the chunking, per channel, and leaves its input alone', () => {
    const x = [Float32Array.from({ length: 20000 }, (_, i) => Math.sin(i / 7) * 0.1), new Float32Array(20000)];
    const copy = x.map((c) => c.slice());
    const whole = new LowFrequencyDither(16000, 2).process(x);
    expect(x).toEqual(copy);
    const d = new LowFrequencyDither(16000, 2);
    const parts: Float32Array[][] = [];
    for (const [a, b] of [[0, 1], [1, 4000], [4000, 4001], [4001, 20000]]) parts.push(d.process(x.map((c) => c.subarray(a, b))));
    for (let c = 0; c < 2; c++) {
      const joined = Float32Array.from(parts.flatMap((p) => Array.from(p[c])));
      expect(joined).toEqual(whole[c]);
    }
    // The two channels get different noises: their correlation is near zero.
    const n0 = whole[0].map((v, i) => v - x[0][i]);
    const n1 = whole[1];
    const dot = n0.reduce((s, v, i) => s + v * n1[i], 0);
    expect(Math.abs(dot / Math.sqrt(n0.reduce((s, v) => s + v * v, 0) * n1.reduce((s, v) => s + v * v, 0)))).toBeLessThan(0.1);
  });

  const rate = 16000;
  const sine = (a: number) => Float32Array.from({ length: rate * 8 }, (_, i) => a * Math.sin((2 * Math.PI * 500 * i) / rate));
  const ditherAndRound = (x: Float32Array) => round16(new LowFrequencyDither(rate, 1).process([x])[0]);

  it('keeps a sine of under half a 16-bit step, which plain rounding erases', () => {
    const a = 0.45 * LSB;
    expect(rms(round16(sine(a)))).toBe(0);
    expect(Math.abs(amplitudeAt(ditherAndRound(sine(a)), 500, rate) / a - 1)).toBeLessThan(0.1);
  });

  it('rounds a sine under one step without the harmonics plain rounding gives it', () => {
    const a = 0.7 * LSB;
    // Plain rounding: a pulse train (only the peaks beyond half a step survive), with a strong third harmonic.
    expect(amplitudeAt(round16(sine(a)), 1500, rate)).toBeGreaterThan(0.3 * a);
    const dithered = ditherAndRound(sine(a));
    expect(Math.abs(amplitudeAt(dithered, 500, rate) / a - 1)).toBeLessThan(0.1);
    expect(amplitudeAt(dithered, 1500, rate)).toBeLessThan(0.05 * a);
  });
});

describe('LowFrequencyDither.toInt16 (dither and rounding in one pass, the in-process WAV writer)', () => {
  test('the same bytes as encodeInt16 after processInPlace, chunk after chunk, with non-finite and out-of-range samples', () => {
    const frames = 5000;
    const make = (seed: number) =>
      Float32Array.from({ length: frames }, (_, i) => {
        if (i % 997 === 0) return NaN;
        if (i % 991 === 0) return (i & 1 ? 1 : -1) * Infinity;
        if (i % 983 === 0) return (i & 1 ? 1 : -1) * 3e38;
        return 1.2 * Math.sin(i * 0.013 * seed) + (i % 7) * 1e-6; // clips at the peaks; sub-LSB detail elsewhere
      });
    const planar = [make(1), make(2)];
    const twoPass = new LowFrequencyDither(48000, 2);
    const onePass = new LowFrequencyDither(48000, 2);
    for (const [from, to] of [[0, 1234], [1234, 1235], [1235, 4000], [4000, frames]]) {
      const chunk = planar.map((x) => x.slice(from, to));
      const expected = encodeInt16(twoPass.processInPlace(chunk.map((x) => x.slice())));
      const got = onePass.toInt16(chunk);
      expect(got.equals(expected)).toBe(true);
      expect(chunk.map((x) => Array.from(x))).toEqual(planar.map((x) => Array.from(x.slice(from, to)))); // untouched
    }
  });
});
