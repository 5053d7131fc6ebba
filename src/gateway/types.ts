// Contracts between the gateway's policy pipeline and what it forwards to.
import type { Request, Response } from 'express';
import type { PendingCharge, RequestLogEntry } from '../store/gateway/types';
import type { ForwardOutcome } from '../upstream/types';

export type { ForwardOutcome };

export type Scope = string; // '*', 'noise-suppressor:*', 'noise-suppressor:denoise', ...

/** One published endpoint: the gateway's route table is a list of these. */
export interface EndpointSpec {
  service: string; // 'noise-suppressor'
  /** 'denoise', 'denoise/batch', 'models', ...; a `{name}` segment matches one path segment (e.g. 'jobs/{id}'). */
  endpoint: string;
  method: 'GET' | 'POST' | 'DELETE';
  scope: Scope; // required scope
  credits: number; // cost per call
  /** Largest request body the gateway lets through, in bytes (counted while streaming). */
  maxBodyBytes: number;
  /** Who answers an authorised call: a handler named in GatewayOptions.targets; omitted = the model service. */
  target?: string;
  /** A single-use `?ticket=` may stand for the key (GatewayOptions.tickets): the WebSocket stream, for browsers. */
  ticketAuth?: boolean;
}

/** What the gateway knows about a call once policies have run; kept in res.locals.gateway. */
export interface GatewayContext {
  /** The gateway's own id for the call (X-Request-Id), unique per call. */
  requestId: string;
  /** The X-Request-Id the client sent, when it looked like an id (logged as client_request_id). */
  clientRequestId?: string;
  startedAt: number; // ms epoch
  clientIp: string;
  route?: EndpointSpec;
  /** Values of the route's `{name}` segments, e.g. { id: 'job_…' }. */
  params?: Record<string, string>;
  tokenId?: string;
  workspaceId?: string;
  creditsCharged: number;
  /** Credits held for this call (they become `creditsCharged` when the call delivers). */
  creditsHeld?: number;
  /**
   * Settles the held credits now instead of when the response ends. For a handler whose work is delivered before its
   * answer is (a job is created, then 202): the credit is counted before the client can see the answer. Resolves
   * false when nothing was held or settling failed (the hold then expires and the call costs nothing). `pending`
   * records, with the settle, that the work it pays for does not exist yet (PendingCharge: a job, created next).
   */
  settleCredits?: (pending?: PendingCharge) => Promise<boolean>;
  /** When the credits were held (their month; a later refund goes to that month). */
  chargedAt?: Date;
  upstreamMs?: number;
  bytesIn: number;
  bytesOut: number;
  errorType?: string;
  /**
   * Status to log when it differs from the status line sent: a response that failed after its headers went out
   * (model service died or stalled mid-body: 502/504; client stopped reading: 408).
   */
  logStatus?: number;
  /** Display prefix of the presented token once it was found (also for revoked/expired keys). */
  keyPrefix?: string;
  /** Why the model service refused the call (its 4xx `detail`), recorded by the forwarder for the request log. */
  errorDetail?: string;
}

/**
 * One finished gateway call as observers see it (structured log line, metrics), handed over after the request-log
 * row was written. Observers must not throw and must not block.
 */
export interface CallSummary {
  entry: RequestLogEntry;
  /** The matched route; undefined for 404/405 paths (metrics then label the endpoint "other"). */
  route?: EndpointSpec;
  /** Credits taken before forwarding; entry.creditsCharged is what stayed after a refund. */
  creditsReserved: number;
  keyPrefix: string | null;
  /** Model and seconds of audio the model service reported (X-NS-Stats, X-NS-Batch), when it answered 2xx. */
  model: string | null;
  audioSeconds: number | null;
}

export type CallObserver = (call: CallSummary) => void;

export type Forwarder = (req: Request, res: Response, ctx: GatewayContext) => Promise<ForwardOutcome>;
