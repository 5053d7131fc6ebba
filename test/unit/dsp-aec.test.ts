// The echo canceller (src/dsp/aec) on generated rooms (image method, scripts/bench/echo-scenes.ts) with speech from
// the LibriSpeech clip: convergence in far-end single talk, the near-end talker kept in double talk, re-convergence
// after the echo path changes, and the bulk delay estimate up to 500 ms. Unit tier: no child process, no server.
import { magSdr, erle } from '../../scripts/bench/echo-metrics';
import { makeScene, type Scene } from '../../scripts/bench/echo-scenes';
import { PRIOR_ZONE_DB, PriorScale } from '../../src/dsp/aec/prior-scale';
import { AecArena } from '../../src/dsp/aec/kernel';
import { RefRing } from '../../src/dsp/aec/ref-ring';
import { RealFFT } from '../../src/dsp/fft';
import { FS, pushSpectrum, runCanceller, talkers } from '../helpers/dsp-aec-helpers';

jest.setTimeout(30_000);

/** ERLE of the canceller's output and of its linear filter alone (suppressor off) over [from, to) seconds. */
async function erles(scene: Scene, from: number, to: number): Promise<{ full: number; linear: number; delayMs: number | null }> {
  const full = runCanceller([scene.mic], scene.ref);
  const linear = runCanceller([scene.mic], scene.ref, { linearOnly: true });
  return {
    full: erle(scene, full.out[0], from * FS, to * FS),
    linear: erle(scene, linear.out[0], from * FS, to * FS),
    delayMs: full.stats.delayMs,
  };
}

test('far-end single talk: the filter converges and the echo goes (ERLE after 6 s)', async () => {
  const scene = makeScene({ kind: 'st', seed: 11, seconds: 10, rt60: 0.35, delayMs: 120, speaker: 'linear' }, await talkers());
  const r = await erles(scene, 6, 10);
  expect(r.linear).toBeGreaterThan(15);
  expect(r.full).toBeGreaterThan(35);
  expect(Math.abs(r.delayMs! - scene.delayMs)).toBeLessThanOrEqual(40);
});

test('a clipping loudspeaker: the suppressor adds to what the linear filter can do', async () => {
  // Clipping at 55 % of the peak leaves bursts of distortion the linear filter cannot model; the suppressor's
  // estimate follows them only in part (docs/echo.md: clipping is where ERLE stays below 35 dB).
  const scene = makeScene({ kind: 'st', seed: 12, seconds: 10, rt60: 0.3, delayMs: 60, speaker: 'clip' }, await talkers());
  const r = await erles(scene, 6, 10);
  expect(r.linear).toBeGreaterThan(12);
  expect(r.full).toBeGreaterThan(r.linear + 2);
  expect(r.full).toBeGreaterThan(20);
});

test('double talk: the near-end talker survives and the filter does not diverge', async () => {
  // Far end from 0 s, near end from 4 s at 0 dB signal-to-echo ratio.
  const scene = makeScene({ kind: 'dt', seed: 13, seconds: 10, rt60: 0.35, delayMs: 90, speaker: 'linear', serDb: 0 }, await talkers());
  const n = scene.mic.length;
  const full = runCanceller([scene.mic], scene.ref);
  const linear = runCanceller([scene.mic], scene.ref, { linearOnly: true });
  const sdrMic = magSdr(scene.near, scene.mic, 6 * FS, n);
  const sdrOut = magSdr(scene.near, full.out[0], 6 * FS, n);
  expect(sdrOut).toBeGreaterThan(sdrMic + 8);
  expect(sdrOut).toBeGreaterThan(10);
  // The linear filter's echo residual (its output minus the near end and noise) stays well below the echo: it kept
  // cancelling through the double talk instead of adapting to the near-end talker.
  let echo = 0;
  let resid = 0;
  for (let i = 7 * FS; i < n; i++) {
    echo += scene.echo[i] * scene.echo[i];
    const r = linear.out[0][i] - (scene.mic[i] - scene.echo[i]);
    resid += r * r;
  }
  expect(10 * Math.log10(echo / resid)).toBeGreaterThan(12);
});

test('echo path change: back above 25 dB ERLE within 2 s', async () => {
  // The loudspeaker moves at 5 s (half of the clip).
  const scene = makeScene({ kind: 'path', seed: 14, seconds: 10, rt60: 0.3, delayMs: 150, speaker: 'linear' }, await talkers());
  const full = runCanceller([scene.mic], scene.ref);
  const before = erle(scene, full.out[0], 3 * FS, 5 * FS);
  const after = erle(scene, full.out[0], 7 * FS, 10 * FS);
  expect(before).toBeGreaterThan(30);
  expect(after).toBeGreaterThan(25);
});

