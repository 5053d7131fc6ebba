// Policy 1 of 11, request-id: gives every call the gateway's own X-Request-Id before anything else can answer it,
// so every response (refusals included) and every request-log row carries one. Never refuses. Runs first; the
// error handlers (error-handlers.ts) use assignRequestId for requests the pipeline did not see.
import crypto from 'node:crypto';
import type { Request, Response } from 'express';
import type { Policy } from '../call';

/** Client-sent request ids are echoed only when they look like an id (no header/log injection). */
export const SAFE_REQUEST_ID = /^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$/;

/**
 * Sets X-Request-Id to a fresh `req_<32 hex>` unless an earlier handler already did. The id is always the
 * gateway's own, so every log row has a unique one; a client-sent X-Request-Id that looks like an id is kept
 * beside it (res.locals.clientRequestId → the log's client_request_id) for correlation, never used as ours.
 */
export function assignRequestId(req: Request, res: Response): string {
  const existing = res.locals.requestId as string | undefined;
  if (existing) return existing;
  const sent = req.headers['x-request-id'];
  const candidate = Array.isArray(sent) ? sent[0] : sent;
  if (candidate && SAFE_REQUEST_ID.test(candidate)) res.locals.clientRequestId = candidate;
  const id = 'req_' + crypto.randomUUID().replace(/-/g, '');
  res.locals.requestId = id;
  if (!res.headersSent) res.setHeader('X-Request-Id', id);
  return id;
}

export function requestIdPolicy(): Policy {
  return {
    name: 'request-id',
    run(call) {
      call.ctx.requestId = assignRequestId(call.req, call.res);
      call.ctx.clientRequestId = call.res.locals.clientRequestId as string | undefined;
      return 'continue';
    },
  };
}
