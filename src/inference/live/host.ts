// Live streams, the worker's side: the streams pinned to this worker (chain-stream.ts: each one's chain between its
// byte edges) and the graphs they share through batching.ts, so one tick (the chunks every stream sent since the
// last) costs one session.run per graph per shape; speech events (vad=true) in the same tick, for all streams at once
// (speech.ts).
import type * as ort from 'onnxruntime-node';
import { batchingGraphs, type BatchStats } from './batching';
import { LiveChainStream } from './chain-stream';
import { MODELS } from '../models/specs';
import type { DtlnGraphs } from '../models/dtln';
import type { LiveOpen, LiveItem } from './packing';
import { LiveSpeech } from './speech';

/** The worker's live streams and the batching graphs they share. */
export class LiveHost {
  private readonly streams = new Map<number, LiveChainStream>();
  private readonly graphs: DtlnGraphs;
  readonly stats: BatchStats = { runs: 0, rows: 0 };
  private readonly speech = new LiveSpeech();

  constructor(graphs: DtlnGraphs) {
    this.graphs = batchingGraphs(graphs, this.stats);
  }

  get size(): number {
    return this.streams.size;
  }

  /** `vadSession`: the VAD's graph, for a stream with vad=true. */
  open(opts: LiveOpen, vadSession?: ort.InferenceSession): { latencySamples: number; chainRate: number } {
    if (!MODELS[opts.model]) throw new Error(`unknown model ${opts.model}`);
    if (opts.vad && !vadSession) throw new Error('speech events need the VAD graph');
    const s = new LiveChainStream(opts, this.graphs);
    if (opts.vad) this.speech.open(opts.streamId, s, opts, vadSession!);
    this.streams.set(opts.streamId, s);
    return { latencySamples: s.latencySamples, chainRate: s.chainRate };
  }

  abort(streamId: number): boolean {
    this.speech.close(streamId);
    // A tick still awaiting this stream's model has run its canceller part already; its next push finds it gone.
    this.streams.get(streamId)?.release();
    return this.streams.delete(streamId);
  }

  /** ms until speech frames waiting are due although no stream sent more (the pool then ticks with no items). */
  vadDueMs(): number | undefined {
    return this.speech.dueMs();
  }

  /**
   * Runs one tick: every stream's chunk at once (their graph runs are merged), results in the items' order; then the
   * speech events decided, on their streams' items (or on items of their own, after those). `now`: the VAD's clock
   * (the bench's simulated one).
   */
  async tick(items: LiveItem[], now = performance.now()): Promise<LiveItem[]> {
    const results = await Promise.all(
      items.map(async ({ streamId, bytes, end }): Promise<LiveItem> => {
        const s = this.streams.get(streamId);
        if (!s) return { streamId, bytes: new Uint8Array(0), end: false, error: `unknown live stream ${streamId}` };
        try {
          let out = bytes.byteLength > 0 ? await s.push(bytes) : new Uint8Array(0);
          if (!end) return { streamId, bytes: out, end };
          const tail = await s.end();
          out = out.byteLength === 0 ? tail : Buffer.concat([out, tail]); // packLive copies it anyway
          this.streams.delete(streamId);
          const echo = s.echoStats();
          s.release();
          return echo ? { streamId, bytes: out, end, echo } : { streamId, bytes: out, end };
        } catch (err) {
          s.release();
          this.streams.delete(streamId);
          return { streamId, bytes: new Uint8Array(0), end: false, error: (err as Error).message };
        }
      }),
    );
    return this.speech.size > 0 ? this.speech.tick(results, now) : results;
  }
}
