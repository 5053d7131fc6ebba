// The residual echo's share of the echo estimate as a regression slope (option `residualSlope`, off by default): per
// band, the slope of |E|² on |Ŷ|² over the last seconds of far-end hops, cov(E, Y) / var(Y). A near-end talker adds
// power that does not follow |Ŷ|² from hop to hop, so in expectation it leaves the slope where it raises a mean and
// breaks a minimum's gaps; a residual the filter cannot remove (a reference that went through a lossy codec) follows
// |Ŷ|² and sets it, where the minimum statistics of residual-ratio.ts lie 10–15 dB under it (docs/echo.md, "A
// compressed reference").

export class ResidualSlope {
  private readonly bins: number;
  private readonly binsPerBand: number;
  private readonly bands: number;
  private readonly a: number;
  private readonly scale: number;
  /** Per band, exponentially weighted means of E, Y, E·Y and Y² (E, Y: the band's sums of |E|² and |Ŷ|²). */
  private readonly e: Float64Array;
  private readonly y: Float64Array;
  private readonly ey: Float64Array;
  private readonly yy: Float64Array;
  /** The larger of the given β and the slope's, per bin (raise()'s result). */
  readonly beta: Float64Array;

  /** `hops`: the means' time constant; `scale`: the slope's weight; `active`: the bins judged (as residual-ratio.ts). */
  constructor(bins: number, binsPerBand: number, hops: number, scale: number, f64: (n: number) => Float64Array, active = bins) {
    this.bins = Math.min(bins, active);
    this.binsPerBand = binsPerBand;
    this.bands = Math.ceil(this.bins / binsPerBand);
    this.a = 1 / hops;
    this.scale = scale;
    this.e = new Float64Array(this.bands);
    this.y = new Float64Array(this.bands);
    this.ey = new Float64Array(this.bands);
    this.yy = new Float64Array(this.bands);
    this.beta = f64(bins).fill(1);
  }

  /** One far-end hop's |E|² and |Ŷ|² per bin. */
  update(ePow: Float64Array, yPow: Float64Array): void {
    const a = this.a;
    const P = this.binsPerBand;
    for (let b = 0, k = 0; b < this.bands; b++) {
      const end = Math.min(this.bins, k + P);
      let es = 0;
      let ys = 0;
      for (; k < end; k++) {
        es += ePow[k];
        ys += yPow[k];
      }
      this.e[b] += a * (es - this.e[b]);
      this.y[b] += a * (ys - this.y[b]);
      this.ey[b] += a * (es * ys - this.ey[b]);
      this.yy[b] += a * (ys * ys - this.yy[b]);
    }
  }

  /** Per bin the larger of `beta` and its band's slope × scale (within 0..1); the bins above the judged ones keep `beta`. */
  raise(beta: Float64Array): Float64Array {
    const out = this.beta;
    const P = this.binsPerBand;
    for (let b = 0, k = 0; b < this.bands; b++) {
      const v = this.yy[b] - this.y[b] * this.y[b];
      let s = v > 1e-30 ? ((this.ey[b] - this.e[b] * this.y[b]) / v) * this.scale : 0;
      if (!(s > 0)) s = 0;
      else if (s > 1) s = 1;
      for (const end = Math.min(this.bins, k + P); k < end; k++) out[k] = s > beta[k] ? s : beta[k];
    }
    for (let k = this.bins; k < out.length; k++) out[k] = beta[k];
    return out;
  }
}
