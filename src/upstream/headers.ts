// What of a call travels between the client and a model-service replica: the request headers that go up (no
// hop-by-hop headers, no client credentials; the call's X-Request-Id, X-Forwarded-For and the gateway's own token),
// the response headers that come back down, and the replica-side path of the call.
import type http from 'node:http';
import type { Request, Response } from 'express';
import type { ForwardCall } from './types';

// Hop-by-hop headers (RFC 9110 §7.6.1) and credentials that must not travel to the model service.
const REQUEST_HEADERS_DROPPED = new Set([
  'connection',
  'keep-alive',
  'proxy-authorization',
  'proxy-connection',
  'te',
  'trailer',
  'transfer-encoding',
  'upgrade',
  'host',
  'expect',
  'authorization',
  'x-api-key',
  'cookie',
  'x-request-id',
  'x-forwarded-for',
]);
const RESPONSE_HEADERS_DROPPED = new Set([
  'connection',
  'keep-alive',
  'transfer-encoding',
  'trailer',
  'upgrade',
  'x-request-id',
  'www-authenticate',
]);

/**
 * Headers of the request to the replica: the client's, less the dropped ones, plus the call's id, the client's
 * address, the gateway's token and, with a body, `Expect: 100-continue` (nothing is sent before the replica agrees).
 */
export function upstreamRequestHeaders(req: Request, ctx: ForwardCall, token: string | null, withBody: boolean): http.OutgoingHttpHeaders {
  const headers: http.OutgoingHttpHeaders = {};
  for (const [name, value] of Object.entries(req.headers)) {
    if (value !== undefined && !REQUEST_HEADERS_DROPPED.has(name)) headers[name] = value;
  }
  headers['x-request-id'] = ctx.requestId;
  headers['x-forwarded-for'] = ctx.clientIp;
  if (token) headers.authorization = `Bearer ${token}`;
  if (withBody) headers.expect = '100-continue';
  return headers;
}

/** Copies the replica's response headers to the client's response; X-Request-Id stays the gateway's. */
export function copyResponseHeaders(from: http.IncomingMessage, res: Response, requestId: string): void {
  for (const [name, value] of Object.entries(from.headers)) {
    if (value !== undefined && !RESPONSE_HEADERS_DROPPED.has(name)) res.setHeader(name, value);
  }
  res.setHeader('X-Request-Id', requestId);
}

/** The call's path on the replica: /v1/<service>/<endpoint>?q → /<endpoint>?q. */
export function upstreamPath(req: Request, ctx: ForwardCall): string {
  let endpoint = ctx.route?.endpoint;
  if (!endpoint) {
    // /v1/<service>/<endpoint> → <endpoint>
    endpoint = req.path.split('/').slice(3).join('/');
  }
  const q = req.originalUrl.indexOf('?');
  return `/${endpoint}${q >= 0 ? req.originalUrl.slice(q) : ''}`;
}

/** Whether the client's request has a body to send (declared length > 0, or chunked). */
export function hasRequestBody(req: Request): boolean {
  if (req.headers['transfer-encoding'] !== undefined) return true;
  const declared = Number(req.headers['content-length']);
  return Number.isFinite(declared) && declared > 0;
}
