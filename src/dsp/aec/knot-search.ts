// The clip knot's search (loudspeaker.ts, clip-knot.ts): candidate levels of an odd hinge, each scored by how much of
// the echo it would explain beside the model's fixed basis. A candidate is one more row of a learning step (its basis
// function of the frame, through the same row FFT and Gram kernel): its cross-terms with the fixed bases, its own
// energy through the room and its correlation with the echo accumulate like the model's normal equations, and its
// score is the drop in the least-squares residual that adding it would bring (a Schur complement, no extra filter).
// Reading the knot off the fixed basis's fit instead was biased toward the breakpoint above the clip (docs/echo.md).

/** Candidate levels, fractions of the model's unit (a clip at 40–70 % of a peak at 0.5–1 of the unit: 0.2–0.7). */
export const KNOT_LEVELS = [0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5, 0.56, 0.63, 0.7, 0.8, 0.9];
/** The fine grid's spacing around a pick (the level matters to about ±0.02 of the unit). */
const FINE = 0.01;

export interface KnotPick {
  /** The best candidate, its level refined between its neighbours' scores, its coefficient and score. */
  k: number;
  level: number;
  coef: number;
  gain: number;
  /** The best candidate's energy beyond the fixed basis's span over the ridge (below ~1 its coefficient says little). */
  evidence: number;
}

export class KnotSearch {
  readonly K = KNOT_LEVELS.length;
  /** The candidates' levels now: the coarse grid, or a fine one around a pick (zoomed). */
  readonly levels = Float64Array.from(KNOT_LEVELS);
  zoomed = false;
  /** Each candidate's Σ x φ (smoothed as the fixed hinges') and its projection on x. */
  readonly xo: Float64Array;
  readonly proj: Float64Array;
  /** The fixed bases' normal equations (B × B, B), the candidates' cross-terms with them (K × B), energies, correlations. */
  private readonly B: number;
  readonly Gb: Float64Array;
  readonly bb: Float64Array;
  readonly Gkb: Float64Array;
  readonly Gkk: Float64Array;
  readonly bk: Float64Array;
  readonly gain: Float64Array;
  readonly coef: Float64Array;
  readonly energy: Float64Array;
  private readonly L: Float64Array;
  private readonly cb: Float64Array;
  private readonly v: Float64Array;
  private readonly sx: Float64Array;
  /** Accumulations since the last reset. */
  n = 0;

  constructor(bases: number) {
    const K = this.K;
    const B = bases;
    this.B = B;
    this.xo = new Float64Array(K);
    this.proj = new Float64Array(K);
    this.Gb = new Float64Array(B * B);
    this.bb = new Float64Array(B);
    this.Gkb = new Float64Array(K * B);
    this.Gkk = new Float64Array(K);
    this.bk = new Float64Array(K);
    this.gain = new Float64Array(K);
    this.coef = new Float64Array(K);
    this.energy = new Float64Array(K);
    this.L = new Float64Array(B * B);
    this.cb = new Float64Array(B);
    this.v = new Float64Array(B);
    this.sx = new Float64Array(K);
  }

  /** The statistics start from nothing (the unit moved: the candidates are other levels of the reference now). */
  reset(): void {
    for (const a of [this.xo, this.proj, this.Gb, this.bb, this.Gkb, this.Gkk, this.bk]) a.fill(0);
    this.n = 0;
    this.levels.set(KNOT_LEVELS);
    this.zoomed = false;
  }

  /**
   * The candidates on a fine grid around `level` (center: null for the coarse grid again); their statistics start
   * from nothing, their projections on x from the old grid's (xx: Σ x², smoothed).
   */
  zoom(level: number | null, xx: number): void {
    const K = this.K;
    const next = new Float64Array(K);
    for (let k = 0; k < K; k++) next[k] = level === null ? KNOT_LEVELS[k] : Math.max(0.02, level + (k - (K - 1) / 2) * FINE);
    for (let k = 0; k < K; k++) this.sx[k] = this.xoAt(next[k]);
    for (const a of [this.Gb, this.bb, this.Gkb, this.Gkk, this.bk]) a.fill(0);
    this.n = 0;
    this.levels.set(next);
    this.zoomed = level !== null;
    for (let k = 0; k < K; k++) {
      this.xo[k] = this.sx[k];
      this.proj[k] = xx > 0 ? this.xo[k] / xx : 0;
    }
  }

