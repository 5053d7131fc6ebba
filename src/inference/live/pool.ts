// Live streams, the engine's side: each stream is pinned to the live worker (LIVE_WORKERS, apart from the file
// workers) with the fewest live streams when it opens, counting workers still starting (see place()). Its chunks wait here until that worker's next tick; a worker
// has at most one tick in flight, and the next one takes every chunk that arrived meanwhile, for all its live streams
// in one message (packed: two transferred buffers). So ticks follow each other as fast as the worker answers (but no
// closer than LIVE_TICK_MS): small and immediate when few streams are open, larger (more streams per session.run) as
// load rises. A worker with speech frames waiting (vad=true) names when they are due; if no chunk comes by then, an
// empty tick runs them, so a speech event never waits for more input.
import type { FromWorker, ToWorker } from '../runtime/protocol';
import { packLive, packedTransfer, unpackLive, type LiveItem, type LiveItemToPack } from './packing';
import type { EchoReport, LiveOptions, LiveSink, LiveState, LiveStream } from '../types';

/** What the pool needs of a worker (engine.ts PoolWorker). */
export interface LiveWorker {
  readonly usable: boolean;
  /** Not ready yet but alive and without a start-up error: it takes streams once `ready` resolves. */
  readonly starting: boolean;
  /** Resolves when the worker is ready; rejects when it cannot start. */
  readonly ready: Promise<void>;
  liveStreams: number;
  /** Posts at once (not queued behind file requests); resolves with the worker's answer. */
  postLive(msg: Extract<ToWorker, { type: 'live-open' | 'live-tick' }>, transfer: ArrayBuffer[]): Promise<FromWorker>;
  /** Drops a live stream in the worker (no answer). */
  abortLive(streamId: number): void;
}

interface Entry {
  worker: LiveWorker;
  sink: LiveSink;
  chunks: Uint8Array[];
  ending: boolean;
  /** The tick carrying `end` has been posted. */
  endSent: boolean;
  onEnded?: () => void;
  failed: boolean;
  /** The canceller's figures, with the end of a stream that had an echo reference. */
  echo: EchoReport | null;
}

/** How long a stream placed on a live worker still starting waits for it before it goes to a ready one. */
const START_WAIT_MS = 10_000;

export class LivePool {
  private readonly entries = new Map<number, Entry>();
  private readonly ticking = new Set<LiveWorker>();
  private readonly scheduled = new Set<LiveWorker>();
  private ticks = 0;
  private readonly lastStart = new Map<LiveWorker, number>();
  /** Per worker: the empty tick that runs speech frames due (vadDueMs) when nothing else comes. */
  private readonly vadTimers = new Map<LiveWorker, NodeJS.Timeout>();
  private items = 0;

  constructor(
    private readonly workers: () => LiveWorker[],
    private readonly nextId: () => number,
    private readonly nextReqId: () => number,
    /**
     * A worker's ticks start at least this far apart (LIVE_TICK_MS). Back-to-back ticks at 300 nsm-1 streams came
     * every ~0.5 ms with a few streams each, and small batches cost more per row: 2 ms took CPU per stream-second
     * from 2.93 to 2.47 ms and p99 from 17 to 10 ms (bench, alternating runs); 4 ms saved no more and raised p50.
     */
    private readonly minTickMs = 2,
  ) {}

  state(): LiveState {
    return { streams: this.entries.size, ticks: this.ticks, items: this.items, perWorker: this.workers().map((w) => w.liveStreams) };
  }

  /**
   * The worker a new stream is pinned to, its count already taken: the one with the fewest live streams among those
   * ready and those still starting (a ready one on a tie). The engine's first live stream waits for one live worker
   * only, so streams that open together (clients reconnecting after a restart, a bench) all went to the first worker
   * ready and stayed there for their whole life: 60 echo streams on one live worker's thread (busy 18.0 of 18.9 s)
   * while the other idled (2.1 s, its warm-up), p99 2 s. A stream placed on a starting worker waits for it, at most
   * START_WAIT_MS, then goes to the least loaded ready one.
   */
  private async place(): Promise<LiveWorker> {
    const fewest = (list: LiveWorker[]): LiveWorker =>
      list.reduce((a, b) => (b.liveStreams < a.liveStreams || (b.liveStreams === a.liveStreams && b.usable && !a.usable) ? b : a));
    const open = this.workers().filter((w) => w.usable || w.starting);
    if (open.length === 0) throw new Error('no inference worker available');
    const pick = fewest(open);
    pick.liveStreams++;
    if (pick.usable) return pick;
    let timer: NodeJS.Timeout | undefined;
    const started = await Promise.race([
      pick.ready.then(() => true, () => false),
      new Promise<boolean>((resolve) => (timer = setTimeout(() => resolve(false), START_WAIT_MS))),
    ]);
    clearTimeout(timer);
    if (started && pick.usable) return pick;
    pick.liveStreams--;
    const usable = this.workers().filter((w) => w.usable);
    if (usable.length === 0) throw new Error('no inference worker available');
    const w = fewest(usable);
    w.liveStreams++;
    return w;
  }

