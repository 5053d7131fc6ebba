// The residual share as a regression slope (src/dsp/aec/residual-slope.ts, option `residualSlope`, on by default): the slope finds a
// residual that follows the echo estimate; under an independent near-end talker its correlation gate holds it back;
// on a scene whose reference went through Opus at 16 kb/s (the bundled ffmpeg) the canceller with it leaves less
// echo than without. Unit tier.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { ResidualSlope } from '../../src/dsp/aec/residual-slope';
import { seeded } from '../../scripts/lib/stats';
import { erle } from '../../scripts/bench/echo-metrics';
import { throughCodec } from '../../scripts/bench/echo-codec';
import { makeScene } from '../../scripts/bench/echo-scenes';
import { FS, runCanceller, talkers } from '../helpers/dsp-aec-helpers';
import { echoScene } from '../helpers/echo-helpers';

jest.setTimeout(60_000);

const f64 = (n: number): Float64Array => new Float64Array(n);

/** Band sums of 8 bins each over the first `bins` (what residual-ratio.ts hands the slope). */
function bandSums(x: Float64Array, bins = x.length): Float64Array {
  const out = new Float64Array(Math.ceil(bins / 8));
  for (let k = 0; k < bins; k++) out[k >> 3] += x[k];
  return out;
}

/** 3000 hops of a residual that follows |Ŷ|² (share rho, fluctuating) and, with `talker`, an independent talker's bursts. */
function feed(slope: ResidualSlope, rho: number, talker: boolean, seed: number): number {
  const rnd = seeded(seed);
  const e = new Float64Array(16);
  const y = new Float64Array(16);
  let eSum = 0;
  let ySum = 0;
  for (let hop = 0; hop < 3000; hop++) {
    // Far-end power that swings by 30 dB, the residual a fluctuating share of it, and a talker on half the hops whose
    // power swings alike but does not depend on the far end's, on average ten times the residual.
    const level = Math.pow(10, 3 * rnd());
    const burst = talker && rnd() < 0.5 ? 20 * rho * Math.pow(10, 3 * rnd()) : 0;
    for (let k = 0; k < 16; k++) {
      y[k] = level * (0.5 + rnd());
      e[k] = rho * y[k] * (0.2 + 1.6 * rnd()) + burst;
    }
    slope.update(bandSums(e), bandSums(y));
    if (hop >= 1000) for (let k = 0; k < 16; k++) ((eSum += e[k]), (ySum += y[k]));
  }
  return eSum / ySum;
}

test('the slope finds a residual that follows |Ŷ|² and fluctuates by itself', () => {
  const rho = 0.05;
  for (const seed of [7, 8, 9]) {
    for (const corr of [-1, 0.35]) {
      const slope = new ResidualSlope(16, 8, 250, 1, f64, 16, corr);
      feed(slope, rho, false, seed);
      const beta = slope.raise(new Float64Array(16).fill(1e-4));
      for (const k of [0, 8]) {
        expect(beta[k]).toBeGreaterThan(rho * 0.8);
        expect(beta[k]).toBeLessThan(rho * 1.25);
      }
    }
  }
});

test('under an independent talker the correlation gate holds the slope back', () => {
  const rho = 0.05;
  for (const seed of [7, 8, 9]) {
    const ungated = new ResidualSlope(16, 8, 250, 1, f64);
    const meanRatio = feed(ungated, rho, true, seed);
    // The talker is most of the error: its mean ratio is far above the residual's share, and over seconds it makes
    // the slope noisy (1.5-2.0 × rho on these seeds), which is what cost double talk without the gate.
    expect(meanRatio).toBeGreaterThan(5 * rho);
    const gated = new ResidualSlope(16, 8, 250, 1, f64, 16, 0.35);
    feed(gated, rho, true, seed);
    const beta = gated.raise(new Float64Array(16).fill(1e-4));
    expect(beta[0]).toBe(1e-4);
    expect(beta[8]).toBe(1e-4);
  }
});

test('raise keeps the larger share, at most 1, and leaves the bins above the judged ones alone', () => {
  const slope = new ResidualSlope(20, 8, 10, 1, f64, 16);
  const e = new Float64Array(20);
  const y = new Float64Array(20);
  for (let hop = 0; hop < 200; hop++) {
    const level = 1 + (hop % 7);
    for (let k = 0; k < 20; k++) {
      y[k] = level;
      // Band 0: twice the echo estimate (the slope clamps to 1); band 1: a tenth of it.
      e[k] = (k < 8 ? 2 : 0.1) * level;
    }
    slope.update(bandSums(e, 16), bandSums(y, 16));
  }
  const given = new Float64Array(20).fill(0.3);
  const beta = slope.raise(given);
  expect(beta[0]).toBe(1);
  expect(beta[8]).toBe(0.3);
  given.fill(0.01);
  const again = slope.raise(given);
  expect(again[8]).toBeCloseTo(0.1, 6);
  expect(again[16]).toBe(0.01);
});

test('a reference through Opus at 16 kb/s: less echo left with the slope', async () => {
  const scene = makeScene({ kind: 'st', seed: 93002, seconds: 14 }, await talkers());
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'nsm-slope-'));
  try {
    const coded = throughCodec(scene.ref, 'opus-16', dir);
    const off = erle(scene, runCanceller([scene.mic], coded, { residualSlope: 0 }).out[0], 8 * FS, scene.mic.length);
    const on = erle(scene, runCanceller([scene.mic], coded).out[0], 8 * FS, scene.mic.length);
    // Measured 2026-11-30: 23.3 → 37.1 dB (the exact reference: 49.8 either way).
    expect(on).toBeGreaterThan(off + 5);
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});

test('samples that cannot be audio (bounded 1e30, NaN, ±Inf) do not teach the slope: the near end after them is heard', async () => {
  const s = await echoScene({ rate: 16000, seconds: 8, nearFrom: 6, delayMs: 70 });
  const mic = s.mic.slice();
  const ref = s.ref.slice();
  const bad = [1e30, NaN, Infinity, -Infinity, -1e30];
  for (let k = 0; k < 200; k++) (k % 2 ? ref : mic)[2 * FS + 80 * k] = bad[k % 5];
  const level = (x: Float32Array): number => {
    let e = 0;
    for (let i = 6.5 * FS; i < 8 * FS; i++) e += x[i] * x[i];
    return 10 * Math.log10(e / (1.5 * FS));
  };
  const clean = level(runCanceller([s.mic], s.ref).out[0]);
  const hostile = level(runCanceller([mic], ref).out[0]);
  const hostileNoSlope = level(runCanceller([mic], ref, { residualSlope: 0 }).out[0]);
  // Measured −31.1 dB (clean) and −32.7 with and without the slope; 3.7 dB under that with the slope before it left
  // such blocks out.
  expect(Math.abs(hostile - hostileNoSlope)).toBeLessThan(0.5);
  expect(hostile).toBeGreaterThan(clean - 3);
});
