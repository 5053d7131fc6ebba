// How much echo the linear filter leaves, per band, as a fraction of a predictor: β_b = the minimum over the last
// ~1.2 s of Σ_b |E|² / Σ_b D (hops where the predictor D is strong only). With D = |Ŷ|² (the echo estimate) the ratio
// is the residual's share in far-end single talk (misadjustment, and the loudspeaker's distortion as far as it
// follows the echo's spectrum); with D = the reference's recent wideband power, the share of a residual that does not
// (a strongly distorting loudspeaker spreads its echo over other bands). Near-end speech only ever raises the ratio,
// and speech pauses often enough within a second, so the minimum (minimum statistics, Martin 2001, "Noise power
// spectral density estimation based on optimal smoothing and minimum statistics", IEEE TSAP 9(5), here applied to a
// ratio instead of a noise power) ignores double talk without a double-talk detector, and follows a change of the
// echo path within the window.

const SUB = 25;
const SUBS = 6;
/** Ratios are not believed below this (−40 dB: the filter never removes more than that of a loudspeaker's echo). */
const MIN_RATIO = 1e-4;

export class ResidualRatio {
  readonly bands: number;
  private readonly binsPerBand: number;
  private readonly bins: number;
  /** Per band: the minimum of the current sub-window, and the last SUBS sub-windows' minima (ring). */
  private readonly cur: Float64Array;
  private readonly past: Float64Array;
  private pos = 0;
  private count = 0;
  /** β per bin (its band's). */
  readonly beta: Float64Array;
  private readonly eSum: Float64Array;
  private readonly bandOf: Int32Array;
  private readonly ySum: Float64Array;
  private readonly yMean: Float64Array;

  /** A hop counts when the predictor is at least this share of its recent mean. */
  private readonly minShare: number;

  private readonly bias: number;

  constructor(bins: number, binsPerBand: number, minShare = 0.1, bias = 1) {
    this.minShare = minShare;
    this.bias = bias;
    this.bins = bins;
    this.binsPerBand = binsPerBand;
    this.bands = Math.ceil(bins / binsPerBand);
    this.cur = new Float64Array(this.bands).fill(Infinity);
    this.past = new Float64Array(this.bands * SUBS).fill(1);
    this.beta = new Float64Array(bins).fill(1);
    this.bandOf = new Int32Array(bins).map((_, k) => (k / binsPerBand) | 0);
    this.eSum = new Float64Array(this.bands);
    this.ySum = new Float64Array(this.bands);
    this.yMean = new Float64Array(this.bands);
  }

  /** One hop of |E|² and the predictor D, per bin. */
  update(ePow: Float64Array, yPow: Float64Array): void {
    const B = this.bands;
    const eSum = this.eSum.fill(0);
    const ySum = this.ySum.fill(0);
    const band = this.bandOf;
    for (let k = 0; k < this.bins; k++) {
      const b = band[k];
      eSum[b] += ePow[k];
      ySum[b] += yPow[k];
    }
    for (let b = 0; b < B; b++) {
      // Only hops where the predictor is strong (against its recent mean level) count.
      this.yMean[b] += 0.05 * (ySum[b] - this.yMean[b]);
      if (ySum[b] > this.minShare * this.yMean[b] && ySum[b] > 1e-12) {
        const r = Math.max(MIN_RATIO, eSum[b] / ySum[b]);
        if (r < this.cur[b]) this.cur[b] = r;
      }
    }
    if (++this.count < SUB) return;
    this.count = 0;
    for (let b = 0; b < B; b++) {
      // A sub-window without a usable hop keeps the previous sub-window's minimum.
      const prev = this.past[((this.pos + SUBS - 1) % SUBS) * B + b];
      this.past[this.pos * B + b] = Number.isFinite(this.cur[b]) ? this.cur[b] : prev;
      this.cur[b] = Infinity;
    }
    this.pos = (this.pos + 1) % SUBS;
    for (let b = 0; b < B; b++) {
      let m = Infinity;
      for (let s = 0; s < SUBS; s++) m = Math.min(m, this.past[s * B + b]);
      for (let k = b * this.binsPerBand; k < Math.min(this.bins, (b + 1) * this.binsPerBand); k++) this.beta[k] = m * this.bias;
    }
  }
}
