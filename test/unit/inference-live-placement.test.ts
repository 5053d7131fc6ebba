// Live streams are spread over the live workers (LIVE_WORKERS) even when they open together at the engine's first
// live stream, while only one live worker is ready (live/pool.ts place()): a stream placed on a worker still starting
// waits for it. Real engine, worker threads and ONNX Runtime.
import { loadConfig } from '../../src/config';
import { createInferenceEngine } from '../../src/inference/runtime/engine';
import type { InferenceEngine, LiveStream } from '../../src/inference/types';

describe('live stream placement', () => {
  let engine: InferenceEngine;

  beforeAll(async () => {
    engine = await createInferenceEngine({ ...loadConfig(), workers: 1, liveWorkers: 2 }, { warmUp: false });
  });
  afterAll(() => engine.close());

  test('ten streams opened at once before any live worker has started: five on each, all served', async () => {
    expect(engine.liveState!().perWorker).toEqual([]);
    const outputs: number[] = Array.from({ length: 10 }, () => 0);
    const failures: Error[] = [];
    const streams: LiveStream[] = await Promise.all(
      outputs.map((_, i) =>
        engine.openLive!(
          { model: 'nsm-2', channels: 1, sampleRate: 16000, encoding: 'pcm_s16le', attenuationLimitDb: 0 },
          { output: (b) => (outputs[i] += b.byteLength), error: (e) => failures.push(e) },
        ),
      ),
    );
    expect(engine.liveState!().perWorker).toEqual([5, 5]);
    // Half a second of a tone each, in 20 ms chunks; every stream answers all of it.
    const chunk = new Int16Array(320).map((_, i) => Math.round(8000 * Math.sin((2 * Math.PI * 440 * i) / 16000)));
    for (let k = 0; k < 25; k++) for (const s of streams) s.push(new Uint8Array(chunk.buffer.slice(0)));
    await Promise.all(streams.map((s) => s.end()));
    expect(failures).toEqual([]);
    expect(outputs).toEqual(outputs.map(() => 25 * 640));
    expect(engine.liveState!().perWorker).toEqual([0, 0]);
  }, 60_000);
});
