// Echo scenes at 8 kHz for the development tools (echo-ab --narrow): the bench's 16 kHz scenes band-limited and
// decimated, and a canceller run as the narrow-band chain runs it (inference/models/narrowband.ts): microphone and
// reference interpolated 2:1, the canceller at 16 kHz, its output decimated; everything aligned to the 8 kHz scene.
import { Decimator2, HALF_BAND_DELAY, Interpolator2 } from '../../src/dsp/halfband';
import type { Scene } from './echo-scenes';

export const NARROW_FS = 8000;

/**
 * The scene at 8 kHz: every part through the same decimator (phase 1: 8 kHz sample i stands for 16 kHz sample
 * 2 (i − 19)), so the parts stay aligned; sample positions halved and shifted alike.
 */
export function narrowScene(s: Scene): Scene {
  const down = (x: Float32Array): Float32Array => new Decimator2(1).process(x);
  const shift = (HALF_BAND_DELAY - 1) / 2;
  const at = (i: number | null): number | null => (i === null ? null : Math.round(i / 2) + shift);
  return { ...s, mic: down(s.mic), ref: down(s.ref), echo: down(s.echo), near: down(s.near), changeAt: at(s.changeAt), nearFrom: at(s.nearFrom) };
}

/**
 * `run16` (a canceller's output at 16 kHz, its latency removed, as long as its input) on the 8 kHz scene through the
 * half-band pair: the output at 8 kHz, aligned with the scene (the pair's delay, HALF_BAND_DELAY 8 kHz samples, removed).
 */
export function runNarrow<T extends { out: Float32Array }>(run16: (s: { mic: Float32Array; ref: Float32Array }) => T, s8: Scene): T {
  const n = s8.mic.length;
  const up = (x: Float32Array): Float32Array => new Interpolator2().process(x);
  const r = run16({ mic: up(s8.mic), ref: up(s8.ref) });
  const y = new Decimator2(0).process(r.out);
  const out = new Float32Array(n);
  out.set(y.subarray(HALF_BAND_DELAY, Math.min(y.length, HALF_BAND_DELAY + n)));
  return { ...r, out };
}
