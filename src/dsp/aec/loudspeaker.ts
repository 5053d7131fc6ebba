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
// frame of x_eff, one pass over the partitions; nl-learner.ts) and correlated with each basis function of that frame
// through their spectra (Parseval: no inverse FFT). The Gram matrix of the filtered basis comes from the basis frames'
// spectra weighted by the filter's power response per bin (exact up to the cross-terms between partitions). The basis
// spectra come from the WebAssembly row FFT (fft-pairs.ts), the correlations and the Gram matrix from the `gram`
// kernel: a learning step cost as much as a whole hop of the canceller when all of it ran in JavaScript. The normal
// equations accumulate the back-propagated error plus what the model explained when that frame was distorted (the
// coefficients of each block are kept: using today's instead made the loop overshoot); exponentially weighted (~4 s),
// ridge-regularised toward 0 by the error power over a prior variance (a basis that explains little stays off), solved
// by Cholesky (7 × 7) at every learning step (every 4th hop by default: the canceller's nlEvery). Shared by all
// microphone channels (the loudspeaker is one), learned on channel 0.
//
// Optionally (the canceller's `clipKnot`) an 8th basis: an odd hinge at a knot, at the level a search over candidate
// knots scores best (knot-search.ts, clip-knot.ts): a hard clip between two octave breakpoints is outside the fixed
// basis's span. Once the knot has settled its coefficient's ridge is weaker (a clip's −1 is far beyond PRIOR).

import { sharedRowFft, type RowFft } from '../fft-pairs';
import { ClipKnot, ridgeSolve } from './clip-knot';
import { KnotSearch, KNOT_LEVELS } from './knot-search';
import type { AecArena, Slab } from './kernel';

const THRESHOLDS = [0.125, 0.25, 0.5];
export const NL_BASES = 1 + 2 * THRESHOLDS.length;
/** With the clip knot's basis. */
const NL_MAX = NL_BASES + 1;
/** Rows of a learning step at most: the bases and the knot's candidates. */
const NL_ROWS = NL_MAX + KNOT_LEVELS.length;
/** Forgetting of the statistics per hop (125 hops/s: about 4 s); a learning step every n hops forgets FORGET^n. */
const FORGET = Math.sqrt(0.996);
/** Prior standard deviation of a coefficient: the ridge is σ²_e / PRIOR². */
const PRIOR = 0.1;
const C_MAX = 4;
/** The peak's release per hop: −6 dB in about 20 s. */
const PEAK_RELEASE = Math.pow(0.5, 1 / 2500);
const ORTHO_SMOOTH = 0.995;

export class LoudspeakerModel {
  readonly J: number;
  readonly c = new Float64Array(NL_MAX);
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
  /** The clip knot (null when off) and the level each block was distorted with. */
  readonly knot: ClipKnot | null;
  readonly search: KnotSearch | null;
  private readonly kHist: Float64Array;
  /** The learning statistics (public for NonlinearLearner.reset). */
  readonly G = new Float64Array(NL_MAX * NL_MAX);
  readonly b = new Float64Array(NL_MAX);
  private readonly A = new Float64Array(NL_MAX * NL_MAX);
  private readonly sol = new Float64Array(NL_MAX);
  private readonly g = new Float64Array(NL_ROWS);
  /** The bases' rows per learning step (J; the knot's candidates follow them). */
  private readonly rowsN: number;
  /** The basis frames' spectra (rows of `stride` in the arena), √S per bin, and the Gram kernel's result. */
  private readonly fft: RowFft;
  /** Views of the row FFT's signal rows, remade when its memory moves. */
  private sigOf: Float64Array | null = null;
  private rows: Float64Array[] = [];
  private readonly arena: AecArena;
  private readonly stride: number;
  private readonly fRe: Slab;
  private readonly fIm: Slab;
  private readonly sqrtPow: Slab;
  private readonly gOut: Slab;
  private readonly gz: Slab;
  private readonly edge0 = new Float64Array(NL_ROWS);
  private readonly edgeN = new Float64Array(NL_ROWS);
  private readonly inc = new Float64Array(NL_MAX * NL_MAX);
  /** Learning steps taken (the model applies its coefficients once it has some). */
  steps = 0;

  static floats(stride: number, clipKnot = false): number {
    const J = clipKnot ? NL_ROWS : NL_BASES;
    return (2 * J + 1) * stride + J * J + J + 16;
  }

