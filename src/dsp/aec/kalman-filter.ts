// The linear echo canceller's adaptive filter: a partitioned-block frequency-domain Kalman filter (PBFDKF) in its
// diagonal form (Enzner & Vary 2006, "Frequency-domain adaptive Kalman filter for acoustic echo control in hands-free
// telephones", Signal Processing 86(6); partitioned: Kuech, Mabande & Enzner 2014, "State-space architecture of the
// partitioned-block-based acoustic echo controller", ICASSP). Every bin k of every partition p has a coefficient
// W_p(k) and a state-error variance P_p(k); the reference spectra come from a shared ring (ref-ring.ts).
//
// Per block (R new samples, FFT size M = 2R, overlap-save):
//   echo estimate   Ŷ = Σ_p X_p W_p, ŷ = last R samples of IFFT(Ŷ), e = d − ŷ, E = FFT([0_R, e])
//   residual echo   Φ(k) = (R/M) Σ_p |X_p|² P_p                  (expected |E|² from the filter's own uncertainty)
//   Kalman gain     K_p = μ P_p X_p* / (Φ + Ψ_S)                 (Ψ_S: the near-end and noise power in E, estimated)
//   update          W_p += K_p E,  P_p ← A² (1 − μ (R/M) |X_p|² P_p / (Φ + Ψ_S)) P_p + (1 − A²) |W_p|²
// The filter is unconstrained (each partition's 2R-point spectrum is free) except for one partition per hop in turn
// (constrainNext). Echo path changes are caught by the shadow filter (shadow-filter.ts), which then hands over.
import type { RowFft } from '../fft-pairs';
import type { RealFFT } from '../fft';
import type { AecArena, Slab } from './kernel';
import type { RefRing } from './ref-ring';

/** A bulk-delay move of this many partitions or more may reopen the filter's uncertainty (shift()). */
const BIG_SHIFT = 6;

export interface KalmanOptions {
  /** Block length R (the hop); the FFT is 2R. */
  block: number;
  /** Partitions: the filter covers partitions × block samples after the bulk delay. */
  partitions: number;
  /** Step size μ (1 = the Kalman gain itself). */
  step: number;
  /** A² of the random-walk state model: how fast the filter forgets (closer to 1: slower, quieter). */
  forget: number;
  /**
   * Decay of the initial state-error variance over the partitions, per partition (1: flat). A room's impulse
   * response decays exponentially, so starting with variances that decay alike puts the first steps where the echo
   * is (Makino, Kaneda & Koizumi 1993, "Exponentially weighted stepsize NLMS adaptive filter based on the statistics
   * of a room impulse response", IEEE TSAP 1(1)).
   */
  priorDecay: number;
  /** Bins the filter covers, the lowest (default block + 1: all; fewer where the input's band is limited, options.ts). */
  bins?: number;
}

export class PartitionedKalmanFilter {
  readonly bins: number;
  readonly stride: number;
  readonly partitions: number;
  private readonly block: number;
  private readonly step: number;
  private readonly forget: number;
  private readonly arena: AecArena;
  /** Coefficients and state-error variances, partition-major rows of `stride`: index p * stride + k. */
  readonly wRe: Slab;
  readonly wIm: Slab;
  readonly pVar: Slab;
  /** Residual echo power the filter expects in E (Φ), per bin, from the last filter() call (R/M applied). */
  readonly phi: Slab;
  /** The echo estimate's spectrum from the last filter() call. */
  readonly yRe: Slab;
  readonly yIm: Slab;
  /** μ / (Φ + Ψ_S) per bin, for the kernel; the ring offsets of the partitions' spectra. */
  private readonly inv: Slab;
  private readonly offs: Slab;
  /** The error spectrum E for update(), written by the caller. */
  readonly eRe: Slab;
  readonly eIm: Slab;
  /** Initial state-error variance per partition. */
  private readonly pInit: Float64Array;
  private nextConstrained = 0;

  static floats(block: number, partitions: number): number {
    const stride = (block + 4) & ~3;
    return 3 * stride * partitions + 7 * stride + partitions + 4;
  }

