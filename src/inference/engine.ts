// The inference engine: a pool of worker threads (config.workers), streams pinned to a worker (their state lives
// there) when one has room for them (see BINDING), a per-worker queue on this side (ordered as ARRIVAL_ORDER_MESSAGES
// says; at most MAX_IN_FLIGHT requests posted per worker, which runs them one at a time, in order), audio moved with
// transferable ArrayBuffers. A worker that dies is replaced; only the streams pinned to it fail, with a clear error.
import fs from 'node:fs';
import path from 'node:path';
import { Worker } from 'node:worker_threads';
import type { WavSampleFormat } from '../dsp/pcm';
import type { Config } from '../config';
import { type BandProcessing } from './types';
import { CHAINS, streamLayout } from './catalog';
import { LivePool, type LiveWorker } from './live';
import { spansItsBuffer, type FromWorker, type ToWorker } from './protocol';
import {
  MODEL_IDS,
  type DenoiseOptions,
  type DenoiseStream,
  type InferenceEngine,
  type ModelId,
  type ModelManifestEntry,
  type PcmDenoiseStream,
  type LiveOptions,
  type LiveSink,
  type LiveState,
  type LiveStream,
  type PoolState,
  type StreamLoudness,
} from './types';

const WORKER_SCRIPT = path.join(__dirname, 'worker.js');
/**
 * Requests posted to a worker before it has answered the previous ones: with 2, the next request is already there
 * when the worker finishes one (no idle round trip) while the rest stays queued here (bounded memory in the worker).
 */
const MAX_IN_FLIGHT = 2;
/**
 * Queue order on a worker. A stream's first messages (open and the next three: a 10 s call's whole life with 8 s
 * chunks) rank by the stream's age, so the oldest call's go first. Each later message of a long stream (a long file,
 * a job fed 1 s chunks) ranks by when it was submitted, as if it opened a stream then: streams opened before it go
 * ahead, newer ones behind. So short calls finish one after another, a long stream shares its worker chunk by chunk
 * and holds back a newer call by at most the chunks already queued, and no message waits for more than the streams
 * older than it.
 */
const ARRIVAL_ORDER_MESSAGES = 4;
/** Added to the newest stream id for a rank behind every stream opened so far (later messages, abort). */
const LATER = 0.5;
// BINDING. A new stream is not pinned when it opens but when a worker has room for it: when fewer than MAX_IN_FLIGHT
// of the worker's requests would run before the stream's (those posted, and those queued that rank ahead of it).
// Until then its requests wait here, in the order the streams opened, and the first worker to get room takes the
// oldest. Pinning at open had to guess from the queues of that moment: a short call could land behind a long file's
// queued chunks while the other worker ran dry a moment later. With one worker the order is the same as pinning at
// open (the stream binds when its requests would have been posted anyway).
/** close() waits at most this long for requests already posted to the workers. */
const CLOSE_DRAIN_MS = 10_000;

/** A worker's answer to one request (fire-and-forget messages resolve with NO_REPLY). */
type Reply = Pick<Extract<FromWorker, { type: 'result' }>, 'planar' | 'pcm' | 'loudness'>;
const NO_REPLY: Reply = { planar: [] };

interface Job {
  msg: ToWorker;
  /** Queue position: behind every job of a rank no higher (a stream id: see ARRIVAL_ORDER_MESSAGES). */
  rank: number;
  transfer: ArrayBuffer[];
  /** Fire-and-forget messages (abort) have no reply. */
  expectsReply: boolean;
  resolve(reply: Reply): void;
  reject(err: Error): void;
}

class PoolWorker implements LiveWorker {
  readonly worker: Worker;
  /** Live streams pinned here (live.ts), and their requests awaiting an answer, by reqId. */
  liveStreams = 0;
  private readonly liveReplies = new Map<number, { resolve(msg: FromWorker): void; reject(err: Error): void }>();
  readonly ready: Promise<void>;
  readonly queue: Job[] = [];
  /** Posted and awaiting their reply, in posting order (the worker answers in that order). */
  readonly inFlight: Job[] = [];
  readonly streams = new Map<number, StreamHandle>();
  dead = false;
  private isReady = false;
  private initError: Error | null = null;

