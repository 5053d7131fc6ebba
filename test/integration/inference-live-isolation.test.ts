// A failed joint ONNX run fails only the streams whose input caused it (issue 35, review finding). The live worker's
// host (LiveHost, the real chains and ONNX Runtime sessions) runs three streams in the same ticks, so their DTLN runs
// are joined into one session.run; one stream's audio provokes a failure of stage 1. Here that is a session wrapper
// that refuses absurd magnitudes (above 1e5; full-scale audio stays under ~300), standing in for a kernel failing on one row's
// input: a float stream of absurd samples (1e30, which the decoder clamps to 1e4: dsp/sample-bound.ts; a frame of
// them still has magnitudes ~1e6) is the stream that causes it.
// The failing stream gets an error; the other two go on and their output is byte for byte what they give alone —
// also when the failure comes in the second of several runs of one long chunk (the first run's state is put back).
import type * as ort from 'onnxruntime-node';
import fs from 'node:fs';
import { loadConfig } from '../../src/config';
import type { DtlnGraphs } from '../../src/inference/models/dtln';
import { LiveHost } from '../../src/inference/live/host';
import type { LiveItem } from '../../src/inference/live/packing';
import { loadGraphs } from '../../src/inference/runtime/sessions';
import type { ModelId } from '../../src/inference/types';
import { fixture } from '../helpers/service-helpers';
import { wavData } from '../helpers/streaming-helpers';

/** stage 1 refusing a batch with any absurd magnitude (the provoked failure). */
function refusingAbsurd(graphs: DtlnGraphs): { graphs: DtlnGraphs; failures: () => number } {
  let failures = 0;
  const real = graphs.stage1;
  const stage1 = new Proxy(real, {
    get(target, prop) {
      if (prop !== 'run') return Reflect.get(target, prop, target);
      return (feeds: Record<string, ort.Tensor>) => {
        const mag = feeds.mag.data as Float32Array;
        for (let i = 0; i < mag.length; i++) {
          if (!(Math.abs(mag[i]) < 1e5)) {
            failures++;
            return Promise.reject(new Error('provoked: a row of absurd input'));
          }
        }
        return real.run(feeds);
      };
    },
  });
  return { graphs: { ...graphs, stage1 }, failures: () => failures };
}

const s16ToF32 = (pcm: Buffer): Buffer => {
  const out = Buffer.alloc(pcm.length * 2);
  for (let i = 0; i < pcm.length / 2; i++) out.writeFloatLE(pcm.readInt16LE(2 * i) / 32768, 4 * i);
  return out;
};

/** Ticks of `samples` samples per stream (chunk sizes equal, so the streams' runs are joined), then a last tick with end. */
async function run(host: LiveHost, streams: Array<{ id: number; pcm: Buffer; bytesPerSample: number }>, sizes: number[]): Promise<Map<number, { out: Buffer[]; error?: string }>> {
  const got = new Map(streams.map((s) => [s.id, { out: [] as Buffer[], error: undefined as string | undefined }]));
  let at = 0;
  for (let t = 0; t <= sizes.length; t++) {
    const n = sizes[t] ?? 0;
    const items: LiveItem[] = streams
      .filter((s) => got.get(s.id)!.error === undefined)
      .map((s) => ({ streamId: s.id, bytes: new Uint8Array(s.pcm.subarray(at * s.bytesPerSample, (at + n) * s.bytesPerSample)), end: t === sizes.length }));
    at += n;
    for (const r of await host.tick(items)) {
      const g = got.get(r.streamId)!;
      if (r.error !== undefined) g.error = r.error;
      else g.out.push(Buffer.from(r.bytes));
    }
  }
  return got;
}

describe('a failed joint run fails only the stream that caused it', () => {
  let graphs: DtlnGraphs;
  const three = wavData(fs.readFileSync(fixture('speech-noisy-16k-mono.wav'))); // 3 s, 16 kHz mono s16
  const pcm = Buffer.concat([three, three]);

  beforeAll(async () => {
    graphs = await loadGraphs(loadConfig().modelsDir);
  });

  test.each(['nsm-1', 'nsm-2'] as ModelId[])('%s: small ticks, then one long chunk whose last run fails', async (model) => {
    // 0.24 s in 20 ms ticks, then one 5.76 s chunk: more frames than one run of three streams takes (341), so it
    // runs in two (nsm-1) or three (nsm-2) session.runs; the absurd samples reach only the last of them.
    const sizes = [...Array.from({ length: 12 }, () => 320), 92_160];
    const open = (host: LiveHost, id: number, encoding: 'pcm_s16le' | 'pcm_f32le'): void =>
      void host.open({ streamId: id, model, channels: 1, sampleRate: 16000, encoding, attenuationLimitDb: 0 });

    // Alone: the reference outputs of the two good streams.
    const alone = new LiveHost(graphs);
    open(alone, 1, 'pcm_s16le');
    const reference = Buffer.concat((await run(alone, [{ id: 1, pcm, bytesPerSample: 2 }], sizes)).get(1)!.out);
    expect(reference.length).toBe(pcm.length);

    // Together with a float stream that turns absurd at 5.9 s, inside the long chunk's last run.
    const bad = s16ToF32(pcm);
    for (let i = Math.round(5.9 * 16000); i < pcm.length / 2; i++) bad.writeFloatLE(1e30, 4 * i);
    const provoked = refusingAbsurd(graphs);
    const host = new LiveHost(provoked.graphs);
    open(host, 1, 'pcm_s16le');
    open(host, 2, 'pcm_f32le');
    open(host, 3, 'pcm_s16le');
    const rowsBefore = host.stats.rows;
    const got = await run(
      host,
      [
        { id: 1, pcm, bytesPerSample: 2 },
        { id: 2, pcm: bad, bytesPerSample: 4 },
        { id: 3, pcm, bytesPerSample: 2 },
      ],
      sizes,
    );
    expect(provoked.failures()).toBeGreaterThan(0);
    expect(got.get(2)!.error).toMatch(/provoked/);
    for (const id of [1, 3]) {
      expect(got.get(id)!.error).toBeUndefined();
      expect(Buffer.compare(Buffer.concat(got.get(id)!.out), reference)).toBe(0);
    }
    // The streams really shared their runs before the failure (more rows than runs).
    expect(host.stats.rows - rowsBefore).toBeGreaterThan(host.stats.runs);
    expect(host.size).toBe(0);
  }, 60_000);
});