  /** One reference block at unit u: the candidates' projections on x (xx: Σ x², smoothed). */
  observe(x: Float32Array, u: number, xx: number, smooth: number): void {
    const K = this.K;
    const s = this.sx;
    s.fill(0);
    const t0 = this.levels[0] * u;
    for (let i = 0; i < x.length; i++) {
      const av = x[i] < 0 ? -x[i] : x[i];
      if (av <= t0) continue;
      for (let k = 0; k < K; k++) {
        const t = this.levels[k] * u;
        if (av <= t) break;
        s[k] += av * (av - t);
      }
    }
    for (let k = 0; k < K; k++) {
      this.xo[k] = smooth * this.xo[k] + s[k];
      this.proj[k] = xx > 0 ? this.xo[k] / xx : 0;
    }
  }

  /**
   * The candidates' rows of a frame (2R samples of the raw reference `v`, at unit u) into rows[c0 + k]: the odd hinge
   * at each level minus its projection on x.
   */
  rows(sig: Float64Array, n: number, c0: number, o: number, hist: Float64Array, h: number, R: number, u: number): void {
    const K = this.K;
    const t0 = this.levels[0] * u;
    for (let i = 0; i < R; i++) {
      const v = hist[h + i];
      const av = v < 0 ? -v : v;
      let k = 0;
      if (av > t0) {
        for (; k < K; k++) {
          const d = av - this.levels[k] * u;
          if (d <= 0) break;
          sig[(c0 + k) * n + o + i] = (v > 0 ? d : -d) - this.proj[k] * v;
        }
      }
      for (; k < K; k++) sig[(c0 + k) * n + o + i] = -this.proj[k] * v;
    }
  }

  /**
   * One learning step: go the Gram kernel's result (Jt × Jt: the fixed bases from row 0, the candidates from row c0),
   * sc its scale, g the rows' correlations with the back-propagated error, cHist the model's J coefficients the
   * frame was distorted with (from cf): the candidates' correlation with the echo is g plus what the model explained.
   */
  accumulate(go: Float32Array, Jt: number, c0: number, sc: number, g: Float64Array, J: number, cHist: Float64Array, cf: number, decay: number): void {
    const B = this.B;
    const K = this.K;
    for (let i = 0; i < B * B; i++) this.Gb[i] *= decay;
    for (let i = 0; i < K * B; i++) this.Gkb[i] *= decay;
    for (let k = 0; k < K; k++) {
      this.Gkk[k] *= decay;
      this.bk[k] *= decay;
    }
    for (let j = 0; j < B; j++) {
      this.bb[j] *= decay;
      let s = g[j];
      for (let l = 0; l < J; l++) s += sc * go[j * Jt + l] * cHist[cf + l];
      this.bb[j] += s;
      for (let l = 0; l < B; l++) this.Gb[j * B + l] += sc * go[j * Jt + l];
    }
    for (let k = 0; k < K; k++) {
      const r = (c0 + k) * Jt;
      let s = g[c0 + k];
      for (let l = 0; l < J; l++) s += sc * go[r + l] * cHist[cf + l];
      this.bk[k] += s;
      for (let l = 0; l < B; l++) this.Gkb[k * B + l] += sc * go[r + l];
      this.Gkk[k] += sc * go[r + c0 + k];
    }
    this.n++;
  }

