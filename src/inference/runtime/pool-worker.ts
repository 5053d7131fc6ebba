// One worker thread of the engine's pool (engine.ts): its queue on this side, ordered by rank, with at most
// MAX_IN_FLIGHT requests posted to it at a time (it runs them one at a time, in order), and the streams pinned to it.
import path from 'node:path';
import { Worker } from 'node:worker_threads';
import type { LiveWorker } from '../live/pool';
import type { FromWorker, ToWorker } from './protocol';
import type { ThreadPriority } from './thread-priority';

const WORKER_SCRIPT = path.join(__dirname, 'worker.js');
/**
 * Requests posted to a worker before it has answered the previous ones: with 2, the next request is already there
 * when the worker finishes one (no idle round trip) while the rest stays queued here (bounded memory in the worker).
 */
export const MAX_IN_FLIGHT = 2;

/** A worker's answer to one request (fire-and-forget messages resolve with NO_REPLY). */
export type Reply = Pick<Extract<FromWorker, { type: 'result' }>, 'planar' | 'pcm' | 'loudness' | 'speech' | 'echo'>;
export const NO_REPLY: Reply = { planar: [] };

export interface Job {
  msg: ToWorker;
  /** Queue position: behind every job of a rank no higher (a stream id: see ARRIVAL_ORDER_MESSAGES in stream-handle.ts). */
  rank: number;
  transfer: ArrayBuffer[];
  /** Fire-and-forget messages (abort) have no reply. */
  expectsReply: boolean;
  resolve(reply: Reply): void;
  reject(err: Error): void;
}

/** What the worker needs of a stream pinned to it: to fail it when the worker dies. */
export interface PinnedStream {
  fail(err: Error): void;
}

export class PoolWorker implements LiveWorker {
  readonly worker: Worker;
  /** Live streams pinned here (live/pool.ts), and their requests awaiting an answer, by reqId. */
  liveStreams = 0;
  private readonly liveReplies = new Map<number, { resolve(msg: FromWorker): void; reject(err: Error): void }>();
  readonly ready: Promise<void>;
  readonly queue: Job[] = [];
  /** Posted and awaiting their reply, in posting order (the worker answers in that order). */
  readonly inFlight: Job[] = [];
  readonly streams = new Map<number, PinnedStream>();
  dead = false;
  /** The thread's kernel id and the priority it got (known once ready). */
  priority: ThreadPriority | null = null;
  private isReady = false;
  private initError: Error | null = null;

  constructor(
    modelsDir: string,
    warmUp: boolean,
    private readonly onExit: (w: PoolWorker, code: number) => void,
    /** Called when the worker may have room for a waiting stream (it got ready, or answered a request). */
    private readonly onRoom: () => void,
    /**
     * The thread's priority (file workers: FILE_WORK_NICE, FILE_WORK_IDLE; live workers as the server); `live`: a live
     * worker (its warm-up also runs the echo canceller: worker.ts).
     */
    lower: { nice: number; idle: boolean; live?: boolean } = { nice: 0, idle: false },
  ) {
    this.worker = new Worker(WORKER_SCRIPT, { workerData: { modelsDir, warmUp, ...lower } });
    this.ready = new Promise<void>((resolve, reject) => {
      this.worker.on('message', (msg: FromWorker) => {
        if (msg.type === 'ready') {
          this.isReady = true;
          this.priority = msg.priority;
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

  /** Still starting (not ready, not dead, no start-up error): it takes streams once `ready` resolves. */
  get starting(): boolean {
    return !this.isReady && !this.dead && !this.initError;
  }

  /** Requests posted and not answered yet, file or live (close() waits for them before terminating). */
  get busy(): boolean {
    return this.inFlight.length > 0 || this.liveReplies.size > 0;
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

  /** Live requests (live/pool.ts) are posted at once, not queued behind file requests; resolves with the answer. */
  postLive(msg: Extract<ToWorker, { type: 'live-open' | 'live-tick' }>, transfer: ArrayBuffer[]): Promise<FromWorker> {
    if (this.dead) return Promise.reject(new Error('inference worker is gone'));
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

  abortLive(streamId: number): void {
    if (this.dead) return;
    try {
      this.worker.postMessage({ type: 'live-abort', streamId } satisfies ToWorker);
    } catch {
      // The worker is going: its streams go with it.
    }
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
