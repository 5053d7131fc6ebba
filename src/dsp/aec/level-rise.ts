// The residual echo after the reference rises above its recent peak. The linear filter and the loudspeaker model
// (loudspeaker.ts) have learnt the echo at the levels the reference has had; a passage louder than those drives a
// clipping loudspeaker into a distortion they never saw, and the error bursts far above the suppressor's estimate for
// a moment (β, residual-ratio.ts, is a minimum over ~1.2 s; Φ follows the filter, not the loudspeaker). The suppressor
// then takes the burst for near-end speech and lets it through. So where the reference's power at the echo's main lag
// exceeds its recent peak (decaying by 2 dB a second), the error stood within 3 dB of the suppressor's estimate over
// the hops before, and the error's energy stayed 12 dB under the echo estimate's over the last seconds (far-end single
// talk: no near-end speech evident, not even a talker in a pause), β is raised to 1 (the residual as large as the echo
// estimate) for the next 200 ms, in the bins where the error is no larger than the echo estimate.
// Double talk is left alone by the second and third conditions; bins above the echo estimate (near-end speech) by the
// fourth.

/** The recent peak's decay, dB per second. */
const DECAY_DB = 2;
/** Hops β stays raised after a rise (200 ms: the burst and the room's tail behind it). */
const HOLD_HOPS = 25;
/** The smoothed error over estimate (250 Hz–6 kHz) below which far-end single talk counts as evident (3 dB). */
const SINGLE_TALK = Math.pow(10, 0.3);
/** Smoothing of that ratio per far-end hop, and the largest value one hop contributes. */
const DOM_SMOOTH = 0.05;
const DOM_MAX = 100;

/**
 * The error's energy over the echo estimate's (250 Hz–6 kHz), each smoothed over far-end hops with this time constant
 * (300 hops: 2.4 s), must stay below this (−12 dB) for a rise to count: a near-end talker under the echo leaves the
 * sums above it for seconds after a pause of its own, while in far-end single talk the linear filter keeps it lower.
 */
const EXCESS = Math.pow(10, -12 / 10);
const EXCESS_HOPS = 300;

export class LevelRise {
  /** β to apply on a held hop. */
  readonly beta: Float64Array;
  private readonly bins: number;
  private readonly decay: number;
  private peak = 0;
  private held = 0;
  /** The error over the suppressor's estimate, smoothed over far-end hops (high at the start: nothing evident yet). */
  private dom = DOM_MAX;
  /** The error's and the echo estimate's energies (250 Hz–6 kHz), smoothed over far-end hops (0 at the start: no rise counts yet). */
  private eSum = 0;
  private ySum = 0;

  /** `f64` allocates β (it must lie where the suppressor's kernel reads it). */
  constructor(bins: number, hopsPerSecond: number, f64: (n: number) => Float64Array) {
    this.bins = bins;
    this.beta = f64(bins);
    this.decay = Math.pow(10, -DECAY_DB / 10 / hopsPerSecond);
  }

  /** Every hop, before the suppressor: `level` the reference's power at the echo's main lag. */
  hop(level: number, far: boolean): void {
    const t = this.peak * this.decay;
    if (this.held > 0) this.held--;
    if (far && level > t && this.dom < SINGLE_TALK && this.eSum < EXCESS * this.ySum) this.held = HOLD_HOPS;
    this.peak = level > t ? level : t;
  }

  /** β for this hop: while held, 1 in the bins whose error is at most the echo estimate; else β itself. */
  apply(beta: Float64Array, ePow: Float64Array, yPow: Float64Array): Float64Array {
    if (this.held === 0) return beta;
    const out = this.beta;
    for (let k = 0; k < this.bins; k++) out[k] = beta[k] < 1 && ePow[k] <= yPow[k] ? 1 : beta[k];
    return out;
  }

  /** After the suppressor, on far-end hops: |E|² against its residual estimate (before overdrive) and the echo estimate |Ŷ|². */
  judge(ePow: Float64Array, resid: Float64Array, yPow: Float64Array): void {
    let e = 0;
    let r = 0;
    let y = 0;
    for (let k = 4; k < 100; k++) {
      e += ePow[k];
      r += resid[k];
      y += yPow[k];
    }
    // Held hops are left out: the burst they hold back would otherwise block the next rise.
    if (this.held === 0) {
      const a = 1 / EXCESS_HOPS;
      this.eSum += a * (e - this.eSum);
      this.ySum += a * (y - this.ySum);
    }
    const d = e / (r + 1e-20);
    this.dom += DOM_SMOOTH * ((d < DOM_MAX ? d : DOM_MAX) - this.dom);
  }
}
