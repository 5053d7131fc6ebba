// The residual echo's share on the reference's loud hops: a hard-clipping loudspeaker distorts only its loudest
// passages, so there the linear filter leaves a larger share of the echo than on the rest. β (residual-ratio.ts) is
// the minimum share over ~1.2 s, taken on any hop with a strong echo estimate, and so follows the quieter hops: on the
// loud ones the estimate falls short and the echo leaks. This keeps a second minimum-statistics ratio over the loud
// hops only (the reference's wideband power at the echo's main lag within `db` of its slowly decaying maximum) and on
// such hops raises β to it, at most `capDb` above β. A minimum, not a mean, so that near-end speech still only raises
// it where it fills every loud hop of the window.
import { ResidualRatio } from './residual-ratio';

export interface LoudResidualOptions {
  /** A hop is loud when the reference's power at the echo's lag is within this many dB of its recent maximum. */
  db: number;
  /** The maximum decays by this many dB per second. */
  decayDb: number;
  /** β on a loud hop is raised at most this many dB. */
  capDb: number;
  hopsPerSecond: number;
  /** A level above every level so far (its maximum decaying by `newDecayDb` per second) by `newDb`: β raised to `newBetaDb` for `newHold` hops (0: off). */
  newHold: number;
  newDb: number;
  newDecayDb: number;
  newBetaDb: number;
  /** Raise only bins whose error is at most this many dB above the echo estimate (large: every bin). */
  newGateDb: number;
  /** Trigger only while the error's recent share of the suppressor's estimate is below this (dB; large: always). */
  newDomDb: number;
}

export class LoudResidual {
  readonly ratio: ResidualRatio;
  /** β to apply this hop (β itself on a quiet hop). */
  readonly beta: Float64Array;
  private readonly bins: number;
  private readonly within: number;
  private readonly decay: number;
  private readonly cap: number;
  private max = 0;
  private top = 0;
  private held = 0;
  private readonly o: LoudResidualOptions;
  private readonly newDecay: number;
  private readonly newOver: number;
  private readonly newBeta: number;
  private readonly gate: number;
  private readonly domMax: number;
  /** The error over the suppressor's estimate (250 Hz–6 kHz), smoothed over the last hops. */
  private dom = 100;
  /** Whether the current hop is a loud one. */
  loud = false;

  constructor(bins: number, binsPerBand: number, bias: number, o: LoudResidualOptions, f64: (n: number) => Float64Array) {
    this.bins = bins;
    this.ratio = new ResidualRatio(bins, binsPerBand, 0.1, bias, f64);
    this.beta = f64(bins);
    this.within = Math.pow(10, -o.db / 10);
    this.decay = Math.pow(10, -o.decayDb / 10 / o.hopsPerSecond);
    this.cap = Math.pow(10, o.capDb / 10);
    this.o = o;
    this.newDecay = Math.pow(10, -o.newDecayDb / 10 / o.hopsPerSecond);
    this.newOver = Math.pow(10, o.newDb / 10);
    this.newBeta = Math.pow(10, o.newBetaDb / 10);
    this.gate = Math.pow(10, o.newGateDb / 10);
    this.domMax = Math.pow(10, o.newDomDb / 10);
  }

  /**
   * Every hop: `level` the reference's power at the echo's lag (its maximum decays per hop); on far-end hops also
   * |E|² and |Ŷ|² per bin, and the window moves on (so it spans ~1.2 s of far-end time) though only loud hops count.
   */
  hop(level: number, far: boolean, ePow: Float64Array, yPow: Float64Array): void {
    const m = this.max * this.decay;
    this.max = level > m ? level : m;
    this.loud = far && level > 0 && level >= this.within * this.max && this.o.db > 0;
    if (far && this.o.db > 0) this.ratio.update(ePow, yPow, this.loud);
    const t = this.top * this.newDecay;
    if (this.held > 0) this.held--;
    if (level > this.newOver * t && far && this.o.newHold > 0 && this.dom < this.domMax) this.held = this.o.newHold;
    this.top = level > t ? level : t;
  }

  /** After the suppressor: its estimate `resid` against |E|² (what says whether near-end speech was evident). */
  judge(ePow: Float64Array, resid: Float64Array): void {
    let e = 0;
    let r = 0;
    for (let k = 4; k < 100; k++) {
      e += ePow[k];
      r += resid[k];
    }
    const d = e / (r + 1e-20);
    this.dom += 0.05 * ((d < 100 ? d : 100) - this.dom);
  }

  /** β for this hop: on a loud far-end hop the larger of β and the loud hops' ratio (capped); else β. */
  apply(beta: Float64Array, ePow: Float64Array, yPow: Float64Array): Float64Array {
    const out = this.beta;
    if (this.held > 0) {
      const nb = this.newBeta;
      const gate = this.gate;
      for (let k = 0; k < this.bins; k++) out[k] = beta[k] < nb && ePow[k] <= gate * yPow[k] ? nb : beta[k];
      return out;
    }
    if (!this.loud) return beta;
    const lb = this.ratio.beta;
    const cap = this.cap;
    for (let k = 0; k < this.bins; k++) {
      const b = beta[k];
      const l = lb[k] < cap * b ? lb[k] : cap * b;
      out[k] = l > b ? l : b;
    }
    return out;
  }
}
