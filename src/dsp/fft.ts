// Real FFT for power-of-two sizes (512 for DTLN), computed as a complex FFT of half the size plus a split step.
// Complex FFTs are radix-4 (plus one radix-2 pass when log2(n/2) is odd) with per-pass twiddle tables: forward is
// decimation in frequency (natural-order input read straight from the signal in its first pass, bit-reversed output
// read by the split step), inverse is decimation in time on the conjugate (the split step writes bit-reversed, the
// last pass writes the scaled samples). Split steps handle bins k and n/2-k together (they share their inputs and
// twiddle). Tables are built once; forward/inverse allocate nothing.
// Over 400 lines on purpose: one algorithm (the radix-4 passes, the split steps and the fused DTLN variants share
// their tables and index scheme), so it is kept in one file rather than cut apart.

type Samples = Float32Array | Float64Array;
// Hot paths (DTLN, post-filter) always call with Float32Array signals and Float64Array spectra: keep it that way,
// so the loops stay monomorphic.

export class RealFFT {
  readonly n: number;
  /** Number of non-redundant bins: n/2 + 1. */
  readonly bins: number;
  private readonly half: number;
  private readonly rev: Int32Array;
  /** Split twiddles e^{-2πik/n}, k = 0..n/4 (bins k and n/2-k share one). */
  private readonly spRe: Float64Array;
  private readonly spIm: Float64Array;
  /** Radix-4 twiddles, pass after pass: per j, W^j, W^2j, W^3j (re, im) with W = e^{-2πi/(4h)}. */
  private readonly tw: Float64Array;
  /** log2(n/2) odd: one radix-2 pass besides the radix-4 ones. */
  private readonly oddBits: boolean;
  private readonly zRe: Float64Array;
  private readonly zIm: Float64Array;

  constructor(n: number) {
    if (n < 4 || (n & (n - 1)) !== 0) throw new Error(`RealFFT size must be a power of two >= 4, got ${n}`);
    this.n = n;
    const m = (this.half = n >> 1);
    this.bins = m + 1;
    const bits = Math.round(Math.log2(m));
    this.rev = new Int32Array(m);
    for (let i = 0; i < m; i++) {
      let r = 0;
      for (let b = 0; b < bits; b++) if (i & (1 << b)) r |= 1 << (bits - 1 - b);
      this.rev[i] = r;
    }
    const q = m >> 1;
    this.spRe = new Float64Array(q + 1);
    this.spIm = new Float64Array(q + 1);
    for (let k = 0; k <= q; k++) {
      this.spRe[k] = Math.cos((-2 * Math.PI * k) / n);
      this.spIm[k] = Math.sin((-2 * Math.PI * k) / n);
    }
    this.zRe = new Float64Array(m);
    this.zIm = new Float64Array(m);
    this.oddBits = bits % 2 === 1;
    const tw: number[] = [];
    for (let h = this.oddBits ? 2 : 1; 4 * h <= m; h *= 4) {
      for (let j = 0; j < h; j++) {
        for (let p = 1; p <= 3; p++) {
          const a = (-2 * Math.PI * p * j) / (4 * h);
          tw.push(Math.cos(a), Math.sin(a));
        }
      }
    }
    this.tw = Float64Array.from(tw);
  }

  /**
   * Forward transform of input[inOff .. inOff+n) into re/im[outOff .. outOff+bins).
   * Same convention as numpy.fft.rfft (no scaling).
   */
  forward(input: Samples, inOff: number, re: Samples, im: Samples, outOff = 0): void {
    this.forwardComplex(input, inOff);
    const m = this.half;
    const zr = this.zRe;
    const zi = this.zIm;
    const rev = this.rev;
    const spRe = this.spRe;
    const spIm = this.spIm;
    re[outOff] = zr[0] + zi[0];
    im[outOff] = 0;
    re[outOff + m] = zr[0] - zi[0];
    im[outOff + m] = 0;
    // E = (Z[k] + conj Z[m-k]) / 2, O = (Z[k] - conj Z[m-k]) / 2i: X[k] = E + W^k O, X[m-k] = conj(E - W^k O).
    for (let k = 1, k2 = m - 1; k <= k2; k++, k2--) {
      const p1 = rev[k];
      const p2 = rev[k2];
      const ar = zr[p1];
      const ai = zi[p1];
      const br = zr[p2];
      const bi = zi[p2];
      const er = 0.5 * (ar + br);
      const ei = 0.5 * (ai - bi);
      const or = 0.5 * (ai + bi);
      const oi = 0.5 * (br - ar);
      const wr = spRe[k];
      const wi = spIm[k];
      const tr = or * wr - oi * wi;
      const ti = or * wi + oi * wr;
      re[outOff + k] = er + tr;
      im[outOff + k] = ei + ti;
      re[outOff + k2] = er - tr;
      im[outOff + k2] = ti - ei;
    }
  }

