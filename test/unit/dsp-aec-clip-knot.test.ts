// The loudspeaker model's clip knot (src/dsp/aec/knot-search.ts, clip-knot.ts): candidate knots scored by the residual
// they leave beside a fixed basis find a hard clip's level (coarse grid, then the fine grid around the pick); the ridge
// solve. Unit tier.
import { ClipKnot, ridgeSolve, SETTLE_PICKS } from '../../src/dsp/aec/clip-knot';
import { KnotSearch } from '../../src/dsp/aec/knot-search';

/** Laplacian samples (speech-like amplitudes) with a fixed seed, scaled to a peak of about `peak`. */
function laplace(n: number, seed: number, peak: number): Float32Array {
  let s = seed >>> 0;
  const rnd = (): number => ((s = (Math.imul(s, 1664525) + 1013904223) >>> 0) + 0.5) / 4294967296;
  const x = new Float32Array(n);
  for (let i = 0; i < n; i++) x[i] = (rnd() < 0.5 ? -1 : 1) * -Math.log(rnd()) * 0.08;
  let pk = 0;
  for (const v of x) pk = Math.max(pk, Math.abs(v));
  for (let i = 0; i < n; i++) x[i] *= peak / pk;
  return x;
}

/**
 * Feeds the search blocks of x whose "echo" beyond the linear part is clip(x, ±c) − x less its projection on x, through a flat room: the Gram
 * matrix and the correlations are time-domain sums over each block. One fixed basis: an odd hinge at 0.125.
 */
function feed(search: KnotSearch, x: Float32Array, c: number, R: number, xx0 = 0): number {
  const K = search.K;
  const Jt = 1 + K;
  const sig = new Float64Array(Jt * R);
  const go = new Float32Array(Jt * Jt);
  const g = new Float64Array(Jt);
  // The echo's nonlinear part without its linear share (the linear filter's part, as in the canceller).
  const e = new Float64Array(x.length);
  let ex = 0;
  let x2 = 0;
  for (let i = 0; i < x.length; i++) {
    e[i] = Math.max(-c, Math.min(c, x[i])) - x[i];
    ex += e[i] * x[i];
    x2 += x[i] * x[i];
  }
  for (let i = 0; i < x.length; i++) e[i] -= (ex / x2) * x[i];
  let xx = xx0;
  for (let b = 0; b + R <= x.length; b += R) {
    const blk = x.subarray(b, b + R);
    let sq = 0;
    for (const v of blk) sq += v * v;
    xx = 0.995 * xx + sq;
    search.observe(blk, 1, xx, 0.995);
    search.rows(sig, R, 1, 0, Float64Array.from(blk), 0, R, 1);
    for (let i = 0; i < R; i++) {
      const v = blk[i];
      const d = Math.abs(v) > 0.125 ? Math.abs(v) - 0.125 : 0;
      sig[i] = v > 0 ? d : -d;
    }
    for (let j = 0; j < Jt; j++) {
      let s = 0;
      for (let i = 0; i < R; i++) s += sig[j * R + i] * e[b + i];
      g[j] = s;
      for (let l = 0; l < Jt; l++) {
        let t = 0;
        for (let i = 0; i < R; i++) t += sig[j * R + i] * sig[l * R + i];
        go[j * Jt + l] = t;
      }
    }
    search.accumulate(go, Jt, 1, 1, g, 1, new Float64Array(1), 0, 0.999);
  }
  return xx;
}

test('the search finds a hard clip between two candidates: the coarse grid within about its spacing (0.05), the fine grid within 0.01', () => {
  for (const c of [0.28, 0.385, 0.49]) {
    const search = new KnotSearch(1);
    const x = laplace(128 * 400, 7 + Math.round(c * 1000), 0.7);
    const xx = feed(search, x, c, 128);
    const p = search.evaluate(1e-9, 0.63)!;
    expect(Math.abs(p.level - c)).toBeLessThan(0.06);
    // A clip takes away the slope beyond it: the candidate's coefficient is strongly negative.
    expect(p.coef).toBeLessThan(-0.5);
    search.zoom(p.level, xx);
    expect(search.zoomed).toBe(true);
    feed(search, x, c, 128, xx);
    const q = search.evaluate(1e-9, 0.63)!;
    expect(Math.abs(q.level - c)).toBeLessThan(0.01);
  }
});

