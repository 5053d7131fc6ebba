// Whether a microphone channel holds any echo of the reference at all. A client may send a reference that plays but
// never reaches the microphone (a headset, a device that cancelled it already); the canceller then only does harm: its
// filters fit chance correlations of the near-end talker (or the room's noise) with the reference and subtract them,
// and its suppressor takes the talker for residual echo (near-end SDR 54 dB at the microphone, 11.5–17.4 dB out).
//
// The evidence is the main filter's own success: a "hit" is a far-end hop on which it removes at least 6 dB of the
// microphone's energy. With an echo there, hits come on most far-end hops where the near end pauses; without one,
// hardly ever (no-echo scenes of 20 s, talker or silence: 0–1 % of their far-end hops). Three states:
//   present    the canceller as it always was (the start). ABSENT_HOPS far-end hops without a hit → absent, or
//              probation when the delay estimator is confident all the same (CUE: the lag may be what is wrong; it
//              is forgotten either way, so that the estimator's best lag is taken at once). A filter that runs
//              away (its error averaging 10 dB above the microphone's for a quarter second, or 20 dB: RUNAWAY_*)
//              starts again from nothing. One that has cancelled and then loses its echo (1.5 s without a hit,
//              neither filter removing anything: LOST_*) → probation with its filters emptied; after 0.5 s of that it
//              is in doubt (DOUBT_*): still present, but the delay estimator looks for a new lag, and the filter moves
//              with it, as when the echo's delay jumped in the same room.
//   absent     the output fades to the microphone itself, bit for bit; both filters are emptied and learn nothing
//              (their fits of chance would mislead the delay estimator, which now reads the microphone's own power).
//              When the delay estimator finds a lag (its confidence reaches CUE) → probation.
//   probation  the output is still the microphone; both filters learn (from nothing after absent, as at the start;
//              a filter whose error grows 6 dB above the microphone is emptied again). ON_HITS hits within ON_HOPS
//              → present; ABSENT_HOPS without a hit → absent.
// An echo appearing after "absent" or "probation" is searched for as at a call's start (`restart`): the delay estimator
// takes a better lag at once, a filter emptied skips that hop's update, the loudspeaker model starts again with it.
// A scene whose filter scores a hit at least every ABSENT_HOPS far-end hops never leaves "present" and is bit for bit
// what it was. Cost: an energy sum per hop; until an echo is found a 256-point FFT per hop (the channel's row FFT), and
// no filter updates while absent. docs/echo.md, "A reference with no echo".
import type { DelayEstimator } from './delay-estimator';

/** A hit: the microphone's energy over the filter's error energy on a far-end hop at least this (6 dB). */
const HIT_RATIO = 4;
/**
 * Far-end hops without a hit before the channel counts as without echo (6 s of far-end activity). 3 s took an echo whose
 * delay estimate was wrong for its first 4 s for none (echo-ab's st-8201, sigmoid, 296 ms: 32.4 → 16.0 dB); with 6 s
 * the 108 held-out echo scenes of echo-ab (seeds 8000.. and 10000..) are within 0.04 dB of the canceller without the
 * decision, while a no-echo talker keeps the microphone's SDR from 10 s on as with 3 s.
 */
const ABSENT_HOPS = 750;
/** Hits within ON_HOPS far-end hops that mean an echo is there (3 let a no-echo talker's chance through once in 12 scenes). */
const ON_HITS = 6;
const ON_HOPS = 125;
/** Far-end hops in a row with the error 6 dB above the microphone that mean a learning filter diverged (1 emptied filters
 * mid-convergence: echo-ab path-8603 lost 17 dB; 16 missed an echo appearing at 8 s in the unit test; 4: 22.4 dB, 2: 25.2
 * dB of ERLE 12–20 s with an echo from 10 s, seeds 12000..). */
const DIVERGED_HOPS = 2;
/**
 * A filter that adds energy while present: the main filter's error energy over the microphone's, each averaged over
 * about half a second of far-end hops, above RUNAWAY_RATIO (10 dB) means the filter ran away (seen on a reverberant
 * room after a late delay move: the output 5 dB above the microphone for 4 s). In normal operation the ratio peaks at
 * +5.8 dB (a path change, before the shadow filter's coefficients are taken), +3.3 in double talk and +1.2 in single
 * talk (12 generated scenes of each kind). The filters and the loudspeaker model then start again from nothing.
 */