  constructor(
    modelsDir: string,
    warmUp: boolean,
    private readonly onExit: (w: PoolWorker, code: number) => void,
    /** Called when the worker may have room for a waiting stream (it got ready, or answered a request). */
    private readonly onRoom: () => void,
  ) {
    this.worker = new Worker(WORKER_SCRIPT, { workerData: { modelsDir, warmUp } });
    this.ready = new Promise<void>((resolve, reject) => {
      this.worker.on('message', (msg: FromWorker) => {
        if (msg.type === 'ready') {
          this.isReady = true;
          resolve();
          this.onRoom();
          this.pump();
        } else if (msg.type === 'init-error') {
          this.initError = new Error(`inference worker could not start: ${msg.message}`);
          reject(this.initError);
          this.failAll(this.initError);
          this.onRoom(); // streams waiting for a worker fail if none can take them any more
        } else if (this.liveReplies.has(msg.reqId)) {
          const waiter = this.liveReplies.get(msg.reqId)!;
          this.liveReplies.delete(msg.reqId);
          waiter.resolve(msg);
        } else {
          const i = this.inFlight.findIndex((j) => 'reqId' in j.msg && j.msg.reqId === msg.reqId);
          const job = i >= 0 ? this.inFlight.splice(i, 1)[0] : undefined;
          if (job) {
            if (msg.type === 'result') job.resolve(msg);
            else job.reject(new Error(msg.type === 'error' ? msg.message : `unexpected answer ${msg.type}`));
          }
          this.onRoom();
          this.pump();
        }
      });
      this.worker.on('error', () => undefined); // an 'exit' always follows; handled there
      this.worker.on('exit', (code) => {
        this.dead = true;
        if (!this.isReady && !this.initError) reject(new Error(`inference worker exited during start-up (code ${code})`));
        this.onExit(this, code);
      });
    });
    this.ready.catch(() => undefined);
  }

  /** Ready and alive: can take streams now. */
  get usable(): boolean {
    return this.isReady && !this.dead;
  }

  /** Why it could not start (it never will take streams), or null. */
  get failedToStart(): Error | null {
    return this.initError;
  }

  /** Requests that would run before a stream of this id bound now: those posted, and those queued ranking ahead. */
  ahead(streamId: number): number {
    let n = this.inFlight.length;
    for (const j of this.queue) if (j.rank < streamId) n++;
    return n;
  }

  submit(job: Job): void {
    if (this.dead) return job.reject(new Error('inference worker is gone'));
    if (this.initError) return job.reject(this.initError);
    // By rank (ARRIVAL_ORDER_MESSAGES): short calls finish one after another instead of all together, so the worker
    // still has an older call's work while a finished one's answer goes out and the next upload comes in. A
    // stream's ranks never decrease, so its own jobs keep their order.
    let i = this.queue.length;
    while (i > 0 && this.queue[i - 1].rank > job.rank) i--;
    this.queue.splice(i, 0, job);
    this.pump();
  }

  postLive(msg: ToWorker, transfer: ArrayBuffer[]): Promise<FromWorker> {
    if (this.dead) return Promise.reject(new Error('inference worker is gone'));
    if (!('reqId' in msg)) {
      this.worker.postMessage(msg, transfer);
      return Promise.resolve({ type: 'ready' });
    }
    return new Promise<FromWorker>((resolve, reject) => {
      this.liveReplies.set(msg.reqId, { resolve, reject });
      try {
        this.worker.postMessage(msg, transfer);
      } catch (err) {
        this.liveReplies.delete(msg.reqId);
        reject(err as Error);
      }
    });
  }

  private pump(): void {
    while (this.isReady && !this.dead && this.inFlight.length < MAX_IN_FLIGHT && this.queue.length > 0) {
      const job = this.queue.shift()!;
      try {
        this.worker.postMessage(job.msg, job.transfer);
      } catch (err) {
        job.reject(err as Error);
        continue;
      }
      if (job.expectsReply) this.inFlight.push(job);
      else job.resolve(NO_REPLY);
    }
  }

  failAll(err: Error): void {
    for (const waiter of this.liveReplies.values()) waiter.reject(err);
    this.liveReplies.clear();
    const jobs = [...this.inFlight, ...this.queue];
    this.inFlight.length = 0;
    this.queue.length = 0;
    for (const j of jobs) j.reject(err);
    for (const s of this.streams.values()) s.fail(err);
    this.streams.clear();
  }
}

/** Gives each channel its own exclusively owned buffer so it can be transferred (views into shared buffers are copied). */
function ownedPlanar(planar: Float32Array[]): { planar: Float32Array[]; transfer: ArrayBuffer[] } {
  const seen = new Set<ArrayBufferLike>();
  const out = planar.map((ch) => {
    const owned = spansItsBuffer(ch) && !seen.has(ch.buffer) ? ch : ch.slice();
    seen.add(owned.buffer);
    return owned;
  });
  return { planar: out, transfer: out.map((c) => c.buffer as ArrayBuffer) };
}

class StreamHandle implements DenoiseStream {
  private failure: Error | null = null;
  private finished = false;
  /** Messages of this stream submitted so far (its `open` is the first). */
  private messages = 1;
  private measured: StreamLoudness | null = null;
  /** The worker it is pinned to; null while it waits for one (BINDING). */
  private owner: PoolWorker | null = null;
  /** Its requests, `open` first, while it waits for a worker. */
  readonly waiting: Job[] = [];
  /** The worker's answer to `open`: requests are queued behind it at once, and fail with its error if it failed. */
  readonly opened: Promise<unknown>;

