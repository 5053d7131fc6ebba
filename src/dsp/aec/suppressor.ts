// Residual echo suppressor: a gain per bin on the linear canceller's error, from an estimate of the echo it left
// behind. That estimate is the largest of (a) the adaptive filter's own expected residual Φ (its state-error variance
// times the reference power: large while it converges), (b) the residual's share β of the echo estimate
// (residual-ratio.ts: misadjustment and the loudspeaker's distortion, which follows the echo's level), spread over
// neighbouring bins because distortion products land beside their sources, (c) the room's reverberation beyond
// the filter's length (the last partition's coefficients continued with the filter's own decay), and (d) a share of
// the reference's recent wideband power (what a strongly distorting loudspeaker spreads anywhere). The gain is a decision-directed Wiener gain (Ephraim &
// Malah 1984) against that estimate times an over-estimation factor, held above the error's own noise floor so that
// room noise stays continuous (the denoiser after us handles noise), and never above 1. Overdrive (a larger estimate
// while the error is mostly residual echo) is held back while a near-end talker is evident over the last seconds
// (near-end.ts).
import type { SuppressKernel } from './hop-passes';
import { NearEndEvidence } from './near-end';

export interface SuppressorOptions {
  bins: number;
  /** Over-estimation of the residual echo (≥ 1: more suppression, less double talk). */
  overEstimate: number;
  /** Lowest gain, linear. */
  floor: number;
  /** Decision-directed smoothing weight. */
  ddAlpha: number;
  /** Hops per second (time constants). */
  hopsPerSecond: number;
  /** Extra over-estimation while the error is mostly residual echo (no near-end speech evident). */
  overdrive: number;
}

export class EchoSuppressor {
  private readonly o: SuppressorOptions;
  readonly gain: Float64Array;
  private readonly prevClean: Float64Array;
  readonly noise: Float64Array;
  private readonly smoothPow: Float64Array;
  private readonly tail: Float64Array;
  readonly resid: Float64Array;
  private readonly noiseRise: number;
  private started = false;
  /**
   * Which residual terms count, bit mask phi 1, leak 2, tail 4, wideband 8; 16: the channel raises β after a level rise
   * (level-rise.ts); 32: no overdrive while a near-end talker is evident (near-end.ts).
   */
  terms = 15;
  /** The evidence of a near-end talker (used where terms have 32). */
  readonly nearEnd = new NearEndEvidence();
  /** The same loops in WebAssembly (hop-passes.ts; bit-identical), set where every array lies in its memory. */
  kernel: SuppressKernel | null = null;

  /** `f64` allocates its per-bin arrays (zeroed; by default plain arrays). */
  constructor(opts: SuppressorOptions, f64: (n: number) => Float64Array = (n) => new Float64Array(n)) {
    this.o = opts;
    const K = opts.bins;
    this.gain = f64(K).fill(1);
    this.prevClean = f64(K);
    this.noise = f64(K);
    this.smoothPow = f64(K);
    this.tail = f64(K);
    this.resid = f64(K);
    // The noise floor may rise 3 dB per second.
    this.noiseRise = Math.pow(10, 3 / 10 / opts.hopsPerSecond);
  }

  /**
   * Gains for one frame: ePow = |E|² of the error frame, yPow = |Ŷ|² of the echo estimate frame, phi = the filter's
   * expected residual, beta = the residual's share of |Ŷ|², tailIn = the echo power entering the tail beyond the
   * filter this hop, decaying by tailDecay per hop; nl = the wideband model's residual.
   */
  compute(
    ePow: Float64Array,
    yPow: Float64Array,
    phi: Float32Array,
    beta: Float64Array,
    tailIn: Float64Array,
    tailDecay: Float64Array,
    nl: Float64Array,
  ): Float64Array {
    const o = this.o;
    const K = o.bins;
    const g = this.gain;
    const noise = this.noise;
    const sp = this.smoothPow;
    const tail = this.tail;
    const resid = this.resid;
    if (!this.started) {
      for (let k = 0; k < K; k++) {
        sp[k] = ePow[k];
        noise[k] = ePow[k];
      }
      this.started = true;
    }
    const m = this.terms;
    const wPhi = m & 1 ? 1 : 0;
    const wLeak = m & 2 ? 1 : 0;
    const wTail = m & 4 ? 1 : 0;
    const wNl = m & 8 ? 1 : 0;
    const over = o.overEstimate;
    const rise = this.noiseRise;
    const guard = (m & 32) !== 0;
    // Both back ends take the hop's overdrive as a parameter, so they stay bit-identical.
    const overdrive = guard ? 1 + (o.overdrive - 1) * this.nearEnd.share() : o.overdrive;
    if (this.kernel) {
      this.kernel(K, ePow, yPow, phi, beta, tailIn, tailDecay, nl, g, this.prevClean, noise, sp, tail, resid, wPhi, wLeak, wTail, wNl, over, rise, overdrive, o.ddAlpha, o.floor);
      if (guard) this.nearEnd.update(ePow, yPow, resid);
      return g;
    }
    let eSum = 0;
    let rSum = 0;
    let prevLeak = beta[0] * yPow[0];
    let curLeak = prevLeak;
    for (let k = 0; k < K; k++) {
      const tk = tailDecay[k] * (tail[k] + tailIn[k]);
      tail[k] = tk;
      // Leakage spread over the bin and its neighbours (distortion products sit beside their sources).
      const nextLeak = k + 1 < K ? beta[k + 1] * yPow[k + 1] : curLeak;
      let leak = curLeak > prevLeak ? curLeak : prevLeak;
      if (nextLeak > leak) leak = nextLeak;
      prevLeak = curLeak;
      curLeak = nextLeak;
      let r = wPhi * phi[k];
      if (wLeak * leak > r) r = wLeak * leak;
      if (wTail * tk > r) r = wTail * tk;
      if (wNl * nl[k] > r) r = wNl * nl[k];
      r *= over;
      resid[k] = r;
      // Noise floor: minimum tracking of the smoothed error power; it may rise only where no residual echo is
      // expected above it (continuous far-end speech must not become "noise").
      const e = ePow[k];
      const spk = 0.7 * sp[k] + 0.3 * e;
      sp[k] = spk;
      if (spk < noise[k]) noise[k] = spk;
      else if (r < noise[k]) noise[k] *= rise;
      // Echo dominance, 250 Hz to 6 kHz: the error's power over the residual estimate's (below).
      if (k >= 4 && k < 100) {
        eSum += e;
        rSum += r;
      }
    }
    // Near 1 (or below), nothing but residual echo is there and the estimate may be raised (overdrive); well above
    // it, near-end speech is present.
    const dom = eSum / (rSum + 1e-20);
    const od = 1 + (overdrive - 1) * Math.min(1, Math.max(0, (6 - dom) / 4));
    const dd = o.ddAlpha;
    const floor = o.floor;
    const prev = this.prevClean;
    for (let k = 0; k < K; k++) {
      const e = ePow[k];
      const inv = 1 / (od * resid[k] + 1e-20);
      const post = e * inv;
      const prior = dd * prev[k] * inv + (1 - dd) * (post > 1 ? post - 1 : 0);
      let gk = prior / (1 + prior);
      // Never below the noise floor: gk² e ≥ noise.
      if (gk * gk * e < noise[k]) gk = Math.sqrt(noise[k] / (e + 1e-20));
      if (gk < floor) gk = floor;
      if (gk > 1) gk = 1;
      g[k] = gk;
      prev[k] = gk * gk * e;
    }
    if (guard) this.nearEnd.update(ePow, yPow, resid);
    return g;
  }
}
