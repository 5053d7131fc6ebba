// One try of a forwarded call on one replica: sends the request head, pumps the client's body once the replica said
// 100 Continue, relays the answer, and runs the clocks that tell whose fault a stall is (see forwarder.ts). It ends
// with a verdict on the replica's breaker and one result: done (the client got its answer or was cut), retry
// elsewhere (refused before any of the body went out), or stale (the same replica again, on a new connection).
import type http from 'node:http';
import type { Request, Response } from 'express';
import type { Config } from '../config';
import { copyResponseHeaders, upstreamPath, upstreamRequestHeaders } from './headers';
import { CLIENT_GONE_STATUS, CLIENT_STALLED_STATUS, convertedAnswer, errorBodyOf, failures, isConvertedStatus, isRefusalStatus } from './refusals';
import { deliveredWork, MAX_ERROR_BODY, readSmall, refusalBeforeBody, verdictOfAnswer, type GatewayFailure, type Refusal } from './refusals';
import type { ReplicaCall } from './replicas';
import type { ForwardCall, ForwardOutcome } from './types';
import { IdleTimer, ProgressWatch } from './watchdogs';

/** The clocks an attempt runs (the forwarder's config). */
export type AttemptConfig = Pick<Config, 'upstreamTimeoutMs' | 'upstreamIdleTimeoutMs' | 'upstreamConnectTimeoutMs' | 'clientIdleTimeoutMs'>;

export type AttemptResult =
  | { kind: 'retry'; refusal: Refusal }
  | { kind: 'done'; outcome: ForwardOutcome }
  /** A kept-alive connection failed before anything of the call reached the replica: the same replica, a new connection. */
  | { kind: 'stale' };

/**
 * Where an attempt stands. waiting: the request head went out, no 100 Continue or answer yet; uploading: the replica
 * took the body; answered: its response head arrived (with or without the body); over: given up or settled.
 */
export type AttemptPhase = 'waiting' | 'uploading' | 'answered' | 'over';

/** What an attempt needs of the call it belongs to. */
export interface AttemptDeps {
  config: AttemptConfig;
  req: Request;
  res: Response;
  ctx: ForwardCall;
  replica: ReplicaCall;
  token: string | null;
  /** On a new connection (after a kept-alive one went stale), not a pooled one. */
  fresh: boolean;
  withBody: boolean;
  maxBody: number;
  /** The least the client must send per CLIENT_IDLE_TIMEOUT_MS window of its upload. */
  clientMinBytes: number;
  /** Answers the client with the gateway's envelope and finishes the call. */
  fail(failure: GatewayFailure): void;
}

export class Attempt {
  private phase: AttemptPhase = 'waiting';
  /** The replica said 100 Continue: the body is committed to it. */
  private bodyCommitted = false;
  private settled = false;
  private settleWith!: (result: AttemptResult) => void;
  private readonly started = performance.now();
  private readonly upReq: http.ClientRequest;
  /** The replica's response head, once it arrived. */
  private answer: http.IncomingMessage | null = null;

  // -- clocks
  /** No connection (no body) or no 100 Continue (with a body) within UPSTREAM_CONNECT_TIMEOUT_MS. */
  private readonly connectTimer: NodeJS.Timeout;
  /** No response head within UPSTREAM_TIMEOUT_MS after the upload was handed over. */
  private processingTimer: NodeJS.Timeout | undefined;
  /** The replica stopped accepting the upload (or, later, stopped sending its answer). */
  private readonly upstreamIdle: IdleTimer;
  /** The client stopped sending its upload. */
  private readonly clientUpload: ProgressWatch;
  /** The client stopped reading the answer. */
  private readonly clientRead: IdleTimer;

  readonly result: Promise<AttemptResult>;

