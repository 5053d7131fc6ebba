// One microphone channel of the echo canceller, one hop at a time: the main Kalman filter and its shadow, the
// residual estimates, the suppressor and the overlap-add synthesis. The reference's spectra (shared by all channels)
// come from the ring, read `lag` hops back (the bulk delay).
import type { RowFft } from '../fft-pairs';
import { jsHopPasses, type HopPasses } from './hop-passes';
import type { AecArena } from './kernel';
import type { ChannelShared } from './options';
import type { NonlinearLearner } from './nl-learner';
import { PartitionedKalmanFilter } from './kalman-filter';
import type { RefRing } from './ref-ring';
import { EchoPresence } from './echo-presence';
import type { JumpFinder } from './jump-finder';
import { LevelRise } from './level-rise';
export type { PresenceOptions } from './echo-presence';
import { ResidualRatio } from './residual-ratio';
import { ResidualSlope } from './residual-slope';
import { ShadowFilter } from './shadow-filter';
import { EchoSuppressor } from './suppressor';
import { TalkerCue, youngWeight } from './talker-cue';

/** Hops without a near-end talker (near-end.ts) before the Kalman filter forgets at `forgetFree` (1 s). */
const FREE_AFTER_HOPS = 125;

/**
 * A channel's options: the canceller's resolved options that every channel takes as they are (options.ts documents
 * each), and these, set per canceller or per channel.
 */
export interface ChannelOptions extends ChannelShared {
  hop: number;
  partitions: number;
  shadowPartitions: number;
  /** Whether an echo appearing after the channel found none is searched for as at a call's start (EchoPresence.restart). */
  presenceRestart: boolean;
  /** The talker cue's lags (the ring's capacity) where terms bit 128 is on, else 0: its memory in the arena. */
  cueLags: number;
  /** The delay estimator reads the microphone's power until the filter has cancelled (options.ts; channel 0 only). */
  delayFromMic: boolean;
  /** The presence decision's mismatch test and lost-echo clock (options.ts `findJump`, with `delayDoubt`). */
  findJump: boolean;
}

/** Scratch shared by the channels of one canceller (they run one after the other), in its arena. */
export class Scratch {
  readonly aRe: Float64Array;
  readonly aIm: Float64Array;
  readonly ePow: Float64Array;
  readonly yPow: Float64Array;
  readonly tailIn: Float64Array;
  readonly nl: Float64Array;
  /** The hop's error energies (main, echo estimate, shadow). */
  readonly res: Float64Array;
  /** Floats it takes in the arena. */
  static floats(hop: number): number {
    return 6 * 2 * ((hop + 4) & ~3) + 8;
  }
  constructor(arena: AecArena, hop: number) {
    const bins = hop + 1;
    this.aRe = arena.f64(bins);
    this.aIm = arena.f64(bins);
    this.ePow = arena.f64(bins);
    this.yPow = arena.f64(bins);
    this.tailIn = arena.f64(bins);
    this.nl = arena.f64(bins);
    this.res = arena.f64(3);
  }
}

/**
 * `lostSuppress`: the over-estimation of the incoherent echo power (16: +12 dB over the |Ŷ|² / 2 scale) that caps the
 * gains while the filter is lost. Unweighed by the near-end evidence, over 32 path changes and 32 jumps (seeds 84000)
 * the first second's ERLE gained +1.7 / +2.1 dB at ×1, +4.5 / +4.1 at ×4, +6.4 / +5.6 at ×16 and +7.1 / +6.2 at ×64;
 * weighed (as it runs) +5.1 / +5.4 at ×16 (docs/echo.md, "The echo suppressed while the filter is lost").
 */
const LOST_OVER = 16;
/** Shadow error this far below the main filter's (power ratio), for ADOPT_HOPS active hops: take its coefficients. */
const ADOPT_RATIO = 0.5;
const ADOPT_HOPS = 16;
/** Shadow error this far above the main's for RESET_HOPS: reset the shadow from the main filter. */
const RESET_RATIO = 4;
const RESET_HOPS = 16;
const ERR_SMOOTH = 0.1;
/**
 * The delay guard (vetoes()): the share of hits above which a filter counts as cancelling (a filter at a wrong first
 * lag scored a hit now and then, and vetoing the right lag then cost st-5003 16 dB), its smoothing per far-end hop, and
 * the far-end hops the filter must have learnt first (2 s).
 */