  async open(opts: LiveOptions, sink: LiveSink): Promise<LiveStream> {
    const worker = await this.place();
    const id = this.nextId();
    let reply: FromWorker;
    try {
      reply = await worker.postLive({ type: 'live-open', reqId: this.nextReqId(), open: { streamId: id, ...opts } }, []);
    } catch (err) {
      worker.liveStreams--;
      throw err;
    }
    if (reply.type !== 'live-opened') {
      worker.liveStreams--;
      throw new Error(reply.type === 'error' ? reply.message : `unexpected answer ${reply.type}`);
    }
    const entry: Entry = { worker, sink, chunks: [], ending: false, endSent: false, failed: false, echo: null };
    this.entries.set(id, entry);
    return {
      id,
      latencySamples: reply.latencySamples,
      push: (bytes) => {
        if (entry.ending || entry.failed) return;
        entry.chunks.push(bytes);
        this.schedule(worker);
      },
      end: () =>
        new Promise<void>((resolve) => {
          if (entry.failed || !this.entries.has(id)) return resolve();
          entry.ending = true;
          entry.onEnded = resolve;
          this.schedule(worker);
        }),
      abort: () => {
        if (!this.entries.delete(id)) return;
        worker.liveStreams--;
        entry.onEnded?.();
        worker.abortLive(id);
      },
      echo: () => entry.echo,
    };
  }

  /** A worker died: its live streams fail (their state was there). */
  workerGone(worker: LiveWorker, err: Error): void {
    for (const [id, e] of this.entries) {
      if (e.worker !== worker) continue;
      this.entries.delete(id);
      this.fail(e, err);
    }
    this.ticking.delete(worker);
    this.scheduled.delete(worker);
    this.clearVadTimer(worker);
  }

  private clearVadTimer(worker: LiveWorker): void {
    const timer = this.vadTimers.get(worker);
    if (timer) clearTimeout(timer);
    this.vadTimers.delete(worker);
  }

  /** Runs the worker's due speech frames in `ms` unless a tick goes first (which reports anew). */
  private vadFlushIn(worker: LiveWorker, ms: number): void {
    this.clearVadTimer(worker);
    const timer = setTimeout(() => {
      this.vadTimers.delete(worker);
      if (this.ticking.has(worker) || this.scheduled.has(worker)) return;
      this.tick(worker, true).catch((err: Error) => this.workerGone(worker, err));
    }, ms);
    timer.unref();
    this.vadTimers.set(worker, timer);
  }

  private fail(e: Entry, err: Error): void {
    if (e.failed) return;
    e.failed = true;
    try {
      e.sink.error(err);
    } catch {
      // The sink's owner is gone with it; nothing else to tell.
    }
    e.onEnded?.();
  }

  private schedule(worker: LiveWorker): void {
    if (this.ticking.has(worker) || this.scheduled.has(worker)) return;
    this.scheduled.add(worker);
    const fire = (): void => {
      this.scheduled.delete(worker);
      this.tick(worker).catch((err: Error) => this.workerGone(worker, err));
    };
    // At least minTickMs after the previous tick's start; else one turn of the event loop: chunks that arrived in the
    // same I/O phase go in the same tick. (A 5 ms floor held fewer streams on an earlier, slower live path: 200 nsm-1
    // went from 0 to 15 underruns; 2 ms is the measured knee.)
    const wait = (this.lastStart.get(worker) ?? -Infinity) + this.minTickMs - performance.now();
    if (wait > 0) setTimeout(fire, wait);
    else setImmediate(fire);
  }

  /** `flush`: tick even with no chunks (speech frames are due). */
  private async tick(worker: LiveWorker, flush = false): Promise<void> {
    const items: LiveItemToPack[] = [];
    for (const [id, e] of this.entries) {
      if (e.worker !== worker || e.endSent || (e.chunks.length === 0 && !e.ending)) continue;
      if (e.ending) e.endSent = true;
      items.push({ streamId: id, bytes: e.chunks, end: e.ending });
      e.chunks = [];
    }
    if (items.length === 0 && !flush) return;
    this.clearVadTimer(worker);
    this.lastStart.set(worker, performance.now());
    this.ticking.add(worker);
    this.ticks++;
    this.items += items.length;
    let results: LiveItem[] = [];
    try {
      const packed = packLive(items);
      const reply = await worker.postLive({ type: 'live-tick', reqId: this.nextReqId(), packed }, packedTransfer(packed));
      if (reply.type === 'live-result') {
        results = unpackLive(reply.packed);
        if (reply.packed.vadDueMs !== undefined) this.vadFlushIn(worker, reply.packed.vadDueMs);
      } else throw new Error(reply.type === 'error' ? reply.message : `unexpected answer ${reply.type}`);
    } catch (err) {
      for (const item of items) {
        const e = this.entries.get(item.streamId);
        if (e) {
          this.entries.delete(item.streamId);
          worker.liveStreams--;
          this.fail(e, err as Error);
        }
      }
    } finally {
      this.ticking.delete(worker);
    }
    for (const r of results) {
      const e = this.entries.get(r.streamId);
      if (!e) continue; // aborted meanwhile
      try {
        if (r.error !== undefined) {
          this.entries.delete(r.streamId);
          worker.liveStreams--;
          this.fail(e, new Error(r.error));
          continue;
        }
        if (r.bytes.byteLength > 0) e.sink.output(r.bytes);
        if (r.events) for (const ev of r.events) e.sink.event?.(ev);
        if (r.end) {
          e.echo = r.echo ?? null;
          this.entries.delete(r.streamId);
          worker.liveStreams--;
          e.onEnded?.();
        }
      } catch (err) {
        // A sink that throws fails its own stream; the others of the tick still get their output.
        if (this.entries.delete(r.streamId)) {
          worker.liveStreams--;
          worker.abortLive(r.streamId);
        }
        this.fail(e, err as Error);
      }
    }
    // Chunks that came while this tick ran go next.
    for (const e of this.entries.values()) {
      if (e.worker === worker && !e.endSent && (e.chunks.length > 0 || e.ending)) {
        this.schedule(worker);
        break;
      }
    }
  }
}
