// The one boundary between the gateway and the model service: an HTTP reverse proxy for one call, with
// a streamed and counted request body, an upstream timeout and a circuit breaker.
import http from 'node:http';
import https from 'node:https';
import type { Request, Response } from 'express';
import type { Config } from '../config';
import { sendGatewayError, type GatewayErrorType } from '../gateway/errors';
import type { ForwardOutcome, Forwarder, GatewayContext } from '../gateway/types';
import { CircuitBreaker, type BreakerState } from './circuit-breaker';

export interface ForwarderDeps {
  config: Pick<Config, 'upstreamTimeoutMs' | 'breakerThreshold' | 'breakerCooldownMs'>;
  /** Model service root, e.g. http://127.0.0.1:8081 (no trailing slash needed). */
  baseUrl: string;
  /** Clock for the breaker (tests). */
  now?: () => number;
}

/** One upstream's breaker as metrics and readiness see it. */
export interface UpstreamState {
  upstream: string;
  state: BreakerState;
  consecutiveFailures: number;
}

export type ModelServiceForwarder = Forwarder & {
  readonly breaker: CircuitBreaker;
  readonly baseUrl: string;
  /** Every upstream with its breaker state, read when asked (a /metrics scrape, /readyz). */
  upstreams(): UpstreamState[];
};

/** Largest body accepted when the gateway context carries no route (should not happen). */
const FALLBACK_MAX_BODY = 201 * 1024 * 1024;
/** Upstream error bodies (413/503) are read only this far to extract their detail. */
const MAX_ERROR_BODY = 64 * 1024;

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
const RESPONSE_HEADERS_DROPPED = new Set(['connection', 'keep-alive', 'transfer-encoding', 'trailer', 'upgrade', 'x-request-id']);

function upstreamPath(req: Request, ctx: GatewayContext): string {
  let endpoint = ctx.route?.endpoint;
  if (!endpoint) {
    // /v1/<service>/<endpoint> → <endpoint>
    endpoint = req.path.split('/').slice(3).join('/');
  }
  const q = req.originalUrl.indexOf('?');
  return `/${endpoint}${q >= 0 ? req.originalUrl.slice(q) : ''}`;
}

function detailOf(body: Buffer): string | null {
  return errorBodyOf(body).detail;
}

/** `detail` and `type` of a model-service error body ({"detail", "type", "request_id"}), when it is one. */
function errorBodyOf(body: Buffer): { detail: string | null; type: string | null } {
  try {
    const parsed = JSON.parse(body.toString('utf8')) as { detail?: unknown; type?: unknown };
    return {
      detail: typeof parsed.detail === 'string' ? parsed.detail : null,
      type: typeof parsed.type === 'string' && /^[a-z_]{1,40}$/.test(parsed.type) ? parsed.type : null,
    };
  } catch {
    return { detail: null, type: null };
  }
}