  constructor(arena: AecArena, opts: KalmanOptions) {
    this.arena = arena;
    this.block = opts.block;
    this.bins = Math.min(opts.block + 1, opts.bins ?? opts.block + 1);
    this.stride = (this.bins + 3) & ~3;
    this.partitions = opts.partitions;
    this.step = opts.step;
    this.forget = opts.forget;
    const n = this.stride * this.partitions;
    this.wRe = arena.alloc(n);
    this.wIm = arena.alloc(n);
    this.pVar = arena.alloc(n);
    this.phi = arena.alloc(this.stride);
    this.yRe = arena.alloc(this.stride);
    this.yIm = arena.alloc(this.stride);
    this.inv = arena.alloc(this.stride);
    this.eRe = arena.alloc(this.stride);
    this.eIm = arena.alloc(this.stride);
    this.offs = arena.alloc(this.partitions);
    this.pInit = new Float64Array(this.partitions);
    for (let p = 0; p < this.partitions; p++) {
      this.pInit[p] = Math.pow(opts.priorDecay, p);
      this.pVar.a.fill(this.pInit[p], p * this.stride, p * this.stride + this.bins);
    }
  }

  private setOffsets(ring: RefRing, lag: number): void {
    const i32 = this.arena.i32;
    for (let p = 0; p < this.partitions; p++) i32[this.offs.at + p] = ring.offset(lag + p);
  }

  /** Ŷ = Σ_p X_{newest − lag − p} W_p and Φ. */
  filter(ring: RefRing, lag: number): void {
    this.setOffsets(ring, lag);
    this.arena.filter(this.partitions, this.offs.at, ring.re.at, ring.im.at, ring.pow.at, this.wRe.at, this.wIm.at, this.pVar.at, this.yRe.at, this.yIm.at, this.phi.at, this.stride);
    const phi = this.phi.a;
    for (let k = 0; k < this.bins; k++) phi[k] *= 0.5; // R / M
  }

  /** What filter() gives when every spectrum it would read is exactly 0: Ŷ = 0 and Φ = 0 (the update never follows it). */
  silence(): void {
    this.yRe.a.fill(0);
    this.yIm.a.fill(0);
    this.phi.a.fill(0);
  }

  /**
   * One update with the error spectrum E = FFT([0_R, e]) in eRe/eIm; `psiS`: the estimated near-end power in E, per
   * bin; `a2` this hop's A² (the channel's forgetNow()). Uses the offsets of the last filter() call (same lag).
   */
  update(ring: RefRing, psiS: Float64Array, a2 = this.forget): void {
    const inv = this.inv.a;
    const phi = this.phi.a;
    for (let k = 0; k < this.bins; k++) inv[k] = this.step / (phi[k] + psiS[k] + 1e-20);
    this.arena.update(this.partitions, this.offs.at, ring.re.at, ring.im.at, ring.pow.at, this.wRe.at, this.wIm.at, this.pVar.at, this.inv.at, this.eRe.at, this.eIm.at, a2, 1 - a2, this.stride);
  }

  /**
   * Moves the impulse response `s` samples later (earlier where negative) in the window: the echo's delay jumped by
   * that much beyond the bulk move (jump-finder.ts). Each partition's taps are the first half of its inverse FFT (the
   * second half, the unconstrained wrap-around, is dropped: the constraint on every partition at once); taps moved past
   * either end are lost. The variances stay: the coefficients are as good as they were, where they now are.
   */
  moveSamples(s: number, fft: RealFFT): void {
    const R = this.block;
    const P = this.partitions;
    const S = this.stride;
    const h = this.impulse(fft);
    const re = new Float64Array(R + 1);
    const im = new Float64Array(R + 1);
    const t = new Float64Array(2 * R);
    const wRe = this.wRe.a;
    const wIm = this.wIm.a;
    for (let p = 0; p < P; p++) {
      t.fill(0);
      for (let i = 0; i < R; i++) {
        const n = p * R + i - s;
        t[i] = n >= 0 && n < P * R ? h[n] : 0;
      }
      fft.forward(t, 0, re, im);
      for (let k = 0; k < this.bins; k++) {
        wRe[p * S + k] = re[k];
        wIm[p * S + k] = im[k];
      }
    }
  }

  /**
   * The filter's impulse response, P × R taps: each partition's first half of its inverse FFT (the unconstrained
   * wrap-around dropped). The echo estimate is ŷ(t) = Σ_k h[k] x(t − lag·R − k) over the loudspeaker model's reference x.
   */
  impulse(fft: RealFFT): Float64Array {
    const R = this.block;
    const P = this.partitions;
    const S = this.stride;
    const re = new Float64Array(R + 1);
    const im = new Float64Array(R + 1);
    const t = new Float64Array(2 * R);
    const h = new Float64Array(P * R);
    const wRe = this.wRe.a;
    const wIm = this.wIm.a;
    for (let p = 0; p < P; p++) {
      re.fill(0);
      im.fill(0);
      for (let k = 0; k < this.bins; k++) {
        re[k] = wRe[p * S + k];
        im[k] = wIm[p * S + k];
      }
      fft.inverse(re, im, 0, t, 0);
      for (let i = 0; i < R; i++) h[p * R + i] = t[i];
    }
    return h;
  }

