// Per-bin gains in WebAssembly SIMD (src/dsp/bin-gains.ts, wasm/bin-gains.ts) bit for bit against the JS loops
// they stand for. The post-filter's and the high-band filter's against the filters' JS loops on RealFFT rows: every
// post-filter noise mode, every way of combining the high-band gain, both overlaps, other smoothing widths, frames
// with DTLN saying speech and noise, leading digital silence, and random chunk sizes (batches split at different
// frames). The resamplers' phase filters (PhaseGains) on WebAssembly rows against their JS loops on RealFFT rows,
// on random spectra.
import fs from 'node:fs';
import { BIN_GAINS_WASM, PhaseGains } from '../../src/dsp/bin-gains';
import { createRowFft } from '../../src/dsp/fft-pairs';
import { HighBandFilter, HighBandOptions } from '../../src/dsp/highband';
import { PostFilter, PostFilterOptions } from '../../src/dsp/postfilter';
import { concatAll } from '../../src/dsp/concat';
import { seededRandom } from '../../src/audio/synthetic-noise';

/** Noise whose level moves, tone bursts, and (unless `silence` is false) a second of digital silence first. */
function signal(n: number, rate: number, seed: number, silence = true): Float32Array {
  const r = seededRandom(seed);
  const x = new Float32Array(n);
  for (let i = silence ? rate : 0; i < n; i++) {
    const t = i / rate;
    const level = 0.02 * (1 + 0.8 * Math.sin(2 * Math.PI * 0.3 * t));
    const burst = Math.floor(t * 2) % 3 === 0 ? 0.3 * Math.sin(2 * Math.PI * (rate / 9) * t) : 0;
    x[i] = level * (r() * 2 - 1) + burst;
  }
  return x;
}

/** Random chunk sizes, 1 to 9000 samples. */
function chunks(n: number, seed: number): number[] {
  const r = seededRandom(seed);
  const sizes: number[] = [];
  for (let at = 0; at < n; ) {
    const s = Math.min(n - at, 1 + Math.floor(r() * 9000));
    sizes.push(s);
    at += s;
  }
  return sizes;
}

function bitsEqual(a: Float32Array, b: Float32Array): boolean {
  if (a.length !== b.length) return false;
  const ua = new Uint32Array(a.buffer, a.byteOffset, a.length);
  const ub = new Uint32Array(b.buffer, b.byteOffset, b.length);
  for (let i = 0; i < ua.length; i++) if (ua[i] !== ub[i]) return false;
  return true;
}

/** First index where the two differ (NaN equals NaN, -0 differs from 0), or -1. */
function firstDifference(a: Float64Array, b: Float64Array): number {
  if (a.length !== b.length) return 0;
  for (let i = 0; i < a.length; i++) if (!Object.is(a[i], b[i])) return i;
  return -1;
}

function usesKernel(filter: PostFilter | HighBandFilter | PhaseGains): boolean {
  return (filter as unknown as { kernel: unknown }).kernel !== null;
}

