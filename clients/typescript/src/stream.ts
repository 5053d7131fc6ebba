// A live stream (GET /v1/noise-suppressor/stream, docs/streaming.md): PCM in, denoised PCM out in order, as events,
// a Node Duplex or a Web TransformStream. Writes are cut into whole sample frames (the server closes 1007 on a
// partial one), optionally paced in real time, and sent in order; end() sends {"type":"end"} after the last of them
// and resolves with the server's `done` once all output has arrived (total output = total input).
// Every text message the server sends is an event under its own `type` (ready, done, error, and types added later
// such as speech_start / speech_end) and a 'message' event; nothing unknown is dropped.
import { Emitter } from './emitter.js';
import { NsmError, StreamError } from './errors.js';
import { sleep } from './http.js';
import type { Socket } from './socket.js';

const nodeStream: { Duplex: typeof import('node:stream').Duplex } | null =
  typeof process !== 'undefined' && process.versions?.node ? await import('node:stream') : null;

/** Bytes per sample of the encodings the server speaks (and those being added); others: `bytesPerSample`. */
const SAMPLE_BYTES: Record<string, number> = { pcm_s16le: 2, pcm_f32le: 4, mulaw: 1, pcm_mulaw: 1, alaw: 1, pcm_alaw: 1 };

/** Bytes queued in the socket above which writes wait (the server itself gives up at 4 MB unread). */
const HIGH_WATER = 1 << 20;
/** Largest binary message sent when not pacing. */
const MAX_MESSAGE = 64 * 1024;

export interface ReadyMessage {
  type: 'ready';
  request_id: string;
  model: string;
  sample_rate: number;
  encoding: string;
  channels: number;
  latency_ms: number;
  latency_samples: number;
  /** With echo_reference=last: the last input channel is the reference; the output has `output_channels`. */
  echo_reference?: boolean;
  output_channels?: number;
  [key: string]: unknown;
}

export interface DoneMessage {
  type: 'done';
  stats: {
    model: string;
    sample_rate: number;
    input_seconds: number;
    output_seconds: number;
    credits_charged: number;
    bytes_in: number;
    bytes_out: number;
    [key: string]: unknown;
  };
  [key: string]: unknown;
}

/**
 * With `vad: true` in the query: where speech starts or ends (`at_ms`) and the end of the audio that decided it
 * (`decided_ms`), ms on the input timeline; sent after the output up to `at_ms`, the last one before `done`.
 * Listen with `stream.on('speech_start', …)` / `stream.on('speech_end', …)`.
 */
export interface SpeechEventMessage {
  type: 'speech_start' | 'speech_end';
  at_ms: number;
  decided_ms: number;
}

export interface ServerMessage {
  type: string;
  [key: string]: unknown;
}

export interface PaceOptions {
  /** Frame length sent per message, ms. Default 20. */
  frameMs?: number;
}

export interface LiveStreamOptions {
  /** Real-time pacing: send frames no faster than the audio's own duration (as a microphone would). */
  pace?: boolean | PaceOptions;
  /** Bytes per sample for an encoding this client does not know (pcm_s16le 2, pcm_f32le 4, mulaw/alaw 1). */
  bytesPerSample?: number;
  /** Channels and encoding as sent in the query (used before `ready` to frame the writes). */
  channels?: number;
  encoding?: string;
}

export type AudioChunk = Uint8Array | ArrayBuffer | ArrayBufferView;

function bytesOf(chunk: AudioChunk): Uint8Array {
  if (chunk instanceof Uint8Array) return chunk;
  if (chunk instanceof ArrayBuffer) return new Uint8Array(chunk);
  return new Uint8Array(chunk.buffer, chunk.byteOffset, chunk.byteLength);
}

function concat(a: Uint8Array, b: Uint8Array): Uint8Array {
  if (a.length === 0) return b;
  const out = new Uint8Array(a.length + b.length);
  out.set(a);
  out.set(b, a.length);
  return out;
}

export class LiveStream extends Emitter {
  /** Resolves with the server's `ready` message; rejects with the refusal (an NsmError subclass). */
  readonly ready: Promise<ReadyMessage>;
  /** Resolves with `done` after end(); rejects with a StreamError when the stream ends otherwise. */
  readonly done: Promise<DoneMessage>;
  /** The `ready` message once it came. */
  info: ReadyMessage | null = null;
  /** Bytes of audio sent and received so far. */
  bytesSent = 0;
  bytesReceived = 0;
  /** The WebSocket close code once closed (1000 after done; an error's code otherwise, e.g. 1007, 4402). */
  closeCode: number | null = null;

  private socket: Socket | null = null;
  private resolveReady!: (m: ReadyMessage) => void;
  private rejectReady!: (e: NsmError) => void;
  private resolveDone!: (m: DoneMessage) => void;
  private rejectDone!: (e: NsmError) => void;
  private finished = false;
  private sendChain: Promise<void> = Promise.resolve();
  private carry: Uint8Array = new Uint8Array(0);
  private nextDeadline = -Infinity;
  private readonly paceMs: number | null;
  private readonly opts: LiveStreamOptions;
  /** Audio that arrived before anything consumed it (handed to the first consumer). */
  private backlog: Uint8Array[] | null = [];
  private ended = false;
  private errorMessage: ServerMessage | null = null;