const GUARD_RATE = 0.25;
const HIT_SMOOTH = 1 / 125;
const GUARD_LEARNT = 250;

export class EchoChannel {
  /** The microphone frame's power spectrum (the suppressor's frame's samples), for the delay estimator. */
  private readonly micPow: Float64Array;
  readonly main: PartitionedKalmanFilter;
  readonly shadow: ShadowFilter;
  readonly ratio: ResidualRatio;
  /** The residual's share of the reference's recent wideband power (nonlinear echo), and that power per bin. */
  readonly wideRatio: ResidualRatio;
  /** The residual's share as a regression slope (`residualSlope`; null: off). */
  private readonly slope: ResidualSlope | null;
  /** Set by the canceller per hop: a reference block that cannot be audio is within the filter's reach. */
  refWild = false;
  /**
   * Hops the slope still learns nothing for after a microphone block that cannot be audio (over R in energy: more than
   * every sample at full scale): that block and the next, whose error frame holds it.
   */
  private micWild = 0;
  readonly env: Float64Array;
  /** `lostSuppress`'s sum per bin (outside the arena: only JavaScript reads it, and only while a filter is lost). */
  private incoherentPow: Float64Array | null = null;
  /** The reference's wideband power at the echo's main lag, smoothed over a few hops (every bin's predictor for wideRatio). */
  private pw = 0;
  /** The main filter's strongest partition (where the echo's direct sound is), and whether it was just measured. */
  peak = 0;
  peakFresh = false;
  readonly sup: EchoSuppressor;
  /** β raised after the reference rises above its recent peak in single talk (used where the suppressor's terms have 16). */
  readonly rise: LevelRise;
  private readonly hop: number;
  private readonly bins: number;
  private readonly o: ChannelOptions;
  /** Previous microphone block (its output comes a hop later), previous error block (the suppressor's frame). */
  readonly micPrev: Float64Array;
  private readonly ePrev: Float64Array;
  readonly ola: Float64Array;
  private readonly psiS: Float64Array;
  private readonly tailDecay: Float64Array;
  /** estimateDecay's energies of the last partitions per band of 16 bins. */
  private readonly late: Float64Array;
  private readonly early: Float64Array;
  private errMain = 0;
  private errShadow = 0;
  private better = 0;
  private worse = 0;
  /** Hops between gradient constraints (one partition each) and between shadow-filter runs. */
  constrainEvery = 4;
  shadowEvery = 1;
  /** Times the shadow's coefficients were adopted (for tests and the bench). */
  adoptions = 0;
  /**
   * The share of recent far-end hops (~1 s) on which the main filter removed 6 dB or more of the microphone's energy
   * (a "hit", as echo-presence.ts counts them): while it is high the filter is cancelling an echo where it stands, and
   * the canceller keeps a bulk-delay move from pushing its strongest partition out of the window (docs/echo.md, "A
   * delay move in double talk").
   */
  hitRate = 0;
  /**
   * The filter has cancelled (GUARD_LEARNT far-end hops learnt and hits above GUARD_RATE, as the delay guard counts
   * it; cleared when the presence decision empties it): from then on the delay estimator reads the error and the echo
   * estimate, as before delayFromMic. Reading the microphone in double talk after that let the near-end talker move the
   * estimate (bench dt-2006: 24.6 → 10.1 dB), and a filter that cancels holds the lag steady.
   */
  private cancelled = false;
  private hops = 0;
  /** The hop's per-bin and per-sample passes (the canceller sets the WebAssembly ones where they reach its memory). */
  passes: HopPasses = jsHopPasses;
  /** Channel 0 learns the loudspeaker model (the canceller sets it). */
  learner: NonlinearLearner | null = null;
  /** Whether this channel's microphone holds any echo (null: not decided, always the canceller's output). */
  readonly presence: EchoPresence | null;
  /** The microphone and the echo estimate of the last second, where a delay jump is searched for (channel 0, `findJump`). */
  jumps: JumpFinder | null = null;
  /** The microphone block the output block is aligned with, kept while the output mixes it in. */
  private readonly micOut: Float64Array;
  /** The filter-independent talker cue while the filter is young (terms bit 128; null without it, and once done). */
  private cue: TalkerCue | null;

