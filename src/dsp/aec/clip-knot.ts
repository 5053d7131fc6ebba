// Helpers of the loudspeaker model (loudspeaker.ts): the clip knot, an odd hinge of the model's basis at the level where
// the loudspeaker saturates (a hard clip's level, which the fixed octave breakpoints can only straddle: with the knot at
// the clip's level the tuning scenes that clipping limited went from 26 to 45–50 dB, with it 0.035 off back to 36–43);
// and the ridge-regularised solve of the model's normal equations.

/** Learning steps before the knot is first read, and the smoothing of the reading per step. */
const KNOT_AFTER = 25;
const KNOT_SMOOTH = 0.8;
/** A saturation read above this share of the peak is no clip (a linear loudspeaker's fit reads about 1). */
const KNOT_MAX = 0.9;
/** The Gauss-Newton moves: gain, the largest move per step (a fraction of the unit), the least |c_k| that moves it. */
const KNOT_GAIN = 0.1;
const KNOT_MAX_STEP = 0.005;
const KNOT_MIN_C = 0.05;
/** The lowest knot (a fraction of the unit). */
export const KNOT_LOW = 0.05;

/**
 * Where the knot is (a fraction of the model's unit; 0: none yet) and its statistics. It is placed once from the
 * fixed basis's fit (saturationLevel), which is biased toward the breakpoint above a clip (the least-squares fit does
 * not interpolate at the breakpoints), then moved by Gauss-Newton steps on the error (move()), which need no
 * interpolation but only converge from near the clip.
 */
export class ClipKnot {
  level = 0;
  /** The odd hinge's Σ x φ (smoothed as the fixed ones') and its projection on x. */
  xo = 0;
  proj = 0;
  private read = 0;
  /** The derivative's correlation with the error and its energy through the room, gathered over steps. */
  private gK = 0;
  private hK = 0;

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
   * While there is no knot: the fixed basis's saturation read (lin the slope at 0, odd coefficients at the knots),
   * smoothed; true when the knot was placed now (its statistics start from nothing; xoAt: the fixed hinges' Σ x φ
   * interpolated to the new level, the projection to start from).
   */
  place(steps: number, lin: number, knots: ArrayLike<number>, odd: ArrayLike<number>, top: number, xx: number, xoAt: (level: number) => number): boolean {
    if (this.level > 0 || steps < KNOT_AFTER) return false;
    const r = saturationLevel(lin, knots, odd, top);
    if (r === null) return false;
    this.read = this.read === 0 ? r : KNOT_SMOOTH * this.read + (1 - KNOT_SMOOTH) * r;
    if (!(this.read < KNOT_MAX * top) || this.read < KNOT_LOW) return false;
    this.level = this.read;
    this.xo = xoAt(this.level);
    this.proj = xx > 0 ? this.xo / xx : 0;
    this.gK = 0;
    this.hK = 0;
    return true;
  }

  /**
   * A Gauss-Newton step on a learning step's error: the model's echo moves by −c_k s δ for a move δ of the knot (s the
   * step function at the knot, the hinge's derivative), so the error energy is least at δ = −⟨W s, e⟩ / (c_k ‖W s‖²);
   * gS, hS are this step's ⟨W s, e⟩ and ‖W s‖², gathered with the statistics' forgetting (only the loudest samples
   * reach a knot: most steps carry nothing), damped and limited per step.
   */
  move(gS: number, hS: number, decay: number, ck: number, top: number): void {
    this.gK = decay * this.gK + gS;
    this.hK = decay * this.hK + hS;
    if (Math.abs(ck) < KNOT_MIN_C || !(this.hK > 0)) return;
    const d = Math.max(-KNOT_MAX_STEP, Math.min(KNOT_MAX_STEP, (-KNOT_GAIN * this.gK) / (ck * this.hK)));
    // The move answers that much of the gradient gathered so far (linearised: ⟨W s, e⟩ changes by c_k ‖W s‖² δ).
    this.gK += ck * this.hK * d;
    this.level = Math.max(KNOT_LOW, Math.min(top, this.level + d));
  }

  /** The unit moved by a factor 1 / f: the knot keeps its level of the reference; false when it falls off. */
  rescale(f: number): boolean {
    this.level *= f;
    this.read *= f;
    if (this.level >= KNOT_LOW) return true;
    this.level = 0;
    this.read = 0;
    return false;
  }
}

/** Σ x φ of an odd hinge at `level`, interpolated from the fixed hinges' (`moments` at `levels`): a new knot's start. */
export function momentAt(level: number, levels: number[], moments: number[]): number {
  for (let i = 1; i < levels.length; i++) {
    if (level <= levels[i]) return moments[i - 1] + ((moments[i] - moments[i - 1]) * (level - levels[i - 1])) / (levels[i] - levels[i - 1]);
  }
  return 0;
}

/**
 * The level (a fraction of the unit) at which the fitted odd response g(a) = lin·a + Σ_k odd_k·max(a − knot_k, 0)
 * stops growing, read as a hard clip: the largest g over the knots up to `top` (the reference's peak) and `top` itself,
 * over the slope at 0. For a clip at c between two breakpoints, a fit that interpolates at the breakpoints has its
 * maximum c·lin at the breakpoint above c whatever the breakpoints are, so the estimate is c itself; and once a knot sits
 * at c, at c. Null where the slope at 0 is not positive (no reading).
 */
export function saturationLevel(lin: number, knots: ArrayLike<number>, odd: ArrayLike<number>, top: number): number | null {
  if (!(lin > 0) || !(top > 0)) return null;
  const g = (a: number): number => {
    let y = lin * a;
    for (let k = 0; k < knots.length; k++) if (knots[k] > 0 && a > knots[k]) y += odd[k] * (a - knots[k]);
    return y;
  };
  let best = g(top);
  for (let k = 0; k < knots.length; k++) if (knots[k] > 0 && knots[k] < top) best = Math.max(best, g(knots[k]));
  return best / lin;
}

/**
 * c = (G + δ I)⁻¹ b by Cholesky (J × J, A as scratch), each clamped to ±cMax; c unchanged if the system is not positive
 * definite. δ is at least 1e-6 of the mean diagonal (a basis that never occurred stays solvable).
 */
export function ridgeSolve(J: number, G: Float64Array, b: Float64Array, delta: number, A: Float64Array, z: Float64Array, c: Float64Array, cMax: number): void {
  let tr = 0;
  for (let j = 0; j < J; j++) tr += G[j * J + j];
  if (!(tr > 0)) return;
  const d = Math.max(delta, (1e-6 * tr) / J);
  for (let i = 0; i < J * J; i++) A[i] = G[i];
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
  for (let j = 0; j < J; j++) {
    let s = b[j];
    for (let m = 0; m < j; m++) s -= A[j * J + m] * z[m];
    z[j] = s / A[j * J + j];
  }
  for (let j = J - 1; j >= 0; j--) {
    let s = z[j];
    for (let m = j + 1; m < J; m++) s -= A[m * J + j] * z[m];
    z[j] = s / A[j * J + j];
  }
  for (let j = 0; j < J; j++) c[j] = Math.max(-cMax, Math.min(cMax, z[j]));
}
