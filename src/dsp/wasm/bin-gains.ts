// AssemblyScript (compiled to WebAssembly by `npm run build`, not by tsc): the per-bin gain loops of the post-filter
// (src/dsp/postfilter.ts, PostFilter.gain) and of the high-band filter (src/dsp/highband.ts,
// HighBandFilter.applyGain), two bins per SIMD operation. Every lane does the JS loop's float64 operations in the same
// order (comparisons and selects in place of its branches, min/max with Math.min/Math.max's NaN and signed-zero
// rules), so the results are bit-identical to it. Runs on the spectrum rows of a WasmRowFft, in its memory (imported);
// src/dsp/bin-gains.ts instantiates it there and copies the filters' state in and out around each batch.
//
// State (float64 arrays of `bins` values each, 16-byte aligned, `stride` bytes apart from `st`):
//   post-filter   smoothPow, noise, prevClean, curMin, closedMin
//   high band     smoothPow, noise, prevClean, raw (the unsmoothed gains)

/** Two bins (pair) or one (lane 0; lane 1 is loaded as 0 and never stored). */
@inline function ld(p: usize, pair: bool): v128 {
  return pair ? v128.load(p) : v128.load64_zero(p);
}
@inline function st(p: usize, v: v128, pair: bool): void {
  if (pair) v128.store(p, v);
  else v128.store64_lane(p, v, 0);
}
/** `a < b ? a : b` of the JS (`if (a < b) x = a`), lane by lane: b where either is NaN. */
@inline function lessOf(a: v128, b: v128): v128 {
  return v128.bitselect(a, b, f64x2.lt(a, b));
}

/** PostFilter.gain for bin k (and k + 1 when pair). */
@inline function postFilterBin(
  re: usize, im: usize, st0: usize, stride: usize, k: usize, pair: bool,
  first: bool, windowed: bool, lift: bool, ps: v128, ps1: v128, rise: v128, beta: v128, dd: v128, dd1: v128, floorGain: v128,
): void {
  const o = k << 3;
  const smoothAt = st0 + o;
  const noiseAt = smoothAt + stride;
  const prevAt = noiseAt + stride;
  const curMinAt = prevAt + stride;
  const closedAt = curMinAt + stride;
  const r = ld(re + o, pair);
  const i = ld(im + o, pair);
  const p = f64x2.add(f64x2.mul(r, r), f64x2.mul(i, i));
  const sp = first ? p : f64x2.add(f64x2.mul(ps, ld(smoothAt, pair)), f64x2.mul(ps1, p));
  st(smoothAt, sp, pair);
  let nz: v128;
  if (windowed) {
    const cm = lessOf(sp, ld(curMinAt, pair));
    st(curMinAt, cm, pair);
    nz = lessOf(cm, ld(closedAt, pair));
    if (lift) {
      const up = f64x2.mul(ld(noiseAt, pair), rise);
      const tracked = first ? sp : lessOf(sp, up);
      nz = v128.bitselect(tracked, nz, f64x2.gt(tracked, nz));
    }
  } else {
    const up = f64x2.mul(ld(noiseAt, pair), rise);
    nz = first ? sp : lessOf(sp, up);
  }
  const tiny = f64x2.splat(1e-12);
  nz = v128.bitselect(tiny, nz, f64x2.lt(nz, tiny));
  st(noiseAt, nz, pair);
  const noiseEst = f64x2.mul(beta, nz);
  const post = f64x2.div(p, noiseEst);
  const one = f64x2.splat(1);
  const excess = v128.bitselect(f64x2.sub(post, one), f64x2.splat(0), f64x2.gt(post, one));
  const prior = f64x2.add(f64x2.mul(dd, f64x2.div(ld(prevAt, pair), noiseEst)), f64x2.mul(dd1, excess));
  let g = f64x2.div(prior, f64x2.add(one, prior));
  g = v128.bitselect(floorGain, g, f64x2.lt(g, floorGain));
  st(prevAt, f64x2.mul(f64x2.mul(g, g), p), pair);
  st(re + o, f64x2.mul(r, g), pair);
  st(im + o, f64x2.mul(i, g), pair);
}

/**
 * One frame of PostFilter.gain: spectrum row at re / im (bins values), state at st. windowed: the windowed minimum
 * (noiseWindowS); lift: noiseMode 'lift'. The sub-window bookkeeping stays in JS.
 */