  static floats(o: { hop: number; partitions: number; shadowPartitions: number; cueLags: number; slope: boolean }): number {
    // Besides the filters: 15 float64 arrays of up to hop + 1 values (the channel's, the suppressor's, the β's), one
    // more with the residual slope.
    const cue = o.cueLags > 0 ? TalkerCue.floats(o.cueLags) : 0;
    return PartitionedKalmanFilter.floats(o.hop, o.partitions) + ShadowFilter.floats(o.hop + 1, o.shadowPartitions) + (o.slope ? 16 : 15) * 2 * ((o.hop + 4) & ~3) + cue;
  }

  constructor(arena: AecArena, o: ChannelOptions) {
    this.o = o;
    this.hop = o.hop;
    this.bins = o.hop + 1;
    this.main = new PartitionedKalmanFilter(arena, { block: o.hop, partitions: o.partitions, step: o.step, forget: o.forget, priorDecay: o.priorDecay, bins: o.bins });
    this.shadow = new ShadowFilter(arena, this.main.bins, o.shadowPartitions, o.shadowStep);
    // The per-bin and per-sample state in the arena, where the WebAssembly hop passes reach it.
    const f64 = (n: number): Float64Array => arena.f64(n);
    this.ratio = new ResidualRatio(this.bins, 8, 0.1, o.betaBias, f64, this.main.bins);
    this.wideRatio = new ResidualRatio(this.bins, 8, 1, o.betaBias, f64, this.main.bins);
    this.slope = o.residualSlope > 0 ? new ResidualSlope(this.bins, 8, o.residualSlope, o.residualSlopeScale, f64, this.main.bins, o.residualSlopeCorr) : null;
    this.env = f64(this.bins);
    this.rise = new LevelRise(this.bins, 125, f64);
    this.sup = new EchoSuppressor({ bins: this.bins, overEstimate: o.overEstimate, floor: Math.pow(10, o.floorDb / 20), ddAlpha: 0.5, hopsPerSecond: 125, overdrive: o.overdrive, active: this.main.bins }, f64);
    this.micPrev = f64(o.hop);
    this.ePrev = f64(o.hop);
    this.ola = f64(o.hop);
    this.psiS = f64(this.bins);
    this.tailDecay = f64(this.bins).fill(0.8);
    this.late = new Float64Array(Math.ceil(this.bins / 16));
    this.early = new Float64Array(Math.ceil(this.bins / 16));
    this.presence = o.presence ? new EchoPresence(o.presenceRestart, o.lostEcho, o.delayDoubt, o.findJump, o.followGain, o.earlyJump) : null;
    this.micOut = new Float64Array(o.hop);
    this.micPow = new Float64Array(o.hop + 1);
    this.cue = o.cueLags > 0 ? new TalkerCue(arena, o.hop, o.cueLags) : null;
  }

