// The loudspeaker model's clip knot (src/dsp/aec/clip-knot.ts): the saturation read of a fitted odd response, the
// Gauss-Newton move's direction, and the ridge solve. Unit tier.
import { ClipKnot, momentAt, ridgeSolve, saturationLevel } from '../../src/dsp/aec/clip-knot';

const KNOTS = [0.125, 0.25, 0.5];

test('a hard clip between two breakpoints reads at its level from the interpolating fit; a linear response at the peak', () => {
  for (const c of [0.3, 0.385, 0.45]) {
    // The piecewise-linear interpolant of min(a, c) at the breakpoints: slope 1, then (c − 0.25) / 0.25, then 0.
    const odd = [0, (c - 0.25) / 0.25 - 1, -(c - 0.25) / 0.25];
    expect(saturationLevel(1, KNOTS, odd, 0.7)).toBeCloseTo(c, 10);
  }
  expect(saturationLevel(1.3, KNOTS, [0, 0, 0], 0.7)).toBeCloseTo(0.7, 10);
  expect(saturationLevel(0, KNOTS, [0, 0, 0], 0.7)).toBeNull();
});

test('the knot moves toward less error: down when the model over-predicts beyond it, by at most a small step', () => {
  const k = new ClipKnot();
  k.level = 0.5;
  // A clip (c_k < 0) with the error anti-correlated with the step function: the echo is below the model there.
  k.move(-1, 1, 1, -1, 0.7);
  expect(k.level).toBeLessThan(0.5);
  expect(k.level).toBeGreaterThan(0.49);
  const l = k.level;
  k.move(2, 1, 1, -1, 0.7);
  expect(k.level).toBeGreaterThan(l);
});

test('ridgeSolve solves a positive definite system and leaves c alone when it is not', () => {
  const G = Float64Array.from([4, 1, 1, 3]);
  const b = Float64Array.from([1, 2]);
  const c = new Float64Array(2);
  ridgeSolve(2, G, b, 0, new Float64Array(4), new Float64Array(2), c, 10);
  expect(4 * c[0] + c[1]).toBeCloseTo(1, 5);
  expect(c[0] + 3 * c[1]).toBeCloseTo(2, 5);
  const c2 = Float64Array.from([7, 7]);
  ridgeSolve(2, Float64Array.from([1, 2, 2, 1]), b, 0, new Float64Array(4), new Float64Array(2), c2, 10);
  expect(Array.from(c2)).toEqual([7, 7]);
  expect(momentAt(0.375, [0, 0.25, 0.5, 1], [8, 4, 2, 0])).toBeCloseTo(3, 10);
});
