// Bulk delay between the reference and the microphone, 0 to maxLag hops: the correlation, per candidate lag, of the
// two signals' band envelopes. Each hop, the reference and the microphone give 32 band log-energies (bins 4..99:
// 250 Hz to 6.2 kHz), each minus its slowly tracked mean; for every lag the normalised correlation between the
// microphone's vector now and the reference's `lag` hops ago is averaged over time (about 1.6 s of active hops). The
// echo is where the correlation peaks, when the peak stands clearly above the mean over lags. Envelopes ignore the
// echo path's colouring, level, phase and the loudspeaker's distortion; reverberation smears them, so the peak tends
// to sit 0-3 hops after the direct sound, which the adaptive filter's margin before the estimate absorbs.
// The estimate moves only when another lag has been clearly better for half a second (hysteresis), so the filter is
// not shifted back and forth. The correlation loop (32 bands × up to 64 lags per hop) runs in the canceller's
// arena (kernel.ts).
import { shiftRows, type AecArena, type Slab } from './kernel';

export interface DelayEstimatorOptions {
  /** Largest lag in hops. */
  maxLag: number;
  /** First bin and bins per band (BANDS bands). */
  firstBin: number;
  binsPerBand: number;
}

// Local in the loops (tsc makes a use of the exported constant here a property load of `exports` per iteration).
const NB = 32;
export const BANDS = NB;
/** Averaging of the correlation terms per active hop (time constant 200 hops, 1.6 s). */
const CORR_SMOOTH = 0.005;
/** Averaging of each band's log-energy mean. */
const MEAN_SMOOTH = 0.01;
/** A band's log-energy never goes below this (about 80 dB below a loud frame): silence must not dominate. */
const LOG_FLOOR = Math.log(1e-6);
/** The peak must stand this far above the mean correlation over lags. */
const MIN_CONFIDENCE = 0.15;
/** A new lag must beat the current one by this much, for HOLD active hops in a row (and be 2+ hops away). */
const SWITCH_MARGIN = 0.05;
const HOLD = 60;
/** Active hops before the first estimate is trusted. */
const WARMUP = 125;

export class DelayEstimator {
  private readonly maxLag: number;
  private readonly firstBin: number;
  private readonly binsPerBand: number;
  private readonly arena: AecArena;
  /** The reference's mean-removed band vectors, ring of maxLag + 1, and their squared norms. */
  private readonly refHist: Slab;
  private readonly refNorm: Slab;
  private refHead = 0;
  private readonly refMean = new Float64Array(NB);
  private readonly micMean = new Float64Array(NB);
  private readonly mic: Slab;
  private readonly cxy: Slab;
  private readonly cxx: Slab;
  private cyy = 0;
  /** Normalised correlation per lag, after the last active hop. */
  readonly score: Float64Array;
  private activeHops = 0;
  private candidate = -1;
  private candidateHops = 0;
  private refSeen = false;
  private micSeen = false;
  /** Lag in hops, or -1 before the first confident estimate. */
  lag = -1;
  /** How far the best lag's correlation stood above the mean over lags at the last active hop (echo-presence.ts reads it). */
  confidence = 0;
  /**
   * While set, a lag that beats the current one by SWITCH_MARGIN is taken at once, without waiting HOLD hops: channel 0
   * has found no echo (echo-presence.ts), so the lag held is chance, and an echo appearing must not wait for its
   * correlation to beat chance's for HOLD hops. (Taking the best lag on every hop let it wander between neighbours
   * in double talk: echo-ab's dt-8400 −0.8 dB.)
   */
  follow = false;

  static floats(maxLag: number): number {
    return (maxLag + 1) * (NB + 3) + NB + 16;
  }

  constructor(arena: AecArena, opts: DelayEstimatorOptions) {
    this.arena = arena;
    this.maxLag = opts.maxLag;
    this.firstBin = opts.firstBin;
    this.binsPerBand = opts.binsPerBand;
    this.refHist = arena.alloc((opts.maxLag + 1) * NB);
    this.refNorm = arena.alloc(opts.maxLag + 1);
    this.mic = arena.alloc(NB);
    this.cxy = arena.alloc(opts.maxLag + 1);
    this.cxx = arena.alloc(opts.maxLag + 1);
    this.score = new Float64Array(opts.maxLag + 1);
  }