  /** forward() that also writes the magnitudes |X[k]| to mag[outOff .. outOff+bins) (DTLN's stage-1 input). */
  forwardMag(input: Float32Array, inOff: number, re: Float64Array, im: Float64Array, mag: Float32Array, outOff: number): void {
    this.forwardComplex(input, inOff);
    const m = this.half;
    const zr = this.zRe;
    const zi = this.zIm;
    const rev = this.rev;
    const spRe = this.spRe;
    const spIm = this.spIm;
    const x0 = zr[0] + zi[0];
    const xm = zr[0] - zi[0];
    re[outOff] = x0;
    im[outOff] = 0;
    mag[outOff] = Math.abs(x0);
    re[outOff + m] = xm;
    im[outOff + m] = 0;
    mag[outOff + m] = Math.abs(xm);
    for (let k = 1, k2 = m - 1; k <= k2; k++, k2--) {
      const p1 = rev[k];
      const p2 = rev[k2];
      const ar = zr[p1];
      const ai = zi[p1];
      const br = zr[p2];
      const bi = zi[p2];
      const er = 0.5 * (ar + br);
      const ei = 0.5 * (ai - bi);
      const or = 0.5 * (ai + bi);
      const oi = 0.5 * (br - ar);
      const wr = spRe[k];
      const wi = spIm[k];
      const tr = or * wr - oi * wi;
      const ti = or * wi + oi * wr;
      const r1 = er + tr;
      const i1 = ei + ti;
      const r2 = er - tr;
      const i2 = ti - ei;
      re[outOff + k] = r1;
      im[outOff + k] = i1;
      mag[outOff + k] = Math.sqrt(r1 * r1 + i1 * i1);
      re[outOff + k2] = r2;
      im[outOff + k2] = i2;
      mag[outOff + k2] = Math.sqrt(r2 * r2 + i2 * i2);
    }
  }

  /**
   * Inverse of forward (numpy.fft.irfft convention, scaled by 1/n): re/im[inOff .. inOff+bins) into
   * out[outOff .. outOff+n). The imaginary parts of DC and Nyquist are ignored.
   */
  inverse(re: Samples, im: Samples, inOff: number, out: Samples, outOff: number): void {
    const m = this.half;
    const zr = this.zRe;
    const zi = this.zIm;
    const rev = this.rev;
    const spRe = this.spRe;
    const spIm = this.spIm;
    // Z[k] = E[k] + i O[k], E = (X[k] + conj X[m-k]) / 2, O = (X[k] - conj X[m-k]) W^{-k} / 2;
    // Z[m-k] = conj E + i conj O. Stored conjugated: the forward FFT of it is the conjugate inverse.
    const a0 = re[inOff];
    const am = re[inOff + m];
    zr[0] = 0.5 * (a0 + am);
    zi[0] = -0.5 * (a0 - am);
    for (let k = 1, k2 = m - 1; k <= k2; k++, k2--) {
      const xr = re[inOff + k];
      const xi = im[inOff + k];
      const yr = re[inOff + k2];
      const yi = im[inOff + k2];
      const er = 0.5 * (xr + yr);
      const ei = 0.5 * (xi - yi);
      const dr = 0.5 * (xr - yr);
      const di = 0.5 * (xi + yi);
      const wr = spRe[k];
      const wi = -spIm[k];
      const or = dr * wr - di * wi;
      const oi = dr * wi + di * wr;
      const r1 = rev[k];
      zr[r1] = er - oi;
      zi[r1] = -(ei + or);
      const r2 = rev[k2];
      zr[r2] = er + oi;
      zi[r2] = ei - or;
    }
    this.inverseComplexConj(out, outOff, null);
  }