const RUNAWAY_RATIO = 10;
const RUNAWAY_SMOOTH = 1 / 64;
/** Far-end hops of averaging before the ratio is trusted (and after each state change or restart). */
const RUNAWAY_AFTER = 250;
/**
 * Far-end hops in a row the average must stay above RUNAWAY_RATIO (a quarter second): a burst that the filter recovers
 * from by itself crosses it for a few hops (2 on an image-method room with a polynomial loudspeaker, where restarting
 * cost 7.6 dB of ERLE over 10–20 s); the runaway above stayed over it for 530.
 */
const RUNAWAY_HOLD = 32;
/**
 * A filter that has lost its echo while present (the echo's delay jumped beyond the filters' reach): after the channel
 * has cancelled (EchoChannel's latch), LOST_HOPS far-end hops without a hit (1.5 s) while the smaller of the two
 * filters' errors, averaged as for the runaway (~0.5 s), stays above LOST_RATIO (+1 dB) times the microphone's: neither
 * removes anything. The channel then goes to probation with both filters emptied, as for an echo appearing later, and
 * the delay estimator takes its best lag at once. Without this such a filter waited ABSENT_HOPS (6 s) for probation: a
 * delay jump of 100 → 250 ms kept the output at the microphone's level (ERLE −2..+5 dB) for 6 s, since a filter whose
 * variances had settled learns the new echo too slowly, and once it cancelled the delay estimator read its own echo
 * estimate. The shadow's error counts because after a path change it is often about to be adopted (the main filter's
 * alone, over 1 s, fired on 7 of 108 held-out scenes, 5 worse, path-45805 −21 dB); the margin because at 0 dB a
 * stretch of far end at the noise floor fired it (docs/echo.md, "An echo that jumps").
 */
const LOST_HOPS = 187;
const LOST_RATIO = 1.26;
/**
 * The same test after DOUBT_HOPS far-end hops (0.5 s) puts a present channel in doubt (option `delayDoubt`): the delay
 * estimator's history is weighed down by DOUBT_FADE and it reads the microphone, so that a new lag stands out within a
 * fraction of a second and is taken at once; the bulk move then keeps the filter's coefficients where they are in the
 * window (the room moved with the delay) and reopens their variances. 40 generated delay jumps of 90–370 ms, the same
 * room (docs/echo.md, "Doubt: moving with the echo"): ≥ 20 dB from 2 s after the jump on 32 (9 without), ERLE 2–4 s after it
 * 41.6 / 38.1 / 50.3 dB on three sets (21.7 / 18.3 / 12.7 without); a fade of 0.1: 37.9 / 38.5 / 49.8, 0.02: 34.5 /
 * 36.0 / 49.9, no `follow` in doubt: 32.6 / 38.3 / 46.0. Ordinary scenes never doubt (single and double talk of echo-ab's
 * held-out sets bit for bit); 2 of 42 path changes did (−2.6, −1.5 dB).
 */
const DOUBT_HOPS = 62;
const DOUBT_FADE = 0.3;
/**
 * With `findJump`, the filter also removes nothing when its echo estimate no longer matches the microphone: neither
 * filter's error more than 1 dB under the microphone's (MISMATCH_BEST), the estimate still at least a tenth of the
 * microphone's energy (MISMATCH_ECHO) and its correlation with the microphone, over its own energy, under
 * MISMATCH_SHARE. A filter that tracks the echo, in double talk too, has that share near 1 (the near end is
 * uncorrelated with the estimate); after a delay jump the old estimate and the moved echo share 0.1–0.6 of it, and the
 * Kalman filter's slow unlearning brings its error down to the microphone's (+0.2 to +0.9 dB) rather than above it,
 * so the test without the share waited up to 2.3 s (docs/echo.md, "Finding the jump"). With a noise floor the
 * estimate is far under a tenth of the microphone.
 */
const MISMATCH_BEST = 1 / 1.26;
const MISMATCH_ECHO = 0.1;
const MISMATCH_SHARE = 0.5;
/**
 * The mismatch test counts only once the smaller error's average has been under MISMATCH_DEEP (−10 dB) of the
 * microphone's since the channel's last start: a filter that has cancelled deeply and then stops matching has lost its
 * echo. Without it the test fired in a filter's first seconds (echo-offbench's st-33004 at 3 s, the error at −4 dB
 * before, the estimate over-shooting the microphone by 3 dB: −16.6 dB over 10–20 s) and in double talk whose filter
 * never cancelled (echo-ab's dt-53302: −1.0 dB); jumps come after −18 to −30 dB.
 */
