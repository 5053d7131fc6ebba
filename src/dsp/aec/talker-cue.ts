// A near-end talker cue that does not lean on the Kalman filter (terms bit 128): the share of the microphone's energy
// that the reference explains, from smoothed cross-spectra of the microphone with the reference at every lag the ring
// holds (a coherence double-talk detector in the manner of Benesty's normalized cross-correlation and Gänsler's
// coherence detectors). While the filter is young its expected residual Φ is large and the near-end guard's evidence
// against it cannot see a talker (docs/echo.md, "Double talk from the first second"); this can.
import { RealFFT } from '../fft';
import type { RefRing } from './ref-ring';

/** Far-end hops until which the cue counts fully, and after which not at all (linear between). */
export const YOUNG_FULL = 250;
export const YOUNG_END = 625;
/**
 * Bins summed: every other one of 250 Hz–6 kHz (the near-end evidence's range): a share of energies needs a sample of
 * the spectrum, not every bin (every 4th gained a little less on the tuning set), and the lags are the cost.
 */
const CUE_FROM = 4;
const CUE_TO = 100;
const CUE_STEP = 2;
/** Consecutive lags of the window that counts (96 ms: the echo's direct sound and early reflections). */
const CUE_WINDOW = 12;
/** Far-end hops per update (2: half the cost, and the tuning set's gain the same; every 4th gained less). */
const CUE_EVERY: number = 2;
/** Time constant of the cross-spectra in updates: 1 s (0.5 s read single talk's first seconds lower more often). */
const CUE_HOPS = 125 / CUE_EVERY;

/** The cue's weight after `hops` far-end hops: 1 while the filter is young, 0 once it has converged. */
export function youngWeight(hops: number): number {
  if (hops <= YOUNG_FULL) return 1;
  return hops >= YOUNG_END ? 0 : (YOUNG_END - hops) / (YOUNG_END - YOUNG_FULL);
}

export class TalkerCue {
  private readonly hop: number;
  private readonly bins: number;
  private readonly lags: number;
  private readonly fft: RealFFT;
  private readonly frame: Float64Array;
  private readonly dRe: Float64Array;
  private readonly dIm: Float64Array;
  /** Per lag of the ring (rows of the summed bins): smoothed X*D (re, im) and |X|²; per bin smoothed |D|². */
  private readonly cRe: Float64Array;
  private readonly cIm: Float64Array;
  private readonly xx: Float64Array;
  private readonly dd: Float64Array;
  private readonly perLag: Float64Array;
  private hops = 0;
  private seen = 0;
  /** The explained share of the microphone's energy, less chance (1: all of it; ≤ 0 or NaN: none, or not measured). */
  explained = NaN;

  constructor(hop: number, lags: number) {
    this.hop = hop;
    this.lags = lags;
    this.bins = Math.ceil((CUE_TO - CUE_FROM) / CUE_STEP);
    this.fft = new RealFFT(2 * hop);
    this.frame = new Float64Array(2 * hop);
    this.dRe = new Float64Array(hop + 1);
    this.dIm = new Float64Array(hop + 1);
    const n = lags * this.bins;
    this.cRe = new Float64Array(n);
    this.cIm = new Float64Array(n);
    this.xx = new Float64Array(n);
    this.dd = new Float64Array(this.bins);
    this.perLag = new Float64Array(lags);
  }

  /**
   * One far-end hop: the microphone's previous and current blocks (the frame the ring's reference spectra use) and the
   * ring, whose newest entry is this hop's reference. The lags are the ring's own, not the bulk delay's: the cue does
   * not depend on the delay estimate (a wrong first lock held the echo outside a window that followed it for 1.3 s).
   */
  update(micPrev: Float64Array, d: Float32Array, ring: RefRing): void {
    // Every CUE_EVERY-th far-end hop only (the cost), the sums then over frames that overlap less.
    if (this.seen++ % CUE_EVERY !== 0) return;
    const R = this.hop;
    const f = this.frame;
    for (let i = 0; i < R; i++) {
      f[i] = micPrev[i];
      f[R + i] = d[i];
    }
    this.fft.forward(f, 0, this.dRe, this.dIm);
    // A running mean until the time constant, so that the first half second counts.
    this.hops++;
    const a = 1 / Math.min(this.hops, CUE_HOPS);
    const B = this.bins;
    const dRe = this.dRe;
    const dIm = this.dIm;
    const dd = this.dd;
    let dSum = 0;
    for (let j = 0; j < B; j++) {
      const k = CUE_FROM + j * CUE_STEP;
      const p = dRe[k] * dRe[k] + dIm[k] * dIm[k];
      dd[j] += a * (p - dd[j]);
      dSum += dd[j];
    }
    const rRe = ring.re.a;
    const rIm = ring.im.a;
    const rPow = ring.pow.a;
    const cRe = this.cRe;
    const cIm = this.cIm;
    const xx = this.xx;
    const per = this.perLag;
    const L = this.lags;
    for (let l = 0; l < L; l++) {
      let num = 0;
      const o = ring.offset(l);
      const row = l * B;
      for (let j = 0; j < B; j++) {
        const k = CUE_FROM + j * CUE_STEP;
        const xr = rRe[o + k];
        const xi = rIm[o + k];
        // X* D
        const re = xr * dRe[k] + xi * dIm[k];
        const im = xr * dIm[k] - xi * dRe[k];
        const i = row + j;
        const cr = cRe[i] + a * (re - cRe[i]);
        const ci = cIm[i] + a * (im - cIm[i]);
        const x = xx[i] + a * (rPow[o + k] - xx[i]);
        cRe[i] = cr;
        cIm[i] = ci;
        xx[i] = x;
        if (x > 0) num += (cr * cr + ci * ci) / x;
      }
      per[l] = num;
    }
    // The window of CUE_WINDOW consecutive lags that explains most: a sum over more lags counts the same echo again at
    // every lag whose reference spectra correlate with their neighbours' (36 lags read single talk 1–6 dB above 1).
    const W = Math.min(CUE_WINDOW, L);
    let win = 0;
    for (let l = 0; l < W; l++) win += per[l];
    let num = win;
    for (let l = W; l < L; l++) {
      win += per[l] - per[l - W];
      if (win > num) num = win;
    }
    // What chance gives each lag: an exponentially smoothed cross-spectrum of independent signals has E|C|² = χ·Sxx·Sdd
    // with χ = a/(2 − a), counted 1.5 times where consecutive frames share half their samples (prior-scale.ts; updated
    // every other hop they share none).
    const chance = ((CUE_EVERY === 1 ? 1.5 : 1) * a) / (2 - a);
    this.explained = dSum > 0 ? num / dSum - chance * W : NaN;
  }
}
