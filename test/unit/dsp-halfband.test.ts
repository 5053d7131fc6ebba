// The 8 <-> 16 kHz half-band pair (src/dsp/halfband.ts) and the narrow-band chain around a 16 kHz chain
// (src/inference/models/narrowband.ts): the filter's response, the same bits whatever the chunking, and whole-sample alignment
// (the pair with a chain of even or odd latency between them gives the input back, shifted by the declared latency).
import { Decimator2, HALF_BAND_DELAY, HALF_BAND_TAPS, halfBandTaps, halfBandWasm, Interpolator2 } from '../../src/dsp/halfband';
import { DelayLine } from '../../src/dsp/resample';
import { NarrowBandChain } from '../../src/inference/models/narrowband';
import { AlignedStream, type ChainProcessor } from '../../src/inference/models/aligned-stream';

/** |H(f)| in dB of `h` at `f` Hz (16 kHz). */
function responseDb(h: Float64Array, f: number): number {
  let re = 0;
  let im = 0;
  for (let k = 0; k < h.length; k++) {
    re += h[k] * Math.cos((2 * Math.PI * f * k) / 16000);
    im -= h[k] * Math.sin((2 * Math.PI * f * k) / 16000);
  }
  return 10 * Math.log10(re * re + im * im);
}

function noise(n: number, seed: number): Float32Array {
  const x = new Float32Array(n);
  let s = seed;
  for (let i = 0; i < n; i++) {
    s = (s * 1103515245 + 12345) >>> 0;
    x[i] = s / 4294967296 - 0.5;
  }
  return x;
}

/** Runs `x` through `step` in chunks of the given sizes (cycled), joined. */
function chunked(x: Float32Array, sizes: number[], step: (c: Float32Array) => Float32Array): Float32Array {
  const parts: Float32Array[] = [];
  for (let o = 0, i = 0; o < x.length; i++) {
    const n = Math.min(sizes[i % sizes.length], x.length - o);
    parts.push(step(x.subarray(o, o + n)));
    o += n;
  }
  const out = new Float32Array(parts.reduce((a, p) => a + p.length, 0));
  let o = 0;
  for (const p of parts) {
    out.set(p, o);
    o += p.length;
  }
  return out;
}

/** Speech-band test signal at 8 kHz: sines from 200 Hz to 3.4 kHz. */
function tones(n: number): Float32Array {
  const x = new Float32Array(n);
  for (const [f, a] of [[200, 0.2], [730, 0.15], [1500, 0.1], [2650, 0.1], [3400, 0.05]]) {
    for (let i = 0; i < n; i++) x[i] += a * Math.sin((2 * Math.PI * f * i) / 8000 + f);
  }
  return x;
}

test('the filter: linear phase, half-band zeros, unit DC gain, its pass and stop bands', () => {
  const h = halfBandTaps();
  expect(h.length).toBe(HALF_BAND_TAPS);
  expect(HALF_BAND_DELAY % 2).toBe(1);
  for (let k = 0; k < h.length; k++) {
    expect(h[k]).toBe(h[h.length - 1 - k]);
    const d = Math.abs(k - HALF_BAND_DELAY);
    if (d > 0 && d % 2 === 0) expect(h[k]).toBe(0);
  }
  expect(h[HALF_BAND_DELAY]).toBe(0.5);
  expect(h.reduce((a, b) => a + b, 0)).toBeCloseTo(1, 12);
  for (let f = 0; f <= 3600; f += 100) expect(Math.abs(responseDb(h, f))).toBeLessThan(0.1);
  expect(responseDb(h, 4000)).toBeCloseTo(-6.02, 1);
  for (let f = 4500; f <= 8000; f += 25) expect(responseDb(h, f)).toBeLessThan(-70);
});

