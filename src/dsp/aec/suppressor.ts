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
// (near-end.ts); by the same evidence, so are the two terms that follow levels rather than the filter's state (b, d),
// and the gain's floor and smoothing move towards values that take less of the talker (docs/echo.md, "the estimate
// held back"). Φ stays: holding it back left echo under the talker and lost AECMOS's near-end score.
import type { SuppressKernel } from './hop-passes';
import { EVIDENCE_FROM, EVIDENCE_TO, NearEndEvidence } from './near-end';

/** Where a near-end talker is evident (terms bit 64): the gain's floor (−20 dB) and the decision-directed weight. */
const NEAR_FLOOR = Math.pow(10, -20 / 20);
const NEAR_DD = 0.8;
/**
 * terms bit 512 (off by default): on a hop with evidence of a near-end talker (share < 1), the overdrive per bin is
 * scaled by that bin's error over its residual estimate: full at OD_LO or below, none at OD_HI or above (docs/echo.md,
 * "Overdrive per bin"). A bin the talker fills keeps its near end; a bin with only echo in it is still driven down.
 */
const OD_HI = 3;
const OD_LO = 0.5;

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
  /** The lowest bins the gains are computed for (default all); the gain above them is 0 (options.ts `bins`). */
  active?: number;
}

export class EchoSuppressor {
  private readonly o: SuppressorOptions;
  readonly gain: Float64Array;
  private readonly prevClean: Float64Array;
  readonly noise: Float64Array;
  private readonly smoothPow: Float64Array;
  private readonly tail: Float64Array;
  readonly resid: Float64Array;
  /** The residual estimate without the near end's hold (bits 64), for the evidence; the evidence's bins only. */
  private readonly full: Float64Array;
  private readonly noiseRise: number;
  /** The bins computed. */
  private readonly K: number;
  private started = false;
  /**
   * Which residual terms count, bit mask phi 1, leak 2, tail 4, wideband 8; 16: the channel raises β after a level rise
   * (level-rise.ts); 32: no overdrive while a near-end talker is evident (near-end.ts); 64: by the same evidence, the
   * leak and wideband terms held back, the floor raised towards NEAR_FLOOR and the decision-directed weight towards
   * NEAR_DD; 128: while the filter is young, the evidence also takes a cue that does not lean on Φ (talker-cue.ts; the
   * channel computes it); 256: after a second of summed energies that say talker, a hop that shows one reads as a clear
   * talker, share 0 (near-end.ts, SUSTAINED_HOPS); 512 (off by default): on a hop with such evidence, the overdrive per
   * bin by the bin's error over its residual estimate (OD_HI). Set once, by the canceller; setting it also tells the evidence.
   */
  get terms(): number {
    return this.mask;
  }
  set terms(m: number) {
    this.mask = m;
    this.nearEnd.sustained = (m & 256) !== 0;
  }
  private mask = 15;
  /** The evidence of a near-end talker (used where terms have 32 or 64). */
  readonly nearEnd = new NearEndEvidence();
  /** The same loops in WebAssembly (hop-passes.ts; bit-identical), set where every array lies in its memory. */
  kernel: SuppressKernel | null = null;