  constructor(opts: LiveStreamOptions) {
    super();
    this.opts = opts;
    this.paceMs = opts.pace ? (typeof opts.pace === 'object' ? opts.pace.frameMs ?? 20 : 20) : null;
    this.ready = new Promise((resolve, reject) => {
      this.resolveReady = resolve;
      this.rejectReady = reject;
    });
    this.done = new Promise((resolve, reject) => {
      this.resolveDone = resolve;
      this.rejectDone = reject;
    });
    // Handled here so that an unobserved rejection does not crash a process; callers still see it when they await.
    this.ready.catch(() => undefined);
    this.done.catch(() => undefined);
  }

  // ---- wiring (called by the client) -------------------------------------------------------------------------

  /** @internal */
  attach(socket: Socket): void {
    this.socket = socket;
  }

  /** @internal A text message from the server. */
  onText(text: string): void {
    let msg: ServerMessage;
    try {
      msg = JSON.parse(text);
    } catch {
      this.emit('message', { type: 'unparsed', text });
      return;
    }
    if (!msg || typeof msg.type !== 'string') {
      this.emit('message', { type: 'unparsed', text });
      return;
    }
    if (msg.type === 'ready') {
      this.info = msg as ReadyMessage;
      this.resolveReady(this.info);
    } else if (msg.type === 'done') {
      this.finished = true;
      this.resolveDone(msg as DoneMessage);
    } else if (msg.type === 'error') {
      // The server closes right after an error message: fail at the close, so the error carries its close code.
      this.errorMessage = msg;
      setTimeout(() => this.failWithMessage(null), 2000).unref?.();
    }
    this.emit('message', msg);
    if (msg.type !== 'error') this.emit(msg.type, msg);
  }

  /** @internal Denoised audio from the server. */
  onBinary(data: Uint8Array): void {
    this.bytesReceived += data.length;
    if (this.backlog) this.backlog.push(data);
    else this.emit('audio', data);
  }

  private failWithMessage(closeCode: number | null): boolean {
    if (!this.errorMessage) return false;
    const e = (this.errorMessage.error ?? {}) as Record<string, unknown>;
    this.fail(new StreamError({ type: String(e.type ?? 'stream_error'), message: String(e.message ?? 'stream error'), request_id: (e.request_id as string) ?? this.info?.request_id, body: this.errorMessage, closeCode }));
    return true;
  }

  /** @internal */
  onClose(code: number, reason: string): void {
    if (!this.failWithMessage(code)) this.fail(new StreamError({ type: code === 1000 ? 'closed_before_done' : 'connection_closed', message: `stream closed with ${code}${reason ? ` (${reason})` : ''} before done`, closeCode: code, request_id: this.info?.request_id }));
    this.closeCode = code;
    this.emit('close', { code, reason });
  }

  /** @internal The upgrade was refused or the connection failed. */
  onFailed(err: NsmError): void {
    this.fail(err);
    this.emit('close', { code: err.closeCode ?? 1006, reason: err.message });
  }

  private fail(err: NsmError): void {
    if (this.finished) return; // a close after done (or after the error message) changes nothing
    this.finished = true;
    this.rejectReady(err);
    this.rejectDone(err);
    if (this.listenerCount('error') > 0) this.emit('error', err);
  }

  // ---- sending -----------------------------------------------------------------------------------------------

  private sampleFrameBytes(): number {
    const enc = this.info?.encoding ?? this.opts.encoding ?? 'pcm_s16le';
    const per = this.opts.bytesPerSample ?? SAMPLE_BYTES[enc] ?? 1;
    return per * (this.info?.channels ?? this.opts.channels ?? 1);
  }

  /** Queues PCM for sending; resolves once it went out (paced writes: once its last frame's time came). */
  write(chunk: AudioChunk): Promise<void> {
    if (this.ended) return Promise.reject(new NsmError({ type: 'stream_ended', message: 'write after end()' }));
    const bytes = bytesOf(chunk);
    const p = (this.sendChain = this.sendChain.then(() => this.sendBytes(bytes, false)));
    return p;
  }

  /** Sends what is queued, then {"type":"end"}; resolves with `done` once the output is complete. */
  end(): Promise<DoneMessage> {
    if (!this.ended) {
      this.ended = true;
      this.sendChain = this.sendChain.then(async () => {
        await this.sendBytes(new Uint8Array(0), true);
        this.sendText(JSON.stringify({ type: 'end' }));
      });
      this.sendChain.catch((err) => this.fail(err instanceof NsmError ? err : new StreamError({ type: 'send_failed', message: String(err) })));
    }
    return this.done;
  }

