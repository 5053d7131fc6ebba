// A live echo stream gives its canceller's memory back when it is over (issue 36: memory under stream churn): the
// worker's host (LiveHost, real chains and ONNX Runtime) releases the canceller's heap slot when a stream ends, fails
// or is aborted, also while a tick of that stream is still running, and a new stream gets the slot zeroed: its output
// is byte for byte what the same input gave on a fresh slot. Before, a slot came back only when the garbage collector
// found the canceller.
import fs from 'node:fs';
import { loadConfig } from '../../src/config';
import { aecHeaps } from '../../src/dsp/aec/heap';
import { LiveHost } from '../../src/inference/live/host';
import type { LiveItem } from '../../src/inference/live/packing';
import { loadGraphs } from '../../src/inference/runtime/sessions';
import { fixture } from '../helpers/service-helpers';
import { wavData } from '../helpers/streaming-helpers';

const used = (): number => aecHeaps().reduce((n, h) => n + h.used, 0);

/** 16 kHz s16 frames of two channels: the microphone (the fixture plus an echo of the reference) and the reference. */
function scene(): Buffer {
  const mic = wavData(fs.readFileSync(fixture('speech-noisy-16k-mono.wav')));
  const n = mic.length / 2;
  const out = Buffer.alloc(n * 4);
  let seed = 1;
  for (let i = 0; i < n; i++) {
    seed = (seed * 1103515245 + 12345) >>> 0;
    const ref = Math.round(((seed / 4294967296) - 0.5) * 8000);
    const echo = i >= 480 ? out.readInt16LE(4 * (i - 480) + 2) * 0.3 : 0;
    out.writeInt16LE(Math.max(-32768, Math.min(32767, Math.round(mic.readInt16LE(2 * i) * 0.5 + echo))), 4 * i);
    out.writeInt16LE(ref, 4 * i + 2);
  }
  return out;
}

const FRAME = 320 * 4; // 20 ms of both channels

test('ended, failed and aborted echo streams give their slots back; a reused slot gives the same output', async () => {
  const graphs = await loadGraphs(loadConfig().modelsDir);
  const host = new LiveHost(graphs);
  const pcm = scene();
  const open = (id: number): void =>
    void host.open({ streamId: id, model: 'nsm-2', channels: 2, sampleRate: 16000, encoding: 'pcm_s16le', attenuationLimitDb: 0, echoReference: true });
  const frames = Math.floor(pcm.length / FRAME);
  const item = (id: number, f: number, end = false): LiveItem => ({ streamId: id, bytes: new Uint8Array(pcm.subarray(f * FRAME, (f + 1) * FRAME)), end });

  const before = used();
  open(1);
  open(2);
  open(3);
  open(4);
  expect(used()).toBe(before + 4);
  const first: Buffer[] = [];
  const live = new Set([1, 2, 3, 4]);
  for (let f = 0; f < frames; f++) {
    const end = f === frames - 1;
    const results = await host.tick([...live].map((id) => item(id, f, end && id === 1)));
    for (const r of results) expect(r.error).toBeUndefined();
    first.push(Buffer.from(results[0].bytes));
    if (f === 20) {
      // Aborted while a tick of it is running: the tick ends without harm to the others, the slot comes back once.
      const running = host.tick([item(2, 21), item(3, 21)]);
      expect(host.abort(2)).toBe(true);
      live.delete(2);
      const r = await running;
      expect(r.find((x) => x.streamId === 3)!.error).toBeUndefined();
      expect(used()).toBe(before + 3);
    }
    if (f === 30) {
      // A stream whose input fails (a frame that is not whole) is dropped and releases its canceller too.
      const r = await host.tick([{ streamId: 3, bytes: new Uint8Array(3), end: false }]);
      expect(r[0].error).toMatch(/whole/);
      live.delete(3);
      expect(used()).toBe(before + 2);
    }
    if (f === 39) {
      const r = await host.tick([item(4, 40, true)]);
      expect(r[0].echo).toBeDefined();
      live.delete(4);
      expect(used()).toBe(before + 1);
    }
  }
  expect(host.size).toBe(0);
  expect(used()).toBe(before);

  // Stream 1 again on a slot the others left behind (dirty): the same bytes.
  open(5);
  expect(used()).toBe(before + 1);
  const again: Buffer[] = [];
  for (let f = 0; f < frames; f++) again.push(Buffer.from((await host.tick([item(5, f, f === frames - 1)]))[0].bytes));
  expect(Buffer.concat(again).equals(Buffer.concat(first))).toBe(true);
  expect(used()).toBe(before);
}, 120_000);
