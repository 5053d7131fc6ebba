// Evidence of a near-end talker, for the suppressor's overdrive (suppressor.ts). Overdrive raises the residual echo
// estimate up to 10× on hops whose error is within a few times that estimate: in far-end single talk that takes the
// echo from ~30 to ~40 dB of ERLE, but in double talk it also takes the near end's quieter parts (onsets, word ends,
// the upper bands), which lie within a few times the estimate as well. Per hop the two look alike (the error over the
// estimate bursts in single talk too); energies summed over seconds do not (docs/echo.md, "The near end in double
// talk"): over 250 Hz–6 kHz the error's energy stays ~20 dB under the echo estimate's in single talk and within ~6 dB
// of it or above with a near-end talker; against the suppressor's residual estimate it stays 3 dB or more under it in
// single talk, after an echo path change (the Kalman filter's Φ is large there) and while the filter first converges,
// while a near-end talker takes it above. Where
// both sums say near end, and a hop within the last quarter second had the error above both estimates (the talker is
// there now, not only in the sums), overdrive is not applied; between the sums' thresholds it is scaled linearly in dB.
// The suppressor's hold (terms bit 64) follows the same share, and sums the residual estimate for this evidence as it
// is without the hold, so the hold does not feed the evidence.

/** Time constant of the summed energies, hops (300: 2.4 s). */
const HOPS = 300;
/** Σ|E|² / Σ|Ŷ|² (dB): full overdrive at or below LO, none at or above HI. */
const ECHO_LO_DB = -12;
const ECHO_HI_DB = -6;
const ECHO_HI = Math.pow(10, ECHO_HI_DB / 10);
/** Σ|E|² / Σ residual estimate (dB): full overdrive at or below LO, none at or above HI. */
const RESID_LO_DB = -3;
const RESID_HI_DB = 3;
/**
 * Hops (1 s) the summed error must have stood at ECHO_HI_DB of the echo estimate or above, hop after hop, before a hop
 * that shows the talker reads as a clear talker, share 0 (terms bit 256: no overdrive, and the suppressor's hold and the
 * lost-echo cap's weight as for any clear talker): the sums' verdict, a talker, over the residual test's,
 * which a large Φ (a filter that never saw single talk, a reverberant room) holds at "echo" in double talk (docs/echo.md,
 * "A talker the residual estimate hides"). Right after a path change the same sums rise too, but for under a second.
 */
const SUSTAINED_HOPS = 125;
/** The talker cue's weight (talker-cue.ts youngWeight: 1 until 2 s of far end, 0 from 5 s) at or below which it applies. */
const SUSTAINED_CUE = 0.5;
/** A hop shows the talker where its error exceeds twice the residual estimate and the echo estimate; held this many hops (250 ms). */
const NOW_OVER_RESID = 2;
const HOLD_HOPS = 31;
/** The bins summed: 250 Hz–6 kHz at 16 kHz (the suppressor's echo-dominance range). */
export const EVIDENCE_FROM = 4;
export const EVIDENCE_TO = 100;

/** The talker cue (terms bit 128, talker-cue.ts): the explained share (dB) at or above HI says no talker, at or below LO a talker. */
const CUE_LO_DB = -3;
const CUE_HI_DB = 1;
/** While the cue counts, a hop also shows the talker where its error exceeds this times the echo estimate. */
const NOW_OVER_ECHO = 2;

export class NearEndEvidence {
  private e = 0;
  private y = 0;
  private r = 0;
  /** Consecutive hops whose sums stood at ECHO_HI_DB of the echo estimate or above. */
  private talkerRun = 0;
  /** Whether a sustained verdict of the sums takes the overdrive away (terms bit 256; set with the suppressor's terms). */
  sustained = false;
  /** Hops since the error last stood above both estimates (large: never). */
  private since = HOLD_HOPS + 1;
  /** Hops since a hop last showed the talker (its error above both estimates); the channel's forgetting reads it. */
  get sinceTalker(): number {
    return this.since;
  }

  /** The cue's share (1: no talker) weighted by how young the filter is; 1 where it does not count. */
  private cueShare = 1;
  private cueWeight = 0;

  /**
   * The talker cue of this hop: the microphone's explained share and its weight (0: none). A share of 0 or less (chance
   * over-subtracted, mostly in the cue's first hops) or NaN counts as no measurement, as tuned.
   */
  cue(explained: number, weight: number): void {
    this.cueWeight = weight;
    const f = explained > 0 ? ramp(10 * Math.log10(explained) - CUE_LO_DB, CUE_HI_DB - CUE_LO_DB) : 1;
    this.cueShare = weight > 0 ? 1 - weight * (1 - f) : 1;
  }

  /** The share of the overdrive to apply this hop: 1 without evidence of a near-end talker, 0 with clear evidence. */
  share(): number {
    // Nothing summed yet, or no talker in the last quarter second: no evidence.
    if (this.since > HOLD_HOPS || !(this.y > 0) || !(this.r > 0)) return 1;
    // Not while the cue counts much (the first 3.5 s of far end): a young filter's error stands near its estimate in
    // single talk too, the sums remember that for seconds after it converged, and the overdrive is what keeps the first
    // seconds' echo down (AECMOS's echo score in single talk −0.15 with the rule from the first second, −0.11 from 2 s).
    if (this.sustained && this.cueWeight <= SUSTAINED_CUE && this.talkerRun >= SUSTAINED_HOPS) return 0;
    const fy = ramp(ECHO_HI_DB - 10 * Math.log10(this.e / this.y), ECHO_HI_DB - ECHO_LO_DB);
    if (fy >= 1) return 1;
    let fr = ramp(RESID_HI_DB - 10 * Math.log10(this.e / this.r), RESID_HI_DB - RESID_LO_DB);
    // While the filter is young Φ, and with it the residual estimate, is large: the cue may say "talker" instead.
    if (this.cueShare < fr) fr = this.cueShare;
    return fr > fy ? fr : fy;
  }

  /** After the suppressor's hop: |E|², the echo estimate's power and the residual estimate (before overdrive), per bin. */
  update(ePow: Float64Array, yPow: Float64Array, resid: Float64Array): void {
    let e = 0;
    let y = 0;
    let r = 0;
    for (let k = EVIDENCE_FROM; k < EVIDENCE_TO; k++) {
      e += ePow[k];
      y += yPow[k];
      r += resid[k];
    }
    const now = e > y && (e > NOW_OVER_RESID * r || (this.cueWeight > 0 && e > NOW_OVER_ECHO * y));
    this.since = now ? 0 : this.since + 1;
    const a = 1 / HOPS;
    this.e += a * (e - this.e);
    this.y += a * (y - this.y);
    this.r += a * (r - this.r);
    this.talkerRun = this.e >= ECHO_HI * this.y && this.y > 0 ? this.talkerRun + 1 : 0;
  }
}

/** x / span clamped to [0, 1]; NaN counts as no evidence, 1. */
function ramp(x: number, span: number): number {
  const v = x / span;
  if (v >= 1 || v !== v) return 1;
  return v > 0 ? v : 0;
}
