// The gateway's policy pipeline: one ordered list of small policies in front of the Forwarder.
import crypto from 'node:crypto';
import express, { type ErrorRequestHandler, type Request, type RequestHandler, type Response } from 'express';
import type { Config } from '../config';
import { loggerFromConfig, type Logger } from '../logging';
import type { CreditReservation, GatewayStore, PlanLimits, RequestLogEntry, TokenRecord, Workspace } from '../store/types';
import { hashToken, TOKEN_PATTERN } from '../store/tokens';
import { sendGatewayError, type GatewayErrorType } from '../http/errors';
import { clientIpOf, ipAllowed } from '../http/ip';
import { limitsFor, planAllowsService } from './plans';
import { addressKey, SlidingWindowRateLimiter, type RateLimitState, type RateLimiter } from '../shared-state/rate-limit';
import { matchRoute, ROUTES, scopesAllow, type RouteMatch } from './routes';
import type { CallObserver, EndpointSpec, Forwarder, GatewayContext } from './types';

export interface GatewayOptions {
  config: Config;
  store: GatewayStore;
  forward: Forwarder;
  /** Handlers for routes with a `target` (e.g. 'jobs'), called in place of `forward`. */
  targets?: Record<string, Forwarder>;
  /** Route table; defaults to ROUTES. */
  routes?: EndpointSpec[];
  /**
   * Per-token limits and the per-address limit of unauthenticated requests; defaults to an in-memory sliding
   * window (one process). Several replicas share a Redis one (src/shared-state/redis/rate-limiter.ts).
   */
  rateLimiter?: RateLimiter;
  /** Clock in ms; injectable for tests of window and month boundaries. */
  now?: () => number;
  /** Diagnostics (store failures, exceptions); defaults to a logger from the config. */
  logger?: Logger;
  /** Told about every finished /v1 call after its request-log row is written (structured log line, metrics). */
  observers?: CallObserver[];
}

/** Everything one call accumulates while passing the policies. */
interface Call {
  req: Request;
  res: Response;
  ctx: GatewayContext;
  match?: RouteMatch;
  token?: TokenRecord;
  workspace?: Workspace;
  limits?: PlanLimits;
  /** Credits held while the call is in flight: settled when the model service delivered, released otherwise. */
  reservation?: CreditReservation;
  /** Keeps the reservation from expiring while the call runs. */
  renewTimer?: NodeJS.Timeout;
  /** Credits held for the call before it was forwarded (whatever became of them). */
  heldCredits?: number;
  /** Not written to the request log (unauthenticated requests refused by the per-address limit). */
  unlogged?: boolean;
  /** When the response finished or the client went away. */
  endedAt?: number;
}

/** Retry-After of the 429 given while every remaining credit is held by calls still in flight. */
export const CREDITS_IN_FLIGHT_RETRY_AFTER_S = 2;

/** continue: next policy; handled: a response was produced; pass: not a gateway path, hand to the app. */
type PolicyResult = 'continue' | 'handled' | 'pass';

interface Policy {
  name: string;
  run?(call: Call): PolicyResult | Promise<PolicyResult>;
  /** Runs once when the response finishes or the client goes away. */
  onEnd?(call: Call, finished: boolean): void | Promise<void>;
}

/** Client-sent request ids are echoed only when they look like an id (no header/log injection). */
export const SAFE_REQUEST_ID = /^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$/;

function reject(call: Call, type: GatewayErrorType, message: string, status?: number): PolicyResult {
  call.ctx.errorType = type;
  sendGatewayError(call.res, type, message, status);
  return 'handled';
}

function setRateLimitHeaders(res: Response, state: RateLimitState): void {
  if (res.headersSent) return;
  res.setHeader('RateLimit-Limit', String(state.limit));
  res.setHeader('RateLimit-Remaining', String(state.remaining));
  res.setHeader('RateLimit-Reset', String(state.resetSeconds));
}

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

/**
 * The token from `Authorization: Bearer …` or `X-API-Key: …`; null when neither header is present,
 * '' when a header is present but carries no usable token (→ invalid_token).
 */
function presentedToken(req: Request): string | null {
  const auth = req.headers.authorization;
  const bearer = auth === undefined ? undefined : /^Bearer[ \t]+(.*)$/i.exec(auth.trim())?.[1]?.trim();
  if (bearer) return bearer;
  const key = req.headers['x-api-key'];
  const apiKey = (Array.isArray(key) ? key[0] : key)?.trim();
  if (apiKey) return apiKey;
  // An Authorization header of another scheme (e.g. Basic from a proxy) is not a token.
  return auth !== undefined || key !== undefined ? '' : null;
}

