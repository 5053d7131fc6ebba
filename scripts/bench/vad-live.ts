// The VAD's cost on live streams next to nsm-2's live chain, in one process on simulated time (scripts/bench/vad.ts
// calls it; `npm run bench -- --vad`). N streams each send a 20 ms chunk of 16-bit PCM every 20 ms, their phases
// spread over the 20 ms; every `tickMs` the chunks that arrived form one tick, as the live pool makes them
// (src/inference/live.ts: ticks at least LIVE_TICK_MS = 2 ms apart, each with every stream's waiting chunks). A tick
// runs the streams' chains (LiveHost, the live worker's code: batched DTLN, PCM edges, dither) and then, on the same
// ticks, each VAD variant (VadBatch on the chain's output and its input). CPU (process.cpuUsage, all threads: ONNX
// Runtime's too) is taken over whole passes (the chain over every tick, then each VAD variant over the same ticks),
// not per tick: each reading costs µs of its own (a profile put 8 % of the VAD-only harness in it), a bias on the
// small parts. The audio is the call mixtures (vad-mix.ts), about half of it pauses.
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

/** 16-bit PCM bytes as floats. */
function s16(bytes: Uint8Array): Float32Array {
  return decodeFrames(Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength), { format: 's16', channels: 1, blockAlign: 2 })[0];
}

function cpuMs(): number {
  const u = process.cpuUsage();
  return (u.user + u.system) / 1000;
}

/**
 * `rounds` rounds of `seconds` simulated seconds of `streams` streams; every round opens fresh streams on the same
 * clips (stream i plays clip i mod clips, from a seeded offset), and the variants' order turns from round to round.
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
    const streams = Array.from({ length: opts.streams }, (_, i) => {
      const clip = clips[i % clips.length];
      host.open({ streamId: i, model: 'nsm-2', channels: 1, sampleRate: RATE, encoding: 'pcm_s16le', attenuationLimitDb: 0 });
      return { clip, at: Math.floor(rnd() * clip.length), phase: rnd() * 20, sent: 0 };
    });
    // The ticks' items, made before anything is timed: per tick its time and each stream's bytes.
    const total = (opts.seconds * 1000) / 20;
    const ticksOf: Array<{ t: number; items: LiveItem[] }> = [];
    for (let t = opts.tickMs; streams.some((s) => s.sent < total); t += opts.tickMs) {
      const items: LiveItem[] = [];
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
      });
      if (items.length > 0) ticksOf.push({ t, items });
    }
    ticks += ticksOf.length;
    // The chain, every tick in turn, timed as a whole; then its outputs (and the inputs) as the VAD's chunks.
    const inputs = ticksOf.map(({ items }) => items.map((it) => s16(it.bytes)));
    const c0 = cpuMs();
    const outputs: LiveItem[][] = [];
    for (const { items } of ticksOf) outputs.push(await host.tick(items));
    chain.push((cpuMs() - c0) / (opts.streams * opts.seconds));
    const chunks: VadChunk[][] = outputs.map((out, k) => out.map((r, j) => ({ id: r.streamId, input: [inputs[k][j]], output: [s16(r.bytes)] })));
    // Each VAD variant over the same ticks, timed as a whole; the order turns from round to round.
    for (let j = 0; j < variants.length; j++) {
      const v = variants[(j + round) % variants.length];
      const batch = new VadBatch(v.session, v.batch);
      for (let i = 0; i < opts.streams; i++) batch.open(i, { vad: VAD_DEFAULTS, rate: RATE, channels: 1, gate: v.gate });
      const v0 = cpuMs();
      for (let k = 0; k < ticksOf.length; k++) await batch.tick(chunks[k], ticksOf[k].t);
      vad[v.name].push((cpuMs() - v0) / (opts.streams * opts.seconds));
      runs[v.name] = (runs[v.name] ?? 0) + batch.stats.runs;
      rows[v.name] = (rows[v.name] ?? 0) + batch.stats.rows;
      gated[v.name] = (gated[v.name] ?? 0) + batch.stats.gated;
    }
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
