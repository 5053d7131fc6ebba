// Finding a delay jump (src/dsp/aec/jump-finder.ts) and moving the filter by it (PartitionedKalmanFilter.moveSamples):
// on constructed signals the finder returns the jump to the sample either way, and nothing it would take where the
// microphone is unrelated to the estimate; the estimate continued from the reference through the filter's taps is
// the estimate, and finds an echo that came earlier within a short span; a filter moved by s samples holds its
// impulse response s samples later.
// Through the canceller, in dsp-aec-presence.test.ts. Unit tier.
import { JumpFinder } from '../../src/dsp/aec/jump-finder';
import { PartitionedKalmanFilter } from '../../src/dsp/aec/kalman-filter';
import { AecArena } from '../../src/dsp/aec/kernel';
import { RealFFT } from '../../src/dsp/fft';

const HOP = 128;

/** White noise from a seeded generator (mulberry32). */
function noise(n: number, seed: number): Float32Array {
  let s = seed >>> 0;
  const out = new Float32Array(n);
  for (let i = 0; i < n; i++) {
    s = (s + 0x6d2b79f5) >>> 0;
    let t = s;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    out[i] = ((t ^ (t >>> 14)) >>> 0) / 4294967296 - 0.5;
  }
  return out;
}

/**
 * A finder fed `seconds` of hops in which the microphone is the estimate `shift` samples later (earlier where negative)
 * plus `otherDb` of unrelated noise, or (shift null) unrelated to it altogether.
 */
function fed(shift: number | null, seconds: number, otherDb = -20): JumpFinder {
  const n = Math.round(seconds * 16000 / HOP) * HOP;
  const pad = 10_000;
  const x = noise(n + 2 * pad, 5);
  const other = noise(n, 9);
  const g = Math.pow(10, otherDb / 20);
  const f = new JumpFinder();
  const d = new Float32Array(HOP);
  const e = new Float64Array(HOP);
  for (let h = 0; h < n; h += HOP) {
    for (let i = 0; i < HOP; i++) {
      const y = x[pad + h + i];
      d[i] = shift === null ? other[h + i] : x[pad + h + i - shift] + g * other[h + i];
      e[i] = d[i] - y;
    }
    f.record(d, e, HOP);
  }
  return f;
}

test('the finder returns a jump to the sample, later or earlier, and nothing before a second of history', () => {
  for (const shift of [2880, 1600, 37, -1600, -3040, -4800]) {
    const found = fed(shift, 1.2).find(8000, 8000)!;
    expect(found.shift).toBe(shift);
    expect(found.rho).toBeGreaterThan(0.95);
  }
  expect(fed(1600, 0.9).find(8000, 8000)).toBeNull();
  // Limited to the reach asked for: a jump beyond it is not what is returned.
  expect(fed(3000, 1.2).find(8000, 2000)!.shift).toBeLessThanOrEqual(2000);
});

test('a microphone unrelated to the estimate correlates nowhere near what the canceller takes (0.65)', () => {
  const found = fed(null, 1.2).find(8000, 8000)!;
  expect(found.rho).toBeLessThan(0.2);
});

