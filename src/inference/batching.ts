// Live streams' graph runs merged into one session.run through the batch dimension. Each live stream's chain gets a
// DtlnGraphs whose run() does not run at once: the calls made before the event loop turns are grouped by shape,
// concatenated along the batch axis, run once per group, and every caller gets its own rows back. The rows of a batch
// are computed independently (ONNX Runtime's LSTM and GEMMs treat each row alone: checked bit for bit in
// test/inference-batching.test.ts), so a stream's output does not depend on which streams shared its runs.
//
// Why: a live stream pushes 20 ms at a time, so each run holds 1-3 frames; one stream alone pays ONNX Runtime's fixed
// cost per run (~160 µs per graph for 2 frames), 64 streams together ~19 µs each (docs/streaming.md, "Batching").
import * as ort from 'onnxruntime-node';
import { DtlnCore, type CoreJoiner, type DtlnGraphs, type DtlnOutput, type JointPart } from './dtln';

type Feeds = Record<string, ort.Tensor>;
type Results = ort.InferenceSession.OnnxValueMapType;

/** Axis of the batch in each DTLN graph input and output: data [B, T, F], LSTM states [LAYERS, B, UNITS]. */
const BATCH_AXIS: Record<string, number> = { mag: 0, frames: 0, mask: 0, out: 0, h0: 1, c0: 1, hN: 1, cN: 1 };

/**
 * Rows per session.run at most. Past ~64 rows the per-row cost rises again on these machines (B=64: 19 µs per row
 * for 2 frames of stage 1, B=128: 25, B=256: 29), so larger groups are cut into runs of this size.
 */
export const MAX_BATCH_ROWS = 64;

interface Pending {
  feeds: Feeds;
  rows: number;
  resolve(results: Results): void;
  reject(err: Error): void;
}

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

class BatchingSession {
  private readonly batcher = new TurnBatcher<Pending>((part, rows) => this.runPart(part, rows));

  constructor(
    private readonly session: ort.InferenceSession,
    private readonly stats: BatchStats,
  ) {}

  run(feeds: Feeds): Promise<Results> {
    const data = Object.entries(feeds).find(([name]) => BATCH_AXIS[name] === 0);
    if (!data) return Promise.reject(new Error('batching: no batch-axis input'));
    const dims = data[1].dims;
    // Calls can share a run when everything but the batch size agrees.
    return new Promise<Results>((resolve, reject) => {
      this.batcher.add(dims.slice(1).join('x'), { feeds, rows: dims[0], resolve, reject });
    });
  }

  private async runPart(part: Pending[], rows: number): Promise<void> {
    try {
      if (part.length === 1) {
        const r = await this.session.run(part[0].feeds);
        this.count(rows);
        part[0].resolve(r);
        return;
      }
      const joined: Feeds = {};
      for (const name of Object.keys(part[0].feeds)) {
        joined[name] = join(
          part.map((p) => p.feeds[name]),
          BATCH_AXIS[name],
          rows,
        );
      }
      const r = await this.session.run(joined);
      this.count(rows);
      const split: Record<string, ort.Tensor[]> = {};
      for (const [name, tensor] of Object.entries(r)) {
        split[name] = splitRows(tensor as ort.Tensor, BATCH_AXIS[name], part.map((p) => p.rows));
      }
      part.forEach((p, k) => {
        const own: Record<string, ort.Tensor> = {};
        for (const name of Object.keys(split)) own[name] = split[name][k];
        p.resolve(own as Results);
      });
    } catch (err) {
      for (const p of part) p.reject(err as Error);
    }
  }

  private count(rows: number): void {
    this.stats.runs++;
    this.stats.rows += rows;
  }
}

/** Concatenates float32 tensors along `axis` (all other dims equal). */
function join(tensors: ort.Tensor[], axis: number, rows: number): ort.Tensor {
  const dims = [...tensors[0].dims];
  const outer = dims.slice(0, axis).reduce((a, b) => a * b, 1);
  const inner = dims.slice(axis + 1).reduce((a, b) => a * b, 1);
  dims[axis] = rows;
  const out = new Float32Array(outer * rows * inner);
  let offset = 0;
  for (let o = 0; o < outer; o++) {
    for (const t of tensors) {
      const n = t.dims[axis] * inner;
      out.set((t.data as Float32Array).subarray(o * n, (o + 1) * n), offset);
      offset += n;
    }
  }
  return new ort.Tensor('float32', out, dims);
}

/** join()'s inverse: the rows of each caller, in order. */
function splitRows(tensor: ort.Tensor, axis: number, rows: number[]): ort.Tensor[] {
  const dims = tensor.dims;
  const outer = dims.slice(0, axis).reduce((a, b) => a * b, 1);
  const inner = dims.slice(axis + 1).reduce((a, b) => a * b, 1);
  const total = dims[axis];
  const data = tensor.data as Float32Array;
  let start = 0;
  return rows.map((r) => {
    const own = new Float32Array(outer * r * inner);
    for (let o = 0; o < outer; o++) {
      own.set(data.subarray((o * total + start) * inner, (o * total + start + r) * inner), o * r * inner);
    }
    start += r;
    const d = [...dims];
    d[axis] = r;
    return new ort.Tensor('float32', own, d);
  });
}

interface PendingJoint {
  parts: JointPart[];
  rows: number;
  resolve(out: DtlnOutput[]): void;
  reject(err: Error): void;
}

/**
 * The DTLN cores of many streams run as one: their processJoint calls made in the same turn are grouped by what
 * runJoint needs to be equal (stages, STFT back end, samples held, chunk length) and each group runs once, with one
 * STFT buffer set and one session.run per graph for all its rows. This saves the per-call work a session-level merge
 * still pays per stream (buffer set-up, state copies, splitting results). A call's parts stay together.
 */
class Joiner implements CoreJoiner {
  private readonly batcher = new TurnBatcher<PendingJoint>((calls, rows) => this.runCalls(calls, rows));

  constructor(
    readonly graphs: DtlnGraphs,
    private readonly stats: BatchStats,
  ) {}

  join(parts: JointPart[]): Promise<DtlnOutput[]> {
    return new Promise<DtlnOutput[]>((resolve, reject) => {
      const rows = parts.reduce((n, p) => n + p.core.rows, 0);
      this.batcher.add(parts[0].core.joinKey(parts[0].inputs), { parts, rows, resolve, reject });
    });
  }

  private async runCalls(calls: PendingJoint[], rows: number): Promise<void> {
    try {
      const outs = await DtlnCore.runJoint(calls.flatMap((c) => c.parts));
      this.stats.runs++;
      this.stats.rows += rows;
      let k = 0;
      for (const c of calls) {
        c.resolve(outs.slice(k, k + c.parts.length));
        k += c.parts.length;
      }
    } catch (err) {
      for (const c of calls) c.reject(err as Error);
    }
  }
}

/** Graphs for live streams: the same sessions, with their runs merged across streams (see the file header). */
export function batchingGraphs(graphs: DtlnGraphs, stats: BatchStats): DtlnGraphs {
  return {
    stage1: new BatchingSession(graphs.stage1, stats) as unknown as ort.InferenceSession,
    stage2: new BatchingSession(graphs.stage2, stats) as unknown as ort.InferenceSession,
    joiner: new Joiner(graphs, stats),
  };
}
