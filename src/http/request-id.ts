// Request ids for answers written outside the gateway's pipeline (probes, /metrics, Node's own refusals of malformed
// requests): the same `req_<32 hex>` format, so every response a client can get carries an X-Request-Id.
import crypto from 'node:crypto';
import type { ServerResponse } from 'node:http';

/** A fresh id: `req_` + 32 hex digits. */
export function newRequestId(): string {
  return 'req_' + crypto.randomUUID().replace(/-/g, '');
}

/**
 * The id of this response: the one an earlier handler gave it (Express's res.locals.requestId, or an X-Request-Id
 * header already set), else a fresh one, set as X-Request-Id (and in res.locals when there are locals).
 */
export function ensureRequestId(res: ServerResponse): string {
  const locals = (res as ServerResponse & { locals?: Record<string, unknown> }).locals;
  const kept = locals?.requestId ?? res.getHeader('x-request-id');
  if (typeof kept === 'string' && kept) return kept;
  const id = newRequestId();
  if (locals) locals.requestId = id;
  if (!res.headersSent) res.setHeader('X-Request-Id', id);
  return id;
}