  constructor(private readonly d: AttemptDeps) {
    const { config } = d;
    this.result = new Promise<AttemptResult>((resolve) => (this.settleWith = resolve));
    this.upReq = d.replica.request({
      path: upstreamPath(d.req, d.ctx),
      method: d.req.method,
      headers: upstreamRequestHeaders(d.req, d.ctx, d.token, d.withBody),
      fresh: d.fresh,
    });
    this.connectTimer = setTimeout(() => this.onConnectTimeout(), config.upstreamConnectTimeoutMs);
    this.upstreamIdle = new IdleTimer(config.upstreamIdleTimeoutMs, () => this.onUpstreamIdle());
    this.clientUpload = new ProgressWatch(config.clientIdleTimeoutMs, d.clientMinBytes, () => this.onUploadStalled());
    this.clientRead = new IdleTimer(config.clientIdleTimeoutMs, () => this.onClientStalled());

    const upReq = this.upReq;
    upReq.on('drain', this.onDrain);
    upReq.on('socket', (socket) => {
      const connected = (): void => {
        if (!d.withBody) clearTimeout(this.connectTimer);
      };
      if (socket.connecting) socket.once('connect', connected);
      else connected();
    });
    if (d.withBody) {
      upReq.flushHeaders();
    } else {
      upReq.end();
      this.startProcessingClock();
    }
    upReq.on('continue', () => this.onContinue());
    upReq.on('error', (err: NodeJS.ErrnoException) => this.onRequestError(err));
    upReq.on('response', (answer: http.IncomingMessage) => this.onResponse(answer));
  }

  /** Client gone or shutdown: lets go of the replica (no verdict on it). False when the attempt was already over. */
  cancel(why: 'client' | 'shutdown'): boolean {
    if (this.phase === 'over') return false;
    this.abandon();
    this.d.replica.judge('release');
    if (why === 'client') this.done(this.d.ctx.logStatus ?? CLIENT_GONE_STATUS, false);
    else this.done(503, false);
    return true;
  }

  // -- settling

  private settle(result: AttemptResult): void {
    if (this.settled) return;
    this.settled = true;
    this.phase = 'over';
    this.d.replica.end();
    this.stopClocks();
    this.settleWith(result);
  }

  private retry = (refusal: Omit<Refusal, 'upstream'>): void => this.settle({ kind: 'retry', refusal: { upstream: this.d.replica.upstream, ...refusal } });
  private done = (status: number, ok: boolean): void => this.settle({ kind: 'done', outcome: { status, ok, upstreamMs: this.d.ctx.upstreamMs } });

  /** Gives up on the replica's request: no more body, no clocks. */
  private abandon(): void {
    this.phase = 'over';
    this.stopFeeding();
    this.stopClocks();
    this.upReq.destroy();
  }

  private stopClocks(): void {
    clearTimeout(this.connectTimer);
    clearTimeout(this.processingTimer);
    this.upstreamIdle.disarm();
    this.clientUpload.disarm();
    this.clientRead.disarm();
  }

  // -- clocks firing

  private startProcessingClock(): void {
    this.processingTimer = setTimeout(() => {
      if (this.phase === 'answered' || this.phase === 'over') return;
      this.abandon();
      this.d.replica.judge('failure');
      this.d.fail(failures.noAnswer(this.d.config.upstreamTimeoutMs));
      this.done(504, false);
    }, this.d.config.upstreamTimeoutMs);
  }

  private onConnectTimeout(): void {
    if (this.phase !== 'waiting') return;
    const ms = this.d.config.upstreamConnectTimeoutMs;
    const what = this.d.withBody ? 'no 100 Continue' : 'no connection';
    this.abandon();
    this.d.replica.judge('failure');
    this.d.replica.upstream.markUnhealthy(`${what} within ${ms} ms`);
    this.retry({ kind: 'unreachable', reason: `${what} within ${ms} ms` });
  }

  private onUpstreamIdle(): void {
    if (this.phase === 'over') return;
    if (this.phase !== 'answered') {
      this.abandon();
      this.d.replica.judge('failure');
      this.d.fail(failures.uploadNotAccepted(this.d.config.upstreamIdleTimeoutMs));
      this.done(504, false);
    } else {
      this.failMidBody('upstream_timeout', 504);
    }
  }

