// An abort that lands while the pipeline is still starting (ffmpeg spawned, header not yet read; engine stream or
// encoder being opened) must not leave anything running: the source, stream or sink that resolves after the run
// failed is released. Before this, such a late ffmpeg decoder stayed alive, blocked on its full stdout pipe, for as
// long as the process lived (found as leftover ffmpeg children in later test files of the same jest process).
import fs from 'node:fs';
import path from 'node:path';
import { loadConfig } from '../src/config';
import { createInferenceEngine } from '../src/inference/engine';
import type { InferenceEngine } from '../src/inference/types';
import { AudioAbortedError, denoiseFile } from '../src/audio/pipeline';
import { childProcesses, fixture, makeTmpDir } from './audio-helpers';

const config = loadConfig();
let engine: InferenceEngine;
let tmp: string;

beforeAll(async () => {
  tmp = makeTmpDir('nsm-abort-start-');
  engine = await createInferenceEngine({ ...config, workers: 1 });
});
afterAll(async () => {
  await engine?.close();
  fs.rmSync(tmp, { recursive: true, force: true });
});

async function settle(condition: () => boolean, ms = 3000): Promise<boolean> {
  const end = Date.now() + ms;
  while (!condition() && Date.now() < end) await new Promise((r) => setTimeout(r, 25));
  return condition();
}

test('aborts at every moment of the start-up leave no ffmpeg child and no engine stream behind', async () => {
  const before = new Set(childProcesses().map((c) => c.pid));
  const leaks: string[] = [];
  // An MP3 goes through the ffmpeg decoder; FLAC output through the ffmpeg encoder.
  for (const delayMs of [0, 1, 2, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96]) {
    const controller = new AbortController();
    const out = path.join(tmp, `out-${delayMs}.flac`);
    const run = denoiseFile({ config, engine }, fixture('speech-noisy-44k1-stereo.mp3'), out, {
      model: 'nsm-2',
      attenuationLimitDb: 0,
      outputFormat: 'flac',
      keepInputSampleRate: true,
      signal: controller.signal,
    });
    setTimeout(() => controller.abort(), delayMs);
    const err = await run.then(() => undefined, (e: unknown) => e);
    if (!(err instanceof AudioAbortedError) && err !== undefined) throw err;
    const clean = await settle(() => childProcesses().filter((c) => c.comm === 'ffmpeg' && !before.has(c.pid)).length === 0 && engine.state().streams === 0);
    if (!clean) {
      leaks.push(`abort after ${delayMs} ms: ${childProcesses().filter((c) => c.comm === 'ffmpeg').length} ffmpeg, ${engine.state().streams} streams`);
      for (const c of childProcesses()) if (c.comm === 'ffmpeg' && !before.has(c.pid)) process.kill(c.pid, 'SIGKILL');
    }
  }
  expect(leaks).toEqual([]);
});
