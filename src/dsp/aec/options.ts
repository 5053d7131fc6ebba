// The echo canceller's options (docs/echo.md, Parameters) and its figures; resolveOptions fills in the defaults, which
// the measurements in docs/echo.md chose.
import type { PresenceOptions } from './echo-presence';
import { PRIOR_ZONE_DB } from './prior-scale';

export interface EchoCancellerOptions extends PresenceOptions {
  channels: number;
  /** Echo path the adaptive filter covers after the bulk delay, ms (default 282: 250 ms plus the 32 ms margin kept before the delay estimate). */
  filterMs?: number;
  /** Largest bulk delay searched, ms (default 500). */
  maxDelayMs?: number;
  /** Kalman step size and forgetting (A²); suppressor over-estimation and floor (dB). */
  step?: number;
  forget?: number;
  /**
   * The Kalman filter's A² while no hop of the last second showed a near-end talker (near-end.ts); `forget` applies
   * otherwise (default 0.999; 0.99995, `forget`'s default, is the canceller before 2026-11-30: docs/echo.md, "The
   * Kalman filter forgets faster"). Without the suppressor's near-end evidence (`terms` below 32) it never applies.
   */
  forgetFree?: number;
  priorDecay?: number;
  overEstimate?: number;
  floorDb?: number;
  /** Bias compensation of the minimum-statistics residual ratios (the minimum of a fluctuating ratio is low). */
  betaBias?: number;
  /**
   * The residual's share also as the slope of |E|² on |Ŷ|² per band over this many far-end hops (residual-slope.ts;
   * default 250, 2 s; 0: off), × `residualSlopeScale` (1), counting from a correlation of E with Ŷ of
   * `residualSlopeCorr` (0.35) on: what a reference that went through a lossy codec leaves (docs/echo.md, "A
   * compressed reference").
   */
  residualSlope?: number;
  residualSlopeScale?: number;
  residualSlopeCorr?: number;
  /** Extra over-estimation of the residual echo while no near-end speech is evident (1: none). */
  overdrive?: number;
  /** Partitions of the shadow filter (default 16: 128 ms). */
  shadowPartitions?: number;
  /**
   * The shadow filter's step μ (normalised block LMS over its own partitions; default 0.25). Its normalisation sums the
   * reference over all of them, so a longer shadow learns each partition more slowly at the same μ (docs/echo.md, "A
   * slow path change in a reverberant room": 36 partitions measured at 0.25–0.56).
   */
  shadowStep?: number;
  /** Diagnostics (the bench's ablations): output the linear filter's error without the suppressor. */
  linearOnly?: boolean;
  /** Hops between gradient constraints and between shadow-filter runs (cost; defaults 4 and 1). */
  constrainEvery?: number;
  shadowEvery?: number;
  /** Loops in WebAssembly SIMD (default, where available) or JavaScript. */
  backend?: 'wasm' | 'js';
  /**
   * The suppressor's residual terms, a bit mask: Kalman 1, echo-estimate share 2, tail 4, wideband 8, level rise 16
   * (level-rise.ts), no overdrive while a near-end talker is evident 32 (near-end.ts), and by the same evidence the
   * echo-estimate share and wideband terms held back and the gain kept fuller 64 (suppressor.ts; 63 is the canceller
   * before it), and in the first seconds a talker cue that does not lean on the filter 128 (talker-cue.ts; 255 since
   * 2026-11-29, its cost × 1.00–1.04 over a 20 s stream; 127 is the canceller before it), and a clear talker (no overdrive,
   * the hold in full) once the evidence's sums have said "talker" for a second 256 (near-end.ts; default 511 since 2026-12-01, 255 the
   * canceller before it: docs/echo.md, "A talker the residual estimate hides"). Bit 512, off by default: on a hop with
   * that evidence, the overdrive per bin by the bin's error over its residual estimate (suppressor.ts OD_HI; 1023 with
   * it). It keeps more of a near end that starts in the filter's first seconds, and lets more echo through there in
   * single talk (docs/echo.md, "Overdrive per bin").
   */
  terms?: number;
  /** The loudspeaker's distortion modelled (loudspeaker.ts; default true). */
  nonlinear?: boolean;
  /** Hops between the loudspeaker model's learning steps (cost; default 4). */
  nlEvery?: number;
  /** The loudspeaker model's extra odd hinge at a hard clip's level, found by a search over candidate knots (knot-search.ts). */
  clipKnot?: boolean;
  /**
   * Which bulk-delay moves of 6 partitions or more reopen the Kalman variances to their prior (kalman-filter.ts):
   * only the first move (the first delay estimate), every such move, or none (default: on held-out scenes both
   * others lost up to 16 dB on linear loudspeakers; docs/echo.md).
   */
  reopen?: 'first' | 'always' | 'never';
  /** How far (dB) the echo path's gain may exceed the bench's before the Kalman prior follows it (prior-scale.ts; large: never). */
  priorZoneDb?: number;
  /**
   * The delay estimator reads the microphone's own power spectrum until the filter has cancelled (default true), not
   * the error's plus the echo estimate's from the moment the channel found echo (false: the canceller before
   * 2026-11-30). A filter that was wrong (at the first bulk delay, or misled by double talk from the first second)
   * put the reference at its own lag into that sum, and the estimator then found the lag it was already at:
   * docs/echo.md, "The delay estimator hears the microphone".
   */
  delayFromMic?: boolean;
  /**
   * A bulk-delay move that would push channel 0's strongest filter partition out of the filter's window is not made
   * while that filter is cancelling (it removes 6 dB on a quarter of the far-end hops or more): double talk moved the
   * estimate wrongly and the move threw the converged filter away (docs/echo.md, "A delay move in double talk"), and in
   * a long reverberant room the estimate drifts late along its correlation's plateau. On by default since it acted on
   * fresh rooms (2 of 528 held-out scenes, +28 and +44 dB, the others unchanged; docs/echo.md, "The
   * delay guard on by default").
   */
  delayGuard?: boolean;
  /**
   * The lowest bins (of 129, 62.5 Hz apart) the per-bin work covers: the filters, their updates, the suppressor and
   * the residual estimates (default 129: all). Rounded up to a multiple of 4. Below 129 the output above the band is 0:
   * meant for input that carries nothing there (narrow band, interpolated from 8 kHz: 72 bins, 0–4.44 kHz), but not set
   * by any chain: at 72 bins a path change at 8 kHz lost 4.8 dB (docs/echo.md, "Narrow band").
   */
  bins?: number;
  /**
   * A channel whose filter had cancelled and then lost its echo while present (1.5 s of far end without a hit, neither
   * filter's error less than 1 dB above the microphone's: both add energy; or, with `findJump`, an estimate that no longer matches the microphone) goes to probation with its filters emptied, instead of after
   * 6 s without a hit (echo-presence.ts, LOST_*; default true).
   */
  lostEcho?: boolean;
  /**
   * While a filter that had cancelled deeply no longer matches its echo (the early jump test's condition, or its doubt),
   * the suppressor's gains are capped by the echo's incoherent power through the main filter as it stands,
   * Σ_p |W_p|² |X_p|² / 2 over-estimated and weighed by the near-end evidence, so that the echo after a path change or
   * a jump is suppressed while the filter finds it again. The output only: the filter runs as without it
   * (echo-presence.ts `echoLost`, channel.ts LOST_OVER; docs/echo.md, "The echo suppressed while the filter is lost";
   * default true).
   */
  lostSuppress?: boolean;
  /**
   * A channel whose filter had cancelled and then, for DOUBT_HOPS far-end hops (0.5 s), removes nothing (the lost-echo
   * test, sooner): the delay estimator reads the microphone, fades what it learnt before and takes a better lag at once,
   * and the delay guard stands aside, so that an echo whose delay jumped is followed by moving the filter, which
   * cancels again at once where the room is the same (echo-presence.ts, `doubt`; default true). Only with `lostEcho`,
   * whose test it is.
   */
  delayDoubt?: boolean;
  /**
   * When a channel comes into doubt, the main filter's echo estimate of the last second is cross-correlated with the
   * microphone; a clear peak away from 0 is a delay jump in the same room, and the filter moves by it, to the sample,
   * at once (jump-finder.ts; default true). Only with `delayDoubt`.
   */
  findJump?: boolean;
  /**
   * A filter that had cancelled deeply and whose estimate still matches the microphone in shape but not in level for a
   * quarter second is scaled by the least-squares gain: the echo path's gain changed (the loudspeaker's volume), and the
   * Kalman filter, taking the sudden error for a near-end talker, followed it over seconds (echo-presence.ts; default true).
   */
  followGain?: boolean;
  /**
   * On a hop where the main filter's error is above the microphone's energy, the shadow's is below the main's, and no
   * hop of the last second showed a near-end talker, the suppressor works on the shadow's error instead (channel.ts;
   * default true).
   */
  shadowFrame?: boolean;
  /**
   * With `findJump`: far-end hops after the error rose suddenly from deep cancellation, its estimate no longer matching
   * the microphone, before the jump is searched for over the microphone since then, not waiting for the doubt
   * (echo-presence.ts EARLY_*; default 8; 0: only at the doubt).
   */
  earlyJump?: number;
  /**
   * An early search also looks into the estimate's near future, computed from the reference with the filter's taps
   * (jump-finder.ts `predict`): an echo that jumped earlier is found as soon as one that jumped later (default true).
   */
  earlyFuture?: boolean;
  /** Each channel decides whether its microphone holds any echo, and without one outputs it as it came (echo-presence.ts; default true). */
  presence?: boolean;
}