  /**
   * One hop: `d` the microphone block, `farActive` whether the reference is active within the filter's reach,
   * `reachZero` whether every spectrum the filter reads is exactly 0 (then Ŷ and Φ are 0 without the filter's pass). Leaves
   * |E|² of the suppressor's frame and |Ŷ|² / 2 in the scratch (the caller's delay estimator reads them), and writes
   * the output block (the previous hop's samples) to out[at..]. The FFTs go in pairs where a hop has two independent
   * ones: the main and the shadow filter's echo estimates back to samples, then the suppressor's frame with the two
   * errors' spectra (rows 0..2 of the row FFT; everything is copied out before the loudspeaker model, which shares it).
   */
  run(fft: RowFft, win: Float64Array, ring: RefRing, lag: number, d: Float32Array, farActive: boolean, reachZero: boolean, s: Scratch, out: Float32Array, at: number): void {
    const R = this.hop;
    const K = this.bins;
    const main = this.main;
    const sh = this.shadow;
    // The shadow runs on far-end hops (every shadowEvery-th); nothing between here and its update changes its
    // coefficients, so its echo estimate is taken now, beside the main filter's.
    const withShadow = farActive && (this.hops + 1) % this.shadowEvery === 0;
    // Main filter: echo estimate (its spectrum's power is the suppressor's |Ŷ|², halved: the 2R-point frame's
    // first half is the overlap-save's discarded part) and error.
    if (reachZero) main.silence();
    else main.filter(ring, lag);
    if (withShadow) sh.filter(ring, lag);
    fft.reserve(4);
    const P = this.passes;
    if (reachZero) {
      // ŷ = 0 (the shadow does not run: the far end is not active) without its inverse FFT.
      s.yPow.fill(0);
      fft.sig.fill(0, R, 2 * R);
    } else {
      P.echoRows(K, main.bins, main.yRe.a, main.yIm.a, withShadow ? sh.yRe.a : null, withShadow ? sh.yIm.a : null, fft.re, fft.im, s.yPow);
      fft.inverse(withShadow ? 2 : 1);
    }
    // The errors and their energies, and the rows of the forward FFTs: row 0 the suppressor's frame (the windowed
    // error of the last hop and this one), row 1 [0, e] for the main filter's update, row 2 [0, e_shadow].
    const res = s.res;
    P.errorRows(R, fft.sig, d, this.ePrev, win, withShadow ? 2 : farActive ? 1 : 0, res);
    const errMain = res[0];
    const echoEnergy = res[1];
    const errShadow = res[2];
    if (this.jumps) this.jumps.record(d, this.ePrev, R);
    const pr = this.presence;
    let mixMic = false;
    let learn = true;
    let micEnergy = 0;
    for (let i = 0; i < R; i++) micEnergy += d[i] * d[i];
    // Written on every hop, not in a branch (canceller.ts applyDelay: a rare branch's first run deoptimised its caller).
    this.micWild = micEnergy > R ? 2 : this.micWild > 0 ? this.micWild - 1 : 0;
    // The main filter adds energy on this hop, the shadow does better, and no hop of the last second showed a near-end
    // talker: the suppressor's frame takes the shadow's error (docs/echo.md, "A burst the main filter adds"). Seen after a
    // path change with a clipping loudspeaker: a loud onset 4 s later, the main filter's error above the microphone's
    // and the shadow's 10 dB under it; the suppressor took the main filter's error for a near-end talker and passed it.
    // The talker gate because in double talk the shadow's smaller error is the near end it has partly cancelled.
    if (this.o.shadowFrame && withShadow && errShadow < errMain && errMain > micEnergy && this.sup.nearEnd.sinceTalker >= FREE_AFTER_HOPS) {
      const t = fft.sig;
      // Row 2 of errorRows' layout (rows of 2R): [0, e_shadow]; its second half is the shadow's error.
      const row2 = 4 * R + R;
      for (let i = 0; i < R; i++) {
        const u = t[row2 + i];
        t[R + i] = u * win[R + i];
        this.ePrev[i] = u;
      }
    }
    if (farActive) this.hitRate += HIT_SMOOTH * ((micEnergy > 0 && errMain * 4 <= micEnergy ? 1 : 0) - this.hitRate);
    if (!this.cancelled && this.hops > GUARD_LEARNT && this.hitRate > GUARD_RATE) this.cancelled = true;
    if (pr) {
      mixMic = pr.hop(farActive, micEnergy, errMain, withShadow && errShadow < errMain ? errShadow : errMain, this.cancelled, echoEnergy);
      // The echo path's gain changed: both filters scaled by it (echo-presence.ts, `followGain`).
      if (pr.gainNow !== 0) {
        main.scale(pr.gainNow);
        sh.copyFrom(main.wRe.a, main.wIm.a);
      }
      // No echo found (or a cue of one): both filters start again from nothing.
      if (pr.resetNow) {
        this.cancelled = false;
        main.reset();
        sh.copyFrom(main.wRe.a, main.wIm.a);
        // The loudspeaker model (channel 0's) was fitted to the same chance: it starts again with the filter.
        if (pr.restart && this.learner) this.learner.reset();
      }
      // Not on the hop they were emptied: this hop's error and Φ are the old filter's, and the prior's variances against
      // the old Φ gave gains above 1 and negative variances (seen: the mean variance of the first partitions at −13).
      learn = pr.learning && !(pr.resetNow && pr.restart);
      if (mixMic) this.micOut.set(this.micPrev);
    }
    const rows = withShadow ? 3 : farActive ? 2 : 1;
    // The microphone's frame win · [previous block, d] as one more row of this FFT, when the delay estimator is to read
    // the microphone's power: while the channel has found no echo (the error and the echo estimate are its filters'
    // fits of chance then, which the estimator would lock onto), and with delayFromMic until the filter has cancelled.
    const micRow = (pr !== null && (pr.state !== 'present' || pr.doubt)) || (this.o.delayFromMic && !this.cancelled);
    if (micRow) {
      const f = fft.sig;
      const o = rows * 2 * R;
      const prev = this.micPrev;
      for (let i = 0; i < R; i++) {
        f[o + i] = prev[i] * win[i];
        f[o + R + i] = d[i] * win[R + i];
      }
    }
    fft.forward(micRow ? rows + 1 : rows);
    if (micRow) {
      const re = fft.re;
      const im = fft.im;
      const o = rows * fft.bins;
      const mp = this.micPow;
      for (let k = 0; k <= R; k++) mp[k] = re[o + k] * re[o + k] + im[o + k] * im[o + k];
    }
    // The suppressor's spectrum and |E|²; on far-end hops also the filters' error spectra E = FFT([0, e]) into the
    // arena, and Ψ_S from the main filter's.
    P.spectra(K, main.bins, fft.re, fft.im, s.aRe, s.aIm, s.ePow, farActive, main.phi.a, this.psiS, main.eRe.a, main.eIm.a, withShadow, sh.eRe.a, sh.eIm.a);
    this.wideband(ring, lag);
    const rise = this.sup.terms & 16 ? this.rise : null;
    if (rise) rise.hop(this.pw, farActive);
    if (farActive) {
      this.hops++;
      this.ratio.update(s.ePow, s.yPow);
      this.wideRatio.updateFlat(this.ratio, this.pw);
      if (this.slope && !this.refWild && this.micWild === 0) this.slope.update(this.ratio.eSum, this.ratio.ySum);
      if (withShadow && learn) sh.update(ring, 1e-6);
      // While the channel finds no echo the filters and the loudspeaker model learn nothing (the learner still
      // counts the hop: its history runs in step with the ring).
      if (learn) this.main.update(ring, this.psiS, this.forgetNow());
      if (this.learner) this.learner.step(main, lag, learn ? main.eRe.a : null, learn ? main.eIm.a : null, errMain, echoEnergy);
      if (learn && this.hops % this.constrainEvery === 0) main.constrainNext(fft);
      if (withShadow && learn) this.judgeShadow(errMain, errShadow);
      if (this.hops % 32 === 0) this.estimateDecay();
    } else if (this.learner) this.learner.step(main, lag, null, null, errMain, echoEnergy);
    if (reachZero) s.tailIn.fill(0);
    else this.tailInput(ring, lag, s.tailIn);
    // Suppression and overlap-add synthesis.
    P.mulInto(K, this.wideRatio.beta, this.env, s.nl);
    const share = this.slope ? this.slope.raise(this.ratio.beta) : this.ratio.beta;
    const beta = rise ? rise.apply(share, s.ePow, s.yPow) : share;
    if (this.cue && this.sup.terms & 128) this.talkerCue(this.cue, fft, d, ring, farActive);
    const g = this.sup.compute(s.ePow, s.yPow, main.phi.a, beta, s.tailIn, this.tailDecay, s.nl);
    if (this.o.lostSuppress && pr !== null && pr.echoLost && !reachZero) {
      // Weighed by the near-end evidence as of this hop (1 without a talker, 0 with a clear one): a filter pulled away in
      // double talk looks lost too, and unweighed the cap took the talker with it (dt-89501, 25.2 → 19.4 dB SDR).
      const w = this.sup.nearEnd.share();
      if (w > 0) this.sup.cap(s.ePow, this.incoherent(ring, lag, w));
    }
    if (rise && farActive) rise.judge(s.ePow, this.sup.resid, s.yPow);
    if (this.o.linearOnly) g.fill(1);
    // The learner may have grown the row FFT's memory (where it is the thread's shared one): views again.
    fft.reserve(1);
    P.applyGains(K, s.aRe, s.aIm, g, fft.re, fft.im);
    fft.inverse(1);
    P.overlapAdd(R, fft.sig, win, this.ola, d, this.micPrev, out, at);
    if (mixMic) pr!.mix(out, at, this.micOut);
    // What the delay estimator reads (ePow + yPow): the microphone's power where micRow says so, else the error's and
    // the echo estimate's (before delayFromMic, from the moment echo was found: a wrong filter then fed the reference at
    // its own lag into it).
    if (micRow) {
      s.ePow.set(this.micPow);
      s.yPow.fill(0);
    }
  }

