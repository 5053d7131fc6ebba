// One live stream over an accepted WebSocket: `ready`, then binary PCM in and denoised PCM out in order, `end` →
// flush → `done` with stats → close 1000. Faults close with a code the client can act on (errors.ts CLOSE): credits
// exhausted 4402, client idle or too slow to read 4408, internal 1011, restarting 1012. The denoising is the in-process
// engine's or a model-service replica's (relay.ts): either way a LiveSource. While more than maxInsideBytes of the
// stream are inside (received, not yet sent back), the client's socket is not read: TCP pushes back on the client.
import type WebSocket from 'ws';
import type { LiveSink, LiveStream } from '../inference/types';
import type { Logger } from '../logging';
import type { StreamCredits } from './credits';
import { CLOSE, StreamFault } from './errors';
import type { StreamMeter } from './metrics';
import { frameBytes, type StreamParams } from './params';

/** Opens the denoising side of a stream, its output going to `sink`. */
export type LiveSource = (sink: LiveSink) => Promise<LiveStream>;

export interface SessionLimits {
  /** No audio for this long: 4408. */
  idleMs: number;
  /** Output the client has not read (bytes queued in the socket) beyond this: 4408. */
  maxBufferedBytes: number;
  /** Longest stream, in seconds of audio. */
  maxAudioSeconds: number;
  /** Bytes received and not yet sent back above which the client is not read (a quarter of it resumes). */
  maxInsideBytes: number;
}

export interface SessionResult {
  inputSeconds: number;
  outputSeconds: number;
  creditsCharged: number;
  bytesIn: number;
  bytesOut: number;
  closeCode: number;
  errorType?: string;
  errorMessage?: string;
}

export class StreamSession {
  private live: LiveStream | null = null;
  private inFrames = 0;
  private outFrames = 0;
  private bytesIn = 0;
  private bytesOut = 0;
  private readonly frame: number;
  private idleTimer: NodeJS.Timeout | null = null;
  private lastAudioAt = 0;
  /** Chunks waiting for the next credit hold (audio never runs on credits not held). */
  private waitingForCredit: Uint8Array[] | null = null;
  private ending = false;
  private over = false;
  /** The client's socket is not being read (maxInsideBytes). */
  private paused = false;
  private meter: StreamMeter | null = null;
  private resolveDone!: (r: SessionResult) => void;
  readonly done: Promise<SessionResult>;

  constructor(
    private readonly ws: WebSocket,
    private readonly params: StreamParams,
    private readonly requestId: string,
    private readonly source: LiveSource,
    private readonly credits: StreamCredits,
    private readonly limits: SessionLimits,
    private readonly logger: Logger,
    private readonly meterFor?: (latencySamples: number) => StreamMeter,
  ) {
    this.frame = frameBytes(params);
    this.done = new Promise((resolve) => (this.resolveDone = resolve));
  }

  async start(): Promise<void> {
    const ws = this.ws;
    ws.on('message', (data, isBinary) => this.onMessage(data as Buffer, isBinary));
    ws.on('close', () => void this.finish(CLOSE.normal, undefined, true));
    ws.on('error', () => undefined); // 'close' follows
    try {
      this.live = await this.source({
        output: (bytes) => this.send(bytes),
        // A relayed stream says what went wrong on its replica (restarting: 1012); anything else is internal.
        error: (err) =>
          void this.fault(err instanceof StreamFault ? err : new StreamFault('internal_error', `denoising failed: ${err.message}`, CLOSE.internal)),
      });
    } catch (err) {
      await this.fault(new StreamFault('internal_error', `could not start the stream: ${(err as Error).message}`, CLOSE.internal));
      return;
    }
    if (this.over) {
      this.live.abort();
      return;
    }
    this.meter = this.meterFor?.(this.live.latencySamples) ?? null;
    this.sendJson({
      type: 'ready',
      request_id: this.requestId,
      model: this.params.model,
      sample_rate: this.params.sampleRate,
      encoding: this.params.encoding,
      channels: this.params.channels,
      latency_ms: Math.round(((this.live.latencySamples * 1000) / this.params.sampleRate) * 100) / 100,
      latency_samples: this.live.latencySamples,
    });
    this.armIdle();
  }

