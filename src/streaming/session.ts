// One live stream over an accepted WebSocket: `ready`, then binary PCM in and denoised PCM out in order, `end` →
// flush → `done` with stats → close 1000. Faults close with a code the client can act on (live-protocol/close.ts):
// key refused 4401/4403, credits used up 4402, client idle or too slow 4408, internal 1011, restarting 1012. The
// denoising is the in-process engine's or a model-service replica's (relay.ts): either way a LiveSource. Where the
// stream stands is its phase (live-protocol/phases.ts: opening → live → ending → flushing → done, or failed). While
// more than maxInsideBytes of the stream are inside (received, not yet sent back), the client's socket is not read
// (client-reader.ts). Audio and `end` that come while opening wait in `early` (bounded by the same rule: at most
// maxInsideBytes plus one message) and go in first. No client message can throw out of the handlers: anything
// unexpected ends that stream (1011) and nothing else. The key is checked again every renewal period (access.ts).
// Speech events (vad=true) wait until the output up to their time has been sent (speech-events.ts), the last ones
// before `done`.
import type WebSocket from 'ws';
import type { LiveSink, LiveStream } from '../inference/types';
import { CLOSE, StreamFault } from '../live-protocol/close';
import { doneMessage, echoStats, errorMessage, parseClientText, readyMessage, speechMessage, type ServerMessage } from '../live-protocol/messages';
import { LivePhases } from '../live-protocol/phases';
import { inputFrameBytes, outputFrameBytes, type LiveParams } from '../live-protocol/query';
import type { Logger } from '../logging';
import type { AccessCheck } from './access';
import { ClientReader } from './client-reader';
import type { HoldResult, StreamCredits } from './credits';
import type { StreamMeter } from './metrics';
import { SpeechEvents } from './speech-events';

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
  /** How often the stream's key is checked again (the credits' renewal period). */
  accessCheckMs: number;
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
  private readonly phases = new LivePhases();
  /** The denoising side, once it is up (opening ends when it is, unless `end` came first). */
  private live: LiveStream | null = null;
  private inFrames = 0;
  /** Frames handed to the denoising side (or waiting in `early` for it): what the stream is billed for. */
  private acceptedFrames = 0;
  private outFrames = 0;
  private bytesIn = 0;
  private bytesOut = 0;
  /** Bytes of one frame of the client's audio, and of the output. */
  private readonly inFrame: number;
  private readonly outFrame: number;
  private readonly reader: ClientReader;
  /** Chunks waiting for the next credit hold (audio never runs on credits not held); null while none is awaited. */
  private creditWait: Uint8Array[] | null = null;
  /** Audio accepted while opening (sent in once the denoising side is up). */
  private early: Uint8Array[] = [];
  /** The fault to end with once what was accepted has been flushed (credits ran out). */
  private endFault: StreamFault | null = null;
  /** What the WebSocket layer refused (invalid UTF-8, a message over 1 MiB, a protocol error), for the request log. */
  private protocolError: Error | null = null;
  private accessTimer: NodeJS.Timeout | null = null;
  private meter: StreamMeter | null = null;
  private readonly speech = new SpeechEvents();
  private resolveDone!: (r: SessionResult) => void;
  readonly done: Promise<SessionResult>;

  constructor(
    private readonly ws: WebSocket,
    private readonly params: LiveParams,
    private readonly requestId: string,
    private readonly source: LiveSource,
    private readonly credits: StreamCredits,
    private readonly limits: SessionLimits,
    private readonly logger: Logger,
    private readonly meterFor?: (latencySamples: number) => StreamMeter,
    private readonly access?: AccessCheck,
  ) {
    this.inFrame = inputFrameBytes(params);
    this.outFrame = outputFrameBytes(params);
    this.reader = new ClientReader(ws, limits, () =>
      this.stop(this.fault(new StreamFault('request_timeout', `no audio for ${this.limits.idleMs / 1000} s`, CLOSE.tooSlow))),
    );
    this.done = new Promise((resolve) => (this.resolveDone = resolve));
  }

  /** Starts the stream; `done` resolves when it is over, whatever happens. */
  start(): void {
    this.stop(this.open());
  }

  private async open(): Promise<void> {
    const ws = this.ws;
    ws.on('message', (data, isBinary) => this.onMessage(data as Buffer, isBinary));
    ws.on('close', () => this.stop(this.finish()));
    // The WebSocket layer closes by itself (1002, 1007, 1009); 'close' follows.
    ws.on('error', (err) => (this.protocolError ??= err));
    if (this.access) {
      this.accessTimer = setInterval(() => this.stop(this.recheck()), this.limits.accessCheckMs);
      this.accessTimer.unref();
    }
    try {
      this.live = await this.source({
        output: (bytes) => this.send(bytes),
        event: (e) => {
          this.speech.add(e);
          this.sendSpeech(false);
        },
        // A relayed stream says what went wrong on its replica (restarting: 1012); anything else is internal.
        error: (err) =>
          this.stop(this.fault(err instanceof StreamFault ? err : new StreamFault('internal_error', `denoising failed: ${err.message}`, CLOSE.internal))),
      });
    } catch (err) {
      await this.fault(new StreamFault('internal_error', `could not start the stream: ${(err as Error).message}`, CLOSE.internal));
      return;
    }
    if (this.phases.over) {
      this.live.abort();
      return;
    }
    if (this.phases.now === 'opening') this.phases.to('live');
    this.meter = this.meterFor?.(this.live.latencySamples) ?? null;
    this.sendJson(readyMessage(this.requestId, this.params, this.live.latencySamples));
    // What came before `ready` goes in first, in order.
    const early = this.early;
    this.early = [];
    for (const bytes of early) {
      this.meter?.input(bytes.byteLength / this.inFrame);
      this.live.push(bytes);
    }
    if (this.phases.now === 'live') this.reader.audioCame();
    this.maybeFlush();
  }

  /** The server is going down: open streams are told and closed (1012) once the grace is over. */
  shutdown(): Promise<void> {
    this.stop(this.fault(new StreamFault('upstream_unavailable', 'the server is restarting; reconnect', CLOSE.restarting)));
    return this.done.then(() => undefined);
  }

  private onMessage(data: Buffer, isBinary: boolean): void {
    try {
      this.handleMessage(data, isBinary);
    } catch (err) {
      // A defect, not the client's doing: this stream ends, the process and the other streams go on.
      this.logger.error({ err, request_id: this.requestId }, 'a live stream message could not be handled');
      this.stop(this.fault(new StreamFault('internal_error', 'the server could not handle a message of this stream', CLOSE.internal)));
    }
  }

  private handleMessage(data: Buffer, isBinary: boolean): void {
    if (!this.phases.takesAudio) return;
    if (!isBinary) return this.onText(data);
    if (data.length % this.inFrame !== 0) {
      this.stop(this.fault(new StreamFault('invalid_request', `a binary message must hold whole ${this.inFrame}-byte frames (got ${data.length} bytes)`, CLOSE.invalidData)));
      return;
    }
    if (data.length === 0) return;
    this.reader.audioCame();
    this.bytesIn += data.length;
    this.inFrames += data.length / this.inFrame;
    if (this.live) this.meter?.input(data.length / this.inFrame);
    this.flow();
    if (this.inFrames / this.params.sampleRate > this.limits.maxAudioSeconds) {
      this.stop(this.fault(new StreamFault('payload_too_large', `a stream may carry at most ${this.limits.maxAudioSeconds} s of audio`, CLOSE.normal)));
      return;
    }
    const bytes = new Uint8Array(data.buffer, data.byteOffset, data.byteLength);
    if (this.creditWait) {
      this.creditWait.push(bytes);
      return;
    }
    const wait = this.credits.cover(this.inFrames / this.params.sampleRate);
    if (!wait) {
      this.accept(bytes);
      return;
    }
    this.creditWait = [bytes];
    const failed = (err: Error): Promise<void> => this.fault(new StreamFault('internal_error', `could not hold credits: ${err.message}`, CLOSE.internal));
    this.stop(wait.then((held) => this.afterHold(held)).catch(failed));
  }

  /** Audio the credits cover, to the denoising side (or to `early` until it is up). */
  private accept(bytes: Uint8Array): void {
    this.acceptedFrames += bytes.byteLength / this.inFrame;
    if (this.live) this.live.push(bytes);
    else this.early.push(bytes);
  }

  private afterHold(held: HoldResult): void {
    const queued = this.creditWait ?? [];
    this.creditWait = null;
    if (this.phases.over) return;
    if (held.ok) {
      for (const b of queued) this.accept(b);
      this.maybeFlush();
      return;
    }
    // No next minute: what the minutes held cover is denoised and flushed, the rest is not; then 4402.
    let room = this.credits.minutes * 60 * this.params.sampleRate - this.acceptedFrames;
    for (const b of queued) {
      const frames = Math.max(0, Math.min(b.byteLength / this.inFrame, room));
      if (frames > 0) this.accept(b.subarray(0, frames * this.inFrame));
      room -= frames;
    }
    const why = held.exhausted
      ? `the workspace has used up its ${held.limit} credits for this month (this stream's ${this.credits.minutes} included)`
      : `the workspace's remaining credits are held by calls in flight`;
    const covered = round3(this.acceptedFrames / this.params.sampleRate);
    this.endFault = new StreamFault('quota_exhausted', `${why}; the stream ends after the ${covered} s its credits cover`, CLOSE.creditsExhausted);
    // `end` may have come while the hold was awaited: the stream is ending already.
    if (this.phases.takesAudio) this.phases.to('ending');
    this.reader.stopIdle();
    this.maybeFlush();
  }

  private onText(data: Buffer): void {
    const read = parseClientText(data.toString('utf8'));
    if ('refused' in read) {
      this.stop(this.fault(new StreamFault('invalid_request', read.refused, CLOSE.invalidData)));
      return;
    }
    // {"type":"end"}, the one message a client sends.
    this.phases.to('ending');
    this.reader.stopIdle();
    this.maybeFlush();
  }

  /** Flushes once the stream is ending, nothing waits for a credit hold, and the denoising side is up. */
  private maybeFlush(): void {
    if (this.phases.now !== 'ending' || !this.live || this.creditWait) return;
    this.phases.to('flushing');
    this.stop(this.flush());
  }

  /** Checks the key again (access.ts); a store that cannot answer leaves the stream running. */
  private async recheck(): Promise<void> {
    if (this.phases.over || !this.access) return;
    let fault: StreamFault | null;
    try {
      fault = await this.access();
    } catch (err) {
      this.logger.error({ err, request_id: this.requestId }, 'could not check the key of a live stream again');
      return;
    }
    if (fault) await this.fault(fault);
  }

  /** Runs a step whose failure must not reach the process: it is logged, and the stream ends (settled) if it has not. */
  private stop(step: Promise<void>): void {
    step.catch(async (err: unknown) => {
      this.logger.error({ err, request_id: this.requestId }, 'a live stream failed');
      this.ws.terminate();
      const fault = new StreamFault('internal_error', `the stream failed: ${String(err)}`, CLOSE.internal);
      this.resolveDone(await this.settle(CLOSE.internal, fault).catch(() => this.resultOf(CLOSE.internal, 0, fault)));
    });
  }

  private async flush(): Promise<void> {
    if (this.phases.over || !this.live) return;
    this.reader.stopIdle();
    await this.live.end();
    if (this.phases.over) return;
    this.sendSpeech(true);
    if (this.endFault) return this.fault(this.endFault);
    const result = await this.settle(CLOSE.normal);
    const echo = this.params.echoReference ? this.live.echo?.() : null;
    this.sendJson(
      doneMessage({
        model: this.params.model,
        sample_rate: this.params.sampleRate,
        input_seconds: round3(result.inputSeconds),
        output_seconds: round3(result.outputSeconds),
        credits_charged: result.creditsCharged,
        bytes_in: result.bytesIn,
        bytes_out: result.bytesOut,
        ...(this.params.vad ? this.speech.stats() : {}),
        ...(echo ? echoStats(echo) : {}),
      }),
    );
    this.ws.close(CLOSE.normal, 'done');
    this.resolveDone(result);
  }

  private send(bytes: Uint8Array): void {
    if (this.phases.over || this.ws.readyState !== this.ws.OPEN) return;
    this.bytesOut += bytes.byteLength;
    this.outFrames += bytes.byteLength / this.outFrame;
    this.ws.send(bytes, { binary: true });
    this.meter?.output(this.outFrames);
    this.sendSpeech(false);
    this.flow();
    if (this.ws.bufferedAmount > this.limits.maxBufferedBytes) {
      this.stop(this.fault(new StreamFault('request_timeout', 'the client is not reading the denoised audio fast enough', CLOSE.tooSlow)));
    }
  }

  /** The speech events whose time the output has reached (`all`: every one, after the flush). */
  private sendSpeech(all: boolean): void {
    const upTo = all ? Infinity : (this.outFrames * 1000) / this.params.sampleRate;
    for (const e of this.speech.due(upTo)) this.sendJson(speechMessage(e));
  }

  private sendJson(message: ServerMessage): void {
    if (this.ws.readyState === this.ws.OPEN) this.ws.send(JSON.stringify(message));
  }

  /** Stops reading the client while too much of the stream is inside; reads again once most of it went out. */
  private flow(): void {
    if (this.phases.over) return;
    // Counted in input bytes: an echo reference's channel comes in and never goes out.
    this.reader.update(this.bytesIn - this.outFrames * this.inFrame, this.phases.takesAudio);
  }

  private async fault(err: StreamFault): Promise<void> {
    if (this.phases.over) return;
    this.sendJson(errorMessage(err, this.requestId));
    const result = await this.settle(err.code, err);
    if (this.ws.readyState === this.ws.OPEN) this.ws.close(err.code, err.type.slice(0, 100));
    this.resolveDone(result);
  }

  /** The client went away (or the socket broke, or the WebSocket layer closed it): what was accepted is paid for. */
  private async finish(): Promise<void> {
    if (this.phases.over) return;
    const why = this.protocolError && `the WebSocket layer closed the stream: ${this.protocolError.message}`;
    const fault = why ? new StreamFault('invalid_request', why, CLOSE.protocolError) : undefined;
    this.resolveDone(await this.settle(this.phases.closing ? CLOSE.normal : CLOSE.abnormal, fault));
  }

  private async settle(closeCode: number, err?: StreamFault): Promise<SessionResult> {
    // Settled twice only when a step failed after the first (stop()): the phase stays what it was.
    if (!this.phases.over) this.phases.to(err ? 'failed' : 'done');
    if (this.accessTimer) clearInterval(this.accessTimer);
    this.early = [];
    // No idle clock, and the client's socket read again: the close handshake needs it.
    this.reader.release();
    if (this.live && (err || this.ws.readyState !== this.ws.OPEN)) this.live.abort();
    let creditsCharged = 0;
    try {
      creditsCharged = await this.credits.settle(this.acceptedFrames / this.params.sampleRate);
    } catch (e) {
      this.logger.error({ err: e, request_id: this.requestId }, 'could not settle the credits of a stream');
    }
    return this.resultOf(closeCode, creditsCharged, err);
  }

  private resultOf(closeCode: number, creditsCharged: number, err?: StreamFault): SessionResult {
    const rate = this.params.sampleRate;
    const { bytesIn, bytesOut } = this;
    const inputSeconds = this.acceptedFrames / rate;
    return { inputSeconds, outputSeconds: this.outFrames / rate, creditsCharged, bytesIn, bytesOut, closeCode, errorType: err?.type, errorMessage: err?.message };
  }
}

function round3(x: number): number {
  return Math.round(x * 1000) / 1000;
}