test('the estimate continued from the reference is the estimate, and finds an echo that came earlier in a short span', () => {
  const LAG = 3000;
  const n = Math.round((1.2 * 16000) / HOP) * HOP;
  const pad = 10_000;
  const x = noise(n + 2 * pad, 5);
  const other = noise(n, 9);
  const h = Float64Array.from([0.8, 0, 0, -0.3, 0.1]);
  // The estimate at time t (from 0): the reference LAG + k samples before it through the taps.
  const yAt = (t: number): number => h.reduce((sum, v, k) => sum + v * x[pad + t - LAG - k], 0);
  const shift = -1600;
  const f = new JumpFinder();
  const d = new Float32Array(HOP);
  const e = new Float64Array(HOP);
  const xr = new Float64Array(HOP);
  for (let b = 0; b < n; b += HOP) {
    for (let i = 0; i < HOP; i++) {
      xr[i] = x[pad + b + i];
      d[i] = yAt(b + i - shift) + 0.1 * other[b + i];
      e[i] = d[i] - yAt(b + i);
    }
    f.recordRef(xr, HOP);
    f.record(d, e, HOP);
  }
  const filter = { h, lag: LAG };
  const past = new Float64Array(1024);
  expect(f.predict(filter, -1024, 0, past, 0)).toBe(true);
  const future = new Float64Array(LAG);
  expect(f.predict(filter, 0, LAG, future, 0)).toBe(true);
  let worst = 0;
  for (let i = 0; i < 1024; i++) worst = Math.max(worst, Math.abs(past[i] - yAt(n - 1024 + i)));
  for (let i = 0; i < LAG; i++) worst = Math.max(worst, Math.abs(future[i] - yAt(n + i)));
  expect(worst).toBeLessThan(1e-6);
  // Beyond what the reference has reached: no prediction.
  expect(f.predict(filter, 0, LAG + 1, future, 0)).toBe(false);
  // The microphone's last 2048 samples match the estimate 1600 samples ahead: only its continuation holds that.
  const found = f.find(8000, 8000, 2048, filter)!;
  expect(found.shift).toBe(shift);
  expect(found.rho).toBeGreaterThan(0.95);
  expect(f.find(8000, 8000, 2048)?.shift).not.toBe(shift);
});

test('a filter moved by s samples holds its impulse response s samples later, whole partitions and within one', () => {
  const partitions = 6;
  const arena = new AecArena(PartitionedKalmanFilter.floats(HOP, partitions), 'js');
  const filter = new PartitionedKalmanFilter(arena, { block: HOP, partitions, step: 0.5, forget: 0.9999, priorDecay: 0.85 });
  const fft = new RealFFT(2 * HOP);
  // An impulse response of a few taps spread over the first two partitions, written as each partition's spectrum.
  const taps = new Map([[3, 1], [70, -0.5], [130, 0.25], [200, 0.125]]);
  const t = new Float64Array(2 * HOP);
  const re = new Float64Array(HOP + 1);
  const im = new Float64Array(HOP + 1);
  for (let p = 0; p < partitions; p++) {
    t.fill(0);
    for (const [n, v] of taps) if (n >= p * HOP && n < (p + 1) * HOP) t[n - p * HOP] = v;
    fft.forward(t, 0, re, im);
    filter.wRe.a.set(Float32Array.from(re), p * filter.stride);
    filter.wIm.a.set(Float32Array.from(im), p * filter.stride);
  }
  const response = (): Float64Array => {
    const h = new Float64Array(partitions * HOP);
    for (let p = 0; p < partitions; p++) {
      for (let k = 0; k <= HOP; k++) {
        re[k] = filter.wRe.a[p * filter.stride + k];
        im[k] = filter.wIm.a[p * filter.stride + k];
      }
      fft.inverse(re, im, 0, t, 0);
      h.set(t.subarray(0, HOP), p * HOP);
    }
    return h;
  };
  // Moves add up (0, 45, 173, −3: 215 in all), and taps moved before the window's start are gone (−300: the taps then
  // at 218 and 285), the others where they were put.
  for (const s of [0, 45, 128 + 45, -3, -300]) {
    const before = response();
    filter.moveSamples(s, fft);
    const after = response();
    for (let n = 0; n < after.length; n++) {
      const want = n - s >= 0 && n - s < before.length ? before[n - s] : 0;
      expect(Math.abs(after[n] - want)).toBeLessThan(1e-5);
    }
  }
  const h = response();
  expect(h[130 + 215 - 300]).toBeCloseTo(0.25, 5);
  expect(h[200 + 215 - 300]).toBeCloseTo(0.125, 5);
  expect(h.reduce((a, v) => a + v * v, 0)).toBeCloseTo(0.25 ** 2 + 0.125 ** 2, 5);
});