  /** inverse() of the spectrum multiplied bin by bin with a real gain (DTLN's mask), without writing it back. */
  inverseMasked(re: Float64Array, im: Float64Array, gain: Float32Array, inOff: number, out: Float32Array, outOff: number): void {
    this.loadMaskedSpectrum(re, im, gain, inOff);
    this.inverseComplexConj(out, outOff, null);
  }

  /**
   * Overlap-add synthesis step: acc[accOff + i] += block[i] * window[i], block = inverseMasked(...) rounded to float32
   * first, so the sums are exactly those of writing the block out and adding it windowed afterwards.
   */
  inverseMaskedOverlapAdd(
    re: Float64Array,
    im: Float64Array,
    gain: Float32Array,
    inOff: number,
    acc: Float32Array,
    accOff: number,
    window: Float32Array,
  ): void {
    this.loadMaskedSpectrum(re, im, gain, inOff);
    this.inverseComplexConj(acc, accOff, window);
  }

  /** Split step of the inverse for X[k] * gain[k] (see inverse()), conjugated, into bit-reversed zRe/zIm. */
  private loadMaskedSpectrum(re: Float64Array, im: Float64Array, gain: Float32Array, inOff: number): void {
    const m = this.half;
    const zr = this.zRe;
    const zi = this.zIm;
    const rev = this.rev;
    const spRe = this.spRe;
    const spIm = this.spIm;
    const a0 = re[inOff] * gain[inOff];
    const am = re[inOff + m] * gain[inOff + m];
    zr[0] = 0.5 * (a0 + am);
    zi[0] = -0.5 * (a0 - am);
    for (let k = 1, k2 = m - 1; k <= k2; k++, k2--) {
      const g1 = gain[inOff + k];
      const g2 = gain[inOff + k2];
      const xr = re[inOff + k] * g1;
      const xi = im[inOff + k] * g1;
      const yr = re[inOff + k2] * g2;
      const yi = im[inOff + k2] * g2;
      const er = 0.5 * (xr + yr);
      const ei = 0.5 * (xi - yi);
      const dr = 0.5 * (xr - yr);
      const di = 0.5 * (xi + yi);
      const wr = spRe[k];
      const wi = -spIm[k];
      const or = dr * wr - di * wi;
      const oi = dr * wi + di * wr;
      const r1 = rev[k];
      zr[r1] = er - oi;
      zi[r1] = -(ei + or);
      const r2 = rev[k2];
      zr[r2] = er + oi;
      zi[r2] = ei - or;
    }
  }

  /** Offset in `tw` of the radix-4 pass with quarter span h. */
  private twOffset(h: number): number {
    let off = 0;
    for (let g = this.oddBits ? 2 : 1; g < h; g *= 4) off += 6 * g;
    return off;
  }