const MISMATCH_DEEP = 0.1;
/**
 * `earlyJump`: a jump searched for within a quarter second, not after the doubt's 0.5 s. An episode begins when the
 * smaller error (averaged over ~8 far-end hops: EARLY_SMOOTH), within EARLY_RISE far-end hops of having been 10 dB
 * under the microphone's, is above EARLY_RATIO of it while the estimate's share of itself in the microphone is under
 * MISMATCH_SHARE (a filter tracking its echo has ~1 there, in double talk too). From `earlyJump` hops into the episode,
 * and every EARLY_RETRY hops after while the test holds, the canceller searches over the microphone since the rise,
 * until EARLY_LAST (the doubt then searches over the full span). A jump is found at the first search, an earlier one
 * too where the canceller continues the estimate into the future (`earlyFuture`; without, it needs Δ + 2048 samples
 * of the microphone after it).
 */
const EARLY_SMOOTH = 1 / 8;
const EARLY_RATIO = 0.5;
const EARLY_RETRY = 8;
const EARLY_RISE = 16;
const EARLY_LAST = 56;
/**
 * `followGain`: over the test's own averages (GAIN_SMOOTH, ~8 far-end hops), the estimate's correlation with the
 * microphone above GAIN_RHO and its least-squares gain beyond GAIN_STEP (±2.3 dB) either way, for GAIN_HOPS far-end
 * hops in a row (0.25 s). A correlation of 0.75 also scaled a filter after a path change whose new echo resembled the
 * old (the bench's path-3003 36.7 → 17.5 dB); the presence decision's 0.5 s averages lagged behind a filter that was
 * following the step by itself, which the scaling then overshot; 16 hops did so too (docs/echo.md, "A louder
 * loudspeaker").
 */
const GAIN_RHO = 0.85;
const GAIN_STEP = 1.3;
const GAIN_HOPS = 31;
const GAIN_SMOOTH = 1 / 8;
/** An average this far above the microphone's (20 dB) restarts at once: the runaway above jumped from +4 to +19 dB in a hop. */
const RUNAWAY_BURST = 100;
/**
 * While absent, the delay estimator's confidence (its best lag's envelope correlation above the mean over lags, over
 * ~1.6 s) at which the filters start learning: its own threshold for a lag. With the filters empty a near-end talker's
 * chance reads up to 0.4 now and then (a probation that finds no hit and ends), an appearing echo 0.15–0.35 within a
 * second; 0.2 instead of 0.15 found echoes appearing at 10 s later (with an earlier form of this decision, ERLE 12–20 s
 * 21.3 against 30.8 dB on 6 scenes).
 */
const CUE = 0.15;
/**
 * The output's crossfade from the canceller's to the microphone's, per hop (1 s: a channel that finds its echo again
 * within a second, after a wrong delay estimate, has leaked only part of it), and back (32 ms).
 */
const FADE_OUT = 1 / 125;
const FADE_IN = 0.25;

/** ⟨d, ŷ⟩ from the energies of d, ŷ and e = d − ŷ (per hop or averaged alike): exact, since |e|² = |d|² − 2⟨d, ŷ⟩ + |ŷ|². */
function crossOf(mic: number, y: number, err: number): number {
  return 0.5 * (mic + y - err);
}

/** |d − g ŷ|² from the same: the error energy had the estimate been g times what it was. */
function scaledErr(mic: number, y: number, cross: number, g: number): number {
  return Math.max(0, mic - 2 * g * cross + g * g * y);
}

export type PresenceState = 'present' | 'absent' | 'probation';

/** The canceller's option for it (EchoCancellerOptions). */
export interface PresenceOptions {
  /** An echo appearing after the channel found none is searched for as at a call's start (EchoPresence.restart; default true, false: as before, for the A/B). */
  presenceRestart?: boolean;
}