function clip(value: string | undefined | null, max = 100): string | null {
  if (value === undefined || value === null || value === '') return null;
  return value.length > max ? value.slice(0, max) : value;
}

export function createGateway({
  config,
  store,
  forward,
  targets = {},
  routes = ROUTES,
  rateLimiter,
  now = Date.now,
  logger = loggerFromConfig(config, 'gateway'),
  observers = [],
}: GatewayOptions): express.Router {
  const limiter = rateLimiter ?? new SlidingWindowRateLimiter();

  /**
   * Refuses a request that did not authenticate (404/405 on a /v1 path, 401). Each address gets
   * config.unauthenticatedRequestsPerMinute of those; beyond it the answer is 429 with Retry-After, and the
   * refusal is not written to the request log (junk traffic must not fill it).
   */
  async function refuseUnauthenticated(call: Call, type: GatewayErrorType, message: string): Promise<PolicyResult> {
    const perMinute = config.unauthenticatedRequestsPerMinute;
    if (perMinute > 0) {
      const decision = await limiter.hit(addressKey(call.ctx.clientIp), perMinute, now());
      if (!decision.allowed) {
        call.unlogged = true;
        call.res.setHeader('Retry-After', String(decision.resetSeconds));
        return reject(
          call,
          'rate_limited',
          `Too many unauthenticated requests from this address (${perMinute} per minute); retry in ${decision.resetSeconds} s.`,
        );
      }
    }
    return reject(call, type, message);
  }

  /** Ends the call's credit hold: charged when the model service delivered, given back otherwise. */
  async function endReservation(call: Call, delivered: boolean): Promise<boolean> {
    const reservation = call.reservation;
    if (!reservation) return false;
    call.reservation = undefined;
    clearInterval(call.renewTimer);
    try {
      if (delivered) {
        await store.settleReservation(reservation);
        call.ctx.creditsCharged = reservation.amount;
      } else {
        await store.releaseReservation(reservation);
      }
      return true;
    } catch (err) {
      // The hold stays until it expires and is reclaimed (the call then costs nothing); the response is already out.
      logger.error({ err, request_id: call.ctx.requestId }, `could not ${delivered ? 'settle' : 'release'} the credits of a call`);
      return false;
    }
  }
  // last_used is informational: write it at most every few seconds per token, not on every call.
  const lastTouched = new Map<string, number>();
  const TOUCH_INTERVAL_MS = 5_000;

  const policies: Policy[] = [
    {
      name: 'request-id',
      run(call) {
        call.ctx.requestId = assignRequestId(call.req, call.res);
        call.ctx.clientRequestId = call.res.locals.clientRequestId as string | undefined;
        return 'continue';
      },
    },
    {
      name: 'route',
      async run(call) {
        const match = matchRoute(call.req.method, call.req.path, routes);
        call.match = match;
        switch (match.kind) {
          case 'not_v1':
            return 'pass';
          case 'service_not_found':
            return refuseUnauthenticated(call, 'service_not_found', `Unknown service "${clip(match.service) ?? ''}". Paths are /v1/{service}/{endpoint}.`);
          case 'endpoint_not_found':
            return refuseUnauthenticated(call, 'endpoint_not_found', `Service "${match.service}" has no endpoint "${clip(match.endpoint) ?? ''}".`);
          case 'method_not_allowed':
            call.res.setHeader('Allow', match.allow.join(', '));
            return refuseUnauthenticated(
              call,
              'method_not_allowed',
              `${call.req.method} is not allowed on /v1/${match.service}/${match.endpoint}; use ${match.allow.join(' or ')}.`,
            );
          case 'ok':
            call.ctx.route = match.route;
            call.ctx.params = match.params;
            return 'continue';
        }
      },
    },
    {
      name: 'auth',
      async run(call) {
        const token = presentedToken(call.req);
        if (token === null) {
          return refuseUnauthenticated(call, 'missing_token', 'Send the access token as "Authorization: Bearer <token>" or "X-API-Key: <token>".');
        }
        const record = TOKEN_PATTERN.test(token) ? await store.findTokenByHash(hashToken(token)) : null;
        const workspace = record ? await store.getWorkspace(record.workspaceId) : null;
        if (!record || !workspace) return refuseUnauthenticated(call, 'invalid_token', 'The access token is not recognised.');
        call.ctx.tokenId = record.id;
        call.ctx.workspaceId = workspace.id;
        call.ctx.keyPrefix = record.prefix;
        if (record.revokedAt) return refuseUnauthenticated(call, 'key_revoked', 'This access token has been revoked.');
        const t = now();
        if (record.expiresAt && Date.parse(record.expiresAt) <= t) {
          return refuseUnauthenticated(call, 'key_expired', `This access token expired at ${record.expiresAt}.`);
        }
        call.token = record;
        call.workspace = workspace;
        call.limits = limitsFor(workspace);
        // From here on every response carries the token's rate-limit state.
        setRateLimitHeaders(call.res, await limiter.peek(record.id, call.limits.requestsPerMinute, t));
        if (t - (lastTouched.get(record.id) ?? 0) >= TOUCH_INTERVAL_MS) {
          lastTouched.set(record.id, t);
          // Informational only: a failed write must not fail the call.
          store.touchToken(record.id, new Date(t).toISOString()).catch((err: unknown) => {
            logger.error({ err, token_id: record.id }, 'could not record the last use of a token');
          });
        }
        return 'continue';
      },
    },
    {
      name: 'ip-allow-list',
      run(call) {
        if (ipAllowed(call.ctx.clientIp, call.token!.allowedIps)) return 'continue';
        return reject(call, 'ip_not_allowed', `This access token may not be used from ${call.ctx.clientIp}.`);
      },
    },
    {
      name: 'scope',
      run(call) {
        const route = call.ctx.route!;
        if (scopesAllow(call.token!.scopes, route)) return 'continue';
        return reject(call, 'scope_denied', `This access token lacks the scope "${route.scope}".`);
      },
    },
    {
      name: 'plan',
      run(call) {
        const route = call.ctx.route!;
        if (planAllowsService(call.workspace!, route.service)) return 'continue';
        return reject(call, 'plan_forbids_service', `The ${call.workspace!.plan} plan of this workspace does not include "${route.service}".`);
      },
    },
    {
      name: 'rate-limit',
      async run(call) {
        const decision = await limiter.hit(call.token!.id, call.limits!.requestsPerMinute, now());
        setRateLimitHeaders(call.res, decision);
        if (decision.allowed) return 'continue';
        call.res.setHeader('Retry-After', String(decision.resetSeconds));
        return reject(
          call,
          'rate_limited',
          `Rate limit of ${decision.limit} requests per minute reached; retry in ${decision.resetSeconds} s.`,
        );
      },
    },
    {
      // Cheap early 413 from the declared size; the forwarder still counts bytes while streaming.
      name: 'declared-body-size',
      run(call) {
        const route = call.ctx.route!;
        const declared = Number(call.req.headers['content-length']);
        if (route.maxBodyBytes > 0 && Number.isFinite(declared) && declared > route.maxBodyBytes) {
          return reject(call, 'payload_too_large', `Request body of ${declared} bytes exceeds the ${route.maxBodyBytes}-byte limit of this endpoint.`);
        }
        return 'continue';
      },
    },
    {
      // The call's credits are held (reserved) before it is forwarded, atomically across processes; they become
      // used only when the model service delivers (see 'forward'). 402 only when SETTLED usage leaves no room;
      // when holds of calls still in flight fill the rest, 429 with a short Retry-After (they may be given back).
      name: 'credits',
      async run(call) {
        const route = call.ctx.route!;
        if (route.credits <= 0) return 'continue';
        const ttlMs = config.creditReservationTtlMs;
        const when = new Date(now());
        const held = await store.reserveCredits(call.workspace!.id, route.credits, call.limits!.creditsPerMonth, when, ttlMs);
        if (!held.ok) {
          if (held.used + route.credits > held.limit) {
            return reject(
              call,
              'quota_exhausted',
              `The workspace has used ${held.used} of its ${held.limit} credits this month; credits renew on the 1st (UTC) or with a plan upgrade.`,
            );
          }
          call.res.setHeader('Retry-After', String(CREDITS_IN_FLIGHT_RETRY_AFTER_S));
          return reject(
            call,
            'rate_limited',
            `The workspace's remaining ${held.limit - held.used} credits are held by calls in flight; retry in ${CREDITS_IN_FLIGHT_RETRY_AFTER_S} s.`,
          );
        }
        const reservation = held.reservation!;
        call.reservation = reservation;
        call.heldCredits = reservation.amount;
        // Handlers that keep the credit past the response (a job, refunded if it later fails) need the amount and the
        // credit period the hold was taken in.
        call.ctx.creditsHeld = reservation.amount;
        call.ctx.chargedAt = when;
        call.ctx.settleCredits = () => endReservation(call, true);
        // A gateway that dies mid-call stops renewing: its hold expires and is reclaimed by the others.
        call.renewTimer = setInterval(() => {
          store.renewReservation(reservation, new Date(now() + ttlMs)).catch((err: unknown) => {
            logger.error({ err, request_id: call.ctx.requestId }, 'could not renew the credit hold of a call');
          });
        }, Math.max(250, Math.floor(ttlMs / 3)));
        call.renewTimer.unref();
        return 'continue';
      },
    },
    {
      name: 'forward',
      async run(call): Promise<PolicyResult> {
        // Refund rule: a call is paid for only when the model service did the work (outcome.ok).
        const route = call.ctx.route!;
        const handler = route.target === undefined ? forward : targets[route.target];
        if (!handler) {
          await endReservation(call, false);
          return reject(call, 'endpoint_not_found', `/v1/${route.service}/${route.endpoint} is not enabled on this server.`);
        }
        let outcome;
        try {
          outcome = await handler(call.req, call.res, call.ctx);
        } catch (err) {
          await endReservation(call, false);
          throw err;
        }
        // A batch whose every file failed delivered nothing: 200 with its manifest, but not charged.
        await endReservation(call, outcome.ok && !batchDeliveredNothing(call.res));
        if (call.ctx.upstreamMs === undefined && outcome.upstreamMs !== undefined) call.ctx.upstreamMs = outcome.upstreamMs;
        return 'handled';
      },
    },
    {
      name: 'request-log',
      async onEnd(call, finished) {
        const { ctx, req, res } = call;
        const match = call.match;
        const service = match && match.kind !== 'not_v1' ? clip(match.kind === 'ok' ? match.route.service : match.service) : null;
        const endpoint =
          match && match.kind !== 'not_v1' && match.kind !== 'service_not_found'
            ? clip(match.kind === 'ok' ? match.route.endpoint : match.endpoint)
            : null;
        const declaredOut = Number(res.getHeader('content-length'));
        const entry: RequestLogEntry = {
          requestId: ctx.requestId,
          clientRequestId: ctx.clientRequestId ?? null,
          time: new Date(ctx.startedAt).toISOString(),
          tokenId: ctx.tokenId ?? null,
          workspaceId: ctx.workspaceId ?? null,
          method: req.method,
          service,
          endpoint,
          // 499: the client went away before a response was sent.
          status: ctx.logStatus ?? (finished || res.headersSent ? res.statusCode : 499),
          errorType: ctx.errorType ?? (res.locals.errorType as string | undefined) ?? null,
          creditsCharged: ctx.creditsCharged,
          bytesIn: ctx.bytesIn,
          bytesOut: ctx.bytesOut || (Number.isFinite(declaredOut) ? declaredOut : 0),
          upstreamMs: ctx.upstreamMs ?? null,
          totalMs: Math.max(0, (call.endedAt ?? now()) - ctx.startedAt),
          clientIp: ctx.clientIp,
          errorMessage: clip(ctx.errorDetail ?? (res.locals.errorMessage as string | undefined), 500),
        };
        try {
          // Unauthenticated requests over the per-address limit get no row (junk must not fill the log); they
          // still reach the observers, so metrics count them.
          if (!call.unlogged) await store.logRequest(entry);
        } catch (err) {
          logger.error({ err, request_id: entry.requestId }, 'could not write the request log');
        }
        if (observers.length === 0) return;
        const result = reportedResult(res);
        const summary = {
          entry,
          route: match?.kind === 'ok' ? match.route : undefined,
          creditsReserved: call.heldCredits ?? 0,
          keyPrefix: ctx.keyPrefix ?? null,
          model: result.model,
          audioSeconds: result.audioSeconds,
        };
        for (const observe of observers) {
          try {
            observe(summary);
          } catch (err) {
            logger.error({ err, request_id: entry.requestId }, 'a request observer failed');
          }
        }
      },
    },
  ];

  const ending = policies.filter((p) => p.onEnd);

  const handler: RequestHandler = async (req, res, next) => {
    const ctx: GatewayContext = {
      requestId: '',
      startedAt: now(),
      clientIp: clientIpOf(req, config.trustProxy),
      creditsCharged: 0,
      bytesIn: 0,
      bytesOut: 0,
    };
    const call: Call = { req, res, ctx };
    res.locals.gateway = ctx;
    // Settles when the policies are done (after the forwarder's refund decision), so the log row
    // of an aborted call carries the final credits even though 'close' fired first.
    let pipelineSettled!: () => void;
    const pipelineDone = new Promise<void>((resolve) => (pipelineSettled = resolve));
    let armed = false;
    const arm = () => {
      // The end hooks run once, on 'finish' (response sent) or 'close' (client aborted).
      armed = true;
      let done = false;
      const end = (finished: boolean) => {
        if (done) return;
        done = true;
        call.endedAt = now();
        void pipelineDone.then(async () => {
          for (const p of ending) {
            try {
              await p.onEnd!(call, finished);
            } catch (err) {
              logger.error({ err, request_id: ctx.requestId, hook: p.name }, 'a gateway end hook failed');
            }
          }
        });
      };
      res.once('finish', () => end(true));
      res.once('close', () => end(res.writableFinished));
    };
    try {
      for (const policy of policies) {
        if (!policy.run) continue;
        const result = await policy.run(call);
        if (result === 'pass') return next();
        // Once the path is a /v1 path, every outcome (404s included) is a gateway call and is logged.
        if (!armed && policy.name === 'route') arm();
        if (result === 'handled') return;
      }
    } catch (err) {
      ctx.errorType = 'internal_error';
      next(err);
    } finally {
      // A hold still open here belongs to a call that failed before it was forwarded: nothing was delivered.
      await endReservation(call, false);
      pipelineSettled();
    }
  };

  const router = express.Router();
  router.use(handler);
  return router;
}

