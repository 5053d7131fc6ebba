// Errors of the streaming endpoint. Before the upgrade: ordinary HTTP answers in the gateway's envelope
// {"error": {"type", "message", "request_id"}}. After it: a text message {"type":"error","error":{...}} and a close code.
import type { Response } from 'express';
import { requestIdOf } from '../http/errors';

export const STREAM_ERRORS = {
  invalid_request: 400,
  model_not_installed: 422,
  upgrade_required: 426,
  too_many_streams: 429,
  upstream_unavailable: 503,
} as const;

export type StreamErrorType = keyof typeof STREAM_ERRORS;

/** A refusal before the upgrade (bad query, no WebSocket, too many streams, draining). */
export class StreamRefusal extends Error {
  constructor(
    readonly type: StreamErrorType,
    message: string,
    readonly retryAfterS?: number,
  ) {
    super(message);
  }
}

export function sendStreamRefusal(res: Response, err: StreamRefusal): number {
  const status = STREAM_ERRORS[err.type];
  res.locals.errorType = err.type;
  const ctx = res.locals.gateway as { errorType?: string; errorDetail?: string } | undefined;
  if (ctx) {
    ctx.errorType = err.type;
    ctx.errorDetail = err.message;
  }
  if (err.retryAfterS !== undefined) res.setHeader('Retry-After', String(err.retryAfterS));
  res.status(status).json({ error: { type: err.type, message: err.message, request_id: requestIdOf(res) } });
  return status;
}

/** Close codes after the upgrade (docs/streaming.md). */
export const CLOSE = {
  normal: 1000,
  invalidData: 1007,
  internal: 1011,
  restarting: 1012,
  overloaded: 1013,
  /** The key was revoked, expired or deleted while the stream ran (streaming/access.ts). */
  keyRefused: 4401,
  creditsExhausted: 4402,
  /** The key's IP list, scopes or the workspace's plan no longer allow the stream (streaming/access.ts). */
  forbidden: 4403,
  tooSlow: 4408,
} as const;

/** A fault mid-stream: its error message type and close code. */
export class StreamFault extends Error {
  constructor(
    readonly type: string,
    message: string,
    readonly code: number,
  ) {
    super(message);
  }
}