  /** `hop` R samples per block; `blocks` the history kept (the oldest frame learn() may ask for, plus 2). */
  constructor(arena: AecArena, hop: number, blocks: number, stride: number, clipKnot = false) {
    this.J = clipKnot ? NL_MAX : NL_BASES;
    this.rowsN = clipKnot ? NL_MAX : NL_BASES;
    this.knot = clipKnot ? new ClipKnot() : null;
    this.search = clipKnot ? new KnotSearch(NL_BASES) : null;
    const J = this.J;
    const Jr = this.rowsN + (this.search ? this.search.K : 0);
    this.arena = arena;
    this.stride = stride;
    this.R = hop;
    this.cap = blocks;
    this.hist = new Float64Array(hop * blocks);
    this.unit = new Float64Array(blocks);
    this.cHist = new Float64Array(blocks * J);
    this.kHist = new Float64Array(blocks);
    this.fft = sharedRowFft(2 * hop);
    this.fRe = arena.alloc(Jr * stride);
    this.fIm = arena.alloc(Jr * stride);
    this.sqrtPow = arena.alloc(stride);
    this.gOut = arena.alloc(Jr * Jr);
    this.gz = arena.alloc(Jr);
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
    const J = this.J;
    // Index map: new basis j ← old basis from(j) (−1: fresh).
    const from = new Int32Array(this.J);
    from[0] = 0;
    for (let t = 0; t < T; t++) {
      const o = t + s;
      from[1 + 2 * t] = o >= 0 && o < T ? 1 + 2 * o : -1;
      from[2 + 2 * t] = o >= 0 && o < T ? 2 + 2 * o : -1;
    }
    // The clip knot keeps its level (a fraction of the new unit now), and with it its coefficient and statistics.
    if (this.knot) from[NL_BASES] = this.knot.rescale(Math.pow(2, -s)) ? NL_BASES : -1;
    this.search?.reset();
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
    this.unit[this.head] = u;
    this.kHist[this.head] = this.knot ? this.knot.level : 0;
    // A loop, not set(subarray()): the view cost a fifth of distort()'s time.
    for (let j = 0, o = this.head * this.J; j < this.J; j++) this.cHist[o + j] = this.c[j];
    // The block into the history, and the odd hinges' projection on x from it (one pass: v (v ∓ th) beyond ±th is
    // |v| (|v| − th) on either side).
    const hist = this.hist;
    const t0 = THRESHOLDS[0] * u;
    const t1 = THRESHOLDS[1] * u;
    const t2 = THRESHOLDS[2] * u;
    let xx = 0;
    let xo0 = 0;
    let xo1 = 0;
    let xo2 = 0;
    for (let i = 0; i < R; i++) {
      const v = x[i];
      hist[h + i] = v;
      xx += v * v;
      const av = v < 0 ? -v : v;
      if (av > t0) {
        xo0 += av * (av - t0);
        if (av > t1) {
          xo1 += av * (av - t1);
          if (av > t2) xo2 += av * (av - t2);
        }
      }
    }
    if (u > 0) {
      this.xx = ORTHO_SMOOTH * this.xx + xx;
      this.xo[0] = ORTHO_SMOOTH * this.xo[0] + xo0;
      this.xo[1] = ORTHO_SMOOTH * this.xo[1] + xo1;
      this.xo[2] = ORTHO_SMOOTH * this.xo[2] + xo2;
      for (let t = 0; t < THRESHOLDS.length; t++) this.proj[t] = this.xx > 0 ? this.xo[t] / this.xx : 0;
      if (this.knot && this.knot.level > 0) this.knot.observe(x, u, this.xx, ORTHO_SMOOTH);
      this.search?.observe(x, u, this.xx, ORTHO_SMOOTH);
    }
    const c = this.c;
    if (this.steps === 0 || u === 0) {
      for (let i = 0; i < R; i++) out[i] = x[i];
      return;
    }
    // Σ_j c_j φ_j(v) = c0 |v| + Σ_t [c_even (hp − hn) + c_odd (hp + hn − a_t v)], folded per sample (hp − hn = |v| − th,
    // hp + hn = v ∓ th, the sign of v); the thresholds ascend, so each test sits inside the one before.
    let lin = 1;
    for (let t = 0; t < THRESHOLDS.length; t++) lin -= c[2 + 2 * t] * this.proj[t];
    const tk = this.knot ? this.knot.level * u : 0;
    const ok = tk > 0 ? c[NL_BASES] : 0;
    if (ok !== 0) lin -= ok * this.knot!.proj;
    const c0 = c[0];
    const e0 = c[1];
    const o0 = c[2];
    const e1 = c[3];
    const o1 = c[4];
    const e2 = c[5];
    const o2 = c[6];
    for (let i = 0; i < R; i++) {
      const v = x[i];
      const av = v < 0 ? -v : v;
      let y = lin * v + c0 * av;
      if (av > t0) {
        let d = av - t0;
        y += e0 * d + o0 * (v > 0 ? d : -d);
        if (av > t1) {
          d = av - t1;
          y += e1 * d + o1 * (v > 0 ? d : -d);
          if (av > t2) {
            d = av - t2;
            y += e2 * d + o2 * (v > 0 ? d : -d);
          }
        }
      }
      if (ok !== 0 && av > tk) y += ok * (v > 0 ? av - tk : tk - av);
      out[i] = y;
    }
  }