/**
 * Last error handler of the app: any exception becomes the 500 envelope with X-Request-Id
 * (413 for body-parser size errors). Mount after everything else.
 */
export function createGatewayErrorHandler(logger: Logger): ErrorRequestHandler {
  return (err, req, res, _next) => {
    const requestId = assignRequestId(req, res);
    const status = Number((err as { status?: number; statusCode?: number })?.status ?? (err as { statusCode?: number })?.statusCode);
    if ((err as { type?: string })?.type === 'entity.too.large' || status === 413) {
      sendGatewayError(res, 'payload_too_large', 'Request body exceeds the limit of this endpoint.');
      return;
    }
    logger.error({ err, request_id: requestId }, `${requestLabel(req)} failed`);
    sendGatewayError(res, 'internal_error', 'Internal server error.');
  };
}

/** The error handler with a JSON logger on stdout (see createGatewayErrorHandler to pass one). */
export const gatewayErrorHandler: ErrorRequestHandler = createGatewayErrorHandler(
  loggerFromConfig({ logFormat: 'json', logLevel: 'info' }, 'gateway'),
);

/** 404 for paths outside /v1 that nothing else handled (mount after the console and static routes). */
export const gatewayNotFoundHandler: RequestHandler = (req, res) => {
  assignRequestId(req, res);
  sendGatewayError(res, 'endpoint_not_found', `No route for ${req.method} ${req.path}. API paths are /v1/{service}/{endpoint}.`);
};

