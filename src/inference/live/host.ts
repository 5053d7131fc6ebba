// Live streams, the worker's side: the streams pinned to this worker (chain-stream.ts: each one's chain between its
// byte edges) and the graphs they share through batching.ts, so one tick (the chunks every stream sent since the
// last) costs one session.run per graph per shape.
import { batchingGraphs, type BatchStats } from './batching';
import { LiveChainStream } from './chain-stream';
import { MODELS } from '../models';
import type { DtlnGraphs } from '../dtln';
import type { LiveOpen, LiveItem } from './packing';

/** The worker's live streams and the batching graphs they share. */
export class LiveHost {
  private readonly streams = new Map<number, LiveChainStream>();
  private readonly graphs: DtlnGraphs;
  readonly stats: BatchStats = { runs: 0, rows: 0 };

  constructor(graphs: DtlnGraphs) {
    this.graphs = batchingGraphs(graphs, this.stats);
  }

  get size(): number {
    return this.streams.size;
  }

  open(opts: LiveOpen): { latencySamples: number; chainRate: number } {
    if (!MODELS[opts.model]) throw new Error(`unknown model ${opts.model}`);
    const s = new LiveChainStream(opts, this.graphs);
    this.streams.set(opts.streamId, s);
    return { latencySamples: s.latencySamples, chainRate: s.chainRate };
  }

  abort(streamId: number): boolean {
    return this.streams.delete(streamId);
  }

  /** Runs one tick: every stream's chunk at once (their graph runs are merged), results in the items' order. */
  async tick(items: LiveItem[]): Promise<LiveItem[]> {
    return Promise.all(
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
          return echo ? { streamId, bytes: out, end, echo } : { streamId, bytes: out, end };
        } catch (err) {
          this.streams.delete(streamId);
          return { streamId, bytes: new Uint8Array(0), end: false, error: (err as Error).message };
        }
      }),
    );
  }
}
