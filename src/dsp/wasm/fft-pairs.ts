// AssemblyScript (compiled to WebAssembly by `npm run build`, not by tsc): RealFFT (src/dsp/fft.ts) for any
// power-of-two size from 16 to 4096 in WebAssembly SIMD, for the full-band stages (resamplers, band-gain probe,
// high-band filter). As in dtln-dsp.ts, the two SIMD lanes are two frames, not two bins: every butterfly is
// RealFFT's scalar code, operation for operation in float64, so the results are bit-identical to it. Loaded by
// src/dsp/fft-pairs.ts, which computes the tables, writes them, and owns the memory.
//
// Memory (byte offsets set by init(); the JS side writes the tables first):
//   SP   split twiddles e^{-2πik/n}, k = 0..n/4, each as (re, re), (im, im) v128 pairs
//   TW   radix-4 twiddles in RealFFT's order (per pass, per j: W^j, W^2j, W^3j), each double splatted
//   REV  bit reversal of 0..n/2-1 (i32)
//   ZR/ZI  the complex work array of one frame pair (lane 0: first frame, lane 1: second)
// Rows: signal rows of n float64 (forward's input, inverse's output), spectrum rows of n/2+1 float64 (re, im).

import { difButterfly, difLast4, difPass, ditFirst4, ditPass, ld64x2, st64x2 } from './radix4';

let M: usize = 0; // n / 2, the complex size
let ODD: bool = false; // log2(M) odd: one radix-2 pass besides the radix-4 ones
let SP: usize = 0;
let TW: usize = 0;
let REV: usize = 0;
let ZR: usize = 0;
let ZI: usize = 0;

/** Sets the size and where the tables and the work arrays are. */
export function init(m: i32, odd: i32, sp: usize, tw: usize, rev: usize, zr: usize, zi: usize): void {
  M = <usize>m;
  ODD = odd != 0;
  SP = sp;
  TW = tw;
  REV = rev;
  ZR = zr;
  ZI = zi;
}

@inline function twv(i: usize): v128 {
  return v128.load(TW + (i << 4));
}

@inline function zr(i: usize): v128 {
  return v128.load(ZR + (i << 4));
}
@inline function zi(i: usize): v128 {
  return v128.load(ZI + (i << 4));
}
@inline function setZ(i: usize, r: v128, im: v128): void {
  v128.store(ZR + (i << 4), r);
  v128.store(ZI + (i << 4), im);
}

/** Offset (in doubles) of the radix-4 pass with quarter span h in TW: RealFFT.twOffset. */
function twOffset(h: usize): usize {
  let off: usize = 0;
  for (let g: usize = ODD ? 2 : 1; g < h; g <<= 2) off += 6 * g;
  return off;
}

/** Forward complex FFT of the packed float64 signals z[p] = x[2p] + i x[2p+1] of frames a and b into ZR/ZI (bit-reversed). */
function forwardComplexPair(a: usize, b: usize): void {
  const m = M;
  let h = m >> 2;
  // First pass (one group) reads the signals.
  const base = twOffset(h);
  const step = h << 4; // bytes between x0, x1, x2, x3: 2h doubles
  for (let j: usize = 0; j < h; j++) {
    const w = base + 6 * j;
    const pa = a + (j << 4);
    const pb = b + (j << 4);
    difButterfly(
      ZR, ZI, j, h, twv(w), twv(w + 1), twv(w + 2), twv(w + 3), twv(w + 4), twv(w + 5),
      ld64x2(pa, pb), ld64x2(pa + 8, pb + 8), ld64x2(pa + step, pb + step), ld64x2(pa + step + 8, pb + step + 8),
      ld64x2(pa + 2 * step, pb + 2 * step), ld64x2(pa + 2 * step + 8, pb + 2 * step + 8),
      ld64x2(pa + 3 * step, pb + 3 * step), ld64x2(pa + 3 * step + 8, pb + 3 * step + 8),
    );
  }
  for (h >>= 2; h > 1; h >>= 2) difPass(ZR, ZI, TW, m, h, twOffset(h));
  if (!ODD) {
    difLast4(ZR, ZI, m);
  } else {
    // Last radix-2 pass.
    for (let q: usize = 0; q < m; q += 2) {
      const ar = zr(q);
      const ai = zi(q);
      const br = zr(q + 1);
      const bi = zi(q + 1);
      setZ(q, f64x2.add(ar, br), f64x2.add(ai, bi));
      setZ(q + 1, f64x2.sub(ar, br), f64x2.sub(ai, bi));
    }
  }
}

