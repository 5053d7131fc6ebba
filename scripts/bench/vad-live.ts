// The VAD's cost on live streams next to nsm-2's live chain, in one process on simulated time (scripts/bench/vad.ts
// calls it; `npm run bench -- --vad`). N streams each send a 20 ms chunk of 16-bit PCM every 20 ms, their phases
// spread over the 20 ms; every `tickMs` the chunks that arrived form one tick, as the live pool makes them
// (src/inference/live.ts: ticks at least LIVE_TICK_MS = 2 ms apart, each with every stream's waiting chunks). A tick
// runs the streams' chains (LiveHost, the live worker's code: batched DTLN, PCM edges, dither) and then, on the same
// ticks, each VAD variant (VadBatch on the chain's output and its input). CPU (process.cpuUsage, all threads: ONNX
// Runtime's too) is summed per part; the audio is the call mixtures (vad-mix.ts), about half of it pauses.
import * as ort from 'onnxruntime-node';
import { decodeFrames, encodeInt16 } from '../../src/dsp/pcm';
import { LiveHost } from '../../src/inference/live-host';
import type { LiveItem } from '../../src/inference/protocol';
import { loadGraphs } from '../../src/inference/sessions';
import { VadBatch, type VadBatchOptions, type VadChunk } from '../../src/vad/batch';
import { VAD_DEFAULTS } from '../../src/vad/options';
import { bootstrapRatio, seeded } from '../lib/stats';

const RATE = 16000;
const CHUNK = 320;

export interface VadVariant {
  name: string;
  session: ort.InferenceSession;
  batch: VadBatchOptions;
  gate: boolean;
}

export interface LiveCostResult {
  /** Per variant: CPU ms per stream-second of the VAD in each round, and of the chain. */
  chainMsPerStreamS: number[];
  vadMsPerStreamS: Record<string, number[]>;
  /** VAD / chain, pooled over rounds, with its 95 % bootstrap interval over rounds. */
  ratio: Record<string, { ratio: number; lo: number; hi: number }>;
  /** Frames per session.run, and the share of frames gated, per variant. */
  rowsPerRun: Record<string, number>;
  gatedShare: Record<string, number>;
  ticks: number;
}

function cpuMs(): number {
  const u = process.cpuUsage();
  return (u.user + u.system) / 1000;
}

/**
 * `rounds` rounds of `seconds` simulated seconds of `streams` streams; every round opens fresh streams on the same
 * clips (stream i plays clip i mod clips, from a seeded offset), and the variants take turns going first in a tick.
 */
export async function liveVadCost(
  modelsDir: string,
  clips: Float32Array[],
  variants: VadVariant[],
  opts: { streams: number; seconds: number; tickMs: number; rounds: number },
): Promise<LiveCostResult> {
  const graphs = await loadGraphs(modelsDir);
  const chain: number[] = [];
  const vad: Record<string, number[]> = Object.fromEntries(variants.map((v) => [v.name, []]));
  const runs: Record<string, number> = {};
  const rows: Record<string, number> = {};
  const gated: Record<string, number> = {};
  let ticks = 0;
  for (let round = 0; round < opts.rounds; round++) {
    const rnd = seeded(1000 + round);
    const host = new LiveHost(graphs);
    const batches = variants.map((v) => new VadBatch(v.session, v.batch));
    const streams = Array.from({ length: opts.streams }, (_, i) => {
      const clip = clips[i % clips.length];
      host.open({ streamId: i, model: 'nsm-2', channels: 1, sampleRate: RATE, encoding: 'pcm_s16le', attenuationLimitDb: 0 });
      variants.forEach((v, k) => batches[k].open(i, { vad: VAD_DEFAULTS, rate: RATE, channels: 1, gate: v.gate }));
      return { clip, at: Math.floor(rnd() * clip.length), phase: rnd() * 20, sent: 0 };
    });
    const total = (opts.seconds * 1000) / 20;
    let chainCpu = 0;
    const vadCpu = new Float64Array(variants.length);
    for (let t = opts.tickMs; ; t += opts.tickMs) {
      const items: LiveItem[] = [];
      const inputs: Float32Array[] = [];
      streams.forEach((s, id) => {
        // The chunks this stream finished sending by time t (more than one when tickMs > 20: sent as one item, as the
        // pool packs a stream's waiting chunks).
        let n = 0;
        while (s.sent + n < total && s.phase + 20 * (s.sent + n + 1) <= t) n++;
        if (n === 0) return;
        const x = new Float32Array(n * CHUNK);
        for (let i = 0; i < x.length; i++) x[i] = s.clip[(s.at + i) % s.clip.length];
        s.at = (s.at + x.length) % s.clip.length;
        s.sent += n;
        const bytes = encodeInt16([x]);
        items.push({ streamId: id, bytes: new Uint8Array(bytes.buffer, bytes.byteOffset, bytes.byteLength), end: false });
        inputs.push(decodeFrames(bytes, { format: 's16', channels: 1, blockAlign: 2 })[0]);
      });
      if (items.length === 0) {
        if (streams.every((s) => s.sent >= total)) break;
        continue;
      }
      const c0 = cpuMs();
      const out = await host.tick(items);
      chainCpu += cpuMs() - c0;
      ticks++;
      const chunks: VadChunk[] = out.map((r, k) => ({
        id: r.streamId,
        input: [inputs[k]],
        output: decodeFrames(Buffer.from(r.bytes.buffer, r.bytes.byteOffset, r.bytes.byteLength), { format: 's16', channels: 1, blockAlign: 2 }),
      }));
      for (let j = 0; j < variants.length; j++) {
        const k = (j + ticks) % variants.length;
        const v0 = cpuMs();
        await batches[k].tick(chunks, t);
        vadCpu[k] += cpuMs() - v0;
      }
    }
    const streamSeconds = opts.streams * opts.seconds;
    chain.push(chainCpu / streamSeconds);
    variants.forEach((v, k) => {
      vad[v.name].push(vadCpu[k] / streamSeconds);
      runs[v.name] = (runs[v.name] ?? 0) + batches[k].stats.runs;
      rows[v.name] = (rows[v.name] ?? 0) + batches[k].stats.rows;
      gated[v.name] = (gated[v.name] ?? 0) + batches[k].stats.gated;
    });
  }
  const ratio: LiveCostResult['ratio'] = {};
  for (const v of variants) {
    const r = bootstrapRatio(chain, vad[v.name]);
    ratio[v.name] = { ratio: r.ratio, lo: r.lo, hi: r.hi };
  }
  return {
    chainMsPerStreamS: chain,
    vadMsPerStreamS: vad,
    ratio,
    rowsPerRun: Object.fromEntries(variants.map((v) => [v.name, rows[v.name] / Math.max(1, runs[v.name])])),
    gatedShare: Object.fromEntries(variants.map((v) => [v.name, gated[v.name] / Math.max(1, gated[v.name] + rows[v.name])])),
    ticks,
  };
}