function requestLabel(req: Request): string {
  return `${req.method} ${req.originalUrl.split('?')[0]}`;
}

/** True when the answer is a batch summary (X-NS-Batch) with no file succeeded. */
function batchDeliveredNothing(res: Response): boolean {
  const raw = res.getHeader('x-ns-batch');
  if (typeof raw !== 'string') return false;
  try {
    return (JSON.parse(raw) as { succeeded?: unknown }).succeeded === 0;
  } catch {
    return false;
  }
}

/** Model and audio seconds from the model service's X-NS-Stats (/denoise) or X-NS-Batch (/denoise/batch) header. */
function reportedResult(res: Response): { model: string | null; audioSeconds: number | null } {
  for (const name of ['x-ns-stats', 'x-ns-batch']) {
    const raw = res.getHeader(name);
    if (typeof raw !== 'string') continue;
    try {
      const parsed = JSON.parse(raw) as { model?: unknown; duration_s?: unknown };
      return {
        model: typeof parsed.model === 'string' ? parsed.model : null,
        audioSeconds: typeof parsed.duration_s === 'number' && Number.isFinite(parsed.duration_s) ? parsed.duration_s : null,
      };
    } catch {
      // not JSON: nothing reported
    }
  }
  return { model: null, audioSeconds: null };
}