test('any chunking gives the same bits, both ways', () => {
  const x8 = noise(8000, 1);
  const x16 = noise(16000, 2);
  const up = (sizes: number[]): Float32Array => {
    const r = new Interpolator2();
    return chunked(x8, sizes, (c) => r.process(c));
  };
  const down = (sizes: number[], phase: 0 | 1): Float32Array => {
    const r = new Decimator2(phase);
    return chunked(x16, sizes, (c) => r.process(c));
  };
  const upWhole = up([x8.length]);
  expect(upWhole.length).toBe(2 * x8.length);
  for (const sizes of [[160], [1], [7, 64, 3, 500], [0, 13]]) expect(Buffer.from(up(sizes).buffer).equals(Buffer.from(upWhole.buffer))).toBe(true);
  for (const phase of [0, 1] as const) {
    const whole = down([x16.length], phase);
    expect(whole.length).toBe(8000);
    for (const sizes of [[320], [1], [3, 128, 5, 1001], [0, 2, 9]]) expect(Buffer.from(down(sizes, phase).buffer).equals(Buffer.from(whole.buffer))).toBe(true);
  }
});

test('the WebAssembly loops give the JS loops\' bits, in any chunking, both ways', () => {
  expect(halfBandWasm()).toBe(true); // built by npm run build: a missing file would make this test compare JS with JS
  // Loud and near-silent samples, odd chunk sizes (the kernels' single-lane tails), single samples, and whole inputs
  // larger than the kernel's first memory page (it grows).
  const x8 = noise(20001, 3).map((v, i) => (i % 997 < 40 ? v * 1e-6 : v * 1.9));
  const x16 = noise(40003, 4).map((v, i) => (i % 883 < 40 ? v * 1e-6 : v * 1.9));
  const run = (wasm: boolean): Buffer[] => {
    halfBandWasm(wasm);
    try {
      const outs: Buffer[] = [];
      for (const sizes of [[x8.length], [1], [7, 64, 3, 161]]) {
        const r = new Interpolator2();
        outs.push(Buffer.from(chunked(x8, sizes, (c) => r.process(c)).buffer));
      }
      for (const phase of [0, 1] as const) {
        for (const sizes of [[x16.length], [1], [3, 128, 5, 321]]) {
          const r = new Decimator2(phase);
          outs.push(Buffer.from(chunked(x16, sizes, (c) => r.process(c)).buffer));
        }
      }
      return outs;
    } finally {
      halfBandWasm(true);
    }
  };
  const js = run(false);
  const wasm = run(true);
  expect(wasm.length).toBe(9);
  wasm.forEach((w, i) => expect(w.equals(js[i])).toBe(true));
});

test('one interpolated phase is the input itself, delayed', () => {
  const x = noise(500, 3);
  const y = new Interpolator2().process(x);
  const lag = (HALF_BAND_DELAY - 1) / 2;
  for (let m = lag; m < x.length; m++) expect(y[2 * m + 1]).toBe(x[m - lag]);
});

/** A 16 kHz "chain" that only delays by `latency` samples. */
function delayCore(latency: number): ChainProcessor {
  const line = new DelayLine(latency);
  return { sampleRate: 16000, channels: 1, latency, process: async ([x]) => [line.process(x)] };
}

test.each([0, 384, 7])('narrow band around a core of latency %i: the input back on its own timeline, in whole samples', async (coreLatency) => {
  const chain = new NarrowBandChain(delayCore(coreLatency));
  expect(chain.sampleRate).toBe(8000);
  expect(chain.latency).toBe(Math.floor((2 * HALF_BAND_DELAY + coreLatency) / 2));
  const x = tones(8000);
  const stream = new AlignedStream(chain, 0);
  const parts: Float32Array[] = [];
  for (let o = 0; o < x.length; o += 160) parts.push((await stream.push([x.subarray(o, o + 160)]))[0]);
  parts.push((await stream.end())[0]);
  const y = new Float32Array(x.length);
  let o = 0;
  for (const p of parts) {
    y.set(p, o);
    o += p.length;
  }
  expect(o).toBe(x.length);
  // Away from the edges (the filters' start-up and the zeros after the end): within -50 dB of the input (an odd core
  // latency too: the decimator keeps the odd 16 kHz samples then). Half an 8 kHz sample off would leave about -8 dB.
  let err = 0;
  let sig = 0;
  for (let i = 200; i < x.length - 200; i++) {
    err += (y[i] - x[i]) ** 2;
    sig += x[i] ** 2;
  }
  expect(10 * Math.log10(err / sig)).toBeLessThan(-50);
});
