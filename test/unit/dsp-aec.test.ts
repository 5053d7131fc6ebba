// The echo canceller (src/dsp/aec) on generated rooms (image method, scripts/bench/echo-scenes.ts) with speech from
// the LibriSpeech clip: convergence in far-end single talk, the near-end talker kept in double talk, re-convergence
// after the echo path changes, and the bulk delay estimate up to 500 ms. Unit tier: no child process, no server.
import { magSdr, erle } from '../../scripts/bench/echo-metrics';
import { makeScene, type Scene } from '../../scripts/bench/echo-scenes';
import { FS, runCanceller, talkers } from '../helpers/dsp-aec-helpers';

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

test.each([30, 260, 490])('bulk delay estimate within 40 ms of %i ms', async (delayMs) => {
  const scene = makeScene({ kind: 'st', seed: 20 + delayMs, seconds: 5, rt60: 0.25, delayMs, speaker: 'linear' }, await talkers());
  const r = runCanceller([scene.mic], scene.ref);
  expect(r.stats.delayMs).not.toBeNull();
  // Reverberation can only make the envelope peak late, never early.
  expect(r.stats.delayMs! - scene.delayMs).toBeGreaterThanOrEqual(-10);
  expect(r.stats.delayMs! - scene.delayMs).toBeLessThanOrEqual(40);
});
