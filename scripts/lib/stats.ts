// Small-sample statistics for the quality benchmark: means with percentile-bootstrap confidence intervals over clips,
// and paired differences (same clips, two systems) with their bootstrap CI and win share. Resampling is seeded, so a
// rerun on the same scores prints the same intervals.

/** mulberry32: a small, fast, seedable PRNG (uniform in [0, 1)); the one the synthetic-noise generator uses. */
import { seededRandom as seeded } from '../../src/audio/synthetic-noise';
export { seeded };

export const BOOTSTRAP_RESAMPLES = 10000;
const SEED = 20261122;

export interface MeanCi {
  n: number;
  mean: number;
  lo: number;
  hi: number;
}

export function mean(xs: number[]): number {
  return xs.length ? xs.reduce((a, b) => a + b, 0) / xs.length : NaN;
}

/**
 * 95 % percentile interval of `stat` over `resamples` bootstrap resamples of n items; `stat` draws its n indices
 * (with replacement) from `pick`, seeded by `seed`, so a rerun gives the same interval.
 */
function percentileInterval(n: number, resamples: number, seed: number, stat: (pick: () => number) => number): { lo: number; hi: number } {
  const rnd = seeded(seed);
  const pick = () => Math.floor(rnd() * n);
  const values = new Float64Array(resamples);
  for (let r = 0; r < resamples; r++) values[r] = stat(pick);
  values.sort();
  const at = (q: number) => values[Math.min(resamples - 1, Math.max(0, Math.round(q * (resamples - 1))))];
  return { lo: at(0.025), hi: at(0.975) };
}

/** Mean and its 95 % percentile-bootstrap interval (resampling clips with replacement). */
export function bootstrapMean(xs: number[], resamples = BOOTSTRAP_RESAMPLES): MeanCi {
  const n = xs.length;
  if (n === 0) return { n, mean: NaN, lo: NaN, hi: NaN };
  const ci = percentileInterval(n, resamples, SEED + n, (pick) => {
    let s = 0;
    for (let i = 0; i < n; i++) s += xs[pick()];
    return s / n;
  });
  return { n, mean: mean(xs), ...ci };
}

export interface PairedDiff extends MeanCi {
  /** Clips where b scored higher than a (ties count half). */
  wins: number;
  winShare: number;
}

/** b - a per clip (same clip order): mean difference, its 95 % bootstrap CI and the share of clips b wins. */
export function pairedDiff(a: number[], b: number[]): PairedDiff {
  if (a.length !== b.length) throw new Error('paired difference needs the same clips on both sides');
  const d = b.map((v, i) => v - a[i]);
  const wins = d.reduce((s, v) => s + (v > 0 ? 1 : v === 0 ? 0.5 : 0), 0);
  return { ...bootstrapMean(d), wins, winShare: d.length ? wins / d.length : NaN };
}

/**
 * Paired ratio sum(b) / sum(a) (e.g. requests/s with N workers over 1, measured in alternating slices) and its 95 %
 * percentile-bootstrap interval, resampling the pairs with replacement: slow and fast phases of the machine hit both
 * sides of a pair, so the interval reflects the pairs' spread, not the drift between them.
 */
export function bootstrapRatio(a: number[], b: number[], resamples = BOOTSTRAP_RESAMPLES): { n: number; ratio: number; lo: number; hi: number } {
  const n = a.length;
  if (n !== b.length) throw new Error('a paired ratio needs as many values on both sides');
  const sum = (xs: number[]) => xs.reduce((s, v) => s + v, 0);
  if (n === 0) return { n, ratio: NaN, lo: NaN, hi: NaN };
  const ci = percentileInterval(n, resamples, SEED + 7 * n, (pick) => {
    let sa = 0;
    let sb = 0;
    for (let i = 0; i < n; i++) {
      const k = pick();
      sa += a[k];
      sb += b[k];
    }
    return sb / sa;
  });
  return { n, ratio: sum(b) / sum(a), ...ci };
}
