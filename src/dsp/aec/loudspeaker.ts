// The loudspeaker's distortion as a Hammerstein model: what the loudspeaker radiates is taken to be
// x_eff = x + Σ_j c_j φ_j(x), a memoryless nonlinearity of the reference, and the room is the linear filter that the
// Kalman filter learns on x_eff instead of x (the canceller's ring holds x_eff's spectra). The basis is piecewise
// linear in x with breakpoints at 1/8, 1/4 and 1/2 of a unit u: |x|, and per breakpoint t an even hinge
// (max(x − tu, 0) − min(x + tu, 0)) and an odd one (max(x − tu, 0) + min(x + tu, 0)) minus its projection on x (the
// linear filter owns the linear part; without it the two learners trade the same component back and forth). u is
// the power of two at or above the reference's peak: a distortion sits at a fixed level of the digital reference (the
// amplifier's), so breakpoints must not wander with the talker's level; when u moves by an octave the breakpoints map
// onto each other and the coefficients move with them. Fitted offline on speech (docs/echo.md) this basis spans hard
// clipping at 35–80 % of the peak, the AEC challenge's asymmetric sigmoid and soft clipping to 32–50 dB.
//
// The coefficients are the least-squares fit of the echo on the basis passed through the learned room, without
// filtering every basis through the room: the error of the last P hops is propagated back through the filter to the
// reference frame they all saw (Z = Σ_p conj(W_p) E_{f+p}: the gradient of the error energy with respect to that
// frame of x_eff, one pass over the partitions; nl-learner.ts) and correlated in the time domain with each basis
// function of that frame. The Gram matrix of the filtered basis comes from the basis frames' spectra weighted by the
// filter's power response per bin (exact up to the cross-terms between partitions). The normal equations accumulate
// the back-propagated error plus what the model explained when that frame was distorted (the coefficients of each
// block are kept: using today's instead made the loop overshoot); exponentially weighted (~4 s), ridge-regularised
// toward 0 by the error power over a prior variance (a basis that explains little stays off), solved by Cholesky
// (7 × 7) at every learning step. Shared by all microphone channels (the loudspeaker is one), learned on channel 0.

import { RealFFT } from '../fft';

const THRESHOLDS = [0.125, 0.25, 0.5];
export const NL_BASES = 1 + 2 * THRESHOLDS.length;
/** Per-learning-step forgetting of the statistics (at 62.5 steps/s: about 4 s). */
const FORGET = 0.996;
/** Prior standard deviation of a coefficient: the ridge is σ²_e / PRIOR². */
const PRIOR = 0.1;
const C_MAX = 4;
/** The peak's release per hop: −6 dB in about 20 s. */
const PEAK_RELEASE = Math.pow(0.5, 1 / 2500);
const ORTHO_SMOOTH = 0.995;

export class LoudspeakerModel {
  readonly J = NL_BASES;
  readonly c = new Float64Array(NL_BASES);
  private readonly R: number;
  private readonly cap: number;
  /** The raw reference blocks (ring of cap blocks) and the unit each was distorted with. */
  private readonly hist: Float64Array;
  private readonly unit: Float64Array;
  /** The coefficients each block was distorted with (the errors learned from were made with them). */
  private readonly cHist: Float64Array;
  private head = 0;
  /** The reference's peak (slow release) and the unit the breakpoints are fractions of: a power of two. */
  private peak = 0;
  private u = 0;
  /** Odd bases' projection on x: Σ x φ_odd and Σ x², smoothed. */
  private readonly xo = new Float64Array(THRESHOLDS.length);
  private xx = 0;
  private readonly proj = new Float64Array(THRESHOLDS.length);
  private readonly G = new Float64Array(NL_BASES * NL_BASES);
  private readonly b = new Float64Array(NL_BASES);
  private readonly A = new Float64Array(NL_BASES * NL_BASES);
  private readonly sol = new Float64Array(NL_BASES);
  private readonly phi: Float64Array[];
  private readonly g = new Float64Array(NL_BASES);
  /** The basis frames' spectra. */
  private readonly fft: RealFFT;
  private readonly fRe: Float64Array[];
  private readonly fIm: Float64Array[];
  private readonly inc = new Float64Array(NL_BASES * NL_BASES);
  /** Learning steps taken (the model applies its coefficients once it has some). */
  steps = 0;

  /** `hop` R samples per block; `blocks` the history kept (the oldest frame learn() may ask for, plus 2). */
  constructor(hop: number, blocks: number) {
    this.R = hop;
    this.cap = blocks;
    this.hist = new Float64Array(hop * blocks);
    this.unit = new Float64Array(blocks);
    this.cHist = new Float64Array(blocks * NL_BASES);
    this.phi = Array.from({ length: NL_BASES }, () => new Float64Array(2 * hop));
    this.fft = new RealFFT(2 * hop);
    this.fRe = Array.from({ length: NL_BASES }, () => new Float64Array(hop + 1));
    this.fIm = Array.from({ length: NL_BASES }, () => new Float64Array(hop + 1));
  }