  /**
   * The talker cue (talker-cue.ts) on far-end hops while the filter is young, handed to the near-end evidence with the
   * weight that blends it out as the filter converges (near-end.ts); once that weight is 0 the evidence is told so
   * (it keeps that) and the cue is dropped: nothing of it runs after (its memory stays in the arena).
   */
  private talkerCue(cue: TalkerCue, fft: RowFft, d: Float32Array, ring: RefRing, farActive: boolean): void {
    const w = youngWeight(this.hops);
    if (w <= 0) this.cue = null;
    else if (farActive) cue.update(this.micPrev, d, ring, fft);
    this.sup.nearEnd.cue(w > 0 ? cue.explained : NaN, w);
  }

  /**
   * The strongest partition as it stands now: `peak` followed through the bulk-delay moves since it was measured
   * (`peak` itself stays as measured: the wideband term and the early move read it as they always did).
   */
  peakNow = 0;
  /**
   * Whether a bulk-delay move of `shift` partitions would throw away a filter that is cancelling: it has learnt for
   * GUARD_LEARNT far-end hops, removed 6 dB on more than GUARD_RATE of the recent ones, and the move pushes its
   * strongest partition out of the window (docs/echo.md, "A delay move in double talk").
   */
  vetoes(shift: number): boolean {
    const np = this.peakNow + shift;
    // A filter in doubt (echo-presence.ts) removes nothing where it stands: the move is what may bring it back.
    if (this.presence !== null && this.presence.doubt) return false;
    return this.hops > GUARD_LEARNT && this.hitRate > GUARD_RATE && (np < 0 || np >= this.main.partitions);
  }