export class EchoPresence {
  state: PresenceState = 'present';
  /** Weight of the canceller's output in this hop's output block (1: all of it, 0: the microphone's), and the previous hop's. */
  weight = 1;
  prevWeight = 1;
  /** Set by hop() when the filters are to be emptied now (the channel just turned absent, a probation filter diverged, or a present one ran away). */
  resetNow = false;
  /**
   * Whether an echo appearing after "absent" or "probation" is searched for as at a call's start (default; false: as
   * before 2026-11-29, for the A/B): while the channel is not present the delay estimator takes its best lag at once
   * (`follow`) instead of holding the chance lag it had when the echo appears; the filters skip the update on the hop
   * they are emptied (its error and Φ are the old filter's); and the loudspeaker model starts again with them (without
   * that the lag's following lost more than it gained: ERLE 12–20 s of an echo from 10 s, seeds 12000.., 24.2 against
   * 26.0 before and 29.3 with it). (Emptying the filters at every probation, not only after absent, made a no-echo
   * talker "present" in 1 of 24 scenes, seeds 14000..: a fresh filter's chance hits.) docs/echo.md, "An echo appearing later".
   */
  readonly restart: boolean;
  /** Far-end hops so far, at the last state change, and at the last ON_HITS hits (a ring). */
  private farHops = 0;
  private since = 0;
  private readonly hits = new Float64Array(ON_HITS).fill(-Infinity);
  private hitAt = 0;
  private worse = 0;
  /** State changes so far (tests, the bench). */
  switches = 0;
  /** Restarts of a filter that ran away while present (watchRunaway). */
  runaways = 0;
  private errAvg = 0;
  /** The smaller of the two filters' errors (the shadow's where it ran), averaged as errAvg. */
  private bestAvg = 0;
  /** The main filter's echo estimate's energy, averaged as errAvg (the mismatch test of `findJump`). */
  private yAvg = 0;
  /** Set by hop() on the hop a doubt begins (the canceller then searches for the jump). */
  doubtNow = false;
  /** Far-end hops at a move made in doubt and at the doubt's onset (the lost-echo clock with `findJump`). */
  private movedAt = 0;
  private doubtAt = 0;
  /** The smaller error's average has been under MISMATCH_DEEP of the microphone's since the averages last restarted. */
  private deep = false;
  /** Set by hop() on a hop the canceller is to search for a jump early (`earlyJump`), over the last searchSpan samples. */
  searchNow = false;
  searchSpan = 0;
  private readonly earlyHops: number;
  private deepAt = -1e9;
  private eBest = 0;
  /** Whether this hop's search is its episode's first, and the episode's searches so far. */
  searchFirst = false;
  private earlySearches = 0;
  /** The far-end hop the current early episode began (−1: none). */
  private earlyAt = -1;
  /** Set by hop() to the gain the filters are to be scaled by this hop (0: none; `followGain`). */
  gainNow = 0;
  private gainHops = 0;
  /** The gain test's own averages (GAIN_SMOOTH: ~8 far-end hops), so that the gain is the echo's now, not 0.5 s ago. */
  private gMic = 0;
  private gErr = 0;
  private gY = 0;
  /** Times the filters were scaled (tests, the bench). */
  gainSteps = 0;
  private readonly gains: boolean;
  private micAvg = 0;
  private avgHops = 0;
  private above = 0;
  private delay: DelayEstimator | null = null;
  private ownsDelay = false;

  /** Whether a present filter that lost its echo goes to probation (LOST_HOPS; option `lostEcho`). */
  private readonly lost: boolean;
  /** Times a present filter lost its echo (tests, the bench). */
  losses = 0;
  /** This far-end hop: the early test's condition (a deep filter's estimate suddenly off the microphone), doubt or not. */
  private mismatch = false;
  /** A filter that had cancelled deeply matches its echo no longer: the early test's condition, or a doubt (`lostSuppress`). */
  get echoLost(): boolean {
    return this.state === 'present' && (this.mismatch || this.doubt);
  }
  /** Whether doubt is used (DOUBT_*; option `delayDoubt`), and whether the channel is in doubt now. */
  private readonly doubts: boolean;
  doubt = false;
  /** Times a present filter came into doubt (tests, the bench), and times the canceller found the jump (jumped()). */
  doubted = 0;
  jumps = 0;

  /** Whether the mismatch test and the lost-echo clock of `findJump` are used. */
  private readonly jumpsOn: boolean;

  constructor(restart = true, lost = false, doubts = false, jumps = false, gains = false, early = 0) {
    this.gains = gains;
    this.earlyHops = jumps ? early : 0;
    this.restart = restart;
    this.lost = lost;
    this.doubts = doubts;
    this.jumpsOn = jumps;
  }

