// The one boundary between the gateway and the model service(s): an HTTP reverse proxy for one call.
//
// - Replicas: MODEL_SERVICE_URL may list several; each call goes to the healthy replica with the fewest calls in
//   flight whose breaker admits it (balancer.ts), and health checks run in the background (health.ts).
// - Nothing of a client's body is sent before the replica said `100 Continue`. A replica that cannot be reached,
//   does not answer in time, is busy, starting or draining (503) or refuses our token answers before that, so the
//   call moves to another replica with the client's body intact; it is never sent twice.
// - Clocks, and whose fault each one is:
//     client too slow sending the upload (less than CLIENT_MIN_BYTES_PER_S over CLIENT_IDLE_TIMEOUT_MS while we
//       wait on it) or not reading the answer → 408 request_timeout / closed connection, refunded, breaker untouched;
//     replica not accepting the upload, or silent mid-response, for UPSTREAM_IDLE_TIMEOUT_MS → failure (504);
//     no response headers within UPSTREAM_TIMEOUT_MS after the upload was handed over → failure (504);
//     no connection / no 100 Continue within UPSTREAM_CONNECT_TIMEOUT_MS → failure, next replica.
// - Each breaker gets exactly one verdict per call sent to it, and success only once the whole response body came
//   through: a response that dies mid-body is a failure, logged with its real status and refunded.
import type http from 'node:http';
import type { Request, Response } from 'express';
import type { Config } from '../config';
import { sendGatewayError, type GatewayErrorType } from '../http/errors';
import type { ForwardCall, ForwardOutcome, UpstreamForwarder } from './types';
import { Balancer, parseUpstreamUrls, Upstream } from './balancer';
import type { BreakerState, CircuitBreaker } from './circuit-breaker';
import { HealthChecker } from './health';
import { IdleTimer, ProgressWatch } from './watchdogs';

export type ForwarderConfig = Pick<
  Config,
  | 'upstreamTimeoutMs'
  | 'breakerThreshold'
  | 'breakerCooldownMs'
  | 'upstreamIdleTimeoutMs'
  | 'upstreamConnectTimeoutMs'
  | 'upstreamHealthIntervalMs'
  | 'clientIdleTimeoutMs'
  | 'clientMinBytesPerSecond'
>;

export interface ForwarderDeps {
  config: ForwarderConfig;
  /** Model service root, e.g. http://127.0.0.1:8081, or a comma-separated list of replicas. */
  baseUrl: string;
  /** Sent as `Authorization: Bearer <token>` to the model service (MODEL_SERVICE_TOKEN). */
  token?: string | null;
  /** Clock for the breakers (tests). */
  now?: () => number;
}

/** One upstream's breaker as metrics and readiness see it. */
export interface UpstreamState {
  upstream: string;
  state: BreakerState;
  consecutiveFailures: number;
  /** Last health verdict (health checks with several replicas, or a failed connection). */
  healthy: boolean;
  inFlight: number;
}

export type ModelServiceForwarder = UpstreamForwarder & {
  /** The first replica's breaker (the only one with a single MODEL_SERVICE_URL). */
  readonly breaker: CircuitBreaker;
  /** The first replica's URL. */
  readonly baseUrl: string;
  /** The replicas themselves (breaker, in-flight count, health). */
  readonly replicas: readonly Upstream[];
  /** Every upstream with its breaker state, read when asked (a /metrics scrape, /readyz). */
  upstreams(): UpstreamState[];
  /** Calls being forwarded right now. */
  activeCalls(): number;
  /**
   * Shutdown: every call still waiting for its answer gets 503 upstream_unavailable with Retry-After (its upstream
   * request is cancelled, its credit refunded by the gateway); answers already streaming are cut. Returns the count.
   */
  abortAll(retryAfterS: number): number;
  /** Stops the health checks. */
  close(): void;
};