export function createModelServiceForwarder(deps: ForwarderDeps): ModelServiceForwarder {
  const { config } = deps;
  const base = new URL(deps.baseUrl.replace(/\/+$/, '') + '/');
  const basePath = base.pathname.replace(/\/+$/, '');
  const client = base.protocol === 'https:' ? https : http;
  // No keep-alive: reusing a socket the model service is just closing would turn into a spurious 502,
  // and a fresh loopback connection costs well under a millisecond.
  const agent = new client.Agent({ keepAlive: false });
  const breaker = new CircuitBreaker({
    threshold: config.breakerThreshold,
    cooldownMs: config.breakerCooldownMs,
    now: deps.now,
  });

  const forward = (req: Request, res: Response, ctx: GatewayContext): Promise<ForwardOutcome> =>
    new Promise<ForwardOutcome>((resolve) => {
      const maxBody = ctx.route ? ctx.route.maxBodyBytes : FALLBACK_MAX_BODY;
      let finished = false;
      const finish = (outcome: ForwardOutcome): void => {
        if (finished) return;
        finished = true;
        resolve(outcome);
      };
      const fail = (type: GatewayErrorType, message: string, status: number): void => {
        ctx.errorType = type;
        sendGatewayError(res, type, message, status);
        finish({ status, ok: false, upstreamMs: ctx.upstreamMs });
      };

      const declared = Number(req.headers['content-length']);
      if (Number.isFinite(declared) && declared > maxBody) {
        fail('payload_too_large', `Request body of ${declared} bytes exceeds the ${maxBody}-byte limit of this endpoint.`, 413);
        return;
      }

      const admission = breaker.admit();
      if (!admission.allowed) {
        res.setHeader('Retry-After', String(Math.max(1, Math.ceil(admission.retryAfterMs / 1000))));
        fail('circuit_open', 'The model service is failing repeatedly; calls are paused briefly. Retry after the Retry-After delay.', 503);
        return;
      }
      const trial = admission.trial;
      // Exactly one breaker verdict per admitted call.
      let judged = false;
      const judge = (verdict: 'success' | 'failure' | 'release'): void => {
        if (judged) return;
        judged = true;
        breaker[verdict](trial);
      };

      const headers: http.OutgoingHttpHeaders = {};
      for (const [name, value] of Object.entries(req.headers)) {
        if (value !== undefined && !REQUEST_HEADERS_DROPPED.has(name)) headers[name] = value;
      }
      headers['x-request-id'] = ctx.requestId;
      headers['x-forwarded-for'] = ctx.clientIp;

      const started = performance.now();
      const upstream = client.request({
        protocol: base.protocol,
        hostname: base.hostname,
        port: base.port,
        path: basePath + upstreamPath(req, ctx),
        method: req.method,
        headers,
        agent,
      });

      let responded = false; // upstream response headers arrived
      let abandoned = false; // we gave up on the upstream (timeout, overflow, client gone)
      const abandon = (): void => {
        abandoned = true;
        clearTimeout(timer);
        req.unpipe();
        req.removeListener('data', onData);
        upstream.destroy();
      };

      const timer = setTimeout(() => {
        if (responded || finished) return;
        abandon();
        judge('failure');
        fail('upstream_timeout', `The model service did not answer within ${config.upstreamTimeoutMs} ms.`, 504);
      }, config.upstreamTimeoutMs);

      // Request body: streamed through with backpressure, counted, cut at the route's limit.
      const onData = (chunk: Buffer): void => {
        ctx.bytesIn += chunk.length;
        if (ctx.bytesIn > maxBody) {
          if (responded) {
            // The model service already answered (e.g. an early 400); just stop feeding it.
            req.removeListener('data', onData);
            upstream.end();
            return;
          }
          abandon();
          judge('release');
          fail('payload_too_large', `Request body exceeds the ${maxBody}-byte limit of this endpoint.`, 413);
          return;
        }
        if (!upstream.write(chunk)) req.pause();
      };
      upstream.on('drain', () => req.resume());
      req.on('data', onData);
      req.on('end', () => {
        if (!abandoned) upstream.end();
      });

      // Client went away before the response was complete.
      res.once('close', () => {
        if (res.writableFinished) return;
        abandon();
        judge('release');
        finish({ status: 499, ok: false, upstreamMs: ctx.upstreamMs });
      });

      upstream.on('error', (err: NodeJS.ErrnoException) => {
        if (abandoned || responded || finished) return;
        clearTimeout(timer);
        judge('failure');
        fail('upstream_unavailable', `The model service is unreachable (${err.code ?? err.message}).`, 502);
      });

      upstream.on('response', (up: http.IncomingMessage) => {
        if (abandoned || finished) {
          up.resume();
          return;
        }
        responded = true;
        clearTimeout(timer);
        const upstreamMs = Math.round(performance.now() - started);
        ctx.upstreamMs = upstreamMs;
        const status = up.statusCode ?? 502;
        res.setHeader('X-Gateway-Upstream-Ms', String(upstreamMs));

        if (status === 413 || status === 503) {
          // Converted into the gateway's envelope; the model service's {detail} becomes the message.
          judge(status === 503 ? 'failure' : 'success');
          const chunks: Buffer[] = [];
          let size = 0;
          up.on('data', (c: Buffer) => {
            if (size < MAX_ERROR_BODY) chunks.push(c);
            size += c.length;
          });
          const convert = (): void => {
            const detail = detailOf(Buffer.concat(chunks));
            if (status === 413) {
              fail('payload_too_large', detail ?? 'Upload larger than the endpoint allows.', 413);
            } else {
              const retryAfter = up.headers['retry-after'];
              if (retryAfter) res.setHeader('Retry-After', retryAfter);
              fail('upstream_unavailable', `The model service is unavailable${detail ? ` (${detail})` : ''}; retry shortly.`, 503);
            }
          };
          up.on('end', convert);
          up.on('error', convert);
          return;
        }

        judge(status >= 500 ? 'failure' : 'success');
        res.status(status);
        for (const [name, value] of Object.entries(up.headers)) {
          if (value !== undefined && !RESPONSE_HEADERS_DROPPED.has(name)) res.setHeader(name, value);
        }
        res.setHeader('X-Request-Id', ctx.requestId);
        // A refusal (4xx) passes through unchanged; a copy of its small JSON body gives the request log its reason.
        const errorCopy: Buffer[] | null = status >= 400 && status < 500 ? [] : null;
        let copied = 0;
        up.on('data', (chunk: Buffer) => {
          ctx.bytesOut += chunk.length;
          if (errorCopy && copied < MAX_ERROR_BODY) {
            errorCopy.push(chunk);
            copied += chunk.length;
          }
          if (!res.write(chunk)) up.pause();
        });
        res.on('drain', () => up.resume());
        up.on('end', () => {
          if (errorCopy) {
            const reason = errorBodyOf(Buffer.concat(errorCopy));
            if (reason.type && !ctx.errorType) ctx.errorType = reason.type;
            if (reason.detail) ctx.errorDetail = reason.detail;
          }
          res.end();
        });
        // The model service died mid-body: the client must see a truncated response, not a complete one.
        up.on('aborted', () => res.destroy());
        up.on('error', () => res.destroy());
        res.once('finish', () => finish({ status, ok: status >= 200 && status < 300, upstreamMs }));
      });
    });

  const baseUrl = base.toString().replace(/\/$/, '');
  const upstreams = (): UpstreamState[] => [{ upstream: baseUrl, ...breaker.snapshot() }];
  return Object.assign(forward, { breaker, baseUrl, upstreams });
}
