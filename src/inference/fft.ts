// Real FFT for power-of-two sizes (512 for DTLN), computed as a complex FFT of half the size plus a split step.
// The complex FFT is radix-4 decimation in time on bit-reversed input (one radix-2 pass first when log2(n/2) is odd),
// with per-pass twiddle tables; the inverse runs the same butterflies on the conjugate. Split steps handle bins k and
// n/2-k together (they share their inputs and twiddle). Tables are built once; forward/inverse allocate nothing.

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
  /** log2(n/2) odd: the butterflies start with one radix-2 pass. */
  private readonly radix2First: boolean;
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
    this.radix2First = bits % 2 === 1;
    const tw: number[] = [];
    for (let h = this.radix2First ? 2 : 1; 4 * h <= m; h *= 4) {
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
    this.loadReal(input, inOff);
    this.butterflies();
    const m = this.half;
    const zr = this.zRe;
    const zi = this.zIm;
    const spRe = this.spRe;
    const spIm = this.spIm;
    re[outOff] = zr[0] + zi[0];
    im[outOff] = 0;
    re[outOff + m] = zr[0] - zi[0];
    im[outOff + m] = 0;
    // E = (Z[k] + conj Z[m-k]) / 2, O = (Z[k] - conj Z[m-k]) / 2i: X[k] = E + W^k O, X[m-k] = conj(E - W^k O).
    for (let k = 1, k2 = m - 1; k <= k2; k++, k2--) {
      const ar = zr[k];
      const ai = zi[k];
      const br = zr[k2];
      const bi = zi[k2];
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
    this.loadReal(input, inOff);
    this.butterflies();
    const m = this.half;
    const zr = this.zRe;
    const zi = this.zIm;
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
      const ar = zr[k];
      const ai = zi[k];
      const br = zr[k2];
      const bi = zi[k2];
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
    // Z[m-k] = conj E + i conj O. Stored conjugated: the forward butterflies then compute the conjugate inverse.
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
    this.butterflies();
    this.storeConjScaled(out, outOff);
  }

  /** inverse() of the spectrum multiplied bin by bin with a real gain (DTLN's mask), without writing it back. */
  inverseMasked(re: Float64Array, im: Float64Array, gain: Float32Array, inOff: number, out: Float32Array, outOff: number): void {
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
    this.butterflies();
    this.storeConjScaled(out, outOff);
  }

  /** Even samples into the real parts, odd into the imaginary parts, in bit-reversed order. */
  private loadReal(input: Samples, inOff: number): void {
    const m = this.half;
    const zr = this.zRe;
    const zi = this.zIm;
    const rev = this.rev;
    for (let i = 0, p = inOff; i < m; i++, p += 2) {
      const r = rev[i];
      zr[r] = input[p];
      zi[r] = input[p + 1];
    }
  }

  /** out = conj(z) / m, interleaved back to real samples. */
  private storeConjScaled(out: Samples, outOff: number): void {
    const m = this.half;
    const zr = this.zRe;
    const zi = this.zIm;
    const scale = 1 / m;
    for (let i = 0, p = outOff; i < m; i++, p += 2) {
      out[p] = zr[i] * scale;
      out[p + 1] = -zi[i] * scale;
    }
  }

  /** In-place forward complex FFT of zRe/zIm (bit-reversed input, natural-order output). */
  private butterflies(): void {
    const m = this.half;
    const re = this.zRe;
    const im = this.zIm;
    const tw = this.tw;
    let h: number;
    if (this.radix2First) {
      for (let a = 0; a < m; a += 2) {
        const br = re[a + 1];
        const bi = im[a + 1];
        const ar = re[a];
        const ai = im[a];
        re[a] = ar + br;
        im[a] = ai + bi;
        re[a + 1] = ar - br;
        im[a + 1] = ai - bi;
      }
      h = 2;
    } else {
      // First radix-4 pass (h = 1): all twiddles are 1.
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
    // Radix-4 passes: the bit-reversed sub-transforms sit at a0 (F0), a0+h (F2), a0+2h (F1), a0+3h (F3).
    // The table starts with the h = 1 pass (unused: done above without twiddles) unless a radix-2 pass came first.
    let t = this.radix2First ? 0 : 6;
    for (; 4 * h <= m; h *= 4) {
      const span = 4 * h;
      for (let s = 0; s < m; s += span) {
        for (let j = 0, w = t; j < h; j++, w += 6) {
          const w1r = tw[w];
          const w1i = tw[w + 1];
          const w2r = tw[w + 2];
          const w2i = tw[w + 3];
          const w3r = tw[w + 4];
          const w3i = tw[w + 5];
          const i0 = s + j;
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
      t += 6 * h;
    }
  }
}