  /** The server is going down: open streams are told and closed (1012) once the grace is over. */
  shutdown(): Promise<void> {
    return this.fault(new StreamFault('upstream_unavailable', 'the server is restarting; reconnect', CLOSE.restarting));
  }

  private onMessage(data: Buffer, isBinary: boolean): void {
    if (this.over || this.ending) return;
    if (!isBinary) return this.onText(data.toString('utf8'));
    if (data.length % this.frame !== 0) {
      void this.fault(new StreamFault('invalid_request', `a binary message must hold whole ${this.frame}-byte frames (got ${data.length} bytes)`, CLOSE.invalidData));
      return;
    }
    this.armIdle();
    this.bytesIn += data.length;
    this.inFrames += data.length / this.frame;
    this.meter?.input(data.length / this.frame);
    this.flow();
    if (this.inFrames / this.params.sampleRate > this.limits.maxAudioSeconds) {
      void this.fault(new StreamFault('payload_too_large', `a stream may carry at most ${this.limits.maxAudioSeconds} s of audio`, CLOSE.normal));
      return;
    }
    const bytes = new Uint8Array(data.buffer, data.byteOffset, data.byteLength);
    if (this.waitingForCredit) {
      this.waitingForCredit.push(bytes);
      return;
    }
    const wait = this.credits.cover(this.inFrames / this.params.sampleRate);
    if (!wait) {
      this.live?.push(bytes);
      return;
    }
    this.waitingForCredit = [bytes];
    wait.then(
      (held) => {
        const queued = this.waitingForCredit ?? [];
        this.waitingForCredit = null;
        if (!held.ok) {
          const why = held.exhausted
            ? `the workspace has used ${held.used} of its ${held.limit} credits this month`
            : 'the workspace\'s remaining credits are held by calls in flight';
          void this.fault(new StreamFault('quota_exhausted', `${why}; the stream stops here`, CLOSE.creditsExhausted));
          return;
        }
        for (const b of queued) this.live?.push(b);
        if (this.ending) void this.flush();
      },
      (err: Error) => void this.fault(new StreamFault('internal_error', `could not hold credits: ${err.message}`, CLOSE.internal)),
    );
  }

  private onText(text: string): void {
    let msg: { type?: unknown };
    try {
      msg = JSON.parse(text) as { type?: unknown };
    } catch {
      void this.fault(new StreamFault('invalid_request', 'a text message must be JSON, e.g. {"type":"end"}', CLOSE.invalidData));
      return;
    }
    if (msg.type === 'end') {
      this.ending = true;
      if (!this.waitingForCredit) void this.flush();
      return;
    }
    void this.fault(new StreamFault('invalid_request', `unknown message type ${JSON.stringify(msg.type)}; send binary PCM or {"type":"end"}`, CLOSE.invalidData));
  }

  private async flush(): Promise<void> {
    if (this.over || !this.live) return;
    this.clearIdle();
    await this.live.end();
    if (this.over) return;
    const result = await this.settle(CLOSE.normal);
    this.sendJson({
      type: 'done',
      stats: {
        model: this.params.model,
        sample_rate: this.params.sampleRate,
        input_seconds: round3(result.inputSeconds),
        output_seconds: round3(result.outputSeconds),
        credits_charged: result.creditsCharged,
        bytes_in: result.bytesIn,
        bytes_out: result.bytesOut,
      },
    });
    this.ws.close(CLOSE.normal, 'done');
    this.resolveDone(result);
  }

