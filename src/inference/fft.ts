// Real FFT for power-of-two sizes (512 for DTLN), computed as a complex FFT of half the size plus a split step.
// Twiddles and bit-reversal tables are built once; forward/inverse allocate nothing.

type Samples = Float32Array | Float64Array;
// Hot paths call forward(Float32Array, Float64Array spectra) and inverse(Float64Array spectra, Float32Array).

export class RealFFT {
  readonly n: number;
  /** Number of non-redundant bins: n/2 + 1. */
  readonly bins: number;
  private readonly half: number;
  private readonly rev: Uint32Array;
  /** Split twiddles: e^{-2πik/n}, k = 0..half. */
  private readonly spRe: Float64Array;
  private readonly spIm: Float64Array;
  private readonly stageRe: Float64Array;
  private readonly stageImFwd: Float64Array;
  private readonly stageImInv: Float64Array;
  private readonly zRe: Float64Array;
  private readonly zIm: Float64Array;

  constructor(n: number) {
    if (n < 4 || (n & (n - 1)) !== 0) throw new Error(`RealFFT size must be a power of two >= 4, got ${n}`);
    this.n = n;
    this.half = n >> 1;
    this.bins = this.half + 1;
    const m = this.half;
    const bits = Math.log2(m);
    this.rev = new Uint32Array(m);
    for (let i = 0; i < m; i++) {
      let r = 0;
      for (let b = 0; b < bits; b++) if (i & (1 << b)) r |= 1 << (bits - 1 - b);
      this.rev[i] = r;
    }
    this.spRe = new Float64Array(m + 1);
    this.spIm = new Float64Array(m + 1);
    for (let k = 0; k <= m; k++) {
      this.spRe[k] = Math.cos((-2 * Math.PI * k) / n);
      this.spIm[k] = Math.sin((-2 * Math.PI * k) / n);
    }
    this.zRe = new Float64Array(m);
    this.zIm = new Float64Array(m);
    // Per-stage twiddles: for a stage of butterfly span h, entries [h, 2h) hold e^{-iπj/h}, j < h.
    this.stageRe = new Float64Array(m);
    this.stageImFwd = new Float64Array(m);
    this.stageImInv = new Float64Array(m);
    for (let h = 1; h < m; h <<= 1) {
      for (let j = 0; j < h; j++) {
        this.stageRe[h + j] = Math.cos((-Math.PI * j) / h);
        this.stageImFwd[h + j] = Math.sin((-Math.PI * j) / h);
        this.stageImInv[h + j] = -this.stageImFwd[h + j];
      }
    }
  }

  /**
   * Forward transform of input[inOff .. inOff+n) into re/im[outOff .. outOff+bins).
   * Same convention as numpy.fft.rfft (no scaling).
   */
  forward(input: Samples, inOff: number, re: Samples, im: Samples, outOff = 0): void {
    const m = this.half;
    const zr = this.zRe;
    const zi = this.zIm;
    for (let i = 0; i < m; i++) {
      const r = this.rev[i];
      zr[r] = input[inOff + 2 * i];
      zi[r] = input[inOff + 2 * i + 1];
    }
    this.complexFftForward();
    // X[k] = E[k] + W^k O[k], E = (Z[k] + conj Z[m-k]) / 2, O = (Z[k] - conj Z[m-k]) / 2i
    for (let k = 0; k <= m; k++) {
      const k1 = k === m ? 0 : k;
      const k2 = k === 0 ? 0 : m - k;
      const ar = zr[k1];
      const ai = zi[k1];
      const br = zr[k2];
      const bi = -zi[k2];
      const er = 0.5 * (ar + br);
      const ei = 0.5 * (ai + bi);
      // (a - b) / 2i = (ai - bi)/2 - i (ar - br)/2
      const or = 0.5 * (ai - bi);
      const oi = -0.5 * (ar - br);
      const wr = this.spRe[k];
      const wi = this.spIm[k];
      re[outOff + k] = er + or * wr - oi * wi;
      im[outOff + k] = ei + or * wi + oi * wr;
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
    // E[k] = (X[k] + conj X[m-k]) / 2, O[k] = (X[k] - conj X[m-k]) * W^{-k} / 2, Z[k] = E[k] + i O[k]
    for (let k = 0; k < m; k++) {
      const xr = re[inOff + k];
      const xi = k === 0 ? 0 : im[inOff + k];
      const yr = re[inOff + m - k];
      const yi = k === 0 ? 0 : -im[inOff + m - k];
      const er = 0.5 * (xr + yr);
      const ei = 0.5 * (xi + yi);
      const dr = 0.5 * (xr - yr);
      const di = 0.5 * (xi - yi);
      const wr = this.spRe[k];
      const wi = -this.spIm[k];
      const or = dr * wr - di * wi;
      const oi = dr * wi + di * wr;
      const r = this.rev[k];
      zr[r] = er - oi;
      zi[r] = ei + or;
    }
    this.complexFftInverse();
    const scale = 1 / m;
    for (let i = 0; i < m; i++) {
      out[outOff + 2 * i] = zr[i] * scale;
      out[outOff + 2 * i + 1] = zi[i] * scale;
    }
  }

  private complexFftForward(): void {
    this.butterflies(1);
  }

  private complexFftInverse(): void {
    this.butterflies(-1);
  }

  /**
   * Radix-2 decimation-in-time butterflies. Stage 1 (size 2) needs no twiddles; later stages read their twiddles
   * from a per-stage contiguous table (forward or conjugated), so the inner loop is multiply-adds only.
   */
  private butterflies(conj: number): void {
    const m = this.half;
    const re = this.zRe;
    const im = this.zIm;
    for (let a = 0; a < m; a += 2) {
      const br = re[a + 1];
      const bi = im[a + 1];
      re[a + 1] = re[a] - br;
      im[a + 1] = im[a] - bi;
      re[a] += br;
      im[a] += bi;
    }
    const stRe = this.stageRe;
    const stIm = conj > 0 ? this.stageImFwd : this.stageImInv;
    for (let size = 4; size <= m; size <<= 1) {
      const halfSize = size >> 1;
      const base = halfSize; // stage tables are stored at offset halfSize, length halfSize
      for (let start = 0; start < m; start += size) {
        for (let j = 0; j < halfSize; j++) {
          const wr = stRe[base + j];
          const wi = stIm[base + j];
          const a = start + j;
          const b = a + halfSize;
          const xr = re[b] * wr - im[b] * wi;
          const xi = re[b] * wi + im[b] * wr;
          re[b] = re[a] - xr;
          im[b] = im[a] - xi;
          re[a] += xr;
          im[a] += xi;
        }
      }
    }
  }
}
