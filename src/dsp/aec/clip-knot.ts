// Helpers of the loudspeaker model (loudspeaker.ts): the clip knot, an odd hinge of the model's basis at the level where
// the loudspeaker saturates (a hard clip's level, which the fixed octave breakpoints can only straddle: with the knot at
// the clip's level the tuning scenes that clipping limited went from 26 to 45–50 dB, with it 0.035 off back to 36–43),
// where it sits, when it has settled and how far its coefficient's ridge is then relaxed; and the ridge-regularised
// solve of the model's normal equations.
import { choleskySolve, type KnotSearch } from './knot-search';

/** Learning steps before the search's first pick, and between picks. */
const PICK_AFTER = 25;
const PICK_EVERY = 8;
/** A knot only where the best candidate would cut the slope beyond it by at least this (a clip: about 1). */
const PICK_MIN_C = 0.2;
/** A knot above this share of the peak is no clip. */
const KNOT_MAX = 0.9;
/** Picks in a row without a strong candidate before a knot is released. */
const RELEASE_AFTER = 4;
/** Accumulated steps of the search's statistics before a pick from them. */
const PICK_MIN_N = 24;
/** The least move of a placed knot to the fine grid's pick. */
const MOVE_MIN = 0.004;
/** The lowest knot (a fraction of the unit). */
export const KNOT_LOW = 0.05;
/**
 * Strong picks in a row that leave a placed knot where it is before it counts as settled: the model's ridge on its
 * coefficient is then weaker (loudspeaker.ts), so that it can reach a clip's −1. (Counting the picks that say nothing,
 * so that a knot placed before a quiet stretch settles too, broke 6 of 40 held-out path-change scenes down to 11–18 dB.)
 */
export const SETTLE_PICKS = 3;
/**
 * A weak pick whose best candidate has less energy beyond the fixed basis's span than the ridge (no samples above it of
 * late: its coefficient is the ridge's, not the echo's) does not count toward releasing the knot.
 */
const MIN_EVIDENCE = 1;
/**
 * The settled knot's prior standard deviation (the fixed bases': 0.1): a clip's coefficient is about −1, which the
 * fixed bases' prior holds to −0.6…−0.8 (a knot fixed at the true level: 27 → 49 dB on a tuning scene with this one).
 */
const KNOT_PRIOR = 0.5;
/** ... but not within this of a fixed breakpoint: the two hinges would trade large coefficients of opposite sign. */
const KNOT_SEP = 0.06;
/**
 * The knot's coefficient stays where a saturation can put it: beyond a clip the slope is 1 + c, between 0 and 1 (a
 * margin for a knot a little off the clip). Without the bound a settled knot ran to −2.7 on a linear loudspeaker.
 */
const KNOT_C_MIN = -1.25;
const KNOT_C_MAX = 0.25;

/**
 * Where the knot is (a fraction of the model's unit; 0: none) and its statistics. It is placed at the search's best
 * candidate (knot-search.ts: each candidate level scored by the residual it would leave beside the fixed basis), moved
 * along the fine grid the search then lays around it, and released when no candidate cuts the slope any more. (Gauss-Newton
 * steps on the level in between, as before, measured no better on the tuning set and cost a row of every learning step.)
 */
export class ClipKnot {
  level = 0;
  /** The odd hinge's Σ x φ (smoothed as the fixed ones') and its projection on x. */
  xo = 0;
  proj = 0;
  private weak = 0;
  /** Picks in a row that left the knot in place (SETTLE_PICKS and more: settled). */
  stable = 0;
  regrid: number | null | undefined = undefined;

  /** One reference block at unit u: the odd hinge's projection on x (xx: Σ x², smoothed). */
  observe(x: Float32Array, u: number, xx: number, smooth: number): void {
    const tk = this.level * u;
    let s = 0;
    for (let i = 0; i < x.length; i++) {
      const av = x[i] < 0 ? -x[i] : x[i];
      if (av > tk) s += av * (av - tk);
    }
    this.xo = smooth * this.xo + s;
    this.proj = xx > 0 ? this.xo / xx : 0;
  }