  /**
   * Forward complex FFT of the packed signal z[p] = x[2p] + i x[2p+1] into zRe/zIm, output in bit-reversed order.
   * Radix-4 decimation in frequency: inputs x0..x3 at j, j+h, j+2h, j+3h; outputs X0, X2, X1, X3 (bit-reversed
   * order of the four sub-transforms) back to the same places, X_q multiplied by W^{qj}, W = e^{-2πi/(4h)}.
   */
  private forwardComplex(input: Samples, inOff: number): void {
    const m = this.half;
    const re = this.zRe;
    const im = this.zIm;
    const tw = this.tw;
    let h = m >> 2;
    if (h === 0) {
      // m = 2: one radix-2 butterfly.
      const ar = input[inOff];
      const ai = input[inOff + 1];
      const br = input[inOff + 2];
      const bi = input[inOff + 3];
      re[0] = ar + br;
      im[0] = ai + bi;
      re[1] = ar - br;
      im[1] = ai - bi;
      return;
    }
    // First pass (one group) reads the signal directly.
    for (let j = 0, w = this.twOffset(h); j < h; j++, w += 6) {
      const p0 = inOff + 2 * j;
      const p1 = p0 + 2 * h;
      const p2 = p1 + 2 * h;
      const p3 = p2 + 2 * h;
      const x0r = input[p0];
      const x0i = input[p0 + 1];
      const x1r = input[p1];
      const x1i = input[p1 + 1];
      const x2r = input[p2];
      const x2i = input[p2 + 1];
      const x3r = input[p3];
      const x3i = input[p3 + 1];
      const a0r = x0r + x2r;
      const a0i = x0i + x2i;
      const a1r = x0r - x2r;
      const a1i = x0i - x2i;
      const b0r = x1r + x3r;
      const b0i = x1i + x3i;
      const b1r = x1r - x3r;
      const b1i = x1i - x3i;
      // X1 = a1 - i b1, X2 = a0 - b0, X3 = a1 + i b1, then twiddled
      const y1r = a1r + b1i;
      const y1i = a1i - b1r;
      const y2r = a0r - b0r;
      const y2i = a0i - b0i;
      const y3r = a1r - b1i;
      const y3i = a1i + b1r;
      const w1r = tw[w];
      const w1i = tw[w + 1];
      const w2r = tw[w + 2];
      const w2i = tw[w + 3];
      const w3r = tw[w + 4];
      const w3i = tw[w + 5];
      const i1 = j + h;
      const i2 = i1 + h;
      const i3 = i2 + h;
      re[j] = a0r + b0r;
      im[j] = a0i + b0i;
      re[i1] = y2r * w2r - y2i * w2i;
      im[i1] = y2r * w2i + y2i * w2r;
      re[i2] = y1r * w1r - y1i * w1i;
      im[i2] = y1r * w1i + y1i * w1r;
      re[i3] = y3r * w3r - y3i * w3i;
      im[i3] = y3r * w3i + y3i * w3r;
    }
    if (h === 1) return; // m = 4: that was the only pass
    for (h >>= 2; h > 1; h >>= 2) {
      const span = 4 * h;
      for (let j = 0, w = this.twOffset(h); j < h; j++, w += 6) {
        const w1r = tw[w];
        const w1i = tw[w + 1];
        const w2r = tw[w + 2];
        const w2i = tw[w + 3];
        const w3r = tw[w + 4];
        const w3i = tw[w + 5];
        for (let i0 = j; i0 < m; i0 += span) {
          const i1 = i0 + h;
          const i2 = i1 + h;
          const i3 = i2 + h;
          const x0r = re[i0];
          const x0i = im[i0];
          const x1r = re[i1];
          const x1i = im[i1];
          const x2r = re[i2];
          const x2i = im[i2];
          const x3r = re[i3];
          const x3i = im[i3];
          const a0r = x0r + x2r;
          const a0i = x0i + x2i;
          const a1r = x0r - x2r;
          const a1i = x0i - x2i;
          const b0r = x1r + x3r;
          const b0i = x1i + x3i;
          const b1r = x1r - x3r;
          const b1i = x1i - x3i;
          const y1r = a1r + b1i;
          const y1i = a1i - b1r;
          const y2r = a0r - b0r;
          const y2i = a0i - b0i;
          const y3r = a1r - b1i;
          const y3i = a1i + b1r;
          re[i0] = a0r + b0r;
          im[i0] = a0i + b0i;
          re[i1] = y2r * w2r - y2i * w2i;
          im[i1] = y2r * w2i + y2i * w2r;
          re[i2] = y1r * w1r - y1i * w1i;
          im[i2] = y1r * w1i + y1i * w1r;
          re[i3] = y3r * w3r - y3i * w3i;
          im[i3] = y3r * w3i + y3i * w3r;
        }
      }
    }
    if (!this.oddBits) {
      // Last radix-4 pass (h = 1): all twiddles are 1.
      for (let a = 0; a < m; a += 4) {
        const x0r = re[a];
        const x0i = im[a];
        const x1r = re[a + 1];
        const x1i = im[a + 1];
        const x2r = re[a + 2];
        const x2i = im[a + 2];
        const x3r = re[a + 3];
        const x3i = im[a + 3];
        const a0r = x0r + x2r;
        const a0i = x0i + x2i;
        const a1r = x0r - x2r;
        const a1i = x0i - x2i;
        const b0r = x1r + x3r;
        const b0i = x1i + x3i;
        const b1r = x1r - x3r;
        const b1i = x1i - x3i;
        re[a] = a0r + b0r;
        im[a] = a0i + b0i;
        re[a + 1] = a0r - b0r;
        im[a + 1] = a0i - b0i;
        re[a + 2] = a1r + b1i;
        im[a + 2] = a1i - b1r;
        re[a + 3] = a1r - b1i;
        im[a + 3] = a1i + b1r;
      }
    } else {
      // log2(m) odd: a last radix-2 pass.
      for (let a = 0; a < m; a += 2) {
        const ar = re[a];
        const ai = im[a];
        const br = re[a + 1];
        const bi = im[a + 1];
        re[a] = ar + br;
        im[a] = ai + bi;
        re[a + 1] = ar - br;
        im[a + 1] = ai - bi;
      }
    }
  }