  /** Whether the main filter learns this hop. */
  get learning(): boolean {
    return this.state !== 'absent';
  }

  /**
   * One hop: whether the reference was active within the filter's reach, the microphone block's energy, the main
   * filter's error energy on it, the smaller of the two filters' errors (`bestErr`) and whether the channel's filter has
   * cancelled (both for LOST_*). Returns whether the output mixes in the microphone (the weight below 1 now or on the
   * previous hop).
   */
  hop(farActive: boolean, micEnergy: number, errEnergy: number, bestErr = errEnergy, cancelled = false, echoEnergy = 0): boolean {
    const cue = this.delay ? this.delay.confidence : 0;
    this.prevWeight = this.weight;
    this.resetNow = false;
    this.doubtNow = false;
    this.gainNow = 0;
    this.searchNow = false;
    this.mismatch = false;
    if (farActive) {
      const n = ++this.farHops;
      if (micEnergy > HIT_RATIO * errEnergy) {
        this.hits[this.hitAt] = n;
        this.hitAt = this.hitAt + 1 === ON_HITS ? 0 : this.hitAt + 1;
      }
      // Far-end hops since the last hit (or the last state change).
      const sinceHit = n - Math.max(this.hits[(this.hitAt + ON_HITS - 1) % ON_HITS], this.since);
      const quiet = sinceHit >= ABSENT_HOPS;
      if (this.state === 'present') {
        if (quiet) this.to(cue >= CUE ? 'probation' : 'absent');
        else {
          this.watchRunaway(micEnergy, errEnergy);
          this.bestAvg += RUNAWAY_SMOOTH * (bestErr - this.bestAvg);
          this.yAvg += RUNAWAY_SMOOTH * (echoEnergy - this.yAvg);
          if (this.avgHops >= RUNAWAY_AFTER && this.bestAvg < MISMATCH_DEEP * this.micAvg) this.deep = true;
          this.watchGain(micEnergy, errEnergy, echoEnergy);
          this.watchEarly(bestErr);
          const removesNothing = this.lost && cancelled && this.avgHops >= RUNAWAY_AFTER && (this.bestAvg > LOST_RATIO * this.micAvg || (this.jumpsOn && this.mismatched()));
          const doubt = this.doubts && removesNothing && sinceHit >= DOUBT_HOPS;
          if (doubt && !this.doubt) {
            this.doubtNow = true;
            this.doubtAt = n;
            this.doubted++;
            if (this.ownsDelay) this.delay!.fade(DOUBT_FADE);
          }
          this.doubt = doubt;
          // The clock on every hop, not only when the test holds: an operation first met in a stream's rare branch
          // deoptimised the canceller's hop for every stream of the thread (docs/echo.md, "The cancellers' shared code").
          const clock = this.lostClock(n, sinceHit, doubt);
          if (removesNothing && clock >= LOST_HOPS) {
            this.to('probation');
            this.resetNow = true;
            this.losses++;
          }
        }
      } else if (this.state === 'absent') {
        if (cue >= CUE) this.to('probation');
      } else if (n - this.hits[this.hitAt] < ON_HOPS && this.hits[this.hitAt] > this.since) this.to('present');
      else if (quiet) this.to('absent');
      else this.watchDivergence(errEnergy > HIT_RATIO * micEnergy);
    }
    const target = this.state === 'present' ? 1 : 0;
    if (this.restart && this.ownsDelay) this.delay!.follow = this.state !== 'present' || this.doubt;
    if (this.weight !== target) this.weight = target === 1 ? Math.min(1, this.weight + FADE_IN) : Math.max(0, this.weight - FADE_OUT);
    return this.weight < 1 || this.prevWeight < 1;
  }

  /**
   * The canceller's delay estimator, whose confidence cues probation; `owner`: it follows this channel (channel 0), and
   * forgets its lag whenever the filter went ABSENT_HOPS without a hit (without an echo the lag is chance, with one it
   * may be wrong: either way the estimator's best lag is then taken at once, as the first one is, instead of after its
   * hysteresis against the old one).
   */
  watch(delay: DelayEstimator, owner: boolean): void {
    this.delay = delay;
    this.ownsDelay = owner;
  }

