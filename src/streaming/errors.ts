// Refusals of the streaming endpoint before the upgrade: ordinary HTTP answers in the gateway's envelope
// {"error": {"type", "message", "request_id"}}. After the upgrade a fault is an error message and a close code
// (live-protocol/close.ts, messages.ts).
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
