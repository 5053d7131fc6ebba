// Speech events for many live streams at once: each tick of the live worker hands over every stream's new output
// (and the input it lines up with), and the frames those complete wait here until enough have gathered for one
// batched run (or the oldest has waited maxWaitMs): one FFT pass and one session.run for all streams' ungated frames.
// Every stream's events are those it gets alone in one pass (batch rows are independent, the gate and the decision
// rule are per stream); only when they come out depends on the batching. Gated frames need no run and are decided at
// once when nothing ungated waits before them.
import type * as ort from 'onnxruntime-node';
import type { VadOptions } from './options';
import { runTracks, VadTrack } from './track';

export interface VadBatchOptions {
  /** Run as soon as this many ungated frames wait (all streams together). */
  minRows: number;
  /** Run when the oldest ungated frame has waited this long (ms), whatever the count. */
  maxWaitMs: number;
}

/**
 * 32 frames per run: a run costs ~54 µs plus ~9.4 µs per frame (dense graph, these machines), so the fixed part is
 * under a sixth. 20 ms: at most one more 20 ms chunk of waiting; the events' latency is in docs/speech.md.
 */
export const VAD_BATCH_DEFAULTS: VadBatchOptions = { minRows: 32, maxWaitMs: 20 };

export interface VadStreamOptions {
  vad: VadOptions;
  /** The rate of the audio handed over: 16 or 48 kHz (the chain's). */
  rate: number;
  channels: number;
  /** The attenuation limit's weight of the input in the output (0 when unlimited). */
  dryMix?: number;
  /** false: no gate, every frame is run (for comparisons). */
  gate?: boolean;
}

export interface VadEvent {
  type: 'speech_start' | 'speech_end';
  /** Where the speech starts or ends, ms from the stream's first sample handed over (on the input timeline). */
  at_ms: number;
  /** The end of the frame that decided it, ms on the same timeline (at_ms + the decision's latency). */
  decided_ms: number;
}

/** One stream's part of a tick: its input (with `input`; before the output it lines up with) and aligned output. */
export interface VadChunk {
  id: number;
  input?: Float32Array[];
  output: Float32Array[];
  /** The stream ended after this chunk: its last frames are decided now, and a speech in progress ends. */
  end?: boolean;
}

export interface VadBatchStats {
  /** session.runs made, frames they carried, frames gated (not run at all). */
  runs: number;
  rows: number;
  gated: number;
  /** The longest an ungated frame waited for its run (ms, the callers' clock). */
  maxWaitedMs: number;
}

export class VadBatch {
  private readonly tracks = new Map<number, VadTrack>();
  /** Streams with frames waiting. */
  private readonly waiting = new Set<number>();
  private queue: Promise<unknown> = Promise.resolve();
  readonly stats: VadBatchStats = { runs: 0, rows: 0, gated: 0, maxWaitedMs: 0 };

  constructor(
    private readonly session: ort.InferenceSession,
    private readonly opts: VadBatchOptions = VAD_BATCH_DEFAULTS,
  ) {}

  get size(): number {
    return this.tracks.size;
  }

  /** A stream, with the input given for the gate (`withInput`, the default) or without. */
  open(id: number, opts: VadStreamOptions, withInput = true): void {
    if (this.tracks.has(id)) throw new Error(`stream ${id} is already open`);
    this.tracks.set(id, new VadTrack(this.session, { ...opts, withInput }));
  }

  /** Drops a stream (no more events). */
  close(id: number): void {
    this.tracks.delete(id);
    this.waiting.delete(id);
  }

  /**
   * One tick: every chunk in, the events decided meanwhile out (of any stream, in order per stream). Ticks run one
   * after another in the order called.
   */
  tick(chunks: readonly VadChunk[], now = performance.now()): Promise<Map<number, VadEvent[]>> {
    return this.enqueue(() => this.runTick(chunks, now, false));
  }

  /** Runs every frame waiting now (e.g. on a timer when no stream has sent anything for a while). */
  flush(now = performance.now()): Promise<Map<number, VadEvent[]>> {
    return this.enqueue(() => this.runTick([], now, true));
  }

  private enqueue(run: () => Promise<Map<number, VadEvent[]>>): Promise<Map<number, VadEvent[]>> {
    const next = this.queue.then(run);
    this.queue = next.catch(() => undefined);
    return next;
  }

  private async runTick(chunks: readonly VadChunk[], now: number, force: boolean): Promise<Map<number, VadEvent[]>> {
    const ending = new Set<VadTrack>();
    for (const c of chunks) {
      const t = this.tracks.get(c.id);
      if (!t) throw new Error(`unknown stream ${c.id}`);
      if (c.input) t.pushInput(c.input);
      if (c.output[0]?.length) t.pushOutput(c.output, now);
      if (c.end) {
        t.endOutput(now);
        ending.add(t);
      }
      if (t.pendingFrames > 0) this.waiting.add(c.id);
    }
    let rows = 0;
    let oldest = Infinity;
    for (const id of this.waiting) {
      const t = this.tracks.get(id);
      if (!t || t.pendingRows === 0) continue;
      rows += t.pendingRows;
      oldest = Math.min(oldest, t.waitingSince);
    }
    // Everything when enough has gathered (or waited long enough, or a stream ends); otherwise only the streams with
    // nothing but gated frames waiting, which need no run.
    const all = force || ending.size > 0 || rows >= this.opts.minRows || !(now - oldest < this.opts.maxWaitMs);
    if (all && rows > 0 && now - oldest > this.stats.maxWaitedMs) this.stats.maxWaitedMs = now - oldest;
    const batch = [...this.waiting].flatMap((id) => {
      const t = this.tracks.get(id);
      return t && (all || t.pendingRows === 0) ? [{ id, t }] : [];
    });
    const counts = await runTracks(batch.map((b) => b.t));
    this.stats.runs += counts.runs;
    this.stats.rows += counts.rows;
    this.stats.gated += counts.gated;
    const events = new Map<number, VadEvent[]>();
    for (const { id, t } of batch) {
      this.waiting.delete(id);
      if (this.tracks.get(id) !== t) continue; // closed meanwhile
      if (ending.has(t)) {
        t.detector.finish();
        this.tracks.delete(id);
      }
      const found = t.detector.drain().events;
      if (found.length === 0) continue;
      const ms = (frame: number) => Math.round((t.sampleAt(frame) / t.rate) * 1000);
      events.set(
        id,
        found.map((e) => ({ type: e.type, at_ms: ms(e.frame), decided_ms: ms(e.decidedAt + 1) })),
      );
    }
    return events;
  }
}