export interface EchoCancellerStats {
  /** The bulk delay estimate in ms (null before the first confident estimate). */
  delayMs: number | null;
  /** Echo return loss enhancement so far, dB: microphone over output energy while the reference was active. */
  erleDb: number | null;
  /** Whether the reference ever carried signal (before that, the output is the input). */
  referenceActive: boolean;
}

/** Every option but the channels and the presence ones, defaults filled in. */
export type ResolvedOptions = Required<Omit<EchoCancellerOptions, 'channels' | 'presenceRestart'>>;

/** The resolved options every EchoChannel takes as they are (channel.ts ChannelOptions; the rest are per channel). */
const CHANNEL_KEYS = [
  'shadowStep',
  'step',
  'forget',
  'forgetFree',
  'priorDecay',
  'overEstimate',
  'floorDb',
  'linearOnly',
  'betaBias',
  'residualSlope',
  'residualSlopeScale',
  'residualSlopeCorr',
  'overdrive',
  'presence',
  'lostEcho',
  'lostSuppress',
  'delayDoubt',
  'shadowFrame',
  'bins',
  'followGain',
  'earlyJump',
] as const;
export type ChannelShared = Pick<ResolvedOptions, (typeof CHANNEL_KEYS)[number]>;

/** The options of `o` that each channel takes as they are. */
export function channelShared(o: ResolvedOptions): ChannelShared {
  const out: Partial<Record<keyof ChannelShared, unknown>> = {};
  for (const k of CHANNEL_KEYS) out[k] = o[k];
  return out as ChannelShared;
}