  /**
   * Far-end hops that count towards LOST_HOPS. Without `findJump`, since the last hit. With it, from a move made in
   * doubt too (the moved filter gets its chance: a move 0.3 s before the lost test emptied a filter that was about to
   * cancel), and with doubt only from LOST_HOPS − DOUBT_HOPS after its onset (a test that became true late, the last hit
   * long ago, emptied the filter on the hop its doubt began, before the jump could be searched for).
   */
  private lostClock(n: number, sinceHit: number, doubt: boolean): number {
    if (!this.jumpsOn) return sinceHit;
    const clock = n - Math.max(this.hits[(this.hitAt + ON_HITS - 1) % ON_HITS], this.since, this.movedAt);
    if (!this.doubts) return clock;
    return doubt ? Math.min(clock, n - this.doubtAt + DOUBT_HOPS) : 0;
  }

  /**
   * The main filter's estimate does not match the microphone (MISMATCH_*). The averages are energies per hop, so the
   * estimate's correlation with the microphone is (mic + ŷ − e) / 2 exactly (e = d − ŷ).
   */
  private mismatched(): boolean {
    const mic = this.micAvg;
    const y = this.yAvg;
    const cross = crossOf(mic, y, this.errAvg);
    return this.deep && this.bestAvg > MISMATCH_BEST * mic && y > MISMATCH_ECHO * mic && cross < MISMATCH_SHARE * y;
  }

  /**
   * With `followGain`: a filter that had cancelled deeply whose estimate still matches the microphone in shape
   * (correlation over GAIN_RHO) but not in level (the least-squares gain <d, ŷ> / <ŷ, ŷ> beyond GAIN_STEP either way)
   * for GAIN_HOPS far-end hops: the echo path's gain changed (the loudspeaker's volume). gainNow is set to that gain for
   * the channel to scale its filters by, and the averages are brought to what they would have been with the scaled
   * estimate (ŷ' = g ŷ: <ŷ', ŷ'> = g² <ŷ, ŷ>, e' = d − g ŷ).
   */
  private watchGain(micEnergy: number, errEnergy: number, echoEnergy: number): void {
    // The averages also serve `earlyJump` (watchEarly), on without `followGain` too.
    if (!this.gains && this.earlyHops === 0) return;
    this.gMic += GAIN_SMOOTH * (micEnergy - this.gMic);
    this.gErr += GAIN_SMOOTH * (errEnergy - this.gErr);
    this.gY += GAIN_SMOOTH * (echoEnergy - this.gY);
    if (!this.gains || !this.deep) return;
    const mic = this.gMic;
    const y = this.gY;
    const cross = crossOf(mic, y, this.gErr);
    const g = y > 0 ? cross / y : 1;
    const rho = mic > 0 && y > 0 ? cross / Math.sqrt(mic * y) : 0;
    this.gainHops = rho > GAIN_RHO && (g > GAIN_STEP || g < 1 / GAIN_STEP) ? this.gainHops + 1 : 0;
    if (this.gainHops < GAIN_HOPS) return;
    this.gainHops = 0;
    this.gainNow = g;
    this.gErr = scaledErr(mic, y, cross, g);
    this.gY = g * g * y;
    this.errAvg = scaledErr(this.micAvg, this.yAvg, crossOf(this.micAvg, this.yAvg, this.errAvg), g);
    this.yAvg *= g * g;
    this.bestAvg = Math.min(this.bestAvg, this.errAvg);
    this.gainSteps++;
  }

  /** With `earlyJump` (EARLY_*): sets searchNow and searchSpan on the hops of an episode the canceller is to search on. */
  private watchEarly(bestErr: number): void {
    // The microphone's average is the gain test's (watchGain, the same smoothing).
    const mic = this.gMic;
    this.eBest += EARLY_SMOOTH * (bestErr - this.eBest);
    const n = this.farHops;
    if (this.eBest < MISMATCH_DEEP * mic) this.deepAt = n;
    // The estimate's share of itself in the microphone (the gain test's averages, ~8 hops): near 1 while the filter
    // tracks its echo, in double talk too; 0.1–0.6 after a jump (the mismatch test's MISMATCH_SHARE, fast).
    const y = this.gY;
    const share = y > 0 ? crossOf(mic, y, this.gErr) / y : 1;
    this.mismatch = this.earlyHops > 0 && this.deep && this.eBest > EARLY_RATIO * mic && y > MISMATCH_ECHO * mic && share < MISMATCH_SHARE;
    const lost = this.mismatch && !this.doubt;
    // An episode begins with a sudden rise: within EARLY_RISE far-end hops of the error's last deep hop (a jump takes it
    // from −20 dB to 0 in a few hops; a filter that drifts over seconds is left to the doubt). It lasts EARLY_LAST.
    if (this.earlyAt < 0) {
      if (!lost || n - this.deepAt > EARLY_RISE) return;
      this.earlyAt = n;
      this.earlySearches = 0;
    }
    const age = n - this.earlyAt;
    if (age > EARLY_LAST) {
      this.earlyAt = -1;
      return;
    }
    if (!lost || age < this.earlyHops || (age - this.earlyHops) % EARLY_RETRY !== 0) return;
    this.searchNow = true;
    this.searchFirst = this.earlySearches++ === 0;
    // The microphone since the rise began (the fast average's lag, ~8 hops, before it), in samples of 128.
    this.searchSpan = (age + 8) * 128;
  }