  /**
   * The Kalman filter's A² for this hop: `forgetFree` when no hop of the last second showed a near-end talker
   * (near-end.ts, as of the previous hop: the suppressor runs after the update), else `forget`. Forgetting faster keeps
   * the variances from collapsing, so the filter goes on learning (single talk +2.3 dB of linear ERLE); but the larger
   * variances are also Φ, the suppressor's estimate of what the filter misses, and where a talker was near they took
   * the near end with them (docs/echo.md, "The Kalman filter forgets faster").
   */
  private forgetNow(): number {
    const o = this.o;
    return this.sup.nearEnd.sinceTalker < FREE_AFTER_HOPS ? o.forget : o.forgetFree;
  }

  /** The main filter's coefficients moved by `shift` partitions (a bulk-delay move). */
  shifted(shift: number): void {
    this.peakNow = Math.max(0, Math.min(this.main.partitions - 1, this.peakNow + shift));
  }

  /** After both filters' updates: adopt the shadow's coefficients when it does clearly better, reset it when clearly worse. */
  private judgeShadow(errMain: number, errShadow: number): void {
    const sh = this.shadow;
    this.errMain += ERR_SMOOTH * (errMain - this.errMain);
    this.errShadow += ERR_SMOOTH * (errShadow - this.errShadow);
    if (this.errShadow < ADOPT_RATIO * this.errMain) {
      if (++this.better >= ADOPT_HOPS) {
        this.main.adopt(sh.wRe.a, sh.wIm.a, sh.partitions);
        this.errMain = this.errShadow;
        this.better = 0;
        this.adoptions++;
      }
    } else this.better = 0;
    if (this.errShadow > RESET_RATIO * this.errMain) {
      if (++this.worse >= RESET_HOPS) {
        sh.copyFrom(this.main.wRe.a, this.main.wIm.a);
        this.errShadow = this.errMain;
        this.worse = 0;
      }
    } else this.worse = 0;
  }

