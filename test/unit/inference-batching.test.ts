// Live streams through the real engine (worker threads, ONNX Runtime): each stream's output equals the file path's
// for the same audio (engine.openPcmStream, what /denoise's in-process WAV path runs) byte for byte, for every 16 kHz
// model, however the client chunks it and whatever other streams share its batches; and the batches really are
// shared (more than one stream per joint run when several push together).
import fs from 'node:fs';
import { loadConfig } from '../../src/config';
import { createInferenceEngine } from '../../src/inference/runtime/engine';
import type { InferenceEngine, ModelId } from '../../src/inference/types';
import { fixture } from '../helpers/service-helpers';

function pcmOf(file: string): Buffer {
  const wav = fs.readFileSync(file);
  return wav.subarray(44); // the fixture's canonical 44-byte header
}

async function fileOutput(engine: InferenceEngine, model: ModelId, pcm: Buffer): Promise<Buffer> {
  const s = await engine.openPcmStream!({ model, channels: 1, attenuationLimitDb: 0 }, 's16');
  const a = await s.push(new Uint8Array(pcm));
  const b = await s.end();
  return Buffer.concat([Buffer.from(a), Buffer.from(b)]);
}

/** One live stream fed in pseudo-random chunk sizes (whole samples), awaiting now and then. */
async function liveOutput(engine: InferenceEngine, model: ModelId, pcm: Buffer, seed: number): Promise<Buffer> {
  const out: Buffer[] = [];
  let failure: Error | null = null;
  const live = await engine.openLive!(
    { model, channels: 1, sampleRate: 16000, encoding: 'pcm_s16le', attenuationLimitDb: 0 },
    { output: (b) => out.push(Buffer.from(b)), error: (e) => (failure = e) },
  );
  let off = 0;
  let x = seed;
  while (off < pcm.length) {
    x = (x * 1103515245 + 12345) >>> 0;
    const n = 2 * (1 + (x % 900));
    live.push(new Uint8Array(pcm.subarray(off, off + n)));
    off += n;
    if (x % 4 === 0) await new Promise((r) => setImmediate(r));
  }
  await live.end();
  if (failure) throw failure;
  return Buffer.concat(out);
}

describe('live streams in the engine', () => {
  let engine: InferenceEngine;
  const pcm = pcmOf(fixture('speech-noisy-16k-mono.wav'));

  beforeAll(async () => {
    engine = await createInferenceEngine({ ...loadConfig(), workers: 1 }, { warmUp: false });
  });
  afterAll(() => engine.close());

  test.each(['nsm-1', 'nsm-2', 'nsm-3', 'nsm-4'] as ModelId[])('%s: 6 concurrent streams, each equal to the file path', async (model) => {
    const expected = await fileOutput(engine, model, pcm);
    expect(expected.length).toBe(pcm.length);
    const ticks0 = engine.liveState!().ticks;
    const items0 = engine.liveState!().items;
    const outs = await Promise.all([1, 2, 3, 4, 5, 6].map((seed) => liveOutput(engine, model, pcm, seed)));
    for (const o of outs) {
      expect(o.length).toBe(pcm.length);
      expect(Buffer.compare(o, expected)).toBe(0);
    }
    // Several streams rode in the same ticks (fewer ticks than stream-chunks).
    const ticks = engine.liveState!().ticks - ticks0;
    const items = engine.liveState!().items - items0;
    expect(items / ticks).toBeGreaterThan(1.5);
  }, 60_000);

  test('a stream whose bytes are not whole frames fails alone; the others go on', async () => {
    let failed: Error | null = null;
    const bad = await engine.openLive!(
      { model: 'nsm-2', channels: 1, sampleRate: 16000, encoding: 'pcm_s16le', attenuationLimitDb: 0 },
      { output: () => undefined, error: (e) => (failed = e) },
    );
    const good = liveOutput(engine, 'nsm-2', pcm, 9);
    bad.push(new Uint8Array(3));
    await bad.end();
    expect(String(failed)).toMatch(/whole/);
    expect(Buffer.compare(await good, await fileOutput(engine, 'nsm-2', pcm))).toBe(0);
  }, 30_000);
});

describe('the delay a live stream declares', () => {
  // LiveChainStream (the worker's side) driven directly on this thread: 20 ms frames in, the output each one completes.
  // The lag (input in minus output out) never exceeds latency_samples, and stays within a frame and a hop of it, so
  // `ready`'s latency_ms is the delay a client really sees, not a bound far above it.
  const cases: Array<[ModelId, number]> = [
    ['nsm-1', 16000], ['nsm-2', 16000], ['nsm-3', 16000], ['nsm-4', 16000],
    ['nsm-2', 8000], ['nsm-2', 44100], ['nsm-2', 48000], ['nsm-2-hd', 48000], ['nsm-2-hd', 16000],
  ];
  let graphs: import('../../src/inference/models/dtln').DtlnGraphs;
  beforeAll(async () => {
    const { loadGraphs } = await import('../../src/inference/runtime/sessions');
    graphs = await loadGraphs(loadConfig().modelsDir);
  });

  test.each(cases)('%s at %i Hz', async (model, rate) => {
    const { LiveChainStream } = await import('../../src/inference/live/chain-stream');
    const s = new LiveChainStream({ streamId: 1, model, channels: 1, sampleRate: rate, encoding: 'pcm_f32le', attenuationLimitDb: 0 }, graphs);
    const frame = Math.round(rate / 50);
    let sent = 0;
    let got = 0;
    let maxLag = 0;
    for (let i = 0; i < 60; i++) {
      got += (await s.push(new Uint8Array(frame * 4))).byteLength / 4;
      sent += frame;
      if (i >= 20) maxLag = Math.max(maxLag, sent - got);
    }
    expect(maxLag).toBeLessThanOrEqual(s.latencySamples);
    const hop = (model === 'nsm-1' ? 256 : 128) * Math.max(1, rate / 16000);
    expect(maxLag).toBeGreaterThan(s.latencySamples - frame - hop);
  }, 30_000);
});