  constructor(
    private readonly engine: Engine,
    readonly id: number,
    readonly sampleRate: number,
    private readonly channels: number,
    readonly bands: BandProcessing[],
    open: Omit<Job, 'resolve' | 'reject'>,
  ) {
    this.opened = new Promise<Reply>((resolve, reject) => this.waiting.push({ ...open, resolve, reject }));
    this.opened.catch((err: Error) => {
      this.owner?.streams.delete(this.id);
      this.fail(err);
    });
  }

  /** Pins the stream to `w` and hands it the requests made so far. */
  bind(w: PoolWorker): void {
    this.owner = w;
    w.streams.set(this.id, this);
    for (const job of this.waiting.splice(0)) w.submit(job);
  }

  /** Fails the requests still waiting for a worker (the stream never got one). */
  failWaiting(err: Error): void {
    this.fail(err);
    for (const job of this.waiting.splice(0)) job.reject(err);
  }

  fail(err: Error): void {
    if (!this.failure) this.failure = err;
  }

  private submit(job: Job): void {
    if (this.owner) this.owner.submit(job);
    else this.waiting.push(job);
  }

  /** Takes ownership of the arrays: their buffers are transferred to the worker (detached here). */
  push(planar: Float32Array[]): Promise<Float32Array[]> {
    if (planar.length !== this.channels) {
      return Promise.reject(new Error(`expected ${this.channels} channels, got ${planar.length}`));
    }
    const moved = ownedPlanar(planar);
    return this.request((reqId) => ({ type: 'push', reqId, streamId: this.id, planar: moved.planar }), moved.transfer).then(
      (r) => r.planar,
    );
  }

  /** A stream opened for PCM: takes ownership of the bytes (transferred, or copied where they are a view). */
  pushPcm(bytes: Uint8Array): Promise<Uint8Array> {
    const owned = spansItsBuffer(bytes) ? bytes : new Uint8Array(bytes); // a copy (Buffer's slice() would be a view)
    return this.request((reqId) => ({ type: 'push-pcm', reqId, streamId: this.id, bytes: owned }), [owned.buffer as ArrayBuffer]).then(pcmOf);
  }

  end(): Promise<Float32Array[]> {
    return this.finish().then((r) => r.planar);
  }

  endPcm(): Promise<Uint8Array> {
    return this.finish().then(pcmOf);
  }

  private finish(): Promise<Reply> {
    const p = this.request((reqId) => ({ type: 'end', reqId, streamId: this.id }), []).then((r) => {
      this.measured = r.loudness ?? null;
      return r;
    });
    this.finished = true;
    return p.finally(() => this.owner?.streams.delete(this.id));
  }

  loudness(): StreamLoudness | null {
    return this.measured;
  }

  abort(): void {
    // Freed here at once, also when `end` was already sent (the pipeline sends it before the last chunk's answer is
    // back); the worker then drops the stream after that flush, and nobody waits for the answer. A repeated call
    // changes nothing: the stream is gone from the map and `finished` is set.
    if (!this.owner) {
      // Still waiting for a worker: nothing of it reached one.
      this.engine.forget(this);
      this.failWaiting(new Error('stream aborted'));
      this.finished = true;
      return;
    }
    this.owner.streams.delete(this.id);
    if (this.finished) return;
    this.finished = true;
    if (!this.owner.dead) {
      this.owner.submit({
        msg: { type: 'abort', streamId: this.id },
        rank: this.engine.newestStream() + LATER, // behind everything of this stream already queued
        transfer: [],
        expectsReply: false,
        resolve: () => undefined,
        reject: () => undefined,
      });
    }
  }

  private request(make: (reqId: number) => ToWorker, transfer: ArrayBuffer[]): Promise<Reply> {
    if (this.finished) return Promise.reject(new Error('stream already ended or aborted'));
    if (this.failure) return Promise.reject(this.failure);
    // Submitted at once: requests of one stream still run in order (one worker, ranks that never decrease, run one at
    // a time there), and a push made before the previous one resolved is already queued, or posted, when the worker
    // gets to it.
    const reply = new Promise<Reply>((resolve, reject) => {
      const rank = ++this.messages <= ARRIVAL_ORDER_MESSAGES ? this.id : this.engine.newestStream() + LATER;
      this.submit({ msg: make(this.engine.nextReqId()), rank, transfer, expectsReply: true, resolve, reject });
    });
    reply.catch(() => undefined); // when `open` failed, its error is the one reported
    return this.opened.then(() => reply);
  }
}

function pcmOf(r: Reply): Uint8Array {
  if (!r.pcm) throw new Error('the inference worker returned no PCM for a PCM stream');
  return r.pcm;
}

