// The inference engine: a pool of worker threads (config.workers), streams pinned to a worker (their state lives
// there) when one has room for them (see BINDING), a per-worker queue on this side (ordered as ARRIVAL_ORDER_MESSAGES
// says; at most MAX_IN_FLIGHT requests posted per worker, which runs them one at a time, in order), audio moved with
// transferable ArrayBuffers. A worker that dies is replaced; only the streams pinned to it fail, with a clear error.
// Here the pool and the binding; one worker and its queue in pool-worker.ts, a stream's requests in stream-handle.ts.
import type { WavSampleFormat } from '../../dsp/pcm';
import type { Config } from '../../config';
import { MODELS, streamLayout } from '../models/specs';
import { MAX_IN_FLIGHT, PoolWorker } from './pool-worker';
import type { ToWorker } from './protocol';
import { StreamHandle, type StreamHost } from './file-stream-handle';
import { LivePool } from '../live/pool';
import type { ThreadPriority } from './thread-priority';
import type {
  DenoiseOptions,
  DenoiseStream,
  InferenceEngine,
  LiveOptions,
  LiveSink,
  LiveState,
  LiveStream,
  PcmDenoiseStream,
  PoolState,
} from '../types';

export { listModels, type ModelListEntry } from '../models/model-list';

// BINDING. A new stream is not pinned when it opens but when a worker has room for it: when fewer than MAX_IN_FLIGHT
// of the worker's requests would run before the stream's (those posted, and those queued that rank ahead of it).
// Until then its requests wait here, in the order the streams opened, and the first worker to get room takes the
// oldest. Pinning at open had to guess from the queues of that moment: a short call could land behind a long file's
// queued chunks while the other worker ran dry a moment later. With one worker the order is the same as pinning at
// open (the stream binds when its requests would have been posted anyway).
/** close() waits at most this long for requests already posted to the workers. */
const CLOSE_DRAIN_MS = 10_000;

class Engine implements InferenceEngine, StreamHost {
  /** File workers: requests of uploads, batches and jobs. */
  private readonly workers: PoolWorker[] = [];
  /** Live workers (LIVE_WORKERS), spawned at the first live stream: live ticks never wait behind a file's runs. */
  private readonly liveWorkers: PoolWorker[] = [];
  private liveStarting: Promise<void> | null = null;
  /** Streams waiting for a worker (BINDING), oldest first. */
  private readonly unbound: StreamHandle[] = [];
  private restarts = 0;
  private closed = false;
  private reqCounter = 0;
  private streamCounter = 0;
  private liveCounter = 0;
  private readonly live: LivePool;

  constructor(
    private readonly config: Config,
    private readonly options: EngineOptions = {},
  ) {
    const fileWorkers = options.liveOnly ? 0 : Math.max(1, config.workers);
    for (let i = 0; i < fileWorkers; i++) this.workers.push(this.spawn());
    // Live ids are their own series: the file queue's ranks (ARRIVAL_ORDER_MESSAGES) count file streams only.
    this.live = new LivePool(() => this.liveWorkers, () => ++this.liveCounter, () => this.nextReqId(), config.liveTickMs);
  }

  /**
   * A live stream (live/pool.ts): chunks in as they come, output to `sink` in order. It runs on a live worker, at the
   * server's priority, while the file workers run lowered (FILE_WORK_IDLE, FILE_WORK_NICE): when the CPU is short the
   * OS runs live ticks first, and a tick never waits for a file's session.run to end.
   */
  async openLive(opts: LiveOptions, sink: LiveSink): Promise<LiveStream> {
    if (this.closed) throw new Error('inference engine closed');
    await this.startLiveWorkers();
    return this.live.open(opts, sink);
  }

  private startLiveWorkers(): Promise<void> {
    if (!this.liveStarting) {
      for (let i = 0; i < Math.max(1, this.config.liveWorkers); i++) this.liveWorkers.push(this.spawn(true));
      // Ready when one is (a live worker that failed to start is replaced like any other).
      this.liveStarting = Promise.any(this.liveWorkers.map((w) => w.ready)).then(
        () => undefined,
        (err: AggregateError) => {
          this.liveStarting = null;
          throw err.errors[0] as Error;
        },
      );
    }
    return this.liveStarting;
  }