  private onUploadStalled(): void {
    if (this.phase === 'over' || this.phase === 'answered') return;
    this.abandon();
    this.d.replica.judge('release');
    this.d.fail(failures.uploadStalled(this.d.clientMinBytes, this.d.config.clientIdleTimeoutMs));
    this.done(408, false);
  }

  private onClientStalled(): void {
    if (this.phase === 'over') return;
    this.abandon();
    this.d.replica.judge('release');
    this.d.ctx.errorType = 'request_timeout';
    this.d.ctx.logStatus = CLIENT_STALLED_STATUS;
    this.d.res.destroy();
    this.done(CLIENT_STALLED_STATUS, false);
  }

  // -- the client's body, up

  private onContinue(): void {
    if (this.phase !== 'waiting') return;
    clearTimeout(this.connectTimer);
    this.phase = 'uploading';
    this.bodyCommitted = true;
    this.d.req.on('data', this.onData);
    this.d.req.on('end', this.onEnd);
    this.clientUpload.arm();
  }

  private readonly onData = (chunk: Buffer): void => {
    const { ctx, req } = this.d;
    ctx.bytesIn += chunk.length;
    this.clientUpload.progress(chunk.length);
    if (ctx.bytesIn > this.d.maxBody) {
      if (this.answer) {
        // The model service already answered (e.g. an early 400); just stop feeding it.
        this.stopFeeding();
        this.upReq.end();
        return;
      }
      this.abandon();
      this.d.replica.judge('release');
      this.d.fail(failures.streamedTooLarge(this.d.maxBody));
      this.done(413, false);
      return;
    }
    if (!this.upReq.write(chunk)) {
      // Held back by the replica: its clock runs, not the client's.
      req.pause();
      this.clientUpload.disarm();
      this.upstreamIdle.arm();
    }
  };

  private readonly onDrain = (): void => {
    if (this.phase === 'over') return;
    this.upstreamIdle.disarm();
    if (!this.d.req.readableEnded) this.clientUpload.arm();
    this.d.req.resume();
  };

  private readonly onEnd = (): void => {
    this.clientUpload.disarm();
    if (this.phase === 'over') return;
    this.upReq.end();
    if (!this.answer) this.startProcessingClock();
  };

  private stopFeeding(): void {
    this.d.req.removeListener('data', this.onData);
    this.d.req.removeListener('end', this.onEnd);
    this.clientUpload.disarm();
  }

  private onRequestError(err: NodeJS.ErrnoException): void {
    if (this.phase === 'answered' || this.phase === 'over') return;
    const code = err.code ?? err.message;
    if (!this.bodyCommitted && this.upReq.reusedSocket && !this.d.fresh) {
      // A kept-alive connection the replica closed as we reused it (or had dropped while idle): a race of the
      // connection, not a fault of the replica. Nothing of the body went out; once more, on a new one.
      this.abandon();
      this.d.replica.judge('release');
      this.settle({ kind: 'stale' });
      return;
    }
    this.abandon();
    this.d.replica.judge('failure');
    if (!this.bodyCommitted) {
      // Nothing of the body went out: another replica can take the call.
      this.d.replica.upstream.markUnhealthy(code);
      this.retry({ kind: 'unreachable', reason: code });
      return;
    }
    this.d.fail(failures.unreachableMidUpload(code));
    this.done(502, false);
  }

  // -- the replica's answer, down