  /**
   * `lostSuppress`: per bin, the echo's incoherent power through the main filter as it stands, Σ_p |W_p|² |X_p|² / 2
   * (the scale of |Ŷ|² / 2), over-estimated by LOST_OVER, times `weight`. The filter's coefficients no longer match the
   * echo's phase, but their power response (loudspeaker, microphone, the room's decay) still says how loud it is.
   */
  private incoherent(ring: RefRing, lag: number, weight: number): Float64Array {
    const P = this.main.partitions;
    const K = this.main.bins;
    const S = this.main.stride;
    const wRe = this.main.wRe.a;
    const wIm = this.main.wIm.a;
    const pow = ring.pow.a;
    const acc = (this.incoherentPow ??= new Float64Array(this.bins));
    acc.fill(0);
    for (let p = 0; p < P; p++) {
      const x = ring.offset(lag + p);
      const o = p * S;
      for (let k = 0; k < K; k++) {
        const wr = wRe[o + k];
        const wi = wIm[o + k];
        acc[k] += (wr * wr + wi * wi) * pow[x + k];
      }
    }
    const f = 0.5 * LOST_OVER * weight;
    for (let k = 0; k < K; k++) acc[k] *= f;
    return acc;
  }

  /** Per bin, the echo power entering the room's tail beyond the filter: |W_last|² |X at the first lag past it|² / 2. */
  private tailInput(ring: RefRing, lag: number, out: Float64Array): void {
    const P = this.main.partitions;
    const K = this.main.bins;
    const x = ring.offset(lag + P);
    const o = (P - 1) * this.main.stride;
    const wRe = this.main.wRe.a;
    const wIm = this.main.wIm.a;
    const pow = ring.pow.a;
    for (let k = 0; k < K; k++) {
      const wr = wRe[o + k];
      const wi = wIm[o + k];
      out[k] = 0.5 * (wr * wr + wi * wi) * pow[x + k];
    }
  }

  /**
   * The reference's wideband power at the echo's main lag, smoothed over a few hops (pw, the predictor of the
   * nonlinear residual), and env: pw held and decaying with the room's tail, per bin (what the suppressor uses).
   */
  private wideband(ring: RefRing, lag: number): void {
    const x = ring.offset(lag + this.peak);
    let p = 0;
    const pow = ring.pow.a;
    for (let k = 0; k < this.main.bins; k++) p += pow[x + k];
    this.pw = 0.5 * this.pw + (0.5 * p) / this.bins;
    for (let k = 0; k < this.main.bins; k++) this.env[k] = Math.max(this.pw, this.tailDecay[k] * this.env[k]);
  }

  /**
   * The filter's own decay per hop over its last partitions, per band of 16 bins (how fast the room's tail fades), and
   * its strongest partition.
   */
  private estimateDecay(): void {
    const P = this.main.partitions;
    const K = this.main.bins;
    const S = this.main.stride;
    const w = this.main.wRe.a;
    const wi = this.main.wIm.a;
    const span = 8;
    const bands = Math.ceil(K / 16);
    const late = this.late.fill(0);
    const early = this.early.fill(0);
    const pw = this.learner ? this.learner.power.fill(0) : null;
    // One pass over the coefficients (this ran every 32nd hop as three): each partition's energy (the strongest
    // partition), the power response for the learner, and the last partitions' energy per band of 16 bins. Every sum
    // takes its terms in the order the separate passes did (partitions, then bins).
    let best = 0;
    let bestE = -1;
    for (let p = 0; p < P; p++) {
      let e = 0;
      const tail = p >= P - span;
      const isLate = p >= P - span / 2;
      for (let k = 0; k < K; k++) {
        const v = w[p * S + k] * w[p * S + k] + wi[p * S + k] * wi[p * S + k];
        e += v;
        if (pw) pw[k] += v;
        if (tail) {
          if (isLate) late[k >> 4] += v;
          else early[k >> 4] += v;
        }
      }
      if (e > bestE) {
        bestE = e;
        best = p;
      }
    }
    this.peak = best;
    this.peakNow = best;
    this.peakFresh = this.hops > 250;
    if (this.learner) this.learner.powerSet = true;
    for (let b = 0; b < bands; b++) {
      // (With fewer than `span` partitions the early sum used to read past the filter's start: NaN, so 0.8.)
      const d = P >= span && early[b] > 0 ? Math.pow(late[b] / early[b], 1 / (span / 2)) : 0.8;
      const dd = Math.min(0.97, Math.max(0.5, d));
      for (let k = 16 * b; k < Math.min(K, 16 * b + 16); k++) this.tailDecay[k] = dd;
    }
  }
}
