// Live streams' graph runs joined through the batch dimension. Each live stream's DTLN core or stage-1 chain hands
// its chunk to the joiner instead of running it: the calls made before the event loop turns are grouped by key, and
// each group runs once (one STFT pass over all its rows, one session.run per graph), every caller getting its own
// rows back. The rows of a batch are computed independently (ONNX Runtime's LSTM and GEMMs treat each row alone:
// checked bit for bit in test/unit/inference-batching.test.ts), so a stream's output does not depend on which streams
// shared its runs.
//
// A joint run that fails is run again call by call, so that only the streams whose own run fails are failed.
//
// Why: a live stream pushes 20 ms at a time, so each run holds 1-3 frames; one stream alone pays ONNX Runtime's fixed
// cost per run (~160 µs per graph for 2 frames), 64 streams together ~19 µs each (docs/streaming.md, "Batching").
import type { CoreJoiner, DtlnGraphs } from '../models/dtln';

/**
 * Rows per session.run at most. Past ~64 rows the per-row cost rises again on these machines (B=64: 19 µs per row
 * for 2 frames of stage 1, B=128: 25, B=256: 29), so larger groups are cut into runs of this size.
 */
export const MAX_BATCH_ROWS = 64;

/** Counters for the live metrics and the bench: runs made and rows they carried. */
export interface BatchStats {
  runs: number;
  rows: number;
}

/**
 * Calls made in one turn of the event loop, grouped by key and handed over at the next macrotask in runs of at most
 * MAX_BATCH_ROWS rows (a call's rows stay together). Every live stream of a tick reaches its next call within the same
 * microtask drain (the chains await nothing else), so by the next macrotask all of them are waiting here.
 */
class TurnBatcher<T extends { rows: number }> {
  private pending = new Map<string, T[]>();
  private scheduled = false;

  constructor(private readonly runPart: (part: T[], rows: number) => Promise<void>) {}

  add(key: string, item: T): void {
    const list = this.pending.get(key) ?? [];
    list.push(item);
    this.pending.set(key, list);
    if (!this.scheduled) {
      this.scheduled = true;
      setImmediate(() => void this.flush());
    }
  }

  private async flush(): Promise<void> {
    this.scheduled = false;
    const groups = [...this.pending.values()];
    this.pending.clear();
    for (const group of groups) {
      for (let i = 0; i < group.length; ) {
        const part: T[] = [];
        let rows = 0;
        while (i < group.length && (part.length === 0 || rows + group[i].rows <= MAX_BATCH_ROWS)) {
          rows += group[i].rows;
          part.push(group[i++]);
        }
        await this.runPart(part, rows);
      }
    }
  }
}

interface PendingJoint {
  parts: unknown[];
  rows: number;
  run(all: unknown[]): Promise<unknown[]>;
  resolve(out: unknown[]): void;
  reject(err: Error): void;
}

/**
 * The DTLN cores and stage-1 chains of many streams run as one: their calls made in the same turn are grouped by
 * what their joint run needs to be equal (stages, STFT back end, samples held, chunk length: the caller's key) and
 * each group runs once, with one STFT buffer set and one session.run per graph for all its rows. A call's parts stay
 * together.
 */
class Joiner implements CoreJoiner {
  private readonly batcher = new TurnBatcher<PendingJoint>((calls, rows) => this.runCalls(calls, rows));

  constructor(
    readonly graphs: DtlnGraphs,
    private readonly stats: BatchStats,
  ) {}

  join<P, R>(key: string, parts: P[], rows: number, run: (all: P[]) => Promise<R[]>): Promise<R[]> {
    return new Promise<R[]>((resolve, reject) => {
      this.batcher.add(key, {
        parts,
        rows,
        run: run as (all: unknown[]) => Promise<unknown[]>,
        resolve: resolve as (out: unknown[]) => void,
        reject,
      });
    });
  }

  private async runCalls(calls: PendingJoint[], rows: number): Promise<void> {
    let outs: unknown[];
    try {
      outs = await calls[0].run(calls.flatMap((c) => c.parts));
    } catch (err) {
      if (calls.length === 1) return calls[0].reject(err as Error);
      // One stream's input may be what failed: a failed run changed no state (dtln.ts), so each call runs again
      // alone, and only the calls that fail again fail; the other streams go on as if nothing happened.
      for (const c of calls) await this.runAlone(c);
      return;
    }
    this.stats.runs++;
    this.stats.rows += rows;
    let k = 0;
    for (const c of calls) {
      c.resolve(outs.slice(k, k + c.parts.length));
      k += c.parts.length;
    }
  }

  private async runAlone(c: PendingJoint): Promise<void> {
    try {
      const out = await c.run(c.parts);
      this.stats.runs++;
      this.stats.rows += c.rows;
      c.resolve(out);
    } catch (err) {
      c.reject(err as Error);
    }
  }
}

/** Graphs for live streams: the same sessions, with the runs of many streams joined (see the file header). */
export function batchingGraphs(graphs: DtlnGraphs, stats: BatchStats): DtlnGraphs {
  return { ...graphs, joiner: new Joiner(graphs, stats) };
}