describe('per-bin gains in WebAssembly (bin-gains)', () => {
  it('the kernel is built and the filters use it on WebAssembly rows only', () => {
    expect(fs.existsSync(BIN_GAINS_WASM)).toBe(true);
    expect(usesKernel(new PostFilter({ overSubtract: 4, floorDb: -15 }))).toBe(true);
    expect(usesKernel(new PostFilter({ overSubtract: 4, floorDb: -15 }, createRowFft(512, 'js')))).toBe(false);
    expect(usesKernel(new HighBandFilter())).toBe(true);
    expect(usesKernel(new HighBandFilter({}, createRowFft(1024, 'js')))).toBe(false);
    expect(() => new PostFilter({ overSubtract: 4, floorDb: -15 }, createRowFft(1024))).toThrow(/512-point/);
  });

  const post: Array<[string, PostFilterOptions]> = [
    ['rise-limited tracker', { overSubtract: 4, floorDb: -15 }],
    ['windowed minimum', { overSubtract: 8, floorDb: -20, noiseWindowS: 0.5 }],
    ['tracker lifted to the windowed minimum (nsm-4)', { overSubtract: 8, floorDb: -20, noiseWindowS: 1.5, noiseMode: 'lift' }],
  ];
  it.each(post)('post-filter, %s: same bits as the JS loop', (_name, opts) => {
    // The rise-limited tracker alone stays idle for long after digital silence (PostFilterOptions.noiseWindowS).
    const x = signal(16000 * 6, 16000, 7, opts.noiseWindowS !== undefined);
    const sizes = chunks(x.length, 11);
    const wasm = new PostFilter(opts);
    const js = new PostFilter(opts, createRowFft(512, 'js'));
    const outW: Float32Array[] = [];
    const outJ: Float32Array[] = [];
    let at = 0;
    for (const s of sizes) {
      outW.push(wasm.process(x.subarray(at, at + s)));
      outJ.push(js.process(x.subarray(at, at + s)));
      at += s;
    }
    const a = concatAll(outW);
    const b = concatAll(outJ);
    expect(a.length).toBeGreaterThan(x.length - 512);
    expect(bitsEqual(a, b)).toBe(true);
    const lag = wasm.latency;
    let diff = 0;
    for (let i = lag; i < a.length; i++) diff += Math.abs(a[i] - x[i - lag]);
    expect(diff).toBeGreaterThan(1); // the gains did something
    if (opts.noiseWindowS) {
      // The windowed minimum recovers from the leading silence: the noise between bursts comes out lower.
      const energy = (v: Float32Array, from: number, to: number) => v.subarray(from, to).reduce((s, y) => s + y * y, 0);
      expect(energy(a, 16000 * 5.1 + lag, 16000 * 5.7 + lag)).toBeLessThan(0.5 * energy(x, 16000 * 5.1, 16000 * 5.7));
    }
  });

  const high: Array<[string, HighBandOptions]> = [
    ['defaults (min, hop N/2)', {}],
    ['product, hop N/4', { combine: 'product', overlap: 4 }],
    ['none, no smoothing', { combine: 'none', smoothBins: 0 }],
    ['min, wide smoothing, 2048 points', { smoothBins: 9, fftSize: 2048 }],
  ];
  it.each(high)('high-band filter, %s: same bits as the JS loops', (_name, opts) => {
    const x = signal(48000 * 5, 48000, 3);
    // DTLN's 4-7.5 kHz gain: noise (0.2), speech (1), in between, moving.
    const g = Float32Array.from(x, (_, i) => {
      const t = i / 48000;
      return Math.floor(t * 2) % 3 === 0 ? 1 : 0.2 + 0.3 * (0.5 + 0.5 * Math.sin(2 * Math.PI * 1.7 * t));
    });
    const sizes = chunks(x.length, 5);
    const wasm = new HighBandFilter(opts);
    const js = new HighBandFilter(opts, createRowFft(opts.fftSize ?? 1024, 'js'));
    const outW: Float32Array[] = [];
    const outJ: Float32Array[] = [];
    let at = 0;
    for (const s of sizes) {
      outW.push(wasm.process(x.subarray(at, at + s), g.subarray(at, at + s)));
      outJ.push(js.process(x.subarray(at, at + s), g.subarray(at, at + s)));
      at += s;
    }
    const a = concatAll(outW);
    const b = concatAll(outJ);
    expect(a.length).toBe(x.length);
    expect(bitsEqual(a, b)).toBe(true);
    let diff = 0;
    for (let i = wasm.latency; i < a.length; i++) diff += Math.abs(a[i] - x[i - wasm.latency]);
    expect(diff).toBeGreaterThan(1); // the gains did something
  });

  it('resampler phase filters (PhaseGains): kernel and JS loops give the same bits, odd bin count, 1 and 5 blocks', () => {
    const r = seededRandom(21);
    for (const [n, blocks] of [[1024, 5], [1024, 1], [64, 3]] as const) {
      const wasmRows = createRowFft(n);
      const jsRows = createRowFft(n, 'js');
      const K = wasmRows.bins;
      const rand = () => Float64Array.from({ length: K }, () => r() * 4 - 2);
      const specRe = [rand(), rand(), rand()];
      const specIm = [rand(), rand(), rand()];
      specRe[1][3] = -0; // signed zeros and a NaN go through as the JS arithmetic takes them
      specIm[2][K - 1] = NaN;
      const pairs = [wasmRows, jsRows].map((fft) => ({ fft, gains: new PhaseGains(fft, specRe, specIm) }));
      expect(usesKernel(pairs[0].gains)).toBe(true);
      expect(usesKernel(pairs[1].gains)).toBe(false);
      for (const op of ['sum', 'products'] as const) {
        const re = Float64Array.from({ length: 4 * blocks * K }, () => r() * 2 - 1);
        const im = Float64Array.from({ length: 4 * blocks * K }, () => r() * 2 - 1);
        for (const { fft, gains } of pairs) {
          fft.reserve(4 * blocks);
          fft.re.set(re);
          fft.im.set(im);
          gains[op](blocks);
        }
        const [w, j] = pairs.map(({ fft }) => fft);
        expect(firstDifference(w.re.subarray(0, re.length), j.re.subarray(0, re.length))).toBe(-1);
        expect(firstDifference(w.im.subarray(0, im.length), j.im.subarray(0, im.length))).toBe(-1);
        // The rows written differ from the ones given (the products were made).
        expect(firstDifference(j.re.subarray(0, re.length), re)).toBeGreaterThanOrEqual(0);
      }
    }
  });
});