  /** Mean-removed band log-energies of pow[off..] into out[outOff..]; returns their squared norm. */
  private features(pow: Float32Array | Float64Array, off: number, mean: Float64Array, seen: boolean, out: Float32Array, outOff: number, zero = false): number {
    let b = this.firstBin + off;
    let norm = 0;
    for (let i = 0; i < NB; i++) {
      let s = 0;
      if (!zero) for (let j = 0; j < this.binsPerBand; j++) s += pow[b++];
      // A spectrum of exact zeros is at the floor in every band (log(1e-30) is far below it): no logarithms.
      const e = zero ? LOG_FLOOR : Math.max(Math.log(s + 1e-30), LOG_FLOOR);
      if (!seen) mean[i] = e;
      else mean[i] += MEAN_SMOOTH * (e - mean[i]);
      const v = e - mean[i];
      out[outOff + i] = v;
      norm += v * v;
    }
    return norm;
  }

  /**
   * One hop: the reference's power spectrum (refPow from refOff; `refZero`: all of it exactly 0) and the microphone's (micPow from micOff). The
   * correlations are updated only while the microphone is above its floor (`micActive`) and the reference has carried
   * signal.
   */
  push(refPow: Float32Array, refOff: number, refActive: boolean, micPow: Float64Array, micOff: number, micActive: boolean, refZero = false): void {
    this.refHead = this.refHead === this.maxLag ? 0 : this.refHead + 1;
    const ro = this.refHead * NB;
    if (refActive || this.refSeen) {
      this.refNorm.a[this.refHead] = this.features(refPow, refOff, this.refMean, this.refSeen, this.refHist.a, ro, refZero);
      this.refSeen = true;
    } else {
      this.refHist.a.fill(0, ro, ro + NB);
      this.refNorm.a[this.refHead] = 0;
    }
    if (!micActive || !this.refSeen) return;
    const mm = this.features(micPow, micOff, this.micMean, this.micSeen, this.mic.a, 0);
    this.micSeen = true;
    this.cyy += CORR_SMOOTH * (mm - this.cyy);
    this.arena.corr(this.refHist.at, this.refNorm.at, this.refHead, this.maxLag + 1, this.mic.at, this.cxy.at, this.cxx.at, CORR_SMOOTH);
    this.activeHops++;
    if (this.activeHops < WARMUP) return;
    this.decide();
  }

  /** Forgets the estimate (not the correlations): the next confident lag is taken at once, as the first one is. */
  forget(): void {
    this.lag = -1;
    this.candidate = -1;
    this.candidateHops = 0;
  }

  /**
   * Takes `lag` as the estimate: the canceller found that the echo jumped by `moved` hops (jump-finder.ts). The
   * correlations move with it (what they learnt at the old lag is the same echo, now at the new one); lags that come
   * in start at 0.
   */
  setLag(lag: number, moved: number): void {
    shiftRows(this.cxy.a, moved, this.maxLag + 1, 1);
    shiftRows(this.cxx.a, moved, this.maxLag + 1, 1);
    this.lag = Math.max(0, Math.min(this.maxLag, lag));
    this.candidate = -1;
    this.candidateHops = 0;
  }

  /**
   * Weighs what the correlations learnt so far by k (0..1) against what comes next: the echo's delay may have jumped,
   * and the old lag's correlation, built over seconds, would otherwise hold the estimate for about as long.
   */
  fade(k: number): void {
    const n = this.maxLag + 1;
    const cxy = this.cxy.a;
    const cxx = this.cxx.a;
    for (let l = 0; l < n; l++) {
      cxy[l] *= k;
      cxx[l] *= k;
    }
    this.cyy *= k;
  }

  private decide(): void {
    const s = this.score;
    let best = 0;
    let sum = 0;
    for (let l = 0; l <= this.maxLag; l++) {
      s[l] = this.cxy.a[l] / Math.sqrt(this.cxx.a[l] * this.cyy + 1e-30);
      sum += s[l];
      if (s[l] > s[best]) best = l;
    }
    this.confidence = s[best] - sum / (this.maxLag + 1);
    if (this.confidence < MIN_CONFIDENCE) {
      this.candidateHops = 0;
      return;
    }
    if (this.lag < 0) {
      this.lag = best;
      return;
    }
    if (Math.abs(best - this.lag) >= 2 && s[best] > s[this.lag] + SWITCH_MARGIN) {
      if (this.follow) {
        this.lag = best;
        this.candidateHops = 0;
        return;
      }
      if (Math.abs(best - this.candidate) <= 1) this.candidateHops++;
      else {
        this.candidate = best;
        this.candidateHops = 1;
      }
      if (this.candidateHops >= HOLD) {
        this.lag = best;
        this.candidateHops = 0;
      }
    } else this.candidateHops = 0;
  }
}