test('hostile samples (1e30, NaN, ±Inf) in the reference and the microphone: the output stays finite and it cancels again', async () => {
  // A float WAV or a pcm_f32le stream can carry anything; before the canceller bounded its input one sample of 1e30
  // left its filter non-finite and its output silent for the rest of the call.
  const scene = makeScene({ kind: 'st', seed: 15, seconds: 10, rt60: 0.3, delayMs: 80, speaker: 'linear' }, await talkers());
  const mic = scene.mic.slice();
  const ref = scene.ref.slice();
  const bad = [1e30, NaN, Infinity, -1e30, -Infinity];
  for (let i = 3 * FS, k = 0; i < 3 * FS + 40; i += 4, k++) {
    ref[i] = bad[k % 5];
    mic[i + 2000] = bad[(k + 2) % 5];
  }
  const clean = runCanceller([scene.mic], scene.ref);
  const hit = runCanceller([mic], ref);
  expect(hit.out[0].every((x) => Number.isFinite(x))).toBe(true);
  expect(Number.isFinite(hit.stats.erleDb ?? 0)).toBe(true);
  // Cancelling again: 6–10 s within 6 dB of the same call without the hostile samples.
  const after = erle(scene, hit.out[0], 6 * FS, 10 * FS);
  expect(after).toBeGreaterThan(25);
  expect(after).toBeGreaterThan(erle(scene, clean.out[0], 6 * FS, 10 * FS) - 6);
});

test.each([500, 1000])('a %i Hz tone as the reference (hold music, ring-back): the linear filter adapts', (hz) => {
  // 500 Hz and 1 kHz sit on bins 8 and 16, between the bins the far-end activity test sampled: the filter never
  // adapted to them (linear ERLE 0 dB) while 1031 Hz reached 36 dB (far-activity.ts). A pure tone's delay is ambiguous
  // (any lag a period apart fits), so how far it gets varies with the estimator's pick (15-57 dB here): > 10 dB.
  const n = 5 * FS;
  let seed = 7;
  const rnd = (): number => ((seed = (seed * 1103515245 + 12345) % 2147483648) / 2147483648) - 0.5;
  const ir = new Float32Array(0.1 * FS);
  for (let i = 0; i < ir.length; i++) ir[i] = rnd() * Math.exp(-i / (0.03 * FS)) * 0.3;
  ir[0] = 0.5;
  const ref = new Float32Array(n);
  for (let i = 0; i < n; i++) ref[i] = 0.3 * Math.sin((2 * Math.PI * hz * i) / FS);
  const mic = new Float32Array(n);
  const delay = 0.05 * FS;
  for (let i = delay; i < n; i++) {
    let a = 0;
    for (let k = 0; k < ir.length && k <= i - delay; k++) a += ir[k] * ref[i - delay - k];
    mic[i] = a + 1e-4 * rnd();
  }
  const out = runCanceller([mic], ref, { linearOnly: true }).out[0];
  let m = 0;
  let o = 0;
  for (let i = 3 * FS; i < n; i++) {
    m += mic[i] * mic[i];
    o += out[i] * out[i];
  }
  expect(10 * Math.log10(m / o)).toBeGreaterThan(10);
});

test.each([30, 260, 490])('bulk delay estimate within 40 ms of %i ms', async (delayMs) => {
  const scene = makeScene({ kind: 'st', seed: 20 + delayMs, seconds: 5, rt60: 0.25, delayMs, speaker: 'linear' }, await talkers());
  const r = runCanceller([scene.mic], scene.ref);
  expect(r.stats.delayMs).not.toBeNull();
  // Reverberation can only make the envelope peak late, never early.
  expect(r.stats.delayMs! - scene.delayMs).toBeGreaterThanOrEqual(-10);
  expect(r.stats.delayMs! - scene.delayMs).toBeLessThanOrEqual(40);
});

test.each([14, 15])('a reference 30 dB quieter (seed %i): the prior follows the echo path gain, back above 25 dB within 2 s of a path change', async (seed) => {
  // The scene's echo is as loud as ever, the reference 30 dB quieter than the bench's: |W|² is 1000× larger than the
  // prior was tuned for. With the tuned prior left as it was this scene stayed at 17–20 dB after the change.
  const scene = makeScene({ kind: 'path', seed, seconds: 10, rt60: 0.3, delayMs: 150, speaker: 'linear' }, await talkers());
  const ref = scene.ref.map((v) => v * 0.0316);
  const full = runCanceller([scene.mic], ref);
  expect(erle(scene, full.out[0], 7 * FS, 10 * FS)).toBeGreaterThan(25);
});

/**
 * PriorScale on white noise: the reference x, the microphone `gain` dB × x two hops late plus, optionally, near-end
 * noise `nearDb` louder than that echo. Returns the factor it settles on (1 on every other hop).
 */