/** Largest body accepted when the gateway context carries no route (should not happen). */
const FALLBACK_MAX_BODY = 201 * 1024 * 1024;
/** Upstream error bodies (401/413/503) are read only this far to extract their detail. */
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
const RESPONSE_HEADERS_DROPPED = new Set([
  'connection',
  'keep-alive',
  'transfer-encoding',
  'trailer',
  'upgrade',
  'x-request-id',
  'www-authenticate',
]);

function upstreamPath(req: Request, ctx: ForwardCall): string {
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
      detail: typeof parsed.detail === 'string' ? parsed.detail.slice(0, 300) : null,
      type: typeof parsed.type === 'string' && /^[a-z_]{1,40}$/.test(parsed.type) ? parsed.type : null,
    };
  } catch {
    return { detail: null, type: null };
  }
}

function readSmall(up: http.IncomingMessage, done: (body: Buffer) => void): void {
  const chunks: Buffer[] = [];
  let size = 0;
  let called = false;
  const finish = (): void => {
    if (called) return;
    called = true;
    done(Buffer.concat(chunks));
  };
  up.on('data', (c: Buffer) => {
    if (size < MAX_ERROR_BODY) chunks.push(c);
    size += c.length;
  });
  up.on('end', finish);
  up.on('error', finish);
  up.on('close', finish);
}

function hasRequestBody(req: Request): boolean {
  if (req.headers['transfer-encoding'] !== undefined) return true;
  const declared = Number(req.headers['content-length']);
  return Number.isFinite(declared) && declared > 0;
}

/** Why an attempt on one replica ended without an answer for the client (nothing of the body was sent). */
interface Refusal {
  upstream: Upstream;
  /** 'unreachable': connection failed / timed out; 'busy': 503 (busy, starting, draining); 'refused': 401/403. */
  kind: 'unreachable' | 'busy' | 'refused';
  reason: string;
  retryAfter?: string;
}

type AttemptResult =
  | { kind: 'retry'; refusal: Refusal }
  | { kind: 'done'; outcome: ForwardOutcome }
  /** A kept-alive connection failed before anything of the call reached the replica: the same replica, a new connection. */
  | { kind: 'stale' };

/** A call in progress, for shutdown. */
interface ActiveCall {
  shutdown(retryAfterS: number): void;
}