  liveState(): LiveState {
    return this.live.state();
  }

  workerPriorities(): { live: boolean; priority: ThreadPriority | null }[] {
    return [
      ...this.workers.map((w) => ({ live: false, priority: w.priority })),
      ...this.liveWorkers.map((w) => ({ live: true, priority: w.priority })),
    ];
  }

  nextReqId(): number {
    return ++this.reqCounter;
  }

  /** The id of the stream opened last (ids grow with each open). */
  newestStream(): number {
    return this.streamCounter;
  }

  async start(): Promise<void> {
    await Promise.all(this.workers.map((w) => w.ready));
  }

  private spawn(live = false): PoolWorker {
    return new PoolWorker(
      this.config.modelsDir,
      this.options.warmUp ?? true,
      (w, code) => this.onWorkerExit(w, code),
      () => this.dispatch(),
      live ? { nice: 0, idle: false, live: true } : { nice: this.config.fileWorkNice, idle: this.config.fileWorkIdle },
    );
  }

  /**
   * Pins waiting streams, oldest first, each to the worker with the fewest requests ahead of it, while one has room
   * (BINDING). A newer stream would find no fewer requests ahead of it, so the first that finds no room ends the turn.
   */
  private dispatch(): void {
    while (this.unbound.length > 0) {
      const s = this.unbound[0];
      let best: PoolWorker | null = null;
      let bestAhead = Infinity;
      for (const w of this.workers) {
        if (!w.usable) continue;
        const n = w.ahead(s.id);
        if (n < bestAhead || (n === bestAhead && best && w.streams.size < best.streams.size)) {
          best = w;
          bestAhead = n;
        }
      }
      if (!best || bestAhead >= MAX_IN_FLIGHT) {
        // None can take it now. If none ever can (every worker failed to start), say so instead of waiting.
        const why = this.workers[0]?.failedToStart;
        if (!best && why && this.workers.every((w) => w.failedToStart)) {
          for (const t of this.unbound.splice(0)) t.failWaiting(why);
        }
        return;
      }
      this.unbound.shift();
      s.bind(best);
    }
  }

  /** Drops a stream that is still waiting for a worker (aborted). */
  forget(s: StreamHandle): void {
    const i = this.unbound.indexOf(s);
    if (i >= 0) this.unbound.splice(i, 1);
  }

  private onWorkerExit(w: PoolWorker, code: number): void {
    const lost = new Error(
      this.closed ? 'inference engine closed' : `inference worker crashed (exit code ${code}); this stream was lost, retry the request`,
    );
    w.failAll(lost);
    this.live.workerGone(w, lost);
    if (this.closed) return;
    for (const [list, live] of [[this.workers, false], [this.liveWorkers, true]] as const) {
      const idx = list.indexOf(w);
      if (idx < 0) continue;
      this.restarts++;
      list[idx] = this.spawn(live);
    }
  }

  openStream(opts: DenoiseOptions): Promise<DenoiseStream> {
    return this.open(opts, null);
  }

  async openPcmStream(opts: DenoiseOptions, input: WavSampleFormat): Promise<PcmDenoiseStream> {
    const h = await this.open(opts, input);
    return {
      sampleRate: h.sampleRate,
      bands: h.bands,
      push: (bytes) => h.pushPcm(bytes),
      end: () => h.endPcm(),
      loudness: () => h.loudness(),
      speech: () => h.speech(),
      echo: () => h.echo(),
      abort: () => h.abort(),
    };
  }

