// A near-end talker cue that does not lean on the Kalman filter (terms bit 128): the share of the microphone's energy
// that the reference explains, from smoothed cross-spectra of the microphone with the reference at every lag the ring
// holds (a coherence double-talk detector in the manner of Benesty's normalized cross-correlation and Gänsler's
// coherence detectors). While the filter is young its expected residual Φ is large and the near-end guard's evidence
// against it cannot see a talker (docs/echo.md, "Double talk from the first second"); this can. Its per-lag loop is
// the arena's `tcue` kernel (float32, WebAssembly SIMD or the same loop in JavaScript; docs/echo.md, "The cue's cost").
import type { RowFft } from '../fft-pairs';
import type { AecArena, Slab } from './kernel';
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
/** The bins summed (a multiple of 4: the kernel's lanes; the kernel takes every other bin, CUE_STEP). */
const BINS = Math.ceil((CUE_TO - CUE_FROM) / CUE_STEP);
/** Consecutive lags of the window that counts (96 ms: the echo's direct sound and early reflections). */
const CUE_WINDOW = 12;
/** Far-end hops per update (2: half the cost, and the tuning set's gain the same; every 4th gained less). */
const CUE_EVERY: number = 2;
/** Time constant of the cross-spectra in updates: 1 s (0.5 s read single talk's first seconds lower more often). */
const CUE_HOPS = 125 / CUE_EVERY;

/**
 * The lags the cue reads, of a ring of `capacity` for bulk delays up to `maxLag` hops: windows that start within the
 * delay range (an echo's direct sound comes no later), one lag more for the frames' overlap; not the filter's reach
 * beyond them (a quarter of the ring, and of the cue's cost).
 */
export function cueLagsFor(maxLag: number, capacity: number): number {
  return Math.min(capacity, maxLag + CUE_WINDOW + 1);
}

/** The cue's weight after `hops` far-end hops: 1 while the filter is young, 0 once it has converged. */
export function youngWeight(hops: number): number {
  if (hops <= YOUNG_FULL) return 1;
  return hops >= YOUNG_END ? 0 : (YOUNG_END - hops) / (YOUNG_END - YOUNG_FULL);
}

export class TalkerCue {
  private readonly hop: number;
  private readonly lags: number;
  private readonly arena: AecArena;
  /**
   * In the arena (where the kernel reads them), float32 (the cue is a share of energies thresholded in dB, and float32
   * halves the kernel's memory traffic and doubles its lanes): the summed bins of this update's microphone spectrum;
   * per lag of the ring smoothed X*D (re, im) and |X|² (rows of the summed bins); per lag Σ_k |S_xd|²/S_xx. Taken
   * at the first update, after the canceller is made: outside the ranges its prefetch brings into cache before every
   * chunk (prefetch.ts), which would read the cue's ~60 KB per channel for the whole call, though it stops after 5 s.
   */
  private m: { gRe: Slab; gIm: Slab; cRe: Slab; cIm: Slab; xx: Slab; per: Slab } | null = null;
  /** Per summed bin smoothed |D|². */
  private readonly dd: Float64Array;
  private hops = 0;
  private seen = 0;
  /** The explained share of the microphone's energy, less chance (1: all of it; ≤ 0 or NaN: none, or not measured). */
  explained = NaN;

  /** Floats it takes in the arena. */
  static floats(lags: number): number {
    // Every array rounded up to 4 floats.
    return 2 * BINS + 3 * lags * BINS + lags + 4 * 6;
  }

  constructor(arena: AecArena, hop: number, lags: number) {
    this.hop = hop;
    this.lags = lags;
    this.arena = arena;
    this.dd = new Float64Array(BINS);
  }

  /**
   * One far-end hop: the microphone's previous and current blocks (the frame the ring's reference spectra use) and the
   * ring, whose newest entry is this hop's reference. The lags are the ring's own, not the bulk delay's: the cue does
   * not depend on the delay estimate (a wrong first lock held the echo outside a window that followed it for 1.3 s).
   */
  update(micPrev: Float64Array, d: Float32Array, ring: RefRing, fft: RowFft): void {
    // Every CUE_EVERY-th far-end hop only (the cost), the sums then over frames that overlap less.
    if (this.seen++ % CUE_EVERY !== 0) return;
    const A = this.arena;
    const L = this.lags;
    const m = (this.m ??= { gRe: A.alloc(BINS), gIm: A.alloc(BINS), cRe: A.alloc(L * BINS), cIm: A.alloc(L * BINS), xx: A.alloc(L * BINS), per: A.alloc(L) });
    const R = this.hop;
    // The channel's row FFT (row 0 is free here: the channel writes it whole after; bit-identical to RealFFT).
    fft.reserve(1);
    const f = fft.sig;
    for (let i = 0; i < R; i++) {
      f[i] = micPrev[i];
      f[R + i] = d[i];
    }
    fft.forward(1);
    // A running mean until the time constant, so that the first half second counts.
    this.hops++;
    // (The kernel's weight, in float32: the chance below takes the same.)
    const a = Math.fround(1 / Math.min(this.hops, CUE_HOPS));
    const B = BINS;
    const dRe = fft.re;
    const dIm = fft.im;
    const dd = this.dd;
    let dSum = 0;
    for (let j = 0; j < B; j++) {
      const k = CUE_FROM + j * CUE_STEP;
      const p = dRe[k] * dRe[k] + dIm[k] * dIm[k];
      dd[j] += a * (p - dd[j]);
      dSum += dd[j];
      m.gRe.a[j] = dRe[k];
      m.gIm.a[j] = dIm[k];
    }
    // Per lag and summed bin: the smoothed X*D and |X|², and Σ_k |S_xd|²/S_xx (the kernel: four bins per SIMD
    // operation in WebAssembly; the JavaScript loop rounds as it does, so both back ends give the same sums).
    const head = ring.offset(0) / ring.stride;
    A.tcue(L, head, ring.capacity, ring.re.at, ring.im.at, ring.pow.at, ring.stride, CUE_FROM, m.gRe.at, m.gIm.at, m.cRe.at, m.cIm.at, m.xx.at, m.per.at, B, a);
    const per = m.per.a;
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
