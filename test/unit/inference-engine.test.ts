// The worker pool with real worker threads running the compiled worker and real ONNX Runtime sessions.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { loadConfig } from '../../src/config';
import { createInferenceEngine, listModels } from '../../src/inference/runtime/engine';
import { loadGraphs } from '../../src/inference/runtime/sessions';
import { STAGE1_FILE, STAGE2_FILE } from '../../src/inference/models/specs';
import { denoiseBuffer } from '../../src/inference/models/offline';
import { concatAll } from '../../src/dsp/concat';
import { DenoiseStream, InferenceEngine, MODEL_IDS, ModelId } from '../../src/inference/types';
import { seededRandom } from '../../src/audio/synthetic-noise';
import { LowFrequencyDither } from '../../src/dsp/dither';
import { LoudnessMeter } from '../../src/dsp/loudness';
import { decodeFrames, encodeInt16 } from '../../src/dsp/pcm';

const config = { ...loadConfig(), workers: 2 };

function requireModels(): void {
  for (const f of [STAGE1_FILE, STAGE2_FILE]) {
    const p = path.join(config.modelsDir, f);
    if (!fs.existsSync(p)) throw new Error(`${p} is missing: run "npm run models" (node dist/scripts/convert-models.js) first`);
  }
}

function signal(n: number, seed: number): Float32Array {
  const r = seededRandom(seed);
  const x = new Float32Array(n);
  for (let i = 0; i < n; i++) x[i] = 0.3 * Math.sin((2 * Math.PI * 220 * i) / 16000) * (i % 8000 < 4000 ? 1 : 0) + 0.05 * (r() * 2 - 1);
  return x;
}

async function runStream(stream: DenoiseStream, x: Float32Array[], chunk: number): Promise<Float32Array[]> {
  const parts: Float32Array[][] = [];
  for (let pos = 0; pos < x[0].length; pos += chunk) parts.push(await stream.push(x.map((c) => c.slice(pos, pos + chunk))));
  parts.push(await stream.end());
  return x.map((_, c) => concatAll(parts.map((p) => p[c])));
}

const NSM2 = { model: 'nsm-2' as const, channels: 1, attenuationLimitDb: 0 };

/** A pool of its own for a test that looks at queue order (no warm-up), closed afterwards. */
async function withEngine(workers: number, run: (e: InferenceEngine) => Promise<void>): Promise<void> {
  const e = await createInferenceEngine({ ...config, workers }, { warmUp: false });
  try {
    await run(e);
  } finally {
    await e.close();
  }
}

/** Opens a stream and pushes three 2 s chunks: on one worker its open and first push are posted, two pushes queued. */
async function fillWorker(e: InferenceEngine, seed: number): Promise<{ stream: DenoiseStream; pushes: Promise<Float32Array[]>[] }> {
  const stream = await e.openStream(NSM2);
  return { stream, pushes: [1, 2, 3].map((k) => stream.push([signal(32000, seed + k)])) };
}

