// AssemblyScript, shared by the WebAssembly kernels (dtln-dsp.ts, fft-pairs.ts; each compiled on its own, these
// inlined into both): the radix-4 passes of RealFFT's complex FFT (src/dsp/fft.ts) on a work array of frame
// pairs, lane 0 the first frame and lane 1 the second, every butterfly RealFFT's scalar arithmetic in float64.
//   zr, zi   the work array's real and imaginary parts: element i at zr + 16 i (one v128 per element)
//   tw       the radix-4 twiddle table, each double splatted (v128 t at tw + 16 t); twBase: the pass's first entry
//   m        the complex size (n / 2)

@inline export function ld64x2(a: usize, b: usize): v128 {
  return v128.load64_lane(b, v128.load64_zero(a), 1);
}

@inline export function st64x2(a: usize, b: usize, v: v128): void {
  v128.store64_lane(a, v, 0);
  v128.store64_lane(b, v, 1);
}

/**
 * One radix-4 decimation-in-frequency butterfly (RealFFT.forwardComplex): inputs x0..x3; outputs X0, X2 W^2j, X1 W^j,
 * X3 W^3j (twiddles w1 = W^j, w2, w3) into work elements i, i + h, i + 2h, i + 3h. Every pass of the forward transform
 * but the last (the first one reads the signal, the others the work array) goes through here.
 */
@inline export function difButterfly(
  zr: usize, zi: usize, i: usize, h: usize,
  w1r: v128, w1i: v128, w2r: v128, w2i: v128, w3r: v128, w3i: v128,
  x0r: v128, x0i: v128, x1r: v128, x1i: v128, x2r: v128, x2i: v128, x3r: v128, x3i: v128,
): void {
  const a0r = f64x2.add(x0r, x2r);
  const a0i = f64x2.add(x0i, x2i);
  const a1r = f64x2.sub(x0r, x2r);
  const a1i = f64x2.sub(x0i, x2i);
  const b0r = f64x2.add(x1r, x3r);
  const b0i = f64x2.add(x1i, x3i);
  const b1r = f64x2.sub(x1r, x3r);
  const b1i = f64x2.sub(x1i, x3i);
  const y1r = f64x2.add(a1r, b1i);
  const y1i = f64x2.sub(a1i, b1r);
  const y2r = f64x2.sub(a0r, b0r);
  const y2i = f64x2.sub(a0i, b0i);
  const y3r = f64x2.sub(a1r, b1i);
  const y3i = f64x2.add(a1i, b1r);
  const p0 = i << 4;
  const p1 = (i + h) << 4;
  const p2 = (i + 2 * h) << 4;
  const p3 = (i + 3 * h) << 4;
  v128.store(zr + p0, f64x2.add(a0r, b0r));
  v128.store(zi + p0, f64x2.add(a0i, b0i));
  v128.store(zr + p1, f64x2.sub(f64x2.mul(y2r, w2r), f64x2.mul(y2i, w2i)));
  v128.store(zi + p1, f64x2.add(f64x2.mul(y2r, w2i), f64x2.mul(y2i, w2r)));
  v128.store(zr + p2, f64x2.sub(f64x2.mul(y1r, w1r), f64x2.mul(y1i, w1i)));
  v128.store(zi + p2, f64x2.add(f64x2.mul(y1r, w1i), f64x2.mul(y1i, w1r)));
  v128.store(zr + p3, f64x2.sub(f64x2.mul(y3r, w3r), f64x2.mul(y3i, w3i)));
  v128.store(zi + p3, f64x2.add(f64x2.mul(y3r, w3i), f64x2.mul(y3i, w3r)));
}

/** Radix-4 decimation-in-frequency pass with quarter span h (RealFFT.forwardComplex's middle passes). */
@inline export function difPass(zr: usize, zi: usize, tw: usize, m: usize, h: usize, twBase: usize): void {
  const span = h << 2;
  for (let j: usize = 0; j < h; j++) {
    const w = tw + ((twBase + 6 * j) << 4);
    const w1r = v128.load(w);
    const w1i = v128.load(w + 16);
    const w2r = v128.load(w + 32);
    const w2i = v128.load(w + 48);
    const w3r = v128.load(w + 64);
    const w3i = v128.load(w + 80);
    for (let i0 = j; i0 < m; i0 += span) {
      const p0 = i0 << 4;
      const p1 = (i0 + h) << 4;
      const p2 = (i0 + 2 * h) << 4;
      const p3 = (i0 + 3 * h) << 4;
      difButterfly(
        zr, zi, i0, h, w1r, w1i, w2r, w2i, w3r, w3i,
        v128.load(zr + p0), v128.load(zi + p0), v128.load(zr + p1), v128.load(zi + p1),
        v128.load(zr + p2), v128.load(zi + p2), v128.load(zr + p3), v128.load(zi + p3),
      );
    }
  }
}