  /**
   * zRe/zIm hold conj(Z) in bit-reversed order: runs the forward decimation-in-time FFT on it and writes
   * conj(result) / m (= the inverse FFT of Z), de-interleaved into real samples, from the last pass; with a window,
   * adds fround(sample) * window[i] to out instead (overlap-add).
   * Radix-4 DIT: the sub-transforms F0, F2, F1, F3 sit at j, j+h, j+2h, j+3h.
   */
  private inverseComplexConj(out: Samples, outOff: number, window: Float32Array | null): void {
    const m = this.half;
    const re = this.zRe;
    const im = this.zIm;
    const tw = this.tw;
    const scale = 1 / m;
    let h: number;
    if (this.oddBits) {
      for (let a = 0; a < m; a += 2) {
        const ar = re[a];
        const ai = im[a];
        const br = re[a + 1];
        const bi = im[a + 1];
        re[a] = ar + br;
        im[a] = ai + bi;
        re[a + 1] = ar - br;
        im[a + 1] = ai - bi;
      }
      if (m === 2) {
        const v = [re[0] * scale, -im[0] * scale, re[1] * scale, -im[1] * scale];
        for (let i = 0; i < 4; i++) {
          if (window) out[outOff + i] += Math.fround(v[i]) * window[i];
          else out[outOff + i] = v[i];
        }
        return;
      }
      h = 2;
    } else {
      h = 1;
      if (m > 4) {
        // First radix-4 pass: all twiddles are 1.
        for (let a = 0; a < m; a += 4) {
          const Ar = re[a];
          const Ai = im[a];
          const Cr = re[a + 1];
          const Ci = im[a + 1];
          const Br = re[a + 2];
          const Bi = im[a + 2];
          const Dr = re[a + 3];
          const Di = im[a + 3];
          const s0r = Ar + Cr;
          const s0i = Ai + Ci;
          const s1r = Ar - Cr;
          const s1i = Ai - Ci;
          const s2r = Br + Dr;
          const s2i = Bi + Di;
          const s3r = Br - Dr;
          const s3i = Bi - Di;
          re[a] = s0r + s2r;
          im[a] = s0i + s2i;
          re[a + 2] = s0r - s2r;
          im[a + 2] = s0i - s2i;
          // -i (B - D)
          re[a + 1] = s1r + s3i;
          im[a + 1] = s1i - s3r;
          re[a + 3] = s1r - s3i;
          im[a + 3] = s1i + s3r;
        }
        h = 4;
      }
    }
    for (; 4 * h < m; h *= 4) {
      const span = 4 * h;
      for (let j = 0, w = this.twOffset(h); j < h; j++, w += 6) {
        const w1r = tw[w];
        const w1i = tw[w + 1];
        const w2r = tw[w + 2];
        const w2i = tw[w + 3];
        const w3r = tw[w + 4];
        const w3i = tw[w + 5];
        for (let i0 = j; i0 < m; i0 += span) {
          const i1 = i0 + h;
          const i2 = i1 + h;
          const i3 = i2 + h;
          const Ar = re[i0];
          const Ai = im[i0];
          const xr = re[i1];
          const xi = im[i1];
          const Cr = xr * w2r - xi * w2i;
          const Ci = xr * w2i + xi * w2r;
          const yr = re[i2];
          const yi = im[i2];
          const Br = yr * w1r - yi * w1i;
          const Bi = yr * w1i + yi * w1r;
          const zr = re[i3];
          const zi = im[i3];
          const Dr = zr * w3r - zi * w3i;
          const Di = zr * w3i + zi * w3r;
          const s0r = Ar + Cr;
          const s0i = Ai + Ci;
          const s1r = Ar - Cr;
          const s1i = Ai - Ci;
          const s2r = Br + Dr;
          const s2i = Bi + Di;
          const s3r = Br - Dr;
          const s3i = Bi - Di;
          re[i0] = s0r + s2r;
          im[i0] = s0i + s2i;
          re[i2] = s0r - s2r;
          im[i2] = s0i - s2i;
          re[i1] = s1r + s3i;
          im[i1] = s1i - s3r;
          re[i3] = s1r - s3i;
          im[i3] = s1i + s3r;
        }
      }
    }
    // Last pass (h = m/4, one group), written out as conj / m: sample 2p = Re, 2p+1 = -Im of element p.
    if (window) {
      for (let j = 0, w = this.twOffset(h); j < h; j++, w += 6) {
        const i1 = j + h;
        const i2 = i1 + h;
        const i3 = i2 + h;
        const Ar = re[j];
        const Ai = im[j];
        const xr = re[i1];
        const xi = im[i1];
        const Cr = xr * tw[w + 2] - xi * tw[w + 3];
        const Ci = xr * tw[w + 3] + xi * tw[w + 2];
        const yr = re[i2];
        const yi = im[i2];
        const Br = yr * tw[w] - yi * tw[w + 1];
        const Bi = yr * tw[w + 1] + yi * tw[w];
        const zr = re[i3];
        const zi = im[i3];
        const Dr = zr * tw[w + 4] - zi * tw[w + 5];
        const Di = zr * tw[w + 5] + zi * tw[w + 4];
        const s0r = Ar + Cr;
        const s0i = Ai + Ci;
        const s1r = Ar - Cr;
        const s1i = Ai - Ci;
        const s2r = Br + Dr;
        const s2i = Bi + Di;
        const s3r = Br - Dr;
        const s3i = Bi - Di;
        const q0 = 2 * j;
        const q1 = q0 + 2 * h;
        const q2 = q1 + 2 * h;
        const q3 = q2 + 2 * h;
        const p0 = outOff + q0;
        const p1 = outOff + q1;
        const p2 = outOff + q2;
        const p3 = outOff + q3;
        out[p0] += Math.fround((s0r + s2r) * scale) * window[q0];
        out[p0 + 1] += Math.fround(-(s0i + s2i) * scale) * window[q0 + 1];
        out[p2] += Math.fround((s0r - s2r) * scale) * window[q2];
        out[p2 + 1] += Math.fround(-(s0i - s2i) * scale) * window[q2 + 1];
        out[p1] += Math.fround((s1r + s3i) * scale) * window[q1];
        out[p1 + 1] += Math.fround(-(s1i - s3r) * scale) * window[q1 + 1];
        out[p3] += Math.fround((s1r - s3i) * scale) * window[q3];
        out[p3 + 1] += Math.fround(-(s1i + s3r) * scale) * window[q3 + 1];
      }
      return;
    }
    for (let j = 0, w = this.twOffset(h); j < h; j++, w += 6) {
      const i1 = j + h;
      const i2 = i1 + h;
      const i3 = i2 + h;
      const Ar = re[j];
      const Ai = im[j];
      const xr = re[i1];
      const xi = im[i1];
      const Cr = xr * tw[w + 2] - xi * tw[w + 3];
      const Ci = xr * tw[w + 3] + xi * tw[w + 2];
      const yr = re[i2];
      const yi = im[i2];
      const Br = yr * tw[w] - yi * tw[w + 1];
      const Bi = yr * tw[w + 1] + yi * tw[w];
      const zr = re[i3];
      const zi = im[i3];
      const Dr = zr * tw[w + 4] - zi * tw[w + 5];
      const Di = zr * tw[w + 5] + zi * tw[w + 4];
      const s0r = Ar + Cr;
      const s0i = Ai + Ci;
      const s1r = Ar - Cr;
      const s1i = Ai - Ci;
      const s2r = Br + Dr;
      const s2i = Bi + Di;
      const s3r = Br - Dr;
      const s3i = Bi - Di;
      const p0 = outOff + 2 * j;
      const p1 = p0 + 2 * h;
      const p2 = p1 + 2 * h;
      const p3 = p2 + 2 * h;
      out[p0] = (s0r + s2r) * scale;
      out[p0 + 1] = -(s0i + s2i) * scale;
      out[p2] = (s0r - s2r) * scale;
      out[p2 + 1] = -(s0i - s2i) * scale;
      out[p1] = (s1r + s3i) * scale;
      out[p1 + 1] = -(s1i - s3r) * scale;
      out[p3] = (s1r - s3i) * scale;
      out[p3 + 1] = -(s1i + s3r) * scale;
    }
  }
}
