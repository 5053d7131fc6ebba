// The load bench's paired ratio (scripts/lib/stats.ts bootstrapRatio): 1 → N workers measured in alternating slices.
import { bootstrapRatio } from '../../scripts/lib/stats';

test('drift that hits both sides of every pair does not widen the interval', () => {
  // The machine's speed changes fourfold between pairs, but within each pair N workers do exactly 1.6× one worker.
  const one = [10, 20, 30, 40, 25, 15];
  const r = bootstrapRatio(one, one.map((v) => v * 1.6));
  expect(r.n).toBe(6);
  expect(r.ratio).toBeCloseTo(1.6, 12);
  expect(r.lo).toBeCloseTo(1.6, 12);
  expect(r.hi).toBeCloseTo(1.6, 12);
});

test('the interval brackets the ratio of sums and widens with the spread between pairs', () => {
  const one = [30, 31, 32, 31, 33, 30];
  const tight = bootstrapRatio(one, [50, 51, 53, 51, 55, 50]);
  const loose = bootstrapRatio(one, [45, 58, 44, 57, 46, 56]);
  expect(tight.ratio).toBeCloseTo((50 + 51 + 53 + 51 + 55 + 50) / (30 + 31 + 32 + 31 + 33 + 30), 12);
  for (const r of [tight, loose]) {
    expect(r.lo).toBeLessThanOrEqual(r.ratio);
    expect(r.hi).toBeGreaterThanOrEqual(r.ratio);
  }
  expect(loose.hi - loose.lo).toBeGreaterThan(2 * (tight.hi - tight.lo));
  // Seeded: the same input gives the same interval.
  expect(bootstrapRatio(one, [45, 58, 44, 57, 46, 56])).toEqual(loose);
});

test('unequal sides are refused', () => {
  expect(() => bootstrapRatio([1, 2], [1])).toThrow(/as many values/);
  expect(bootstrapRatio([], []).ratio).toBeNaN();
});