/** The forward transform's last radix-4 pass (h = 1): all twiddles are 1. */
@inline export function difLast4(zr: usize, zi: usize, m: usize): void {
  for (let q: usize = 0; q < m; q += 4) {
    const p = q << 4;
    const x0r = v128.load(zr + p);
    const x0i = v128.load(zi + p);
    const x1r = v128.load(zr + p + 16);
    const x1i = v128.load(zi + p + 16);
    const x2r = v128.load(zr + p + 32);
    const x2i = v128.load(zi + p + 32);
    const x3r = v128.load(zr + p + 48);
    const x3i = v128.load(zi + p + 48);
    const a0r = f64x2.add(x0r, x2r);
    const a0i = f64x2.add(x0i, x2i);
    const a1r = f64x2.sub(x0r, x2r);
    const a1i = f64x2.sub(x0i, x2i);
    const b0r = f64x2.add(x1r, x3r);
    const b0i = f64x2.add(x1i, x3i);
    const b1r = f64x2.sub(x1r, x3r);
    const b1i = f64x2.sub(x1i, x3i);
    v128.store(zr + p, f64x2.add(a0r, b0r));
    v128.store(zi + p, f64x2.add(a0i, b0i));
    v128.store(zr + p + 16, f64x2.sub(a0r, b0r));
    v128.store(zi + p + 16, f64x2.sub(a0i, b0i));
    v128.store(zr + p + 32, f64x2.add(a1r, b1i));
    v128.store(zi + p + 32, f64x2.sub(a1i, b1r));
    v128.store(zr + p + 48, f64x2.sub(a1r, b1i));
    v128.store(zi + p + 48, f64x2.add(a1i, b1r));
  }
}

/** Radix-4 decimation-in-time pass with quarter span h (RealFFT.inverseComplexConj's middle passes). */
@inline export function ditPass(zr: usize, zi: usize, tw: usize, m: usize, h: usize, twBase: usize): void {
  const span = h << 2;
  for (let j: usize = 0; j < h; j++) {
    const w = tw + ((twBase + 6 * j) << 4);
    const w1r = v128.load(w);
    const w1i = v128.load(w + 16);
    const w2r = v128.load(w + 32);
    const w2i = v128.load(w + 48);
    const w3r = v128.load(w + 64);
    const w3i = v128.load(w + 80);
    for (let i0 = j; i0 < m; i0 += span) {
      const p0 = i0 << 4;
      const p1 = (i0 + h) << 4;
      const p2 = (i0 + 2 * h) << 4;
      const p3 = (i0 + 3 * h) << 4;
      const Ar = v128.load(zr + p0);
      const Ai = v128.load(zi + p0);
      const xr = v128.load(zr + p1);
      const xi = v128.load(zi + p1);
      const Cr = f64x2.sub(f64x2.mul(xr, w2r), f64x2.mul(xi, w2i));
      const Ci = f64x2.add(f64x2.mul(xr, w2i), f64x2.mul(xi, w2r));
      const yr = v128.load(zr + p2);
      const yi = v128.load(zi + p2);
      const Br = f64x2.sub(f64x2.mul(yr, w1r), f64x2.mul(yi, w1i));
      const Bi = f64x2.add(f64x2.mul(yr, w1i), f64x2.mul(yi, w1r));
      const qr = v128.load(zr + p3);
      const qi = v128.load(zi + p3);
      const Dr = f64x2.sub(f64x2.mul(qr, w3r), f64x2.mul(qi, w3i));
      const Di = f64x2.add(f64x2.mul(qr, w3i), f64x2.mul(qi, w3r));
      const s0r = f64x2.add(Ar, Cr);
      const s0i = f64x2.add(Ai, Ci);
      const s1r = f64x2.sub(Ar, Cr);
      const s1i = f64x2.sub(Ai, Ci);
      const s2r = f64x2.add(Br, Dr);
      const s2i = f64x2.add(Bi, Di);
      const s3r = f64x2.sub(Br, Dr);
      const s3i = f64x2.sub(Bi, Di);
      v128.store(zr + p0, f64x2.add(s0r, s2r));
      v128.store(zi + p0, f64x2.add(s0i, s2i));
      v128.store(zr + p2, f64x2.sub(s0r, s2r));
      v128.store(zi + p2, f64x2.sub(s0i, s2i));
      v128.store(zr + p1, f64x2.add(s1r, s3i));
      v128.store(zi + p1, f64x2.sub(s1i, s3r));
      v128.store(zr + p3, f64x2.sub(s1r, s3i));
      v128.store(zi + p3, f64x2.add(s1i, s3r));
    }
  }
}

/** The inverse transform's first radix-4 pass (h = 1): all twiddles are 1. */
@inline export function ditFirst4(zr: usize, zi: usize, m: usize): void {
  for (let q: usize = 0; q < m; q += 4) {
    const p = q << 4;
    const Ar = v128.load(zr + p);
    const Ai = v128.load(zi + p);
    const Cr = v128.load(zr + p + 16);
    const Ci = v128.load(zi + p + 16);
    const Br = v128.load(zr + p + 32);
    const Bi = v128.load(zi + p + 32);
    const Dr = v128.load(zr + p + 48);
    const Di = v128.load(zi + p + 48);
    const s0r = f64x2.add(Ar, Cr);
    const s0i = f64x2.add(Ai, Ci);
    const s1r = f64x2.sub(Ar, Cr);
    const s1i = f64x2.sub(Ai, Ci);
    const s2r = f64x2.add(Br, Dr);
    const s2i = f64x2.add(Bi, Di);
    const s3r = f64x2.sub(Br, Dr);
    const s3i = f64x2.sub(Bi, Di);
    v128.store(zr + p, f64x2.add(s0r, s2r));
    v128.store(zi + p, f64x2.add(s0i, s2i));
    v128.store(zr + p + 32, f64x2.sub(s0r, s2r));
    v128.store(zi + p + 32, f64x2.sub(s0i, s2i));
    v128.store(zr + p + 16, f64x2.add(s1r, s3i));
    v128.store(zi + p + 16, f64x2.sub(s1i, s3r));
    v128.store(zr + p + 48, f64x2.sub(s1r, s3i));
    v128.store(zi + p + 48, f64x2.add(s1i, s3r));
  }
}