export function postFilterFrame(
  re: usize, im: usize, bins: i32, st0: usize, stride: i32,
  first: i32, windowed: i32, lift: i32, ps: f64, rise: f64, beta: f64, dd: f64, floorGain: f64,
): void {
  const K = <usize>bins;
  const S = <usize>stride;
  const f = first != 0;
  const w = windowed != 0;
  const l = lift != 0;
  const vps = f64x2.splat(ps);
  const vps1 = f64x2.splat(1 - ps);
  const vrise = f64x2.splat(rise);
  const vbeta = f64x2.splat(beta);
  const vdd = f64x2.splat(dd);
  const vdd1 = f64x2.splat(1 - dd);
  const vfloor = f64x2.splat(floorGain);
  let k: usize = 0;
  for (; k + 1 < K; k += 2) postFilterBin(re, im, st0, S, k, true, f, w, l, vps, vps1, vrise, vbeta, vdd, vdd1, vfloor);
  if (k < K) postFilterBin(re, im, st0, S, k, false, f, w, l, vps, vps1, vrise, vbeta, vdd, vdd1, vfloor);
}

/** HighBandFilter.applyGain's first loop (noise PSD and the unsmoothed Wiener gain) for bin k (and k + 1). */
@inline function highBandRawBin(
  re: usize, im: usize, st0: usize, stride: usize, k: usize, pair: bool,
  first: bool, hold: bool, an: v128, an1: v128, ps: v128, ps1: v128, beta: v128, dd: v128, dd1: v128,
): void {
  const o = k << 3;
  const smoothAt = st0 + o;
  const noiseAt = smoothAt + stride;
  const prevAt = noiseAt + stride;
  const rawAt = prevAt + stride;
  const r = ld(re + o, pair);
  const i = ld(im + o, pair);
  const p = f64x2.add(f64x2.mul(r, r), f64x2.mul(i, i));
  const sp = first ? p : f64x2.add(f64x2.mul(ps, ld(smoothAt, pair)), f64x2.mul(ps1, p));
  st(smoothAt, sp, pair);
  let nz = first ? p : f64x2.add(f64x2.mul(an, ld(noiseAt, pair)), f64x2.mul(an1, p));
  if (hold) nz = lessOf(sp, nz);
  const tiny = f64x2.splat(1e-14);
  nz = v128.bitselect(tiny, nz, f64x2.lt(nz, tiny));
  st(noiseAt, nz, pair);
  const ne = f64x2.mul(beta, nz);
  const post = f64x2.div(p, ne);
  const one = f64x2.splat(1);
  const prior = f64x2.add(f64x2.mul(dd, f64x2.div(ld(prevAt, pair), ne)), f64x2.mul(dd1, f64x2.max(f64x2.sub(post, one), f64x2.splat(0))));
  const gk = f64x2.div(prior, f64x2.add(one, prior));
  st(rawAt, gk, pair);
  st(prevAt, f64x2.mul(f64x2.mul(gk, gk), p), pair);
}

/**
 * HighBandFilter.applyGain's second loop for bin k (and k + 1): the gain smoothed over bins lo..hi (box: false below
 * the per-bin range, where it is 1), floored, combined with the broadband gain bb (1 product, 2 min), at most 1.
 */
@inline function highBandApplyBin(
  re: usize, im: usize, raw: usize, k: usize, pair: bool, box: bool, lo: usize, hi: usize,
  floorGain: v128, combine: i32, bb: v128,
): void {
  const o = k << 3;
  let gk = f64x2.splat(1);
  if (box) {
    let s = f64x2.splat(0);
    for (let j = lo; j <= hi; j++) s = f64x2.add(s, ld(raw + (j << 3), pair));
    gk = f64x2.div(s, f64x2.splat(<f64>(hi - lo + 1)));
  }
  gk = v128.bitselect(floorGain, gk, f64x2.lt(gk, floorGain));
  if (combine == 1) gk = f64x2.mul(gk, bb);
  else if (combine == 2) gk = f64x2.min(gk, bb);
  const one = f64x2.splat(1);
  gk = v128.bitselect(one, gk, f64x2.gt(gk, one));
  st(re + o, f64x2.mul(ld(re + o, pair), gk), pair);
  st(im + o, f64x2.mul(ld(im + o, pair), gk), pair);
}

/**
 * One frame of HighBandFilter.applyGain (not replaying, not recording): spectrum row at re / im (K bins), state at
 * st. kStart: the first bin of the first loop; hold: DTLN says speech (speech > 0.5); an: the noise PSD's weight;
 * kPerBin: the first per-bin bin; S: smoothBins; combine: 0 none, 1 product, 2 min.
 */