  /**
   * The basis of the frame whose second block is `back` blocks before the newest into the row FFT's signal rows j
   * (2R samples each; this thread's shared instance: filled, transformed and read within learn()).
   */
  private frameBasis(back: number): void {
    const R = this.R;
    const n = 2 * R;
    const search = this.search;
    this.fft.reserve(this.rowsN + (search ? search.K : 0));
    const sig = this.fft.sig;
    if (sig !== this.sigOf) {
      this.sigOf = sig;
      this.rows = Array.from({ length: this.rowsN }, (_, j) => sig.subarray(j * n, (j + 1) * n));
    }
    const [p0, e0, o0, e1, o1, e2, o2, ko] = this.rows;
    const [a0, a1, a2] = this.proj;
    const hist = this.hist;
    for (let half = 0; half < 2; half++) {
      let b = this.head - back - 1 + half;
      while (b < 0) b += this.cap;
      const u = this.unit[b];
      const t0 = THRESHOLDS[0] * u;
      const t1 = THRESHOLDS[1] * u;
      const t2 = THRESHOLDS[2] * u;
      const h = b * R;
      const o = half * R;
      for (let i = 0; i < R; i++) {
        const v = hist[h + i];
        const av = v < 0 ? -v : v;
        const d0 = av > t0 ? av - t0 : 0;
        const d1 = av > t1 ? av - t1 : 0;
        const d2 = av > t2 ? av - t2 : 0;
        p0[o + i] = av;
        e0[o + i] = d0;
        o0[o + i] = (v > 0 ? d0 : -d0) - a0 * v;
        e1[o + i] = d1;
        o1[o + i] = (v > 0 ? d1 : -d1) - a1 * v;
        e2[o + i] = d2;
        o2[o + i] = (v > 0 ? d2 : -d2) - a2 * v;
      }
      if (ko) {
        const tk = this.kHist[b] * u;
        const ak = this.knot!.proj;
        for (let i = 0; i < R; i++) {
          const v = hist[h + i];
          const av = v < 0 ? -v : v;
          const d = tk > 0 && av > tk ? av - tk : 0;
          ko[o + i] = (v > 0 ? d : -d) - ak * v;
        }
      }
      if (search) search.rows(sig, n, this.rowsN, o, hist, h, R, u);
    }
  }