  /** The canceller moved the filter to where the echo jumped (jump-finder.ts): the doubt is over, its clocks start again. */
  jumped(): void {
    this.doubt = false;
    // An early episode needs a new rise from deep cancellation after this.
    this.earlyAt = -1;
    this.deepAt = -1e9;
    this.since = this.farHops;
    this.jumps++;
  }

  /** A move made in doubt: the lost-echo clock starts again from it. */
  moved(): void {
    this.movedAt = this.farHops;
  }

  /**
   * In probation: a learning filter whose error stays 6 dB above the microphone (`worse`) for DIVERGED_HOPS hops in a
   * row is fitting chance and diverging (seen with an echo there, after a false "absent": 26 dB above for a second): it
   * starts again.
   */
  private watchDivergence(worse: boolean): void {
    this.worse = worse ? this.worse + 1 : 0;
    if (this.worse < DIVERGED_HOPS) return;
    this.resetNow = true;
    this.worse = 0;
  }

  /**
   * While present: a main filter whose error has averaged over RUNAWAY_RATIO times the microphone's energy for
   * RUNAWAY_HOLD hops, or over RUNAWAY_BURST times, starts again.
   */
  private watchRunaway(micEnergy: number, errEnergy: number): void {
    this.errAvg += RUNAWAY_SMOOTH * (errEnergy - this.errAvg);
    this.micAvg += RUNAWAY_SMOOTH * (micEnergy - this.micAvg);
    if (++this.avgHops < RUNAWAY_AFTER || this.errAvg <= RUNAWAY_RATIO * this.micAvg) {
      this.above = 0;
      return;
    }
    if (++this.above < RUNAWAY_HOLD && this.errAvg <= RUNAWAY_BURST * this.micAvg) return;
    this.resetNow = true;
    this.runaways++;
    this.restartAverages();
  }

  private restartAverages(): void {
    this.deep = false;
    this.gainHops = 0;
    this.errAvg = 0;
    this.bestAvg = 0;
    this.yAvg = 0;
    this.micAvg = 0;
    this.avgHops = 0;
    this.above = 0;
  }

  private to(state: PresenceState): void {
    const from = this.state;
    this.state = state;
    this.doubt = false;
    this.since = this.farHops;
    this.worse = 0;
    this.restartAverages();
    this.switches++;
    // Filters are emptied when the channel turns absent (and stay so until probation); the delay estimate is
    // forgotten whenever the filter has gone ABSENT_HOPS without a hit (a wrong lag is one reason it may have).
    if (state === 'absent') this.resetNow = true;
    if ((from === 'present' || state === 'absent') && this.ownsDelay) this.delay!.forget();
  }

  /**
   * The output block: the canceller's (out[at..]) crossfaded with the microphone block it is aligned with (mic), from
   * the previous hop's weight to this hop's, sample by sample. Where both are 0 it is the microphone, bit for bit.
   */
  mix(out: Float32Array, at: number, mic: Float64Array): void {
    const n = mic.length;
    const w0 = this.prevWeight;
    const w1 = this.weight;
    if (w0 === 0 && w1 === 0) {
      for (let i = 0; i < n; i++) out[at + i] = mic[i];
      return;
    }
    for (let i = 0; i < n; i++) {
      const w = w0 + ((w1 - w0) * (i + 1)) / n;
      out[at + i] = mic[i] + w * (out[at + i] - mic[i]);
    }
  }
}