export function highBandFrame(
  re: usize, im: usize, bins: i32, st0: usize, stride: i32, first: i32, kStart: i32, hold: i32,
  an: f64, ps: f64, beta: f64, dd: f64, kPerBin: i32, smoothBins: i32, floorGain: f64, combine: i32, bb: f64,
): void {
  const K = <usize>bins;
  const S = <usize>stride;
  const f = first != 0;
  const h = hold != 0;
  const van = f64x2.splat(an);
  const van1 = f64x2.splat(1 - an);
  const vps = f64x2.splat(ps);
  const vps1 = f64x2.splat(1 - ps);
  const vbeta = f64x2.splat(beta);
  const vdd = f64x2.splat(dd);
  const vdd1 = f64x2.splat(1 - dd);
  let k = <usize>kStart;
  for (; k + 1 < K; k += 2) highBandRawBin(re, im, st0, S, k, true, f, h, van, van1, vps, vps1, vbeta, vdd, vdd1);
  if (k < K) highBandRawBin(re, im, st0, S, k, false, f, h, van, van1, vps, vps1, vbeta, vdd, vdd1);

  const raw = st0 + 3 * S;
  const vfloor = f64x2.splat(floorGain);
  const vbb = f64x2.splat(bb);
  const kp = <usize>kPerBin;
  const sb = <usize>smoothBins;
  k = 0;
  for (; k + 1 < kp && k + 1 < K; k += 2) highBandApplyBin(re, im, raw, k, true, false, 0, 0, vfloor, combine, vbb);
  for (; k < kp && k < K; k++) highBandApplyBin(re, im, raw, k, false, false, 0, 0, vfloor, combine, vbb);
  // Both lanes inside: bins k - S .. k + 1 + S all exist (k >= kPerBin > S is not assumed: lo is clamped below).
  for (; k >= sb && k + 1 + sb <= K - 1; k += 2) highBandApplyBin(re, im, raw, k, true, true, k - sb, k + sb, vfloor, combine, vbb);
  for (; k < K; k++) {
    const lo = k > sb ? k - sb : 0;
    const hi = k + sb < K - 1 ? k + sb : K - 1;
    highBandApplyBin(re, im, raw, k, false, true, lo, hi, vfloor, combine, vbb);
  }
}

// The resamplers' polyphase filters applied as per-bin complex gains (src/dsp/resample.ts, Decimator3 / Interpolator3
// viaFft): spectrum rows of K bins at re / im (row r at r * K doubles), the three phase filters' spectra at spec
// (re of phases 0, 1, 2, then im of phases 0, 1, 2, each K doubles, `stride` bytes apart).

/** Decimator3: row 3 blocks + b = sum over p of row 3b + p times phase p, accumulated from 0 in phase order. */
export function phaseSum(re: usize, im: usize, bins: i32, blocks: i32, spec: usize, stride: i32): void {
  const K = <usize>bins;
  const S = <usize>stride;
  const B = <usize>blocks;
  for (let b: usize = 0; b < B; b++) {
    const acc: usize = ((3 * B + b) * K) << 3;
    let k: usize = 0;
    for (; k + 1 < K; k += 2) phaseSumBins(re, im, K, b, acc, spec, S, k, true);
    if (k < K) phaseSumBins(re, im, K, b, acc, spec, S, k, false);
  }
}

@inline function phaseSumBins(re: usize, im: usize, K: usize, b: usize, acc: usize, spec: usize, S: usize, k: usize, pair: bool): void {
  const o = k << 3;
  let ar = f64x2.splat(0);
  let ai = f64x2.splat(0);
  for (let p: usize = 0; p < 3; p++) {
    const q: usize = (((3 * b + p) * K) << 3) + o;
    const xr = ld(re + q, pair);
    const xi = ld(im + q, pair);
    const sr = ld(spec + p * S + o, pair);
    const si = ld(spec + (3 + p) * S + o, pair);
    ar = f64x2.add(ar, f64x2.sub(f64x2.mul(xr, sr), f64x2.mul(xi, si)));
    ai = f64x2.add(ai, f64x2.add(f64x2.mul(xr, si), f64x2.mul(xi, sr)));
  }
  st(re + acc + o, ar, pair);
  st(im + acc + o, ai, pair);
}

/** Interpolator3: row blocks + 3b + p = row b times phase p. */
export function phaseProducts(re: usize, im: usize, bins: i32, blocks: i32, spec: usize, stride: i32): void {
  const K = <usize>bins;
  const S = <usize>stride;
  const B = <usize>blocks;
  for (let b: usize = 0; b < B; b++) {
    for (let p: usize = 0; p < 3; p++) {
      const src = (b * K) << 3;
      const dst = ((B + 3 * b + p) * K) << 3;
      const gr = spec + p * S;
      const gi = spec + (3 + p) * S;
      let k: usize = 0;
      for (; k + 1 < K; k += 2) phaseProductBins(re, im, src, dst, gr, gi, k, true);
      if (k < K) phaseProductBins(re, im, src, dst, gr, gi, k, false);
    }
  }
}

@inline function phaseProductBins(re: usize, im: usize, src: usize, dst: usize, gr: usize, gi: usize, k: usize, pair: bool): void {
  const o = k << 3;
  const xr = ld(re + src + o, pair);
  const xi = ld(im + src + o, pair);
  const hr = ld(gr + o, pair);
  const hi = ld(gi + o, pair);
  st(re + dst + o, f64x2.sub(f64x2.mul(xr, hr), f64x2.mul(xi, hi)), pair);
  st(im + dst + o, f64x2.add(f64x2.mul(xr, hi), f64x2.mul(xi, hr)), pair);
}