export function resolveOptions(opts: EchoCancellerOptions): ResolvedOptions {
  return {
    filterMs: opts.filterMs ?? 282,
    maxDelayMs: opts.maxDelayMs ?? 500,
    step: opts.step ?? 0.5,
    forget: opts.forget ?? 0.99995,
    forgetFree: opts.forgetFree ?? 0.999,
    priorDecay: opts.priorDecay ?? 0.85,
    overEstimate: opts.overEstimate ?? 1,
    floorDb: opts.floorDb ?? -50,
    shadowPartitions: opts.shadowPartitions ?? 16,
    shadowStep: opts.shadowStep ?? 0.25,
    betaBias: opts.betaBias ?? 1,
    residualSlope: opts.residualSlope ?? 250,
    residualSlopeScale: opts.residualSlopeScale ?? 1,
    residualSlopeCorr: opts.residualSlopeCorr ?? 0.35,
    overdrive: opts.overdrive ?? 10,
    linearOnly: opts.linearOnly ?? false,
    terms: opts.terms ?? 511,
    backend: opts.backend ?? 'wasm',
    constrainEvery: opts.constrainEvery ?? 4,
    shadowEvery: opts.shadowEvery ?? 1,
    nonlinear: opts.nonlinear ?? true,
    nlEvery: opts.nlEvery ?? 4,
    clipKnot: !!opts.clipKnot,
    reopen: opts.reopen ?? 'never',
    priorZoneDb: opts.priorZoneDb ?? PRIOR_ZONE_DB,
    delayFromMic: !!(opts.delayFromMic ?? true),
    presence: opts.presence ?? true,
    lostEcho: opts.lostEcho ?? true,
    lostSuppress: opts.lostSuppress ?? true,
    delayDoubt: opts.delayDoubt ?? true,
    findJump: opts.findJump ?? true,
    followGain: opts.followGain ?? true,
    shadowFrame: opts.shadowFrame ?? true,
    earlyJump: opts.earlyJump ?? 8,
    earlyFuture: opts.earlyFuture ?? true,
    delayGuard: opts.delayGuard ?? true,
    bins: Math.min(129, Math.max(4, (Math.ceil(opts.bins ?? 129) + 3) & ~3)),
  };
}