  private onResponse(answer: http.IncomingMessage): void {
    if (this.phase === 'over') {
      answer.resume();
      return;
    }
    const { ctx, res, replica } = this.d;
    this.phase = 'answered';
    this.answer = answer;
    clearTimeout(this.connectTimer);
    clearTimeout(this.processingTimer);
    this.upstreamIdle.disarm();
    const upstreamMs = Math.round(performance.now() - this.started);
    ctx.upstreamMs = upstreamMs;
    const status = answer.statusCode ?? 502;

    if (!this.bodyCommitted && isRefusalStatus(status)) {
      // Refused before any of the body was sent (busy, starting, draining; or our token is not accepted).
      this.abandonAfter(answer, (body) => {
        const refused = refusalBeforeBody(status, body, answer.headers['retry-after']);
        replica.judge(refused.verdict);
        if (refused.unhealthy) replica.upstream.markUnhealthy(refused.unhealthy);
        this.retry(refused.refusal);
      });
      return;
    }
    res.setHeader('X-Gateway-Upstream-Ms', String(upstreamMs));

    if (isConvertedStatus(status)) {
      // Converted into the gateway's envelope; the model service's {detail} becomes the message.
      this.abandonAfter(answer, (body) => {
        const converted = convertedAnswer(status, body, answer.headers['retry-after']);
        replica.judge(converted.verdict);
        this.d.fail(converted.failure);
        this.done(converted.failure.status, false);
      });
      return;
    }
    this.relay(answer, status);
  }

  /** Streams a passed-through answer to the client, the slower side's clock running. */
  private relay(answer: http.IncomingMessage, status: number): void {
    const { ctx, res, req, replica } = this.d;
    res.status(status);
    copyResponseHeaders(answer, res, ctx.requestId);
    // A refusal (4xx) passes through unchanged; a copy of its small JSON body gives the request log its reason.
    const errorCopy: Buffer[] | null = status >= 400 && status < 500 ? [] : null;
    let copied = 0;
    this.upstreamIdle.arm();
    answer.on('data', (chunk: Buffer) => {
      if (this.phase === 'over') return;
      this.upstreamIdle.touch();
      ctx.bytesOut += chunk.length;
      if (errorCopy && copied < MAX_ERROR_BODY) {
        errorCopy.push(chunk);
        copied += chunk.length;
      }
      if (!res.write(chunk)) {
        // Held back by the client: its clock runs, not the replica's.
        answer.pause();
        this.upstreamIdle.disarm();
        this.clientRead.arm();
      }
    });
    res.on('drain', () => {
      if (this.phase === 'over') return;
      this.clientRead.disarm();
      this.upstreamIdle.arm();
      answer.resume();
    });
    answer.on('end', () => {
      if (this.phase === 'over') return;
      this.upstreamIdle.disarm();
      if (errorCopy) {
        const reason = errorBodyOf(Buffer.concat(errorCopy));
        if (reason.type && !ctx.errorType) ctx.errorType = reason.type;
        if (reason.detail) ctx.errorDetail = reason.detail;
      }
      replica.judge(verdictOfAnswer(status));
      if (status < 500) replica.upstream.markHealthy();
      // An early answer (e.g. 400 on a bad option) while the upload was still coming: stop it here.
      if (this.d.withBody && !req.readableEnded) {
        this.stopFeeding();
        this.upReq.destroy();
      }
      res.end();
    });
    // The model service died or hung up in the middle of the body.
    answer.on('close', () => {
      if (!answer.complete) this.failMidBody('upstream_unavailable', 502);
    });
    answer.on('error', () => this.failMidBody('upstream_unavailable', 502));
    res.once('finish', () => this.done(status, deliveredWork(status, answer.headers)));
  }

  /** The status line (2xx) is already out: the client sees a cut connection, the log the real outcome. */
  private failMidBody(type: 'upstream_timeout' | 'upstream_unavailable', status: number): void {
    if (this.phase === 'over') return;
    this.abandon();
    this.d.replica.judge('failure');
    this.d.ctx.errorType = type;
    this.d.ctx.logStatus = status;
    this.d.res.destroy();
    this.done(status, false);
  }

  /** Reads a short error body, then lets go of the replica's request. */
  private abandonAfter(answer: http.IncomingMessage, then: (body: Buffer) => void): void {
    this.stopFeeding();
    readSmall(answer, (body) => {
      if (this.phase === 'over') return;
      this.phase = 'over';
      this.stopClocks();
      this.upReq.destroy();
      then(body);
    });
  }
}
