// AssemblyScript (compiled to WebAssembly by `npm run build`, not by tsc): DTLN's 512-point STFT work in WebAssembly
// SIMD. The same arithmetic as RealFFT (src/dsp/fft.ts) for n = 512, operation for operation in float64, so the
// results are bit-identical to it; the SIMD lanes are two frames (frame pairs), not two bins, which is what lets every
// butterfly stay the scalar code. Loaded by src/inference/dtln-wasm.ts, which fills the tables and owns the memory.
//
// Memory (bytes; the JS side writes the tables before any call):
//   SP   split twiddles e^{-2πik/512}, k = 0..128, each as (re, re), (im, im) v128 pairs
//   TW   radix-4 twiddles as in RealFFT (passes h = 1, 4, 16, 64; per j: W^j, W^2j, W^3j), each double splatted
//   REV  8-bit bit reversal of 0..255 (i32)
//   ZR/ZI  the complex work array of one frame pair (lane 0: first frame, lane 1: second)
// Buffers (signal, spectra, magnitudes, masks, blocks, overlap-add accumulators) start at HEAP (64 KiB).
//
// Layouts (per frame f of one call): signal samples f*128 .. f*128+511 (float32); spectra rows of 257 float64
// (re, im); magnitude and mask rows of 257 float32; blocks of 512 float32.

import { difButterfly, difLast4, difPass, ditFirst4, ditPass, ld64x2, st64x2 } from './radix4';

const SP: usize = 0;
const TW: usize = 4224;
const REV: usize = 12416;
const ZR: usize = 13440;
const ZI: usize = 17536;

const BINS: usize = 257;
const ROW64: usize = BINS * 8;
const ROW32: usize = BINS * 4;
const BLOCK_BYTES: usize = 512 * 4;

// Offsets (in doubles) of each radix-4 pass's twiddles in TW, as RealFFT.twOffset(h).
const TW_H4: usize = 6;
const TW_H16: usize = 30;
const TW_H64: usize = 126;

@inline function tw(i: usize): v128 {
  return v128.load(TW + (i << 4));
}

/** (a[0], b[0]) from two float32 addresses, as float64. */
@inline function ld32x2(a: usize, b: usize): v128 {
  return f64x2.promote_low_f32x4(v128.load32_lane(b, v128.load32_zero(a), 1));
}


