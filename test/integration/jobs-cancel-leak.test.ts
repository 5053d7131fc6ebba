// Canceling work (a canceled job, a client that goes away) at any moment must leave nothing running: no ffmpeg child
// and no engine stream, also when the abort lands while the pipeline is still opening its source, its engine stream
// or its sink (a resource that arrives after the abort must be released, not dropped).
import fs from 'node:fs';
import path from 'node:path';
import { denoiseFile } from '../../src/pipeline';
import { createInferenceEngine } from '../../src/inference/runtime/engine';
import type { InferenceEngine } from '../../src/inference/types';
import type { Config } from '../../src/config';
import { eventually, fixture, testConfig } from '../helpers/service-helpers';
import { until } from '../helpers/jobs-helpers';

/** ffmpeg processes whose parent is this test process. */
function ffmpegChildren(): number[] {
  const out: number[] = [];
  for (const name of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    try {
      const stat = fs.readFileSync(`/proc/${name}/stat`, 'utf8');
      const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
      if (ppid !== process.pid) continue;
      if (fs.readFileSync(`/proc/${name}/cmdline`, 'utf8').includes('ffmpeg')) out.push(Number(name));
    } catch {
      // exited meanwhile
    }
  }
  return out;
}

describe('aborting the pipeline at any moment leaves nothing behind', () => {
  let config: Config;
  let engine: InferenceEngine;

  beforeAll(async () => {
    config = testConfig();
    engine = await createInferenceEngine({ ...config, workers: 1 });
  });

  afterAll(async () => {
    await engine.close();
    fs.rmSync(config.dataDir, { recursive: true, force: true });
  });

  test.each([
    ['WAV read in-process', fixture('speech-noisy-44k1-stereo.wav'), 'wav'],
    ['MP3 through the ffmpeg decoder', fixture('speech-noisy-44k1-stereo.mp3'), 'flac'],
  ] as const)('%s: aborts after 0–30 ms', async (_label, input, format) => {
    const out = path.join(config.dataDir, `out.${format}`);
    for (const delayMs of [0, 0, 1, 1, 2, 3, 5, 8, 12, 20, 30]) {
      const ac = new AbortController();
      const run = denoiseFile({ config, engine }, input, out, {
        model: 'nsm-1',
        attenuationLimitDb: 0,
        outputFormat: format,
        keepInputSampleRate: true,
        signal: ac.signal,
      });
      if (delayMs === 0) queueMicrotask(() => ac.abort());
      else setTimeout(() => ac.abort(), delayMs);
      await run.then(
        () => undefined, // finished before the abort: fine
        (err: Error) => expect(err.name).toBe('AbortError'),
      );
    }
    // Whatever was opened while the aborts landed is closed: no decoder or encoder left, no engine stream pinned.
    await until(async () => (ffmpegChildren().length === 0 ? true : undefined), 5000, 50).catch(() => undefined);
    expect(ffmpegChildren()).toEqual([]);
    // The engine releases an aborted stream's worker state asynchronously.
    await eventually(() => engine.state().streams === 0).catch(() => undefined);
    expect(engine.state().streams).toBe(0);
  });
});