  /**
   * One learning step: Z (the spectrum zRe/zIm in the arena, R + 1 bins) is the error of the last hops propagated back
   * to the reference frame `back` blocks before the newest (its second block), already weighted per hop; its
   * correlation with each basis function is taken in the frequency domain (Parseval); `weight` the mean of the weights,
   * `power` the filter's mean power response Σ_p |W_p|² over the bins, `noise` the error power per sample.
   */
  learn(back: number, zRe: Slab, zIm: Slab, weight: number, power: Float64Array, noise: number, decay: number): void {
    if (back + 2 > this.cap) return;
    const f = (this.head - back + this.cap) % this.cap;
    if (this.unit[f] !== this.u || this.unit[(f - 1 + this.cap) % this.cap] !== this.u) return;
    this.frameBasis(back);
    const J = this.J;
    const n = 2 * this.R;
    const G = this.G;
    const b = this.b;
    for (let i = 0; i < J * J; i++) G[i] *= decay;
    for (let j = 0; j < J; j++) b[j] *= decay;
    // The Gram matrix of the filtered basis: ½ (1/M) Σ_k m_k S(k) Re(Φ_j Φ_l*) over the frame's spectra, S the
    // filter's power response per bin (m_k: 2 for the bins that stand for two of the full spectrum).
    const K = this.R + 1;
    // Each spectrum weighted by √S (the edge bins by √(S/2): they stand for one bin of the full spectrum), then the
    // 28 dot products, in the kernels (float32: the statistics are float64, a step's rounding is far below its noise).
    const S = this.stride;
    const sq = this.sqrtPow.a;
    for (let k = 0; k < K; k++) sq[k] = Math.sqrt(power[k]);
    sq[0] *= Math.SQRT1_2;
    sq[K - 1] *= Math.SQRT1_2;
    const fr = this.fRe.a;
    const fi = this.fIm.a;
    const Jr = this.rowsN + (this.search ? this.search.K : 0);
    this.fft.forward(Jr);
    const re = this.fft.re;
    const im = this.fft.im;
    for (let j = 0; j < Jr; j++) {
      for (let k = 0; k < K; k++) fr[j * S + k] = re[j * K + k];
      for (let k = 0; k < K; k++) fi[j * S + k] = im[j * K + k];
      this.edge0[j] = fr[j * S];
      this.edgeN[j] = fr[j * S + K - 1];
    }
    this.arena.gram(Jr, this.fRe.at, this.fIm.at, this.sqrtPow.at, zRe.at, zIm.at, this.gz.at, this.gOut.at, S);
    // g_j = Σ_i φ_j[i] z[i] = (1/M) Σ_k m_k Re(Φ_j Z*), m_k 1 at DC and Nyquist and 2 between.
    const g = this.g;
    const z0 = zRe.a[0];
    const zN = zRe.a[K - 1];
    for (let j = 0; j < Jr; j++) g[j] = (2 * this.gz.a[j] - this.edge0[j] * z0 - this.edgeN[j] * zN) / n;
    const sc = (1 / n) * weight;
    const go = this.gOut.a;
    if (Jr === J) for (let i = 0; i < J * J; i++) this.inc[i] = sc * go[i];
    else for (let j = 0; j < J; j++) for (let l = 0; l < J; l++) this.inc[j * J + l] = sc * go[j * Jr + l];
    for (let i = 0; i < J * J; i++) G[i] += this.inc[i];
    // b accumulates the back-projected error plus what the current model already explains (G_inc c): the normal
    // equations of the echo on the basis, not of the error.
    let fb = this.head - back;
    if (fb < 0) fb += this.cap;
    const cf = fb * J;
    for (let j = 0; j < J; j++) {
      let s = g[j];
      for (let l = 0; l < J; l++) s += this.inc[j * J + l] * this.cHist[cf + l];
      b[j] += s;
    }
    this.steps++;
    const ridge = noise / (PRIOR * PRIOR);
    if (this.search) this.search.accumulate(go, Jr, this.rowsN, sc, g, J, this.cHist, cf, decay);
    // The knot's coefficient: a ridge of its own once it has settled, and a saturation's range (clip-knot.ts).
    ridgeSolve(J, G, b, ridge, this.A, this.sol, this.c, C_MAX, this.knot ? this.knot.ridgeScale(THRESHOLDS, PRIOR) : 1);
    if (this.knot) {
      this.c[NL_BASES] = ClipKnot.bound(this.c[NL_BASES]);
      this.stepKnot(ridge);
    }
  }

  /** After a learning step: every few steps the knot placed, moved or released by the search (clip-knot.ts). */
  private stepKnot(ridge: number): void {
    const k = this.knot!.pick(this.steps, this.search!, ridge, Math.min(1, this.peak / this.u), this.xx);
    if (k === -1) return;
    this.search!.adopt(k, this.J, this.G, this.b);
    this.c[NL_BASES] = 0;
    ridgeSolve(this.J, this.G, this.b, ridge, this.A, this.sol, this.c, C_MAX, this.knot!.ridgeScale(THRESHOLDS, PRIOR));
    this.c[NL_BASES] = ClipKnot.bound(this.c[NL_BASES]);
    if (this.knot!.regrid !== undefined) this.search!.zoom(this.knot!.regrid, this.xx);
  }
}

export { FORGET as NL_FORGET };
