// The suppressor's level-rise term (src/dsp/aec/level-rise.ts, `terms: 31`, the default; `terms: 15` is without it): on a generated scene with a hard-clipping
// loudspeaker whose far end gets louder than before, the echo left in far-end single talk falls; a double-talk scene's
// near end keeps its SDR; the output does not depend on the chunking. Unit tier.
import { erle, magSdr } from '../../scripts/bench/echo-metrics';
import { makeScene } from '../../scripts/bench/echo-scenes';
import { FS, runCanceller, talkers } from '../helpers/dsp-aec-helpers';

jest.setTimeout(60_000);

test('with a clipping loudspeaker, the echo after the far end rises above its recent peak is suppressed', async () => {
  // 12 s, clipping at 40 % of the reference's peak, bulk delay 197 ms, RT60 0.25 s.
  const scene = makeScene({ kind: 'st', seed: 24, seconds: 12, speaker: 'clip', clipAt: 0.4 }, await talkers());
  // The term's own effect, with the residual slope off on both sides (since 2026-11-30 on by default, it takes the
  // base from 22.5 to 28.3 dB and the term from 35.0 to 36.7).
  const base = erle(scene, runCanceller([scene.mic], scene.ref, { terms: 15, residualSlope: 0 }).out[0], 6 * FS, 12 * FS);
  const rise = erle(scene, runCanceller([scene.mic], scene.ref, { terms: 31, residualSlope: 0 }).out[0], 6 * FS, 12 * FS);
  // Measured 27.3 → 43.5 dB with the canceller before delayFromMic (2026-11-30), 22.5 → 35.0 with it: this scene's
  // filter finds the delay at once now and ends 2 dB less linear ERLE (docs/echo.md, "The delay estimator hears the
  // microphone"). `forgetFree` (2026-11-30) does not act here: it reads the near-end evidence, which `terms` 15 and 31 lack.
  expect(rise).toBeGreaterThan(base + 10);
  expect(rise).toBeGreaterThan(32);
});

test('double talk: the near end keeps its SDR', async () => {
  const t = await talkers();
  for (const [seed, serDb] of [
    [13, 0],
    [14, -5],
  ]) {
    const scene = makeScene({ kind: 'dt', seed, seconds: 12, speaker: 'clip', clipAt: 0.4, serDb }, t);
    const base = magSdr(scene.near, runCanceller([scene.mic], scene.ref, { terms: 15 }).out[0], 6 * FS, 12 * FS);
    const rise = magSdr(scene.near, runCanceller([scene.mic], scene.ref, { terms: 31 }).out[0], 6 * FS, 12 * FS);
    expect(rise).toBeGreaterThan(base - 0.3);
  }
});

test('the output does not depend on the chunking', async () => {
  const scene = makeScene({ kind: 'st', seed: 24, seconds: 8, speaker: 'clip', clipAt: 0.4 }, await talkers());
  const one = runCanceller([scene.mic], scene.ref, { terms: 31 }, [scene.mic.length]).out[0];
  const chunked = runCanceller([scene.mic], scene.ref, { terms: 31 }, [17, 999, 128, 320]).out[0];
  expect(Buffer.from(chunked.buffer).equals(Buffer.from(one.buffer))).toBe(true);
  // The term acted in this scene (else the check would be the canceller's without it).
  const off = runCanceller([scene.mic], scene.ref, { terms: 15 }, [scene.mic.length]).out[0];
  expect(Buffer.from(off.buffer).equals(Buffer.from(one.buffer))).toBe(false);
});