/** RealFFT.forward for frames a and b (float64 signal rows) into spectrum rows reA/imA and reB/imB. */
function forwardPair(a: usize, b: usize, reA: usize, imA: usize, reB: usize, imB: usize): void {
  forwardComplexPair(a, b);
  const m = M;
  const half = f64x2.splat(0.5);
  const z0r = zr(0);
  const z0i = zi(0);
  const zero = f64x2.splat(0.0);
  const om = m << 3;
  st64x2(reA, reB, f64x2.add(z0r, z0i));
  st64x2(imA, imB, zero);
  st64x2(reA + om, reB + om, f64x2.sub(z0r, z0i));
  st64x2(imA + om, imB + om, zero);
  for (let k: usize = 1, k2: usize = m - 1; k <= k2; k++, k2--) {
    const p1 = <usize>load<i32>(REV + (k << 2));
    const p2 = <usize>load<i32>(REV + (k2 << 2));
    const ar = zr(p1);
    const ai = zi(p1);
    const br = zr(p2);
    const bi = zi(p2);
    const er = f64x2.mul(half, f64x2.add(ar, br));
    const ei = f64x2.mul(half, f64x2.sub(ai, bi));
    const or = f64x2.mul(half, f64x2.add(ai, bi));
    const oi = f64x2.mul(half, f64x2.sub(br, ar));
    const wr = v128.load(SP + (k << 5));
    const wi = v128.load(SP + (k << 5) + 16);
    const tr = f64x2.sub(f64x2.mul(or, wr), f64x2.mul(oi, wi));
    const ti = f64x2.add(f64x2.mul(or, wi), f64x2.mul(oi, wr));
    const o1 = k << 3;
    const o2 = k2 << 3;
    st64x2(reA + o1, reB + o1, f64x2.add(er, tr));
    st64x2(imA + o1, imB + o1, f64x2.add(ei, ti));
    st64x2(reA + o2, reB + o2, f64x2.sub(er, tr));
    st64x2(imA + o2, imB + o2, f64x2.sub(ti, ei));
  }
}

