// The echo canceller in front of the chains (src/inference/echo-front.ts), on generated scenes (echo-helpers.ts): a
// silent reference gives the input back bit for bit at 16 and 48 kHz whatever the chunking, the output is as long as
// the input and lines up with it, chunking does not change it, and at 48 kHz the echo goes from both bands: below
// 8 kHz (the canceller) and above (the high band scaled by what the canceller removed in 4-7.5 kHz).
import { EchoFront } from '../src/inference/echo-front';
import { designLowpass } from '../src/dsp/resample';
import { db, echoScene, energy } from './echo-helpers';

/** Runs the front over mic + ref in chunks whose sizes cycle through `sizes`; returns the output (one channel). */
async function run(front: EchoFront, mic: Float32Array, ref: Float32Array, sizes: number[]): Promise<Float32Array> {
  const parts: Float32Array[] = [];
  for (let pos = 0, i = 0; pos < mic.length; i++) {
    const len = Math.min(sizes[i % sizes.length], mic.length - pos);
    parts.push((await front.push([mic.slice(pos, pos + len), ref.slice(pos, pos + len)]))[0]);
    pos += len;
  }
  parts.push((await front.end())[0]);
  const out = new Float32Array(parts.reduce((n, p) => n + p.length, 0));
  let o = 0;
  for (const p of parts) {
    out.set(p, o);
    o += p.length;
  }
  return out;
}

function sameBits(a: Float32Array, b: Float32Array): boolean {
  if (a.length !== b.length) return false;
  const x = new Uint32Array(a.buffer, a.byteOffset, a.length);
  const y = new Uint32Array(b.buffer, b.byteOffset, b.length);
  for (let i = 0; i < x.length; i++) if (x[i] !== y[i]) return false;
  return true;
}

/** The band above 8 kHz of a 48 kHz signal (linear phase FIR high-pass, delay compensated). */
function highBand(x: Float32Array): Float32Array {
  const taps = 201;
  const lp = designLowpass(taps, 8500 / 48000, 8);
  const mid = (taps - 1) / 2;
  const y = new Float32Array(x.length);
  for (let i = 0; i < x.length; i++) {
    let acc = 0;
    for (let k = 0; k < taps; k++) {
      const j = i + mid - k;
      if (j >= 0 && j < x.length) acc += lp[k] * x[j];
    }
    y[i] = x[i] - acc;
  }
  return y;
}

describe('echo front', () => {
  test.each([16000, 48000] as const)('%i Hz: a silent reference gives the input back bit for bit, in any chunking', async (rate) => {
    const scene = await echoScene({ rate, seconds: 4, nearFrom: 0 });
    const silent = new Float32Array(scene.mic.length);
    for (const sizes of [[scene.mic.length], [1000, 37, 4096], [rate]]) {
      const out = await run(new EchoFront(1, rate), scene.mic, silent, sizes);
      expect(sameBits(out, scene.mic)).toBe(true);
    }
    // Below 4 LSB of 16-bit is silence too (dither, a faint hiss of an idle playback path).
    const faint = silent.map((_, i) => ((i * 7919) % 7) / 32768 - 3 / 32768);
    const front = new EchoFront(1, rate);
    expect(sameBits(await run(front, scene.mic, faint, [3000]), scene.mic)).toBe(true);
    expect(front.stats()).toEqual({ delayMs: null, erleDb: null, referenceActive: false });
  });

  test('48 kHz: the echo goes below and above 8 kHz; chunking changes nothing; a late reference leaves the stretch before it as it was', async () => {
    const rate = 48000;
    const scene = await echoScene({ rate, seconds: 10, delayMs: 80 });
    const front = new EchoFront(1, rate);
    const out = await run(front, scene.mic, scene.ref, [rate]);
    expect(out.length).toBe(scene.mic.length);
    const chunked = await run(new EchoFront(1, rate), scene.mic, scene.ref, [4800, 333, 12000]);
    expect(sameBits(chunked, out)).toBe(true);

    // Far-end single talk after 4 s: the whole band, and the band above 8 kHz, against the microphone.
    const from = 4 * rate;
    const whole = db(energy(scene.mic, from), energy(out, from));
    const hi = db(energy(highBand(scene.mic), from), energy(highBand(out), from));
    expect(whole).toBeGreaterThan(25); // measured 38-47 dB over delays of 40-200 ms
    expect(hi).toBeGreaterThan(25); // measured 40-41 dB; unscaled, the band above 8 kHz would keep all of its echo
    const stats = front.stats();
    expect(stats.referenceActive).toBe(true);
    expect(stats.delayMs).not.toBeNull();
    expect(Math.abs(stats.delayMs! - 80)).toBeLessThanOrEqual(40);

    // The reference silent for its first 3 s: the output is the microphone itself there, to the sample.
    const late = scene.ref.slice();
    late.fill(0, 0, 3 * rate);
    const lateOut = await run(new EchoFront(1, rate), scene.mic, late, [rate]);
    expect(sameBits(lateOut.subarray(0, 2.9 * rate), scene.mic.subarray(0, 2.9 * rate))).toBe(true);
    expect(sameBits(await run(new EchoFront(1, rate), scene.mic, late, [997, 6000, 128]), lateOut)).toBe(true);
    expect(db(energy(scene.mic, 7 * rate), energy(lateOut, 7 * rate))).toBeGreaterThan(15);
  });

  test('16 kHz, two microphone channels: each cancelled, output aligned with the input', async () => {
    const scene = await echoScene({ rate: 16000, seconds: 8, delayMs: 30, nearFrom: 6 });
    const front = new EchoFront(2, 16000);
    const parts: Float32Array[][] = [];
    const n = scene.mic.length;
    const second = scene.mic.map((v) => 0.5 * v);
    for (let pos = 0; pos < n; pos += 16000) {
      const end = Math.min(n, pos + 16000);
      parts.push(await front.push([scene.mic.slice(pos, end), second.slice(pos, end), scene.ref.slice(pos, end)]));
    }
    parts.push(await front.end());
    const out = [0, 1].map((c) => {
      const y = new Float32Array(n);
      let o = 0;
      for (const p of parts) {
        y.set(p[c], o);
        o += p[c].length;
      }
      expect(o).toBe(n);
      return y;
    });
    for (const [c, mic] of [scene.mic, second].entries()) {
      expect(db(energy(mic, 3 * 16000, 6 * 16000), energy(out[c], 3 * 16000, 6 * 16000))).toBeGreaterThan(15);
      // Near-end speech from 6 s on comes through (double talk costs some of it, not most).
      const nearIn = energy(scene.near, 6 * 16000) * (c === 0 ? 1 : 0.25);
      expect(db(energy(out[c], 6 * 16000), nearIn)).toBeGreaterThan(-6);
    }
  });
});