export function createModelServiceForwarder(deps: ForwarderDeps): ModelServiceForwarder {
  const { config } = deps;
  const token = deps.token ?? null;
  const breakerOptions = { threshold: config.breakerThreshold, cooldownMs: config.breakerCooldownMs, now: deps.now };
  const upstreams = parseUpstreamUrls(deps.baseUrl).map((u) => new Upstream(u, breakerOptions));
  const balancer = new Balancer(upstreams);
  const health = new HealthChecker(upstreams, {
    intervalMs: config.upstreamHealthIntervalMs,
    timeoutMs: Math.min(config.upstreamConnectTimeoutMs, Math.max(500, config.upstreamHealthIntervalMs)),
    token,
  });
  // With one replica there is nothing to choose between; its breaker alone decides.
  if (upstreams.length > 1) health.start();
  const active = new Set<ActiveCall>();
  const clientMinBytes = Math.max(1, Math.floor((config.clientMinBytesPerSecond * config.clientIdleTimeoutMs) / 1000));

  const forward = (req: Request, res: Response, ctx: ForwardCall): Promise<ForwardOutcome> =>
    new Promise<ForwardOutcome>((resolveCall) => {
      const maxBody = ctx.route ? ctx.route.maxBodyBytes : FALLBACK_MAX_BODY;
      const withBody = hasRequestBody(req);
      let finished = false;
      /** Cancels the attempt in progress (client gone, shutdown); returns false when none is running. */
      let cancelAttempt: ((why: 'client' | 'shutdown') => boolean) | null = null;
      let shuttingDown = false;

      const call: ActiveCall = {
        shutdown(retryAfterS) {
          shuttingDown = true;
          if (finished) return;
          if (res.headersSent) {
            res.destroy(); // the 'close' handler settles it as a client-side end
            return;
          }
          cancelAttempt?.('shutdown');
          res.setHeader('Retry-After', String(retryAfterS));
          res.setHeader('Connection', 'close');
          fail('upstream_unavailable', 'The service is restarting; retry after the Retry-After delay.', 503);
        },
      };
      active.add(call);

      const finish = (outcome: ForwardOutcome): void => {
        if (finished) return;
        finished = true;
        active.delete(call);
        resolveCall(outcome);
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

      // Client went away before the response was complete.
      res.once('close', () => {
        if (res.writableFinished || finished) return;
        cancelAttempt?.('client');
        finish({ status: ctx.logStatus ?? 499, ok: false, upstreamMs: ctx.upstreamMs });
      });

      const tried = new Set<Upstream>();
      const refusals: Refusal[] = [];

      const next = (): void => {
        if (finished) return;
        if (shuttingDown) return;
        const up = balancer.pick(tried);
        if (!up) {
          noReplica();
          return;
        }
        tried.add(up);
        tryReplica(up, false);
      };

      const tryReplica = (up: Upstream, fresh: boolean): void => {
        if (finished || shuttingDown) return;
        const admission = up.breaker.admit();
        if (!admission.allowed) {
          next();
          return;
        }
        void attempt(up, admission.trial, fresh).then((result) => {
          cancelAttempt = null;
          if (result.kind === 'done') {
            finish(result.outcome);
            return;
          }
          if (result.kind === 'stale') {
            tryReplica(up, true);
            return;
          }
          refusals.push(result.refusal);
          next();
        });
      };

      /** No replica could take the call: say why, as precisely as the attempts allow. */
      const noReplica = (): void => {
        if (refusals.length === 0) {
          const waits = upstreams.map((u) => u.breaker.retryAfterMs()).filter((ms) => ms > 0);
          const waitMs = waits.length > 0 ? Math.min(...waits) : config.breakerCooldownMs;
          res.setHeader('Retry-After', String(Math.max(1, Math.ceil(waitMs / 1000))));
          fail(
            'circuit_open',
            'The model service is failing repeatedly; calls are paused briefly. Retry after the Retry-After delay.',
            503,
          );
          return;
        }
        const summary = (r: Refusal): string => (upstreams.length > 1 ? `${r.upstream.label}: ${r.reason}` : r.reason);
        const busy = refusals.filter((r) => r.kind === 'busy');
        if (busy.length > 0) {
          const after = busy.map((r) => Number(r.retryAfter)).filter((n) => Number.isFinite(n) && n > 0);
          res.setHeader('Retry-After', String(after.length > 0 ? Math.min(...after) : 2));
          fail('upstream_unavailable', `The model service is unavailable (${busy.map(summary).join('; ')}); retry shortly.`, 503);
          return;
        }
        fail('upstream_unavailable', `The model service is unreachable (${refusals.map(summary).join('; ')}).`, 502);
      };

      /** One call to `up`; `fresh`: on a new connection (after a kept-alive one went stale), not a pooled one. */
      const attempt = (up: Upstream, trial: boolean, fresh: boolean): Promise<AttemptResult> =>
        new Promise<AttemptResult>((settleAttempt) => {
          let settled = false;
          let judged = false;
          up.inFlight++;
          up.sent++;
          const judge = (verdict: 'success' | 'failure' | 'release'): void => {
            if (judged) return;
            judged = true;
            up.breaker[verdict](trial);
          };
          const settle = (result: AttemptResult): void => {
            if (settled) return;
            settled = true;
            up.inFlight--;
            stopClocks();
            settleAttempt(result);
          };
          const retry = (refusal: Omit<Refusal, 'upstream'>): void => settle({ kind: 'retry', refusal: { upstream: up, ...refusal } });
          const done = (status: number, ok: boolean): void => settle({ kind: 'done', outcome: { status, ok, upstreamMs: ctx.upstreamMs } });

          const headers: http.OutgoingHttpHeaders = {};
          for (const [name, value] of Object.entries(req.headers)) {
            if (value !== undefined && !REQUEST_HEADERS_DROPPED.has(name)) headers[name] = value;
          }
          headers['x-request-id'] = ctx.requestId;
          headers['x-forwarded-for'] = ctx.clientIp;
          if (token) headers.authorization = `Bearer ${token}`;
          if (withBody) headers.expect = '100-continue';

          const started = performance.now();
          const upReq = up.client.request({
            protocol: up.url.protocol,
            hostname: up.url.hostname,
            port: up.url.port,
            path: up.basePath + upstreamPath(req, ctx),
            method: req.method,
            headers,
            agent: fresh ? up.freshAgent : up.agent,
          });

          let bodyStarted = false; // the replica said 100 Continue: the body is committed to it
          let responded = false; // its response headers arrived
          let abandoned = false; // we gave up on this replica

          // -- clocks
          const connectTimer = setTimeout(() => {
            if (bodyStarted || responded || abandoned) return;
            const what = withBody ? 'no 100 Continue' : 'no connection';
            abandon();
            judge('failure');
            up.markUnhealthy(`${what} within ${config.upstreamConnectTimeoutMs} ms`);
            retry({ kind: 'unreachable', reason: `${what} within ${config.upstreamConnectTimeoutMs} ms` });
          }, config.upstreamConnectTimeoutMs);
          let processingTimer: NodeJS.Timeout | undefined;
          const startProcessingClock = (): void => {
            processingTimer = setTimeout(() => {
              if (responded || abandoned) return;
              abandon();
              judge('failure');
              fail('upstream_timeout', `The model service did not answer within ${config.upstreamTimeoutMs} ms.`, 504);
              done(504, false);
            }, config.upstreamTimeoutMs);
          };
          // The replica stopped accepting the upload (or, later, stopped sending its answer).
          const upstreamIdle = new IdleTimer(config.upstreamIdleTimeoutMs, () => {
            if (abandoned) return;
            if (!responded) {
              abandon();
              judge('failure');
              fail('upstream_timeout', `The model service stopped accepting the upload for ${config.upstreamIdleTimeoutMs} ms.`, 504);
              done(504, false);
            } else {
              failMidBody('upstream_timeout', 504);
            }
          });
          // The client stopped sending its upload.
          const clientUpload = new ProgressWatch(config.clientIdleTimeoutMs, clientMinBytes, () => {
            if (abandoned || responded) return;
            abandon();
            judge('release');
            res.setHeader('Connection', 'close');
            fail(
              'request_timeout',
              `The upload stalled: less than ${clientMinBytes} bytes arrived in ${config.clientIdleTimeoutMs} ms. Nothing was charged.`,
              408,
            );
            done(408, false);
          });
          // The client stopped reading the answer.
          const clientRead = new IdleTimer(config.clientIdleTimeoutMs, () => {
            if (abandoned) return;
            abandon();
            judge('release');
            ctx.errorType = 'request_timeout';
            ctx.logStatus = 408;
            res.destroy();
            done(408, false);
          });
          function stopClocks(): void {
            clearTimeout(connectTimer);
            clearTimeout(processingTimer);
            upstreamIdle.disarm();
            clientUpload.disarm();
            clientRead.disarm();
          }

          const onData = (chunk: Buffer): void => {
            ctx.bytesIn += chunk.length;
            clientUpload.progress(chunk.length);
            if (ctx.bytesIn > maxBody) {
              if (responded) {
                // The model service already answered (e.g. an early 400); just stop feeding it.
                stopFeeding();
                upReq.end();
                return;
              }
              abandon();
              judge('release');
              fail('payload_too_large', `Request body exceeds the ${maxBody}-byte limit of this endpoint.`, 413);
              done(413, false);
              return;
            }
            if (!upReq.write(chunk)) {
              // Held back by the replica: its clock runs, not the client's.
              req.pause();
              clientUpload.disarm();
              upstreamIdle.arm();
            }
          };
          const onDrain = (): void => {
            if (abandoned) return;
            upstreamIdle.disarm();
            if (!req.readableEnded) clientUpload.arm();
            req.resume();
          };
          const onEnd = (): void => {
            clientUpload.disarm();
            if (abandoned) return;
            upReq.end();
            if (!responded) startProcessingClock();
          };
          const stopFeeding = (): void => {
            req.removeListener('data', onData);
            req.removeListener('end', onEnd);
            clientUpload.disarm();
          };
          const abandon = (): void => {
            abandoned = true;
            stopFeeding();
            stopClocks();
            upReq.destroy();
          };

          cancelAttempt = (why) => {
            if (settled) return false;
            abandon();
            judge('release');
            if (why === 'client') done(ctx.logStatus ?? 499, false);
            else done(503, false);
            return true;
          };

          upReq.on('drain', onDrain);
          upReq.on('socket', (socket) => {
            const connected = (): void => {
              if (!withBody) clearTimeout(connectTimer);
            };
            if (socket.connecting) socket.once('connect', connected);
            else connected();
          });
          if (withBody) {
            upReq.flushHeaders();
          } else {
            upReq.end();
            startProcessingClock();
          }

          upReq.on('continue', () => {
            if (abandoned || responded || bodyStarted) return;
            clearTimeout(connectTimer);
            bodyStarted = true;
            req.on('data', onData);
            req.on('end', onEnd);
            clientUpload.arm();
          });

          upReq.on('error', (err: NodeJS.ErrnoException) => {
            if (abandoned || responded || settled) return;
            const code = err.code ?? err.message;
            if (!bodyStarted && upReq.reusedSocket && !fresh) {
              // A kept-alive connection the replica closed as we reused it (or had dropped while idle): a race of
              // the connection, not a fault of the replica. Nothing of the body went out; once more, on a new one.
              abandon();
              judge('release');
              settle({ kind: 'stale' });
              return;
            }
            if (!bodyStarted) {
              // Nothing of the body went out: another replica can take the call.
              abandon();
              judge('failure');
              up.markUnhealthy(code);
              retry({ kind: 'unreachable', reason: code });
              return;
            }
            abandon();
            judge('failure');
            fail('upstream_unavailable', `The model service is unreachable (${code}).`, 502);
            done(502, false);
          });

          const failMidBody = (type: GatewayErrorType, status: number): void => {
            if (abandoned || settled) return;
            abandon();
            judge('failure');
            // The status line (2xx) is already out: the client sees a cut connection, the log the real outcome.
            ctx.errorType = type;
            ctx.logStatus = status;
            res.destroy();
            done(status, false);
          };

          upReq.on('response', (up2: http.IncomingMessage) => {
            if (abandoned || settled) {
              up2.resume();
              return;
            }
            responded = true;
            clearTimeout(connectTimer);
            clearTimeout(processingTimer);
            upstreamIdle.disarm();
            const upstreamMs = Math.round(performance.now() - started);
            ctx.upstreamMs = upstreamMs;
            const status = up2.statusCode ?? 502;

            if (!bodyStarted && (status === 503 || status === 401 || status === 403)) {
              // Refused before any of the body was sent (busy, starting, draining; or our token is not accepted).
              abandonAfter(up2, (body) => {
                const detail = detailOf(body) ?? `HTTP ${status}`;
                if (status === 503) {
                  judge('release'); // overloaded or restarting is not failing
                  const ra = up2.headers['retry-after'];
                  retry({ kind: 'busy', reason: detail, retryAfter: Array.isArray(ra) ? ra[0] : ra });
                } else {
                  judge('failure');
                  up.markUnhealthy(`refused the gateway's token (HTTP ${status})`);
                  retry({ kind: 'refused', reason: `it refused the gateway's MODEL_SERVICE_TOKEN (HTTP ${status})` });
                }
              });
              return;
            }
            res.setHeader('X-Gateway-Upstream-Ms', String(upstreamMs));

            if (status === 413 || status === 503 || status === 401 || status === 403) {
              // Converted into the gateway's envelope; the model service's {detail} becomes the message.
              abandonAfter(up2, (body) => {
                const detail = detailOf(body);
                if (status === 413) {
                  judge('success');
                  fail('payload_too_large', detail ?? 'Upload larger than the endpoint allows.', 413);
                  done(413, false);
                } else if (status === 503) {
                  judge('release');
                  const retryAfter = up2.headers['retry-after'];
                  if (retryAfter) res.setHeader('Retry-After', retryAfter);
                  fail('upstream_unavailable', `The model service is unavailable${detail ? ` (${detail})` : ''}; retry shortly.`, 503);
                  done(503, false);
                } else {
                  judge('failure');
                  fail('upstream_unavailable', `The model service refused the gateway's MODEL_SERVICE_TOKEN (HTTP ${status}).`, 502);
                  done(502, false);
                }
              });
              return;
            }

            res.status(status);
            for (const [name, value] of Object.entries(up2.headers)) {
              if (value !== undefined && !RESPONSE_HEADERS_DROPPED.has(name)) res.setHeader(name, value);
            }
            res.setHeader('X-Request-Id', ctx.requestId);
            // A refusal (4xx) passes through unchanged; a copy of its small JSON body gives the request log its reason.
            const errorCopy: Buffer[] | null = status >= 400 && status < 500 ? [] : null;
            let copied = 0;
            upstreamIdle.arm();
            up2.on('data', (chunk: Buffer) => {
              if (abandoned) return;
              upstreamIdle.touch();
              ctx.bytesOut += chunk.length;
              if (errorCopy && copied < MAX_ERROR_BODY) {
                errorCopy.push(chunk);
                copied += chunk.length;
              }
              if (!res.write(chunk)) {
                // Held back by the client: its clock runs, not the replica's.
                up2.pause();
                upstreamIdle.disarm();
                clientRead.arm();
              }
            });
            res.on('drain', () => {
              if (abandoned) return;
              clientRead.disarm();
              upstreamIdle.arm();
              up2.resume();
            });
            up2.on('end', () => {
              if (abandoned) return;
              upstreamIdle.disarm();
              if (errorCopy) {
                const reason = errorBodyOf(Buffer.concat(errorCopy));
                if (reason.type && !ctx.errorType) ctx.errorType = reason.type;
                if (reason.detail) ctx.errorDetail = reason.detail;
              }
              judge(status >= 500 ? 'failure' : 'success');
              if (status < 500) up.markHealthy();
              // An early answer (e.g. 400 on a bad option) while the upload was still coming: stop it here.
              if (withBody && !req.readableEnded) {
                stopFeeding();
                upReq.destroy();
              }
              res.end();
            });
            // The model service died or hung up in the middle of the body.
            up2.on('close', () => {
              if (!up2.complete) failMidBody('upstream_unavailable', 502);
            });
            up2.on('error', () => failMidBody('upstream_unavailable', 502));
            res.once('finish', () => done(status, status >= 200 && status < 300));
          });

          /** Reads a short error body, then lets go of the replica's request. */
          const abandonAfter = (up2: http.IncomingMessage, then: (body: Buffer) => void): void => {
            stopFeeding();
            readSmall(up2, (body) => {
              if (settled) return;
              abandoned = true;
              stopClocks();
              upReq.destroy();
              then(body);
            });
          };
        });

      next();
    });

  return Object.assign(forward, {
    breaker: upstreams[0].breaker,
    baseUrl: upstreams[0].label,
    replicas: upstreams,
    upstreams: (): UpstreamState[] =>
      upstreams.map((u) => ({ upstream: u.label, ...u.breaker.snapshot(), healthy: u.healthy, inFlight: u.inFlight })),
    activeCalls: () => active.size,
    abortAll(retryAfterS: number): number {
      const calls = [...active];
      for (const c of calls) c.shutdown(retryAfterS);
      return calls.length;
    },
    close(): void {
      health.stop();
    },
  });
}