/** RealFFT.inverse for frames a and b: spectrum rows into float64 signal rows outA / outB. */
function inversePair(reA: usize, imA: usize, outA: usize, reB: usize, imB: usize, outB: usize): void {
  const m = M;
  const half = f64x2.splat(0.5);
  const om = m << 3;
  // Split step into bit-reversed, conjugated ZR/ZI.
  const a0 = ld64x2(reA, reB);
  const am = ld64x2(reA + om, reB + om);
  setZ(0, f64x2.mul(half, f64x2.add(a0, am)), f64x2.mul(f64x2.splat(-0.5), f64x2.sub(a0, am)));
  for (let k: usize = 1, k2: usize = m - 1; k <= k2; k++, k2--) {
    const o1 = k << 3;
    const o2 = k2 << 3;
    const xr = ld64x2(reA + o1, reB + o1);
    const xi = ld64x2(imA + o1, imB + o1);
    const yr = ld64x2(reA + o2, reB + o2);
    const yi = ld64x2(imA + o2, imB + o2);
    const er = f64x2.mul(half, f64x2.add(xr, yr));
    const ei = f64x2.mul(half, f64x2.sub(xi, yi));
    const dr = f64x2.mul(half, f64x2.sub(xr, yr));
    const di = f64x2.mul(half, f64x2.add(xi, yi));
    const wr = v128.load(SP + (k << 5));
    const wi = f64x2.neg(v128.load(SP + (k << 5) + 16));
    const or = f64x2.sub(f64x2.mul(dr, wr), f64x2.mul(di, wi));
    const oi = f64x2.add(f64x2.mul(dr, wi), f64x2.mul(di, wr));
    const r1 = <usize>load<i32>(REV + (k << 2));
    setZ(r1, f64x2.sub(er, oi), f64x2.neg(f64x2.add(ei, or)));
    const r2 = <usize>load<i32>(REV + (k2 << 2));
    setZ(r2, f64x2.add(er, oi), f64x2.sub(ei, or));
  }
  let h: usize;
  if (ODD) {
    for (let q: usize = 0; q < m; q += 2) {
      const ar = zr(q);
      const ai = zi(q);
      const br = zr(q + 1);
      const bi = zi(q + 1);
      setZ(q, f64x2.add(ar, br), f64x2.add(ai, bi));
      setZ(q + 1, f64x2.sub(ar, br), f64x2.sub(ai, bi));
    }
    h = 2;
  } else {
    // First radix-4 pass: all twiddles are 1 (m > 4 always here).
    ditFirst4(ZR, ZI, m);
    h = 4;
  }
  for (; (h << 2) < m; h <<= 2) ditPass(ZR, ZI, TW, m, h, twOffset(h));
  // Last pass (h = m/4, one group), written out as conj / m: sample 2p = Re, 2p+1 = -Im of element p.
  const scale = f64x2.splat(1.0 / <f64>m);
  const base = twOffset(h);
  const step = h << 4; // bytes between the four outputs' sample pairs: 2h doubles
  for (let j: usize = 0; j < h; j++) {
    const w = base + 6 * j;
    const Ar = zr(j);
    const Ai = zi(j);
    const xr = zr(j + h);
    const xi = zi(j + h);
    const Cr = f64x2.sub(f64x2.mul(xr, twv(w + 2)), f64x2.mul(xi, twv(w + 3)));
    const Ci = f64x2.add(f64x2.mul(xr, twv(w + 3)), f64x2.mul(xi, twv(w + 2)));
    const yr = zr(j + 2 * h);
    const yi = zi(j + 2 * h);
    const Br = f64x2.sub(f64x2.mul(yr, twv(w)), f64x2.mul(yi, twv(w + 1)));
    const Bi = f64x2.add(f64x2.mul(yr, twv(w + 1)), f64x2.mul(yi, twv(w)));
    const qr = zr(j + 3 * h);
    const qi = zi(j + 3 * h);
    const Dr = f64x2.sub(f64x2.mul(qr, twv(w + 4)), f64x2.mul(qi, twv(w + 5)));
    const Di = f64x2.add(f64x2.mul(qr, twv(w + 5)), f64x2.mul(qi, twv(w + 4)));
    const s0r = f64x2.add(Ar, Cr);
    const s0i = f64x2.add(Ai, Ci);
    const s1r = f64x2.sub(Ar, Cr);
    const s1i = f64x2.sub(Ai, Ci);
    const s2r = f64x2.add(Br, Dr);
    const s2i = f64x2.add(Bi, Di);
    const s3r = f64x2.sub(Br, Dr);
    const s3i = f64x2.sub(Bi, Di);
    const p0 = j << 4; // byte offset of sample 2j
    const p1 = p0 + step;
    const p2 = p1 + step;
    const p3 = p2 + step;
    st64x2(outA + p0, outB + p0, f64x2.mul(f64x2.add(s0r, s2r), scale));
    st64x2(outA + p0 + 8, outB + p0 + 8, f64x2.mul(f64x2.neg(f64x2.add(s0i, s2i)), scale));
    st64x2(outA + p2, outB + p2, f64x2.mul(f64x2.sub(s0r, s2r), scale));
    st64x2(outA + p2 + 8, outB + p2 + 8, f64x2.mul(f64x2.neg(f64x2.sub(s0i, s2i)), scale));
    st64x2(outA + p1, outB + p1, f64x2.mul(f64x2.add(s1r, s3i), scale));
    st64x2(outA + p1 + 8, outB + p1 + 8, f64x2.mul(f64x2.neg(f64x2.sub(s1i, s3r)), scale));
    st64x2(outA + p3, outB + p3, f64x2.mul(f64x2.sub(s1r, s3i), scale));
    st64x2(outA + p3 + 8, outB + p3 + 8, f64x2.mul(f64x2.neg(f64x2.add(s1i, s3r)), scale));
  }
}