  /** Multiplies every coefficient by g: the echo path's gain changed by g (echo-presence.ts, `followGain`). */
  scale(g: number): void {
    const re = this.wRe.a;
    const im = this.wIm.a;
    for (let i = 0; i < re.length; i++) {
      re[i] *= g;
      im[i] *= g;
    }
  }

  /** Multiplies the prior and every variance by f: the echo path's gain is larger than the prior assumed (prior-scale.ts). */
  scalePrior(f: number): void {
    for (let p = 0; p < this.partitions; p++) this.pInit[p] *= f;
    const pv = this.pVar.a;
    for (let i = 0; i < pv.length; i++) pv[i] *= f;
  }

  /**
   * Takes the first partitions' coefficients from the shadow filter and restarts the uncertainty (every partition's
   * variance at least its prior): the echo path changed, so what the filter was sure of is wrong.
   */
  adopt(re: Float32Array, im: Float32Array, partitions: number): void {
    const n = partitions * this.stride;
    this.wRe.a.set(re.subarray(0, n));
    this.wIm.a.set(im.subarray(0, n));
    this.reopen();
  }

  /** Back to the start: no coefficients, the prior's variances (the channel found no echo: echo-presence.ts). */
  reset(): void {
    this.wRe.a.fill(0);
    this.wIm.a.fill(0);
    const S = this.stride;
    for (let p = 0; p < this.partitions; p++) this.pVar.a.fill(this.pInit[p], p * S, p * S + this.bins);
  }

  /** Every variance at least its partition's prior: what the filter was sure of is not to be trusted (any more). */
  reopen(): void {
    const S = this.stride;
    const pv = this.pVar.a;
    for (let p = 0; p < this.partitions; p++) {
      const v = this.pInit[p];
      for (let k = p * S; k < p * S + this.bins; k++) if (pv[k] < v) pv[k] = v;
    }
  }

  /**
   * The gradient constraint, on one partition per call in turn (as speexdsp's MDF does): the update above is
   * unconstrained, so a partition's impulse response grows taps in its second half (circular wrap-around); zeroing
   * them now and then keeps the filter a linear convolution at the cost of 2 FFTs per call instead of 2 per partition.
   */
  constrainNext(fft: RowFft): void {
    const K = this.bins;
    const R = this.block;
    const o = this.nextConstrained * this.stride;
    const re = this.wRe.a;
    const im = this.wIm.a;
    fft.reserve(1);
    const fr = fft.re;
    const fi = fft.im;
    for (let k = 0; k < K; k++) {
      fr[k] = re[o + k];
      fi[k] = im[o + k];
    }
    // Bins above a limited band are 0 (the filter has none there).
    if (K < R + 1) {
      fr.fill(0, K, R + 1);
      fi.fill(0, K, R + 1);
    }
    fft.inverse(1);
    fft.sig.fill(0, R, 2 * R);
    fft.forward(1);
    for (let k = 0; k < K; k++) {
      re[o + k] = fr[k];
      im[o + k] = fi[k];
    }
    this.nextConstrained = this.nextConstrained + 1 === this.partitions ? 0 : this.nextConstrained + 1;
  }

  /**
   * Moves the coefficients by `shift` partitions (positive: toward later partitions), for a new bulk delay; with
   * `reopen`, a move of BIG_SHIFT or more also raises every variance to at least its new position's prior.
   */
  shift(shift: number, reopen = false): void {
    const S = this.stride;
    const P = this.partitions;
    const s = Math.max(-P, Math.min(P, shift));
    for (const a of [this.wRe.a, this.wIm.a, this.pVar.a]) {
      if (s > 0) a.copyWithin(s * S, 0, (P - s) * S);
      else a.copyWithin(0, -s * S, P * S);
    }
    // Partitions that came in fresh: no coefficients, the prior's variance.
    const fresh = s > 0 ? [0, s] : [P + s, P];
    for (let p = fresh[0]; p < fresh[1]; p++) {
      this.wRe.a.fill(0, p * S, (p + 1) * S);
      this.wIm.a.fill(0, p * S, (p + 1) * S);
      this.pVar.a.fill(this.pInit[p], p * S, p * S + this.bins);
    }
    // After a large move (the first delay estimate), the others at least their new position's prior: coefficients
    // learnt where the prior was small (the far end of the filter, before the delay was known) are no surer for having
    // moved to where the echo is. A correction of a few hops keeps what the filter knows (raising the uncertainty
    // then made it follow the near-end talker in double talk).
    if (reopen && Math.abs(s) >= BIG_SHIFT) this.reopen();
  }
}