  /** Sends a text message as it is (for message types this client does not know yet). */
  sendText(text: string): void {
    if (!this.socket) throw new NsmError({ type: 'not_connected', message: 'the stream is not connected yet' });
    this.socket.send(text);
  }

  /** Sends a JSON message (e.g. a control message added to the protocol later). */
  sendJson(message: Record<string, unknown>): void {
    this.sendText(JSON.stringify(message));
  }

  /** Closes the connection without ending the stream properly (the output so far is all there will be). */
  close(code = 1000, reason = 'client closed'): void {
    this.ended = true;
    this.socket?.close(code, reason);
  }

  private async sendBytes(bytes: Uint8Array, last: boolean): Promise<void> {
    await this.ready;
    if (this.finished) throw new StreamError({ type: 'stream_finished', message: 'the stream has already ended', request_id: this.info?.request_id });
    const unit = this.sampleFrameBytes();
    const data = concat(this.carry, bytes);
    if (last && data.length % unit !== 0) {
      throw new NsmError({ type: 'invalid_request', message: `the audio ends in a partial sample frame (${data.length % unit} of ${unit} bytes)` });
    }
    if (this.paceMs !== null) {
      const frame = Math.max(unit, Math.round((this.info!.sample_rate * this.paceMs) / 1000) * unit);
      let off = 0;
      for (; off + frame <= data.length || (last && off < data.length); off += frame) {
        await this.waitForDeadline();
        this.sendBinary(data.subarray(off, Math.min(off + frame, data.length)));
        await this.drain();
      }
      this.carry = data.slice(off);
      return;
    }
    const whole = data.length - (data.length % unit);
    for (let off = 0; off < whole; off += MAX_MESSAGE - (MAX_MESSAGE % unit)) {
      this.sendBinary(data.subarray(off, Math.min(whole, off + MAX_MESSAGE - (MAX_MESSAGE % unit))));
      await this.drain();
    }
    this.carry = data.slice(whole);
  }

  private sendBinary(b: Uint8Array): void {
    this.socket!.send(b);
    this.bytesSent += b.length;
  }

  /** Real time: frame i leaves at start + i × frame; after a pause of the writer (more than 10 frames behind) the
   * clock restarts at now instead of sending the missed time in a burst. */
  private async waitForDeadline(): Promise<void> {
    const now = performance.now();
    if (this.nextDeadline < now - 10 * this.paceMs!) this.nextDeadline = now;
    if (this.nextDeadline > now) await sleep(this.nextDeadline - now);
    this.nextDeadline += this.paceMs!;
  }

  private async drain(): Promise<void> {
    while (this.socket && this.socket.bufferedAmount > HIGH_WATER && !this.finished) await sleep(5);
  }

  // ---- consuming the output ----------------------------------------------------------------------------------

  /** Hands the output to `push` (first the audio that arrived before, then every message as it comes). */
  private consume(push: (chunk: Uint8Array) => void): void {
    const backlog = this.backlog ?? [];
    this.backlog = null;
    for (const b of backlog) push(b);
    this.on('audio', push);
  }

  override on(event: string, fn: (...args: any[]) => void): this {
    super.on(event, fn);
    if (event === 'audio' && this.backlog) {
      const backlog = this.backlog;
      this.backlog = null;
      for (const b of backlog) fn(b);
    }
    return this;
  }

  /** The stream as a Node Duplex: write PCM in, read denoised PCM out; end() of the writable side ends the stream. */
  duplex(): import('node:stream').Duplex {
    if (!nodeStream) throw new Error('duplex() needs Node.js; use transform() in a browser');
    const d = new nodeStream.Duplex({
      read() {
        // output is pushed as it arrives
      },
      write: (chunk: Uint8Array, _enc, cb) => {
        this.write(chunk).then(() => cb(), (err) => cb(err));
      },
      final: (cb) => {
        this.end().then(() => cb(), (err) => cb(err));
      },
      destroy: (err, cb) => {
        if (!this.finished) this.close(1000, 'destroyed');
        cb(err);
      },
    });
    this.consume((b) => d.push(b));
    this.done.then(() => d.push(null), (err) => d.destroy(err));
    return d;
  }

  /** The stream as a Web TransformStream of PCM (closing its writable side ends the stream). */
  transform(): TransformStream<AudioChunk, Uint8Array> {
    let controller!: TransformStreamDefaultController<Uint8Array>;
    const ts = new TransformStream<AudioChunk, Uint8Array>(
      {
        start: (c) => {
          controller = c;
        },
        transform: (chunk) => this.write(chunk),
        flush: async () => {
          await this.end();
        },
      },
      undefined,
      // The output is not held back by the reader: the server sends it whatever the client reads.
      { highWaterMark: Number.MAX_SAFE_INTEGER },
    );
    this.consume((b) => {
      try {
        controller.enqueue(b);
      } catch {
        // the readable side was canceled
      }
    });
    this.done.catch((err) => {
      try {
        controller.error(err);
      } catch {
        // already closed
      }
    });
    return ts;
  }
}