/** Forward transforms of `rows` signal rows (n float64 each, at sig) into spectrum rows (n/2+1 float64) at re / im. */
export function forward(sig: usize, rows: i32, re: usize, im: usize): void {
  const n = <usize>rows;
  const sigRow = M << 4;
  const specRow = (M + 1) << 3;
  let r: usize = 0;
  for (; r + 1 < n; r += 2) {
    const s = r + 1;
    forwardPair(sig + r * sigRow, sig + s * sigRow, re + r * specRow, im + r * specRow, re + s * specRow, im + s * specRow);
  }
  if (r < n) {
    // An odd last row: both lanes compute it (they store the same values).
    forwardPair(sig + r * sigRow, sig + r * sigRow, re + r * specRow, im + r * specRow, re + r * specRow, im + r * specRow);
  }
}

/** Inverse transforms of `rows` spectrum rows at re / im into signal rows at sig. */
export function inverse(re: usize, im: usize, rows: i32, sig: usize): void {
  const n = <usize>rows;
  const sigRow = M << 4;
  const specRow = (M + 1) << 3;
  let r: usize = 0;
  for (; r + 1 < n; r += 2) {
    const s = r + 1;
    inversePair(re + r * specRow, im + r * specRow, sig + r * sigRow, re + s * specRow, im + s * specRow, sig + s * sigRow);
  }
  if (r < n) {
    inversePair(re + r * specRow, im + r * specRow, sig + r * sigRow, re + r * specRow, im + r * specRow, sig + r * sigRow);
  }
}

/**
 * Windowed frames: signal row r (r = 0..rows-1) gets src[r * hop + i] * win[i] for i < n (float32 samples, float64
 * window, the product in float64), rounded to float32 and back when round32 is set (callers whose frames were float32).
 */
export function windowRows(src: usize, hop: i32, rows: i32, win: usize, round32: i32, sig: usize): void {
  const n = M << 1;
  const srcStep = <usize>hop << 2;
  for (let r: usize = 0; r < <usize>rows; r++) {
    const s = src + r * srcStep;
    const d = sig + r * (n << 3);
    if (round32 != 0) {
      for (let i: usize = 0; i < n; i += 2) {
        const y = f64x2.mul(f64x2.promote_low_f32x4(v128.load64_zero(s + (i << 2))), v128.load(win + (i << 3)));
        v128.store(d + (i << 3), f64x2.promote_low_f32x4(f32x4.demote_f64x2_zero(y)));
      }
    } else {
      for (let i: usize = 0; i < n; i += 2) {
        v128.store(d + (i << 3), f64x2.mul(f64x2.promote_low_f32x4(v128.load64_zero(s + (i << 2))), v128.load(win + (i << 3))));
      }
    }
  }
}

/**
 * Overlap-add, rows in order: acc[r * hop + i] += sig row r [i] * win[i] for i < n (float32 accumulator; the sum in
 * float64, rounded once to float32, as `acc[j] += v` in JS), each row value rounded to float32 first when round32 is set.
 */
export function overlapAddRows(sig: usize, rows: i32, hop: i32, win: usize, round32: i32, acc: usize): void {
  const n = M << 1;
  const accStep = <usize>hop << 2;
  for (let r: usize = 0; r < <usize>rows; r++) {
    const s = sig + r * (n << 3);
    const d = acc + r * accStep;
    for (let i: usize = 0; i < n; i += 2) {
      let v = v128.load(s + (i << 3));
      if (round32 != 0) v = f64x2.promote_low_f32x4(f32x4.demote_f64x2_zero(v));
      const a = f64x2.promote_low_f32x4(v128.load64_zero(d + (i << 2)));
      v128.store64_lane(d + (i << 2), f32x4.demote_f64x2_zero(f64x2.add(a, f64x2.mul(v, v128.load(win + (i << 3))))), 0);
    }
  }
}