  /**
   * The unit moved by octaves: breakpoint t at the new unit is breakpoint t ± s at the old one, so coefficients,
   * projections and statistics move with it (the ones that fall off are dropped, new ones start at 0). Learning
   * waits until the frames in flight were all made with the new unit.
   */
  private rescale(u: number): void {
    const T = THRESHOLDS.length;
    const s = this.u === 0 ? T : Math.round(Math.log2(u / this.u));
    this.u = u;
    // Index map: new basis j ← old basis from(j) (−1: fresh).
    const from = new Int32Array(this.J);
    from[0] = 0;
    for (let t = 0; t < T; t++) {
      const o = t + s;
      from[1 + 2 * t] = o >= 0 && o < T ? 1 + 2 * o : -1;
      from[2 + 2 * t] = o >= 0 && o < T ? 2 + 2 * o : -1;
    }
    const J = this.J;
    const c = Float64Array.from(this.c);
    const b = Float64Array.from(this.b);
    const G = Float64Array.from(this.G);
    const xo = Float64Array.from(this.xo);
    for (let j = 0; j < J; j++) {
      const fj = from[j];
      this.c[j] = fj < 0 ? 0 : c[fj];
      this.b[j] = fj < 0 ? 0 : b[fj];
      for (let l = 0; l < J; l++) {
        const fl = from[l];
        this.G[j * J + l] = fj < 0 || fl < 0 ? 0 : G[fj * J + fl];
      }
    }
    for (let t = 0; t < T; t++) {
      const o = t + s;
      this.xo[t] = o >= 0 && o < T ? xo[o] : 0;
    }
  }

  /** Stores the reference block x and writes x_eff = x + Σ c_j φ_j(x) to out. */
  distort(x: Float32Array, out: Float64Array): void {
    const R = this.R;
    let pk = 0;
    for (let i = 0; i < R; i++) {
      const a = x[i] < 0 ? -x[i] : x[i];
      if (a > pk) pk = a;
    }
    this.peak = Math.max(pk, this.peak * PEAK_RELEASE);
    if (this.peak > 1e-4) {
      // The unit: the power of two at or above the peak; down an octave only 3 dB below its lower edge.
      let u = this.u === 0 ? Math.pow(2, Math.ceil(Math.log2(this.peak))) : this.u;
      while (this.peak > u) u *= 2;
      while (this.peak < 0.35 * u) u /= 2;
      if (u !== this.u) this.rescale(u);
    }
    const u = this.u;
    this.head = this.head + 1 === this.cap ? 0 : this.head + 1;
    const h = this.head * R;
    for (let i = 0; i < R; i++) this.hist[h + i] = x[i];
    this.unit[this.head] = u;
    this.cHist.set(this.c, this.head * NL_BASES);
    // The odd hinges' projection on x, from this block.
    if (u > 0) {
      let xx = 0;
      for (let i = 0; i < R; i++) xx += x[i] * x[i];
      this.xx = ORTHO_SMOOTH * this.xx + xx;
      for (let t = 0; t < THRESHOLDS.length; t++) {
        const th = THRESHOLDS[t] * u;
        let xo = 0;
        for (let i = 0; i < R; i++) {
          const v = x[i];
          if (v > th) xo += v * (v - th);
          else if (v < -th) xo += v * (v + th);
        }
        this.xo[t] = ORTHO_SMOOTH * this.xo[t] + xo;
        this.proj[t] = this.xx > 0 ? this.xo[t] / this.xx : 0;
      }
    }
    const c = this.c;
    if (this.steps === 0 || u === 0) {
      for (let i = 0; i < R; i++) out[i] = x[i];
      return;
    }
    // Σ_j c_j φ_j(v) = c0 |v| + Σ_t [c_even (hp − hn) + c_odd (hp + hn − a_t v)], folded per sample.
    let lin = 1;
    for (let t = 0; t < THRESHOLDS.length; t++) lin -= c[2 + 2 * t] * this.proj[t];
    for (let i = 0; i < R; i++) {
      const v = x[i];
      const av = v < 0 ? -v : v;
      let y = lin * v + c[0] * av;
      for (let t = 0; t < THRESHOLDS.length; t++) {
        const th = THRESHOLDS[t] * u;
        if (av > th) {
          // hp − hn = |v| − th, hp + hn = v ∓ th (sign of v).
          const d = av - th;
          y += c[1 + 2 * t] * d + c[2 + 2 * t] * (v > 0 ? d : -d);
        }
      }
      out[i] = y;
    }
  }