  /**
   * Scores every candidate with ridge d: gain_k = r_k² / s_k, r_k the candidate's correlation with what the fixed
   * basis leaves, s_k its energy beyond the fixed basis's span; coef_k = r_k / s_k. Null if the system is singular.
   */
  evaluate(d: number, below: number): KnotPick | null {
    const B = this.B;
    const K = this.K;
    const L = this.L;
    let tr = 0;
    for (let j = 0; j < B; j++) tr += this.Gb[j * B + j];
    if (!(tr > 0)) return null;
    const dd = Math.max(d, (1e-6 * tr) / B);
    // Cholesky of Gb + dd I.
    for (let j = 0; j < B; j++) {
      for (let l = 0; l <= j; l++) {
        let s = this.Gb[j * B + l] + (j === l ? dd : 0);
        for (let m = 0; m < l; m++) s -= L[j * B + m] * L[l * B + m];
        if (j === l) {
          if (!(s > 0)) return null;
          L[j * B + j] = Math.sqrt(s);
        } else L[j * B + l] = s / L[l * B + l];
      }
    }
    this.solve(this.bb, 0, this.cb);
    let best = -1;
    for (let k = 0; k < K; k++) {
      this.solve(this.Gkb, k * B, this.v);
      let r = this.bk[k];
      let s = this.Gkk[k] + dd;
      for (let j = 0; j < B; j++) {
        r -= this.Gkb[k * B + j] * this.cb[j];
        s -= this.Gkb[k * B + j] * this.v[j];
      }
      this.gain[k] = s > 0 ? (r * r) / s : 0;
      this.coef[k] = s > 0 ? r / s : 0;
      this.energy[k] = (s - dd) / dd;
      if (this.levels[k] < below && (best < 0 || this.gain[k] > this.gain[best])) best = k;
    }
    if (best < 0) return null;
    // The level between the best candidate's neighbours: the vertex of the parabola through the three scores.
    let level = this.levels[best];
    if (best > 0 && best < K - 1) {
      const a = this.gain[best - 1];
      const b = this.gain[best];
      const c = this.gain[best + 1];
      const den = a - 2 * b + c;
      if (den < 0) {
        const t = Math.max(-0.5, Math.min(0.5, (0.5 * (a - c)) / den));
        level += t * (t < 0 ? this.levels[best] - this.levels[best - 1] : this.levels[best + 1] - this.levels[best]);
      }
    }
    return { k: best, level, coef: this.coef[best], gain: this.gain[best], evidence: this.energy[best] };
  }

  /**
   * The knot's row and column of the model's normal equations (G: J × J, the knot the basis after the B fixed ones;
   * b) from candidate k's statistics (k < 0: cleared, the knot released).
   */
  adopt(k: number, J: number, G: Float64Array, b: Float64Array): void {
    const B = this.B;
    for (let l = 0; l < J; l++) {
      const v = k >= 0 && l < B ? this.Gkb[k * B + l] : 0;
      G[B * J + l] = v;
      G[l * J + B] = v;
    }
    G[B * J + B] = k >= 0 ? this.Gkk[k] : 0;
    b[B] = k >= 0 ? this.bk[k] : 0;
  }

  /** Σ x φ at `level` from the candidates' (linear between them): a knot placed between two candidates. */
  xoAt(level: number): number {
    const K = this.K;
    if (level <= this.levels[0]) return this.xo[0];
    for (let k = 1; k < K; k++) {
      if (level <= this.levels[k]) return this.xo[k - 1] + ((this.xo[k] - this.xo[k - 1]) * (level - this.levels[k - 1])) / (this.levels[k] - this.levels[k - 1]);
    }
    return this.xo[K - 1];
  }

  /** x = (Gb + dd I)⁻¹ a[at..at+B) with the factor in L. */
  private solve(a: Float64Array, at: number, x: Float64Array): void {
    choleskySolve(this.B, this.L, a, at, x);
  }
}

/** x = (L Lᵀ)⁻¹ b[at..at+n) for the n × n lower Cholesky factor L (row-major; the upper triangle is not read). */
export function choleskySolve(n: number, L: Float64Array, b: Float64Array, at: number, x: Float64Array): void {
  for (let j = 0; j < n; j++) {
    let s = b[at + j];
    for (let m = 0; m < j; m++) s -= L[j * n + m] * x[m];
    x[j] = s / L[j * n + j];
  }
  for (let j = n - 1; j >= 0; j--) {
    let s = x[j];
    for (let m = j + 1; m < n; m++) s -= L[m * n + j] * x[m];
    x[j] = s / L[j * n + j];
  }
}