/** Rounds both lanes to float32 and stores lane 0 at a, lane 1 at b. */
@inline function st32x2(a: usize, b: usize, v: v128): void {
  const s = f32x4.demote_f64x2_zero(v);
  v128.store32_lane(a, s, 0);
  v128.store32_lane(b, s, 1);
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

/** Forward complex FFT of the packed signals of frames a and b (float32 at a, b) into ZR/ZI, bit-reversed. */
function forwardComplexPair(a: usize, b: usize): void {
  // First pass (h = 64) reads the signals: z[p] = x[2p] + i x[2p+1].
  for (let j: usize = 0; j < 64; j++) {
    const w = TW_H64 + 6 * j;
    const pa = a + (j << 3);
    const pb = b + (j << 3);
    difButterfly(
      ZR, ZI, j, 64, tw(w), tw(w + 1), tw(w + 2), tw(w + 3), tw(w + 4), tw(w + 5),
      ld32x2(pa, pb), ld32x2(pa + 4, pb + 4), ld32x2(pa + 512, pb + 512), ld32x2(pa + 516, pb + 516),
      ld32x2(pa + 1024, pb + 1024), ld32x2(pa + 1028, pb + 1028), ld32x2(pa + 1536, pb + 1536), ld32x2(pa + 1540, pb + 1540),
    );
  }
  difPass(ZR, ZI, TW, 256, 16, TW_H16);
  difPass(ZR, ZI, TW, 256, 4, TW_H4);
  // Last radix-4 pass (h = 1): all twiddles are 1.
  difLast4(ZR, ZI, 256);
}

/** RealFFT.forwardMag for frames a and b: spectra rows (reA/imA/magA, reB/imB/magB). */
function forwardMagPair(a: usize, b: usize, reA: usize, imA: usize, magA: usize, reB: usize, imB: usize, magB: usize): void {
  forwardComplexPair(a, b);
  const half = f64x2.splat(0.5);
  const z0r = zr(0);
  const z0i = zi(0);
  const x0 = f64x2.add(z0r, z0i);
  const xm = f64x2.sub(z0r, z0i);
  const zero = f64x2.splat(0.0);
  st64x2(reA, reB, x0);
  st64x2(imA, imB, zero);
  st32x2(magA, magB, f64x2.abs(x0));
  st64x2(reA + 2048, reB + 2048, xm);
  st64x2(imA + 2048, imB + 2048, zero);
  st32x2(magA + 1024, magB + 1024, f64x2.abs(xm));
  for (let k: usize = 1, k2: usize = 255; k <= k2; k++, k2--) {
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
    const r1 = f64x2.add(er, tr);
    const i1 = f64x2.add(ei, ti);
    const r2 = f64x2.sub(er, tr);
    const i2 = f64x2.sub(ti, ei);
    const o1 = k << 3;
    const o2 = k2 << 3;
    st64x2(reA + o1, reB + o1, r1);
    st64x2(imA + o1, imB + o1, i1);
    st32x2(magA + (k << 2), magB + (k << 2), f64x2.sqrt(f64x2.add(f64x2.mul(r1, r1), f64x2.mul(i1, i1))));
    st64x2(reA + o2, reB + o2, r2);
    st64x2(imA + o2, imB + o2, i2);
    st32x2(magA + (k2 << 2), magB + (k2 << 2), f64x2.sqrt(f64x2.add(f64x2.mul(r2, r2), f64x2.mul(i2, i2))));
  }
}

/**
 * RealFFT.inverseMasked for frames a and b: spectra rows times float32 gain rows, inverse FFT, float32 blocks of 512
 * samples at outA / outB.
 */
function inverseMaskedPair(
  reA: usize, imA: usize, gA: usize, outA: usize,
  reB: usize, imB: usize, gB: usize, outB: usize,
): void {
  const half = f64x2.splat(0.5);
  // Split step into bit-reversed, conjugated ZR/ZI (RealFFT.loadMaskedSpectrum).
  const a0 = f64x2.mul(ld64x2(reA, reB), ld32x2(gA, gB));
  const am = f64x2.mul(ld64x2(reA + 2048, reB + 2048), ld32x2(gA + 1024, gB + 1024));
  setZ(0, f64x2.mul(half, f64x2.add(a0, am)), f64x2.mul(f64x2.splat(-0.5), f64x2.sub(a0, am)));
  for (let k: usize = 1, k2: usize = 255; k <= k2; k++, k2--) {
    const g1 = ld32x2(gA + (k << 2), gB + (k << 2));
    const g2 = ld32x2(gA + (k2 << 2), gB + (k2 << 2));
    const o1 = k << 3;
    const o2 = k2 << 3;
    const xr = f64x2.mul(ld64x2(reA + o1, reB + o1), g1);
    const xi = f64x2.mul(ld64x2(imA + o1, imB + o1), g1);
    const yr = f64x2.mul(ld64x2(reA + o2, reB + o2), g2);
    const yi = f64x2.mul(ld64x2(imA + o2, imB + o2), g2);
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
  // First radix-4 pass: all twiddles are 1.
  ditFirst4(ZR, ZI, 256);
  ditPass(ZR, ZI, TW, 256, 4, TW_H4);
  ditPass(ZR, ZI, TW, 256, 16, TW_H16);
  // Last pass (h = 64), written out as conj / 256: sample 2p = Re, 2p+1 = -Im of element p.
  const scale = f64x2.splat(1.0 / 256.0);
  for (let j: usize = 0; j < 64; j++) {
    const w = TW_H64 + 6 * j;
    const Ar = zr(j);
    const Ai = zi(j);
    const xr = zr(j + 64);
    const xi = zi(j + 64);
    const Cr = f64x2.sub(f64x2.mul(xr, tw(w + 2)), f64x2.mul(xi, tw(w + 3)));
    const Ci = f64x2.add(f64x2.mul(xr, tw(w + 3)), f64x2.mul(xi, tw(w + 2)));
    const yr = zr(j + 128);
    const yi = zi(j + 128);
    const Br = f64x2.sub(f64x2.mul(yr, tw(w)), f64x2.mul(yi, tw(w + 1)));
    const Bi = f64x2.add(f64x2.mul(yr, tw(w + 1)), f64x2.mul(yi, tw(w)));
    const qr = zr(j + 192);
    const qi = zi(j + 192);
    const Dr = f64x2.sub(f64x2.mul(qr, tw(w + 4)), f64x2.mul(qi, tw(w + 5)));
    const Di = f64x2.add(f64x2.mul(qr, tw(w + 5)), f64x2.mul(qi, tw(w + 4)));
    const s0r = f64x2.add(Ar, Cr);
    const s0i = f64x2.add(Ai, Ci);
    const s1r = f64x2.sub(Ar, Cr);
    const s1i = f64x2.sub(Ai, Ci);
    const s2r = f64x2.add(Br, Dr);
    const s2i = f64x2.add(Bi, Di);
    const s3r = f64x2.sub(Br, Dr);
    const s3i = f64x2.sub(Bi, Di);
    const p0 = j << 3; // byte offset of sample 2j
    const p1 = p0 + 512;
    const p2 = p1 + 512;
    const p3 = p2 + 512;
    st32x2(outA + p0, outB + p0, f64x2.mul(f64x2.add(s0r, s2r), scale));
    st32x2(outA + p0 + 4, outB + p0 + 4, f64x2.mul(f64x2.neg(f64x2.add(s0i, s2i)), scale));
    st32x2(outA + p2, outB + p2, f64x2.mul(f64x2.sub(s0r, s2r), scale));
    st32x2(outA + p2 + 4, outB + p2 + 4, f64x2.mul(f64x2.neg(f64x2.sub(s0i, s2i)), scale));
    st32x2(outA + p1, outB + p1, f64x2.mul(f64x2.add(s1r, s3i), scale));
    st32x2(outA + p1 + 4, outB + p1 + 4, f64x2.mul(f64x2.neg(f64x2.sub(s1i, s3r)), scale));
    st32x2(outA + p3, outB + p3, f64x2.mul(f64x2.sub(s1r, s3i), scale));
    st32x2(outA + p3 + 4, outB + p3 + 4, f64x2.mul(f64x2.neg(f64x2.add(s1i, s3r)), scale));
  }
}

/**
 * STFT of `frames` frames (every `hop` samples: 128 for DTLN, 256 for nsm-1's stage 1; 512 samples, float32 signal at `sig`) into spectra rows `re`/`im` (float64) and
 * magnitude rows `mag` (float32): RealFFT.forwardMag per frame.
 */
export function stftMag(sig: usize, frames: i32, hop: i32, re: usize, im: usize, mag: usize): void {
  const n = <usize>frames;
  const hopBytes = <usize>hop * 4;
  let f: usize = 0;
  for (; f + 1 < n; f += 2) {
    const g = f + 1;
    forwardMagPair(sig + f * hopBytes, sig + g * hopBytes, re + f * ROW64, im + f * ROW64, mag + f * ROW32, re + g * ROW64, im + g * ROW64, mag + g * ROW32);
  }
  if (f < n) {
    // An odd last frame: both lanes compute it (they store the same values).
    forwardMagPair(sig + f * hopBytes, sig + f * hopBytes, re + f * ROW64, im + f * ROW64, mag + f * ROW32, re + f * ROW64, im + f * ROW64, mag + f * ROW32);
  }
}

/** Masked inverse STFT blocks: RealFFT.inverseMasked per frame, spectra rows times gain rows into 512-sample blocks. */
export function istftMasked(re: usize, im: usize, gain: usize, frames: i32, out: usize): void {
  const n = <usize>frames;
  let f: usize = 0;
  for (; f + 1 < n; f += 2) {
    const g = f + 1;
    inverseMaskedPair(re + f * ROW64, im + f * ROW64, gain + f * ROW32, out + f * BLOCK_BYTES, re + g * ROW64, im + g * ROW64, gain + g * ROW32, out + g * BLOCK_BYTES);
  }
  if (f < n) {
    inverseMaskedPair(re + f * ROW64, im + f * ROW64, gain + f * ROW32, out + f * BLOCK_BYTES, re + f * ROW64, im + f * ROW64, gain + f * ROW32, out + f * BLOCK_BYTES);
  }
}

/**
 * Overlap-add of `frames` 512-sample blocks every `hop` samples into the float32 accumulator `acc` (frame order,
 * sample by sample: acc[i*hop + s] += blocks[i*512 + s]). A float32 sum equals the float64 sum rounded to float32, so this is
 * what the JS loop computes.
 */
export function overlapAdd(blocks: usize, frames: i32, hop: i32, acc: usize): void {
  const n = <usize>frames;
  const hopBytes = <usize>hop * 4;
  for (let f: usize = 0; f < n; f++) {
    const src = blocks + f * BLOCK_BYTES;
    const dst = acc + f * hopBytes;
    for (let s: usize = 0; s < BLOCK_BYTES; s += 16) {
      v128.store(dst + s, f32x4.add(v128.load(dst + s), v128.load(src + s)));
    }
  }
}

/**
 * Windowed overlap-add: acc[i*128 + s] += blocks[i*512 + s] * window[s], in float64 (the float32 product is exact
 * there) and rounded once to float32, as the JS loop does.
 */
export function overlapAddWindowed(blocks: usize, frames: i32, hop: i32, acc: usize, window: usize): void {
  const n = <usize>frames;
  const hopBytes = <usize>hop * 4;
  for (let f: usize = 0; f < n; f++) {
    const src = blocks + f * BLOCK_BYTES;
    const dst = acc + f * hopBytes;
    for (let s: usize = 0; s < BLOCK_BYTES; s += 8) {
      const x = f64x2.promote_low_f32x4(v128.load64_zero(src + s));
      const w = f64x2.promote_low_f32x4(v128.load64_zero(window + s));
      const y = f64x2.promote_low_f32x4(v128.load64_zero(dst + s));
      v128.store64_lane(dst + s, f32x4.demote_f64x2_zero(f64x2.add(y, f64x2.mul(x, w))), 0);
    }
  }
}
