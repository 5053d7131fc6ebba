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
  /** This hop's band sums of |E|² and of the predictor (update(); residual-slope.ts reads them too). */
  readonly eSum: Float64Array;
  readonly ySum: Float64Array;
  private readonly yMean: Float64Array;

  /** A hop counts when the predictor is at least this share of its recent mean. */
  private readonly minShare: number;

  private readonly bias: number;

  /** `f64` allocates β (zeroed; by default a plain array); `active`: the lowest bins judged (β stays 1 above them). */
  constructor(bins: number, binsPerBand: number, minShare = 0.1, bias = 1, f64: (n: number) => Float64Array = (n) => new Float64Array(n), active = bins) {
    this.minShare = minShare;
    this.bias = bias;
    this.bins = Math.min(bins, active);
    this.binsPerBand = binsPerBand;
    this.bands = Math.ceil(this.bins / binsPerBand);
    this.cur = new Float64Array(this.bands).fill(Infinity);
    this.past = new Float64Array(this.bands * SUBS).fill(1);
    this.beta = f64(bins).fill(1);
    this.eSum = new Float64Array(this.bands);
    this.ySum = new Float64Array(this.bands);
    this.yMean = new Float64Array(this.bands);
  }

  /** One hop of |E|² and the predictor D, per bin. */
  update(ePow: Float64Array, yPow: Float64Array): void {
    const eSum = this.eSum;
    const P = this.binsPerBand;
    // Band sums in bin order (bands are runs of P bins), each band judged as soon as it is summed.
    for (let b = 0, k = 0; b < this.bands; b++) {
      const end = Math.min(this.bins, k + P);
      let es = 0;
      let ys = 0;
      for (; k < end; k++) {
        es += ePow[k];
        ys += yPow[k];
      }
      eSum[b] = es;
      this.ySum[b] = ys;
      this.judge(b, es, ys);
    }
    this.advance();
  }

  /**
   * The same hop with the predictor `level` in every bin, and |E|²'s band sums taken from `other` (updated this hop
   * with the same bands): the sums are what update() would add up, in the same order.
   */
  updateFlat(other: ResidualRatio, level: number): void {
    if (other.binsPerBand !== this.binsPerBand || other.bins !== this.bins) throw new Error('residual ratios with different bands');
    const P = this.binsPerBand;
    for (let b = 0, k = 0; b < this.bands; b++) {
      const end = Math.min(this.bins, k + P);
      let ys = 0;
      for (; k < end; k++) ys += level;
      const es = other.eSum[b];
      this.eSum[b] = es;
      this.ySum[b] = ys;
      this.judge(b, es, ys);
    }
    this.advance();
  }

  /** Only hops where the predictor is strong (against its recent mean level) count toward the band's minimum. */
  private judge(b: number, es: number, ys: number): void {
    this.yMean[b] += 0.05 * (ys - this.yMean[b]);
    if (ys > this.minShare * this.yMean[b] && ys > 1e-12) {
      const r = Math.max(MIN_RATIO, es / ys);
      if (r < this.cur[b]) this.cur[b] = r;
    }
  }

  /** Counts the hop; at the end of a sub-window, the minima move into the ring and β is their minimum. */
  private advance(): void {
    const B = this.bands;
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
