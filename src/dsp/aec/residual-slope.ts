// The residual echo's share of the echo estimate as a regression slope (option `residualSlope`, on by default): per
// band, the slope of |E|² on |Ŷ|² over the last seconds of far-end hops, cov(E, Y) / var(Y). A residual the filter
// cannot remove (a reference that went through a lossy codec) follows |Ŷ|² from hop to hop and sets it, where the
// minimum statistics of residual-ratio.ts lie 10–15 dB under it. A near-end talker adds power that does not follow
// |Ŷ|²: in expectation the slope stays, but over seconds it turns noisy, so the slope counts only as far as E
// correlates with Ŷ (the talker takes that below 0.15; a codec's residual leaves it at 0.5–0.8; docs/echo.md, "A
// compressed reference").

/** Correlations over which the slope's weight goes from 0 to 1. */
const CORR_SPAN = 0.3;

export class ResidualSlope {
  private readonly bins: number;
  private readonly binsPerBand: number;
  private readonly bands: number;
  private readonly a: number;
  private readonly scale: number;
  /** The slope counts from this correlation of E with Y on (0 below), fully from CORR_SPAN more. */
  private readonly corr: number;
  /** Per band, exponentially weighted means of E, Y, E·Y, Y² and E² (E, Y: the band's sums of |E|² and |Ŷ|²). */
  private readonly e: Float64Array;
  private readonly y: Float64Array;
  private readonly ey: Float64Array;
  private readonly yy: Float64Array;
  private readonly ee: Float64Array;
  /** The larger of the given β and the slope's, per bin (raise()'s result). */
  readonly beta: Float64Array;

  /** `hops`: the means' time constant; `scale`: the slope's weight; `active`: the bins judged (as residual-ratio.ts). */
  constructor(bins: number, binsPerBand: number, hops: number, scale: number, f64: (n: number) => Float64Array, active = bins, corr = -1) {
    this.corr = corr;
    this.bins = Math.min(bins, active);
    this.binsPerBand = binsPerBand;
    this.bands = Math.ceil(this.bins / binsPerBand);
    this.a = 1 / hops;
    this.scale = scale;
    this.e = new Float64Array(this.bands);
    this.y = new Float64Array(this.bands);
    this.ey = new Float64Array(this.bands);
    this.yy = new Float64Array(this.bands);
    this.ee = new Float64Array(this.bands);
    this.beta = f64(bins).fill(1);
  }

  /** One far-end hop's band sums of |E|² and |Ŷ|² (residual-ratio.ts's, whose bands these are). */
  update(eSum: Float64Array, ySum: Float64Array): void {
    const a = this.a;
    for (let b = 0; b < this.bands; b++) {
      const es = eSum[b];
      const ys = ySum[b];
      this.e[b] += a * (es - this.e[b]);
      this.y[b] += a * (ys - this.y[b]);
      this.ey[b] += a * (es * ys - this.ey[b]);
      this.yy[b] += a * (ys * ys - this.yy[b]);
      this.ee[b] += a * (es * es - this.ee[b]);
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
      if (s > 0 && this.corr > -1) {
        const ve = this.ee[b] - this.e[b] * this.e[b];
        const r = ve > 1e-30 ? (this.ey[b] - this.e[b] * this.y[b]) / Math.sqrt(v * ve) : 0;
        const x = (r - this.corr) / CORR_SPAN;
        s *= x >= 1 ? 1 : x > 0 ? x : 0;
      }
      for (const end = Math.min(this.bins, k + P); k < end; k++) out[k] = s > beta[k] ? s : beta[k];
    }
    for (let k = this.bins; k < out.length; k++) out[k] = beta[k];
    return out;
  }
}