  /** The basis of the frame whose second block is `back` blocks before the newest: 2R samples per function. */
  private frameBasis(back: number): void {
    const R = this.R;
    for (let half = 0; half < 2; half++) {
      let b = this.head - back - 1 + half;
      while (b < 0) b += this.cap;
      const u = this.unit[b];
      const h = b * R;
      const o = half * R;
      for (let i = 0; i < R; i++) {
        const v = this.hist[h + i];
        const av = v < 0 ? -v : v;
        this.phi[0][o + i] = av;
        for (let t = 0; t < THRESHOLDS.length; t++) {
          const d = av > THRESHOLDS[t] * u ? av - THRESHOLDS[t] * u : 0;
          this.phi[1 + 2 * t][o + i] = d;
          this.phi[2 + 2 * t][o + i] = (v > 0 ? d : -d) - this.proj[t] * v;
        }
      }
    }
  }

  /**
   * One learning step: z (2R samples) is the error of the last hops propagated back to the reference frame `back`
   * blocks before the newest (its second block), already weighted per hop; `weight` the mean of those weights,
   * `power` the filter's mean power response Σ_p |W_p|² over the bins, `noise` the error power per sample.
   */
  learn(back: number, z: Float64Array, weight: number, power: Float64Array, noise: number, decay: number): void {
    if (back + 2 > this.cap) return;
    const f = (this.head - back + this.cap) % this.cap;
    if (this.unit[f] !== this.u || this.unit[(f - 1 + this.cap) % this.cap] !== this.u) return;
    this.frameBasis(back);
    const J = this.J;
    const n = 2 * this.R;
    const phi = this.phi;
    const G = this.G;
    const b = this.b;
    for (let i = 0; i < J * J; i++) G[i] *= decay;
    for (let j = 0; j < J; j++) b[j] *= decay;
    const g = this.g;
    for (let j = 0; j < J; j++) {
      const pj = phi[j];
      let s = 0;
      for (let i = 0; i < n; i++) s += pj[i] * z[i];
      g[j] = s;
    }
    // The Gram matrix of the filtered basis: ½ (1/M) Σ_k m_k S(k) Re(Φ_j Φ_l*) over the frame's spectra, S the
    // filter's power response per bin (m_k: 2 for the bins that stand for two of the full spectrum).
    const K = this.R + 1;
    for (let j = 0; j < J; j++) this.fft.forward(phi[j], 0, this.fRe[j], this.fIm[j], 0);
    const sc = (0.5 / n) * weight;
    for (let j = 0; j < J; j++) {
      const ar = this.fRe[j];
      const ai = this.fIm[j];
      for (let l = j; l < J; l++) {
        const br = this.fRe[l];
        const bi = this.fIm[l];
        let acc = 0.5 * (power[0] * (ar[0] * br[0]) + power[K - 1] * (ar[K - 1] * br[K - 1]));
        for (let k = 1; k < K - 1; k++) acc += power[k] * (ar[k] * br[k] + ai[k] * bi[k]);
        const v = 2 * sc * acc;
        this.inc[j * J + l] = v;
        this.inc[l * J + j] = v;
      }
    }
    for (let i = 0; i < J * J; i++) G[i] += this.inc[i];
    // b accumulates the back-projected error plus what the current model already explains (G_inc c): the normal
    // equations of the echo on the basis, not of the error.
    let fb = this.head - back;
    if (fb < 0) fb += this.cap;
    const cf = fb * NL_BASES;
    for (let j = 0; j < J; j++) {
      let s = g[j];
      for (let l = 0; l < J; l++) s += this.inc[j * J + l] * this.cHist[cf + l];
      b[j] += s;
    }
    this.steps++;
    this.solve(noise / (PRIOR * PRIOR));
  }

  /** c = (G + δ I)⁻¹ b by Cholesky; unchanged if the system is not positive definite. */
  private solve(delta: number): void {
    const J = this.J;
    const A = this.A;
    let tr = 0;
    for (let j = 0; j < J; j++) tr += this.G[j * J + j];
    if (!(tr > 0)) return;
    const d = Math.max(delta, (1e-6 * tr) / J);
    for (let i = 0; i < J * J; i++) A[i] = this.G[i];
    for (let j = 0; j < J; j++) A[j * J + j] += d;
    for (let j = 0; j < J; j++) {
      for (let l = 0; l < j; l++) {
        let s = A[j * J + l];
        for (let m = 0; m < l; m++) s -= A[j * J + m] * A[l * J + m];
        A[j * J + l] = s / A[l * J + l];
      }
      let s = A[j * J + j];
      for (let m = 0; m < j; m++) s -= A[j * J + m] * A[j * J + m];
      if (!(s > 0)) return;
      A[j * J + j] = Math.sqrt(s);
    }
    const z = this.sol;
    for (let j = 0; j < J; j++) {
      let s = this.b[j];
      for (let m = 0; m < j; m++) s -= A[j * J + m] * z[m];
      z[j] = s / A[j * J + j];
    }
    for (let j = J - 1; j >= 0; j--) {
      let s = z[j];
      for (let m = j + 1; m < J; m++) s -= A[m * J + j] * z[m];
      z[j] = s / A[j * J + j];
    }
    for (let j = 0; j < J; j++) this.c[j] = Math.max(-C_MAX, Math.min(C_MAX, z[j]));
  }
}

export { FORGET as NL_FORGET };