  private async open(opts: DenoiseOptions, pcmInput: WavSampleFormat | null): Promise<StreamHandle> {
    if (this.closed) throw new Error('inference engine closed');
    if (!Object.hasOwn(MODELS, opts.model)) throw new Error(`unknown model "${opts.model}"`);
    if (!Number.isInteger(opts.channels) || opts.channels < 1) throw new Error(`invalid channel count ${opts.channels}`);
    if (!(opts.attenuationLimitDb >= 0)) throw new Error(`invalid attenuation limit ${opts.attenuationLimitDb}`);
    if (this.options.liveOnly) throw new Error('this engine runs live streams only (file work runs in the file-work process)');
    if (opts.echoReference && pcmInput) throw new Error('echo cancellation takes planar input, not PCM edges');
    if (this.workers.every((w) => w.dead)) throw new Error('no inference worker available');
    const id = ++this.streamCounter;
    const layout = streamLayout(opts.model, !!opts.fullBand, !!opts.narrowBand);
    // Not awaited: the stream's first push is queued right behind `open` (same worker, same rank), so the worker goes
    // from one to the other without waiting for this thread to see the answer to `open` in between.
    // With an echo reference every push carries it as one more channel, after the microphone's.
    const handle = new StreamHandle(this, id, layout.sampleRate, opts.channels + (opts.echoReference ? 1 : 0), layout.bands, {
      msg: {
        type: 'open', reqId: this.nextReqId(), streamId: id, model: opts.model, channels: opts.channels,
        attenuationLimitDb: opts.attenuationLimitDb, fullBand: !!opts.fullBand, measureLoudness: !!opts.measureLoudness,
        ...(opts.narrowBand ? { narrowBand: true } : {}),
        ...(pcmInput ? { pcmInput } : {}),
        ...(opts.speech ? { speech: opts.speech } : {}),
        ...(opts.echoReference ? { echoReference: true } : {}),
      },
      rank: id,
      transfer: [],
      expectsReply: true,
    });
    this.unbound.push(handle);
    this.dispatch();
    return handle;
  }

  state(): PoolState {
    let busy = 0;
    let queued = 0;
    let streams = 0;
    for (const w of this.workers) {
      if (w.inFlight.length > 0) busy++;
      queued += w.queue.length;
      streams += w.streams.size;
    }
    for (const s of this.unbound) queued += s.waiting.length;
    streams += this.unbound.length;
    return { size: this.workers.length, busy, queued, streams, restarts: this.restarts };
  }

  /** Test hook: makes worker `index` exit abruptly, as a native crash would. */
  crashWorkerForTest(index: number): void {
    this.workers[index].worker.postMessage({ type: 'crash' } satisfies ToWorker);
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    // Terminating a worker in the middle of an ONNX Runtime call aborts the whole process ("terminate called after
    // throwing an instance of 'Napi::Error'"): drop what is still queued here, let the requests already posted finish
    // (an aborted stream's last chunk, typically; bounded), then terminate.
    const closing = new Error('inference engine closed');
    for (const s of this.unbound.splice(0)) s.failWaiting(closing);
    for (const w of this.workers) {
      const queued = w.queue.splice(0);
      for (const j of queued) j.reject(closing);
    }
    const until = Date.now() + CLOSE_DRAIN_MS;
    while ([...this.workers, ...this.liveWorkers].some((w) => !w.dead && w.busy) && Date.now() < until) {
      await new Promise((r) => setTimeout(r, 10));
    }
    // A live worker still loading its graphs is let finish first (terminating it inside ONNX Runtime would abort).
    await Promise.allSettled(this.liveWorkers.map((w) => w.ready));
    await Promise.all([...this.workers, ...this.liveWorkers].map((w) => w.worker.terminate()));
  }
}

export interface EngineOptions {
  /** Each worker runs half a second of audio before it reports ready (default true; the CLI, one file, skips it). */
  warmUp?: boolean;
  /**
   * No file workers: only live streams run here (openStream refuses). `npm start` uses it when the file work runs in
   * a child process of its own (FILE_WORK_PROCESS, src/file-process).
   */
  liveOnly?: boolean;
}

/** Starts the pool and resolves once every worker has loaded the graphs (rejects if they cannot be loaded). */
export async function createInferenceEngine(config: Config, options: EngineOptions = {}): Promise<InferenceEngine> {
  const engine = new Engine(config, options);
  try {
    await engine.start();
  } catch (err) {
    await engine.close();
    throw err;
  }
  return engine;
}