  private send(bytes: Uint8Array): void {
    if (this.over || this.ws.readyState !== this.ws.OPEN) return;
    this.bytesOut += bytes.byteLength;
    this.outFrames += bytes.byteLength / this.frame;
    this.ws.send(bytes, { binary: true });
    this.meter?.output(this.outFrames);
    this.flow();
    if (this.ws.bufferedAmount > this.limits.maxBufferedBytes) {
      void this.fault(new StreamFault('request_timeout', 'the client is not reading the denoised audio fast enough', CLOSE.tooSlow));
    }
  }

  private sendJson(value: unknown): void {
    if (this.ws.readyState === this.ws.OPEN) this.ws.send(JSON.stringify(value));
  }

  /** Stops reading the client while too much of the stream is inside; reads again once most of it went out. */
  private flow(): void {
    if (this.over) return;
    const inside = this.bytesIn - this.bytesOut;
    if (!this.paused && inside > this.limits.maxInsideBytes) {
      this.paused = true;
      this.ws.pause();
      // Not reading is not the client's silence.
      this.clearIdle();
    } else if (this.paused && inside < this.limits.maxInsideBytes / 4) {
      this.paused = false;
      this.ws.resume();
      if (!this.ending) this.armIdle();
    }
  }

  /**
   * (Re)starts the idle clock. Called for every message (50 a second per stream), so it only notes the time; the one
   * timer, when it fires, looks at when audio last came and sleeps again for the rest (a timer per message cost the
   * HTTP thread a clearTimeout and a setTimeout each, with hundreds of streams open).
   */
  private armIdle(): void {
    this.lastAudioAt = performance.now();
    if (this.idleTimer) return;
    const sleep = (ms: number): void => {
      this.idleTimer = setTimeout(check, ms);
      this.idleTimer.unref();
    };
    const check = (): void => {
      const quiet = performance.now() - this.lastAudioAt;
      if (quiet < this.limits.idleMs) return sleep(Math.max(1, this.limits.idleMs - quiet));
      this.idleTimer = null;
      void this.fault(new StreamFault('request_timeout', `no audio for ${this.limits.idleMs / 1000} s`, CLOSE.tooSlow));
    };
    sleep(this.limits.idleMs);
  }

  private clearIdle(): void {
    if (this.idleTimer) clearTimeout(this.idleTimer);
    this.idleTimer = null;
  }

  private async fault(err: StreamFault): Promise<void> {
    if (this.over) return;
    this.sendJson({ type: 'error', error: { type: err.type, message: err.message, request_id: this.requestId } });
    const result = await this.settle(err.code, err);
    if (this.ws.readyState === this.ws.OPEN) this.ws.close(err.code, err.type.slice(0, 100));
    this.resolveDone(result);
  }

  /** The client went away (or the socket broke): whatever was sent in is paid for, nothing more is sent. */
  private async finish(code: number, err: StreamFault | undefined, closedByPeer: boolean): Promise<void> {
    if (this.over) return;
    const result = await this.settle(closedByPeer ? this.closeCodeOf() : code, err);
    this.resolveDone(result);
  }

  private closeCodeOf(): number {
    return this.ending ? CLOSE.normal : 1006;
  }

  private async settle(closeCode: number, err?: StreamFault): Promise<SessionResult> {
    this.over = true;
    this.clearIdle();
    // The close handshake needs the client's socket read again.
    if (this.paused) this.ws.resume();
    if (this.live && (err || this.ws.readyState !== this.ws.OPEN)) this.live.abort();
    const inputSeconds = this.inFrames / this.params.sampleRate;
    let creditsCharged = 0;
    try {
      creditsCharged = await this.credits.settle(inputSeconds);
    } catch (e) {
      this.logger.error({ err: e, request_id: this.requestId }, 'could not settle the credits of a stream');
    }
    return {
      inputSeconds,
      outputSeconds: this.outFrames / this.params.sampleRate,
      creditsCharged,
      bytesIn: this.bytesIn,
      bytesOut: this.bytesOut,
      closeCode,
      errorType: err?.type,
      errorMessage: err?.message,
    };
  }
}

function round3(x: number): number {
  return Math.round(x * 1000) / 1000;
}