function priorFactor(gainDb: number, nearDb: number | null, echo = true, tonal = false, backend: 'js' | 'wasm' = 'js'): number {
  const hop = 128;
  const lags = 8;
  const arena = new AecArena(RefRing.floats(hop + 1, lags) + PriorScale.floats(hop, lags), backend);
  const ring = new RefRing(arena, hop + 1, lags);
  const s = new PriorScale(arena, PRIOR_ZONE_DB, hop, lags);
  const fft = new RealFFT(2 * hop);
  let seed = 7;
  const noise = (): number => {
    seed = (seed * 1103515245 + 12345) % 2147483648;
    return seed / 2147483648 - 0.5;
  };
  // tonal: reference and near end both the first 10 harmonics of 250 Hz (on bins), in other phases (a voice and another of the same pitch).
  const harmonics = (phase: number) => (h: number, i: number): number => {
    let v = 0;
    for (let m = 1; m <= 10; m++) v += Math.sin((2 * Math.PI * 250 * m * (h * hop + i)) / 16000 + phase * m * m) / 10;
    return v;
  };
  const refTone = harmonics(0.3);
  const nearTone = harmonics(1.9);
  const x = Array.from({ length: 140 }, (_, h) => Float32Array.from({ length: hop }, (_v, i) => (tonal ? refTone(h, i) : noise())));
  const g = Math.pow(10, gainDb / 20);
  const frame = new Float64Array(2 * hop);
  const re = new Float64Array(hop + 1);
  const im = new Float64Array(hop + 1);
  let factor = 1;
  for (let h = 2; h < 140; h++) {
    frame.set(x[h - 1], 0);
    frame.set(x[h], hop);
    fft.forward(frame, 0, re, im);
    pushSpectrum(ring, re, im);
    const mic = Float32Array.from({ length: hop }, (_, i) => (echo ? g * x[h - 2][i] : 0) + (nearDb === null ? 0 : g * Math.pow(10, nearDb / 20) * (tonal ? nearTone(h, i) : noise())));
    let refE = 0;
    for (let i = 0; i < hop; i++) refE += x[h][i] * x[h][i];
    if (s.settled) {
      expect(s.hop(true, refE, mic.map((v) => v * 1e3), ring)).toBe(1); // settled: later hops change nothing
      continue;
    }
    const f = s.hop(true, refE, mic, ring);
    if (s.settled) factor = f;
    else expect(f).toBe(1);
  }
  expect(s.settled).toBe(true);
  return factor;
}

test('PriorScale: one factor after a second of reference, never below 1, nothing within 3 dB of the bench gain', () => {
  expect(PRIOR_ZONE_DB).toBe(3);
  expect(priorFactor(-8.4, null)).toBe(1);
  expect(priorFactor(-30, null)).toBe(1);
  expect(priorFactor(-8.4 + 2.5, null)).toBe(1);
  const f3 = priorFactor(-8.4 + 3.5, null);
  expect(10 * Math.log10(f3)).toBeGreaterThan(3);
  expect(10 * Math.log10(f3)).toBeLessThan(4);
  const f6 = priorFactor(-8.4 + 6.5, null);
  expect(10 * Math.log10(f6)).toBeGreaterThan(6);
  expect(10 * Math.log10(f6)).toBeLessThan(7);
  expect(10 * Math.log10(priorFactor(-8.4 + 26, null))).toBeCloseTo(26, 0);
});

test('PriorScale: near-end sound does not count as echo (it does not correlate with the reference)', () => {
  // The energy ratio alone would read 20 dB above the bench's gain here and scale the prior 100×.
  expect(priorFactor(-8.4, 20)).toBe(1);
  // No echo at all, only the near end at the level a +20 dB echo would have.
  expect(priorFactor(-8.4 + 20, 0, false)).toBe(1);
  // No echo, a near end of the reference's very harmonics, as loud as a +14 dB echo would be: in phase with it hop
  // after hop, more than chance counts (the acausal lags measure that). Perfect coherence is harsh: 20 dB up, the
  // first hops' half frames (1 % of each lag's sum) leave 8 dB.
  expect(priorFactor(-8.4 + 14, 0, false, true)).toBe(1);
  // A real +20 dB echo with near-end sound 10 dB above it still scales (within 2 dB).
  expect(Math.abs(10 * Math.log10(priorFactor(-8.4 + 20, 10)) - 20)).toBeLessThan(2);
});

test('PriorScale: its cross-spectra give the same factor, bit for bit, in WebAssembly as in JavaScript', () => {
  // The sums are float64 in both back ends with each lane's operations in the JavaScript's order, so the factor (and
  // the canceller's output: dsp-aec-golden.test.ts) does not depend on the back end's kernel.
  for (const [gain, near, echo, tonal] of [[-8.4 + 6.5, null, true, false], [-8.4 + 26, null, true, false], [-8.4 + 20, 10, true, false], [-8.4 + 14, 0, false, true]] as const) {
    const js = priorFactor(gain, near, echo, tonal, 'js');
    expect(priorFactor(gain, near, echo, tonal, 'wasm')).toBe(js);
  }
});

test('a filter shorter than the shadow filter (64 ms): adopting the shadow after a path change does not throw, and it cancels', async () => {
  // The shadow filter's 16 partitions (128 ms) replace the main filter's first ones; with fewer main partitions that
  // copy ran past the end (RangeError) until the shadow was capped at the main filter's length.
  const scene = makeScene({ kind: 'path', seed: 14, seconds: 10, rt60: 0.2, delayMs: 20, speaker: 'linear' }, await talkers());
  const r = runCanceller([scene.mic], scene.ref, { filterMs: 64 });
  expect(r.out[0].every((v) => Number.isFinite(v))).toBe(true);
  expect(erle(scene, r.out[0], 7 * FS, 10 * FS)).toBeGreaterThan(10);
});