class Engine implements InferenceEngine {
  private readonly workers: PoolWorker[] = [];
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
    for (let i = 0; i < Math.max(1, config.workers); i++) this.workers.push(this.spawn());
    // Live ids are their own series: the file queue's ranks (ARRIVAL_ORDER_MESSAGES) count file streams only.
    this.live = new LivePool(() => this.workers, () => ++this.liveCounter, () => this.nextReqId());
  }

  /** A live stream (live.ts): chunks in as they come, output to `sink` in order, ahead of file work. */
  openLive(opts: LiveOptions, sink: LiveSink): Promise<LiveStream> {
    if (this.closed) return Promise.reject(new Error('inference engine closed'));
    return this.live.open(opts, sink);
  }

  liveState(): LiveState {
    return this.live.state();
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

  private spawn(): PoolWorker {
    return new PoolWorker(
      this.config.modelsDir,
      this.options.warmUp ?? true,
      (w, code) => this.onWorkerExit(w, code),
      () => this.dispatch(),
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
    const idx = this.workers.indexOf(w);
    const lost = new Error(
      this.closed ? 'inference engine closed' : `inference worker crashed (exit code ${code}); this stream was lost, retry the request`,
    );
    w.failAll(lost);
    this.live.workerGone(w, lost);
    if (this.closed || idx < 0) return;
    this.restarts++;
    this.workers[idx] = this.spawn();
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
      abort: () => h.abort(),
    };
  }

  private async open(opts: DenoiseOptions, pcmInput: WavSampleFormat | null): Promise<StreamHandle> {
    if (this.closed) throw new Error('inference engine closed');
    if (!MODEL_IDS.includes(opts.model)) throw new Error(`unknown model "${opts.model}"`);
    if (!Number.isInteger(opts.channels) || opts.channels < 1) throw new Error(`invalid channel count ${opts.channels}`);
    if (!(opts.attenuationLimitDb >= 0)) throw new Error(`invalid attenuation limit ${opts.attenuationLimitDb}`);
    if (this.workers.every((w) => w.dead)) throw new Error('no inference worker available');
    const id = ++this.streamCounter;
    const layout = streamLayout(opts.model, !!opts.fullBand);
    // Not awaited: the stream's first push is queued right behind `open` (same worker, same rank), so the worker goes
    // from one to the other without waiting for this thread to see the answer to `open` in between.
    const handle = new StreamHandle(this, id, layout.sampleRate, opts.channels, layout.bands, {
      msg: {
        type: 'open', reqId: this.nextReqId(), streamId: id, model: opts.model, channels: opts.channels,
        attenuationLimitDb: opts.attenuationLimitDb, fullBand: !!opts.fullBand, measureLoudness: !!opts.measureLoudness,
        ...(pcmInput ? { pcmInput } : {}),
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
    while (this.workers.some((w) => !w.dead && w.inFlight.length > 0) && Date.now() < until) {
      await new Promise((r) => setTimeout(r, 10));
    }
    await Promise.all(this.workers.map((w) => w.worker.terminate()));
  }
}

export interface EngineOptions {
  /** Each worker runs half a second of audio before it reports ready (default true; the CLI, one file, skips it). */
  warmUp?: boolean;
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

export interface ModelListEntry {
  id: ModelId;
  label: string;
  sample_rate: number;
  description: string;
  available: boolean;
  size_mb: number;
}

/**
 * The model catalogue for GET /models and /health: chain definitions from catalog.ts, sizes from
 * models/manifest.json when present, `available` when every graph file the chain needs exists.
 */
export function listModels(config: Config): { models: ModelListEntry[]; default: ModelId } {
  let manifest: { models?: ModelManifestEntry[]; default?: string } = {};
  try {
    manifest = JSON.parse(fs.readFileSync(path.join(config.modelsDir, 'manifest.json'), 'utf8'));
  } catch {
    // no manifest yet: every model is listed as unavailable
  }
  const byId = new Map((manifest.models ?? []).map((m) => [m.id, m]));
  const models = MODEL_IDS.map((id) => {
    const def = CHAINS[id];
    const entry = byId.get(id);
    const files = entry?.files ?? def.files;
    const available = !!entry && files.every((f) => fs.existsSync(path.join(config.modelsDir, f)));
    let size = 0;
    for (const f of files) {
      try {
        size += fs.statSync(path.join(config.modelsDir, f)).size;
      } catch {
        // missing file: not available, size unknown
      }
    }
    return {
      id,
      label: def.label,
      sample_rate: def.sample_rate,
      description: def.description,
      available,
      size_mb: entry?.size_mb ?? Math.round((size / 1e6) * 100) / 100,
    };
  });
  const dflt = MODEL_IDS.includes(manifest.default as ModelId) ? (manifest.default as ModelId) : 'nsm-2';
  return { models, default: dflt };
}