describe('inference engine (worker pool)', () => {
  let engine: InferenceEngine;

  beforeAll(async () => {
    requireModels();
    engine = await createInferenceEngine(config);
  });

  afterAll(async () => {
    await engine?.close();
  });

  it('measureLoudness: the worker meters input and output as a meter on this thread does; without it, nothing', async () => {
    const x = [signal(40000, 7), signal(40000, 8)];
    const measured = await engine.openStream({ model: 'nsm-2', channels: 2, attenuationLimitDb: 0, measureLoudness: true });
    const plain = await engine.openStream({ model: 'nsm-2', channels: 2, attenuationLimitDb: 0 });
    const inMeter = new LoudnessMeter(16000, 2);
    const outMeter = new LoudnessMeter(16000, 2);
    for (let pos = 0; pos < 40000; pos += 7000) {
      const chunk = x.map((c) => c.slice(pos, pos + 7000));
      inMeter.push(chunk);
      outMeter.push(await measured.push(chunk.map((c) => c.slice())));
      await plain.push(chunk);
    }
    outMeter.push(await measured.end());
    await plain.end();
    const got = measured.loudness();
    expect(got).not.toBeNull();
    expect(got!.input.length).toBe(22); // 2.5 s: 25 sub-blocks of 100 ms, 22 blocks of 400 ms
    expect(Array.from(got!.input)).toEqual(Array.from(inMeter.blockPowers()));
    expect(Array.from(got!.output)).toEqual(Array.from(outMeter.blockPowers()));
    expect(got!.output[10]).toBeLessThan(got!.input[10]); // the noise went down
    expect(plain.loudness()).toBeNull();
  });

  it('reports its state', async () => {
    expect(engine.state()).toEqual({ size: 2, busy: 0, queued: 0, streams: 0, restarts: 0 });
  });

  it('runs several concurrent streams and matches the in-thread result', async () => {
    const graphs = await loadGraphs(config.modelsDir);
    const jobs: { model: ModelId; x: Float32Array[] }[] = [
      { model: 'nsm-2', x: [signal(16000, 1)] },
      { model: 'nsm-1', x: [signal(12000, 2), signal(12000, 3)] },
      { model: 'nsm-3', x: [signal(20000, 4)] },
      { model: 'nsm-2-hd', x: [signal(48000, 5)] },
    ];
    const streams = await Promise.all(jobs.map((j) => engine.openStream({ model: j.model, channels: j.x.length, attenuationLimitDb: 0 })));
    expect(engine.state().streams).toBe(4);
    expect(streams.map((s) => s.sampleRate)).toEqual([16000, 16000, 16000, 48000]);
    const outs = await Promise.all(streams.map((s, i) => runStream(s, jobs[i].x, 3000)));
    for (let i = 0; i < jobs.length; i++) {
      const expected = await denoiseBuffer(graphs, jobs[i].model, jobs[i].x);
      for (let c = 0; c < expected.length; c++) {
        expect(outs[i][c].length).toBe(jobs[i].x[c].length);
        let maxDiff = 0;
        for (let k = 0; k < expected[c].length; k++) maxDiff = Math.max(maxDiff, Math.abs(outs[i][c][k] - expected[c][k]));
        expect(maxDiff).toBeLessThan(1e-5);
      }
    }
    expect(engine.state().streams).toBe(0);
  });

  it("queue order: a stream's first messages by the stream's age, later ones by when they came", () =>
    withEngine(1, async (one) => {
      // Both opens are posted at once (the engine does not wait for them), so the worker has its two posts in flight
      // and everything below waits in the queue on this side, all submitted in this one turn of the event loop.
      const [a, c] = await Promise.all([one.openStream(NSM2), one.openStream(NSM2)]);
      const done: string[] = [];
      const track = (name: string, p: Promise<Float32Array[]>) => p.then((out) => (done.push(name), out));
      const pushes = [track('c1', c.push([signal(2000, 31)])), track('c2', c.push([signal(2000, 32)]))];
      for (let k = 1; k <= 6; k++) pushes.push(track(`a${k}`, a.push([signal(2000, 40 + k)])));
      // A stream opened after a's later chunks were queued goes behind them.
      const d = await one.openStream(NSM2);
      pushes.push(track('d1', d.push([signal(2000, 50)])));
      await Promise.all(pushes);
      // a is older than c: its first three pushes (messages 2-4 after its open) go first; its later ones rank by when
      // they came, after c's (c was open by then) and before d's.
      expect(done).toEqual(['a1', 'a2', 'a3', 'c1', 'c2', 'a4', 'a5', 'a6', 'd1']);
      for (const s of [a, c, d]) await s.end();
      expect(one.state().streams).toBe(0);
    }));

  it('a new stream goes to the first worker with room, not behind a long stream on the other', () =>
    withEngine(2, async (two) => {
      const done: string[] = [];
      const track = (name: string, p: Promise<Float32Array[]>) => p.then((out) => (done.push(name), out));
      const pushes: Promise<Float32Array[]>[] = [];
      // All in this one turn of the event loop (opens are not awaited by the engine, so nothing is answered yet):
      // a long stream with four 30 s chunks, then two short streams, then the stream S under test.
      const long = await two.openStream(NSM2);
      for (let k = 1; k <= 4; k++) pushes.push(track(`L${k}`, long.push([signal(480000, 60 + k)])));
      const m1 = await two.openStream(NSM2);
      pushes.push(track('m1', m1.push([signal(2000, 70)])));
      const m2 = await two.openStream(NSM2);
      pushes.push(track('m2', m2.push([signal(2000, 71)])));
      const s = await two.openStream(NSM2);
      pushes.push(track('S', s.push([signal(2000, 72)])));
      expect(two.state().streams).toBe(4);
      await Promise.all(pushes);
      // Pinned at open, S went to the worker with fewer streams, the long one's, and waited for its four chunks
      // (about 85 ms each). Bound when a worker has room, it runs on the other worker as soon as m1 and m2 are done.
      expect(done.indexOf('S')).toBeLessThan(done.indexOf('L2'));
      for (const x of [long, m1, m2, s]) await x.end();
      expect(two.state()).toMatchObject({ streams: 0, queued: 0 });
    }));

  it('a stream still waiting for a worker can be aborted: its requests fail, the others go on', () =>
    withEngine(1, async (one) => {
      const { stream: a, pushes: aPushes } = await fillWorker(one, 80);
      const b = await one.openStream(NSM2); // b waits for the worker
      const bPush = b.push([signal(2000, 84)]);
      expect(one.state()).toMatchObject({ streams: 2, queued: 4 }); // a's last two pushes, b's open and push
      b.abort();
      await expect(bPush).rejects.toThrow(/aborted/);
      expect(one.state().streams).toBe(1);
      const outs = await Promise.all(aPushes);
      expect(outs.every((o) => o[0].length > 0)).toBe(true);
      await a.end();
      expect(one.state()).toMatchObject({ streams: 0, queued: 0 });
    }));

  it('a stream still waiting for a worker survives a worker crash and runs on its replacement', () =>
    withEngine(1, async (one) => {
      const { pushes: aPushes } = await fillWorker(one, 90);
      const b = await one.openStream(NSM2); // b waits for the worker
      const bx = [signal(6000, 94)];
      const bOut = runStream(b, bx, 3000);
      (one as unknown as { crashWorkerForTest(i: number): void }).crashWorkerForTest(0);
      const aResults = await Promise.allSettled(aPushes);
      expect(aResults.some((r) => r.status === 'rejected' && /worker crashed/.test(String(r.reason)))).toBe(true);
      const out = await bOut;
      expect(out[0].length).toBe(bx[0].length);
      expect(one.state()).toMatchObject({ streams: 0, restarts: 1 });
    }));

  it('rejects bad options', async () => {
    await expect(engine.openStream({ model: 'nsm-9' as ModelId, channels: 1, attenuationLimitDb: 0 })).rejects.toThrow(/unknown model/);
    await expect(engine.openStream({ model: 'nsm-2', channels: 0, attenuationLimitDb: 0 })).rejects.toThrow(/channel/);
  });

  it('a worker crash fails only its streams, and the worker is replaced', async () => {
    const a = await engine.openStream({ model: 'nsm-2', channels: 1, attenuationLimitDb: 0 }); // worker 0
    const b = await engine.openStream({ model: 'nsm-2', channels: 1, attenuationLimitDb: 0 }); // worker 1
    await a.push([signal(4000, 6)]);
    const first = await b.push([signal(4000, 7)]);
    (engine as unknown as { crashWorkerForTest(i: number): void }).crashWorkerForTest(0);
    await expect(a.push([signal(4000, 8)])).rejects.toThrow(/worker crashed/);
    await expect(a.end()).rejects.toThrow();
    // The other worker's stream is untouched.
    const rest = await b.push([signal(4000, 9)]);
    const tail = await b.end();
    expect(first[0].length + rest[0].length + tail[0].length).toBe(8000);
    expect(engine.state().restarts).toBe(1);
    // The replacement worker serves new streams.
    const c = await engine.openStream({ model: 'nsm-1', channels: 1, attenuationLimitDb: 0 });
    const out = await runStream(c, [signal(5000, 10)], 5000);
    expect(out[0].length).toBe(5000);
    expect(engine.state()).toMatchObject({ size: 2, restarts: 1, streams: 0 });
  });

  it('PCM stream: the worker decodes the bytes, and returns the output dithered and rounded as the WAV sink would write it', async () => {
    // The same audio as s16 bytes and as the planar float32 decodeFrames makes of them, in chunks of odd sizes.
    const frames = 37_000;
    const x = [signal(frames, 21), signal(frames, 22)];
    const bytes = encodeInt16(x);
    const planar = decodeFrames(bytes, { format: 's16', channels: 2, blockAlign: 4 });
    const opts = { model: 'nsm-3' as const, channels: 2, attenuationLimitDb: 0, measureLoudness: true };
    const pcm = await engine.openPcmStream!(opts, 's16');
    const float = await engine.openStream(opts);
    const got: Uint8Array[] = [];
    const want: Buffer[] = [];
    const dither = new LowFrequencyDither(16000, 2);
    for (let f = 0, k = 0; f < frames; k++) {
      const n = Math.min(frames - f, [4001, 333, 9000][k % 3]);
      // A view into the larger buffer: the engine copies what it cannot transfer.
      got.push(await pcm.push(bytes.subarray(f * 4, (f + n) * 4)));
      want.push(dither.toInt16(await float.push(planar.map((c) => c.slice(f, f + n)))));
      f += n;
    }
    got.push(await pcm.end());
    want.push(dither.toInt16(await float.end()));
    const all = Buffer.concat(got);
    expect(all.length).toBe(frames * 4);
    expect(all.equals(Buffer.concat(want))).toBe(true);
    expect(Array.from(pcm.loudness()!.input)).toEqual(Array.from(float.loudness()!.input));
    expect(Array.from(pcm.loudness()!.output)).toEqual(Array.from(float.loudness()!.output));
    // The bytes the caller handed over are still its own (a view is copied, not detached).
    expect(bytes.length).toBe(frames * 4);

    const f32 = await engine.openPcmStream!({ model: 'nsm-1', channels: 1, attenuationLimitDb: 0 }, 'f32');
    await expect(f32.push(new Uint8Array(6))).rejects.toThrow(/not whole 4-byte frames/);
    f32.abort();
    const plain = await engine.openStream({ model: 'nsm-1', channels: 1, attenuationLimitDb: 0 });
    await expect(plain.push([new Float32Array(100)])).resolves.toHaveLength(1);
    plain.abort();
  });

  it('abort frees the stream', async () => {
    const s = await engine.openStream({ model: 'nsm-4', channels: 1, attenuationLimitDb: 0 });
    await s.push([signal(3000, 11)]);
    s.abort();
    expect(engine.state().streams).toBe(0);
    await expect(s.push([signal(100, 12)])).rejects.toThrow(/ended or aborted/);
  });

  it('fails with a clear message when the graphs are missing', async () => {
    const empty = fs.mkdtempSync(path.join(os.tmpdir(), 'nsm-models-'));
    await expect(createInferenceEngine({ ...config, workers: 1, modelsDir: empty })).rejects.toThrow(/npm run models/);
  });
});

describe('listModels', () => {
  it('lists the five chains with availability from models/', async () => {
    requireModels();
    const cat = listModels(config);
    expect(cat.default).toBe('nsm-2');
    expect(cat.models.map((m) => m.id)).toEqual([...MODEL_IDS]);
    for (const m of cat.models) {
      expect(m.available).toBe(true);
      expect(m.size_mb).toBeGreaterThan(1);
    }
    expect(cat.models.find((m) => m.id === 'nsm-2-hd')!.sample_rate).toBe(48000);
    const missing = listModels({ ...config, modelsDir: fs.mkdtempSync(path.join(os.tmpdir(), 'nsm-none-')) });
    expect(missing.models.every((m) => !m.available)).toBe(true);
  });
});
