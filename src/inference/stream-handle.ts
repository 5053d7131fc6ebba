// A stream as the engine hands it out (StreamHandle): its requests, ranked for the worker's queue, wait here until
// the engine pins it to a worker (engine.ts, BINDING), then go to that worker; audio moves as transferred buffers.
import { spansItsBuffer, type ToWorker } from './protocol';
import type { Job, PoolWorker, Reply } from './pool-worker';
import type { BandProcessing, DenoiseStream, EchoReport, StreamLoudness } from './types';
import type { SpeechReport } from '../vad/options';

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

/** What a stream needs of its engine (Engine implements it). */
export interface StreamHost {
  nextReqId(): number;
  /** The id of the stream opened last (ids grow with each open). */
  newestStream(): number;
  /** Drops a stream that is still waiting for a worker (aborted). */
  forget(s: StreamHandle): void;
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

export class StreamHandle implements DenoiseStream {
  private failure: Error | null = null;
  private finished = false;
  /** Messages of this stream submitted so far (its `open` is the first). */
  private messages = 1;
  private measured: StreamLoudness | null = null;
  private speechReport: SpeechReport | null = null;
  private echoReport: EchoReport | null = null;
  /** The worker it is pinned to; null while it waits for one (BINDING). */
  private owner: PoolWorker | null = null;
  /** Its requests, `open` first, while it waits for a worker. */
  readonly waiting: Job[] = [];
  /** The worker's answer to `open`: requests are queued behind it at once, and fail with its error if it failed. */
  readonly opened: Promise<unknown>;

  constructor(
    private readonly engine: StreamHost,
    readonly id: number,
    readonly sampleRate: number,
    /** Channels of each push (with an echo reference, the microphone's and the reference). */
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
      this.speechReport = r.speech ?? null;
      this.echoReport = r.echo ?? null;
      return r;
    });
    this.finished = true;
    return p.finally(() => this.owner?.streams.delete(this.id));
  }

  loudness(): StreamLoudness | null {
    return this.measured;
  }

  speech(): SpeechReport | null {
    return this.speechReport;
  }

  echo(): EchoReport | null {
    return this.echoReport;
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