  /**
   * Every few learning steps: the search's pick with ridge d (top: the reference's peak, a fraction of the unit). Returns
   * the candidate whose statistics the knot starts from now (placed or moved to it), −2 when the knot was released, −1
   * when nothing changed; `regrid` then says where the search's grid goes next (a level to zoom on, null: the coarse
   * grid, undefined: stays).
   */
  pick(steps: number, search: KnotSearch, d: number, top: number, xx: number): number {
    this.regrid = undefined;
    if (steps < PICK_AFTER || steps % PICK_EVERY !== 0 || search.n < PICK_MIN_N) return -1;
    const p = search.evaluate(d, KNOT_MAX * top);
    if (!p) return -1;
    const strong = p.coef <= -PICK_MIN_C;
    if (!strong) {
      if (p.evidence < MIN_EVIDENCE) return -1;
      this.stable = 0;
      if (this.level > 0 && ++this.weak >= RELEASE_AFTER) {
        this.level = 0;
        this.weak = 0;
        this.xo = 0;
        this.proj = 0;
        this.regrid = null;
        return -2;
      }
      return -1;
    }
    this.weak = 0;
    // A pick on the coarse grid, or at the fine grid's edge: the fine grid moves there.
    if (!search.zoomed || p.k === 0 || p.k === search.K - 1) this.regrid = p.level;
    else if (Math.abs(p.level - this.level) < MOVE_MIN) {
      this.stable++;
      return -1;
    }
    this.stable = 0;
    this.level = p.level;
    this.xo = search.xoAt(p.level);
    this.proj = xx > 0 ? this.xo / xx : 0;
    return p.k;
  }

  /**
   * The factor on the model's ridge (σ²_e / prior²) for the knot's coefficient: weaker once the knot has settled, unless
   * it sits near one of the fixed breakpoints (fractions of the unit).
   */
  ridgeScale(breakpoints: readonly number[], prior: number): number {
    if (this.level <= 0 || this.stable < SETTLE_PICKS) return 1;
    for (const t of breakpoints) if (Math.abs(this.level - t) < KNOT_SEP) return 1;
    return (prior * prior) / (KNOT_PRIOR * KNOT_PRIOR);
  }

  /** The knot's coefficient within a saturation's range. */
  static bound(c: number): number {
    return Math.max(KNOT_C_MIN, Math.min(KNOT_C_MAX, c));
  }

  /** The unit moved by a factor 1 / f: the knot keeps its level of the reference; false when it falls off. */
  rescale(f: number): boolean {
    this.level *= f;
    this.stable = 0;
    if (this.level >= KNOT_LOW) return true;
    this.level = 0;
    return false;
  }
}

/**
 * c = (G + δ I)⁻¹ b by Cholesky (J × J, A as scratch), each clamped to ±cMax; c unchanged if the system is not positive
 * definite. δ is at least 1e-6 of the mean diagonal (a basis that never occurred stays solvable); the last coefficient's
 * ridge is δ × lastScale (the settled clip knot's weaker prior).
 */
export function ridgeSolve(J: number, G: Float64Array, b: Float64Array, delta: number, A: Float64Array, z: Float64Array, c: Float64Array, cMax: number, lastScale = 1): void {
  let tr = 0;
  for (let j = 0; j < J; j++) tr += G[j * J + j];
  if (!(tr > 0)) return;
  const d = Math.max(delta, (1e-6 * tr) / J);
  for (let i = 0; i < J * J; i++) A[i] = G[i];
  for (let j = 0; j < J; j++) A[j * J + j] += d;
  if (lastScale !== 1) A[J * J - 1] += d * (lastScale - 1);
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
  choleskySolve(J, A, b, 0, z);
  for (let j = 0; j < J; j++) c[j] = Math.max(-cMax, Math.min(cMax, z[j]));
}