test('without clipping no candidate cuts the slope; levels above the limit are not picked', () => {
  const search = new KnotSearch(1);
  const x = laplace(128 * 200, 3, 0.7);
  feed(search, x, 10, 128);
  const p = search.evaluate(1e-9, 0.63)!;
  expect(Math.abs(p.coef)).toBeLessThan(0.05);
  expect(p.level).toBeLessThan(0.63);
  search.reset();
  expect(search.n).toBe(0);
  expect(search.evaluate(1e-9, 0.63)).toBeNull();
});

test('ridgeSolve solves a positive definite system and leaves c alone when it is not', () => {
  const G = Float64Array.from([4, 1, 1, 3]);
  const b = Float64Array.from([1, 2]);
  const c = new Float64Array(2);
  ridgeSolve(2, G, b, 0, new Float64Array(4), new Float64Array(2), c, 10);
  expect(4 * c[0] + c[1]).toBeCloseTo(1, 5);
  expect(c[0] + 3 * c[1]).toBeCloseTo(2, 5);
  const c2 = Float64Array.from([7, 7]);
  ridgeSolve(2, Float64Array.from([1, 2, 2, 1]), b, 0, new Float64Array(4), new Float64Array(2), c2, 10);
  expect(Array.from(c2)).toEqual([7, 7]);
});

test('ridgeSolve: the last coefficient can have a ridge of its own (the settled knot), the others keep δ', () => {
  const G = Float64Array.from([2, 0, 0, 2]);
  const b = Float64Array.from([1, 1]);
  const c = new Float64Array(2);
  ridgeSolve(2, G, b, 2, new Float64Array(4), new Float64Array(2), c, 10, 0.04);
  expect(c[0]).toBeCloseTo(1 / (2 + 2), 9);
  expect(c[1]).toBeCloseTo(1 / (2 + 2 * 0.04), 9);
});

test('the knot settles after picks that leave it in place, and a stretch without samples above it does not release it', () => {
  const knot = new ClipKnot();
  const search = new KnotSearch(1);
  const x = laplace(128 * 400, 11, 0.7);
  let xx = feed(search, x, 0.385, 128);
  // The coarse pick places the knot and asks for the fine grid around it.
  expect(knot.pick(32, search, 1e-9, 1, xx)).toBeGreaterThanOrEqual(0);
  expect(knot.level).toBeGreaterThan(0.3);
  expect(knot.stable).toBe(0);
  search.zoom(knot.regrid!, xx);
  let steps = 32;
  for (let i = 0; i < 6; i++) {
    xx = feed(search, x, 0.385, 128, xx);
    steps += 8;
    knot.pick(steps, search, 1e-9, 1, xx);
  }
  expect(Math.abs(knot.level - 0.385)).toBeLessThan(0.015);
  expect(knot.stable).toBeGreaterThanOrEqual(SETTLE_PICKS);
  const level = knot.level;
  // Then only quiet passages (below every candidate): the picks' coefficients are the ridge's, which says nothing.
  const quiet = new KnotSearch(1);
  const q = laplace(128 * 200, 5, 0.15);
  let qx = feed(quiet, q, 10, 128);
  const p = quiet.evaluate(1e-6, 1)!;
  expect(p.coef).toBeGreaterThan(-0.2);
  expect(p.evidence).toBeLessThan(1);
  for (let i = 0; i < 8; i++) {
    steps += 8;
    expect(knot.pick(steps, quiet, 1e-6, 1, qx)).toBe(-1);
    qx = feed(quiet, q, 10, 128, qx);
  }
  expect(knot.level).toBe(level);
});