  /** `f64` allocates its per-bin arrays (zeroed; by default plain arrays). */
  constructor(opts: SuppressorOptions, f64: (n: number) => Float64Array = (n) => new Float64Array(n)) {
    this.o = opts;
    const K = opts.bins;
    this.gain = f64(K).fill(1);
    this.K = Math.min(K, opts.active ?? K);
    this.gain.fill(0, this.K);
    this.prevClean = f64(K);
    this.noise = f64(K);
    this.smoothPow = f64(K);
    this.tail = f64(K);
    this.resid = f64(K);
    this.full = new Float64Array(K);
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
    const K = this.K;
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
    const guard = (m & 32) !== 0;
    const hold = (m & 64) !== 0;
    // 1 without evidence of a near-end talker, 0 with clear evidence.
    const share = guard || hold ? this.nearEnd.share() : 1;
    const held = hold && share < 1;
    const wPhi = m & 1 ? 1 : 0;
    const wLeak = m & 2 ? (held ? share : 1) : 0;
    const wTail = m & 4 ? 1 : 0;
    const wNl = m & 8 ? (held ? share : 1) : 0;
    const over = o.overEstimate;
    const rise = this.noiseRise;
    // Both back ends take the hop's overdrive, term weights, smoothing and floor as parameters, so they stay
    // bit-identical; without evidence every one is what it was before the hold.
    const overdrive = guard ? 1 + (o.overdrive - 1) * share : o.overdrive;
    const dd = held ? o.ddAlpha + (NEAR_DD - o.ddAlpha) * (1 - share) : o.ddAlpha;
    const floor = held && o.floor < NEAR_FLOOR ? o.floor * Math.pow(NEAR_FLOOR / o.floor, 1 - share) : o.floor;
    const binOd = (m & 512) !== 0 && share < 1 ? 1 : 0;
    if (this.kernel) {
      this.kernel(K, ePow, yPow, phi, beta, tailIn, tailDecay, nl, g, this.prevClean, noise, sp, tail, resid, wPhi, wLeak, wTail, wNl, over, rise, overdrive, dd, floor, binOd, OD_HI, OD_LO);
      if (guard || hold) this.nearEnd.update(ePow, yPow, held ? this.fullResid(phi, beta, yPow, nl, over) : resid);
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
      const r = largestTerm(wPhi * phi[k], wLeak * leak, wTail * tk, wNl * nl[k]) * over;
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
    const prev = this.prevClean;
    for (let k = 0; k < K; k++) {
      const e = ePow[k];
      let odk = od;
      if (binOd !== 0) odk = 1 + (od - 1) * Math.min(1, Math.max(0, (OD_HI - e / (resid[k] + 1e-20)) / (OD_HI - OD_LO)));
      const inv = 1 / (odk * resid[k] + 1e-20);
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
    if (guard || hold) this.nearEnd.update(ePow, yPow, held ? this.fullResid(phi, beta, yPow, nl, over) : resid);
    return g;
  }

  /**
   * `lostSuppress` (channel.ts): this hop's gains, after compute(), at most 1 − limit / |E|² per bin (an echo estimate from
   * outside the suppressor's terms), never under the noise floor or the gain's floor. Only the output changes: the
   * decision-directed state, the noise floor and the near-end evidence are what compute() left, so the filter, whose
   * forgetting reads that evidence, runs as it would without it.
   */
  cap(ePow: Float64Array, limit: Float64Array): void {
    const g = this.gain;
    const noise = this.noise;
    const floor = this.o.floor;
    for (let k = 0; k < this.K; k++) {
      const e = ePow[k] + 1e-20;
      let c = 1 - limit[k] / e;
      const nf = Math.sqrt(noise[k] / e);
      if (c < nf) c = nf;
      if (c < floor) c = floor;
      if (c < g[k]) g[k] = c;
    }
  }

  /**
   * The residual estimate over the evidence's bins as it would be without the hold (the terms at full weight, as the
   * loop above forms it), so that holding the terms back does not feed the evidence that holds them.
   */
  private fullResid(phi: Float32Array, beta: Float64Array, yPow: Float64Array, nl: Float64Array, over: number): Float64Array {
    const m = this.terms;
    const wPhi = m & 1 ? 1 : 0;
    const wLeak = m & 2 ? 1 : 0;
    const wTail = m & 4 ? 1 : 0;
    const wNl = m & 8 ? 1 : 0;
    const full = this.full;
    const tail = this.tail;
    // Within the computed bins (Φ has no more); the evidence reads 0 above them.
    const to = Math.min(EVIDENCE_TO, this.K);
    for (let k = EVIDENCE_FROM; k < to; k++) {
      const a = beta[k - 1] * yPow[k - 1];
      const b = beta[k] * yPow[k];
      const c = beta[k + 1] * yPow[k + 1];
      let leak = b > a ? b : a;
      if (c > leak) leak = c;
      full[k] = largestTerm(wPhi * phi[k], wLeak * leak, wTail * tail[k], wNl * nl[k]) * over;
    }
    return full;
  }
}

/** The residual estimate of a bin before over-estimation: the largest of its weighted terms (Φ, leak, tail, wideband). */
function largestTerm(phi: number, leak: number, tail: number, nl: number): number {
  let r = phi;
  if (leak > r) r = leak;
  if (tail > r) r = tail;
  if (nl > r) r = nl;
  return r;
}
