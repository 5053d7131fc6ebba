// The gateway: the order of its policies in front of the Forwarder, one file each under policies/ (what each
// enforces is in its header), run by pipeline.ts. This file only wires them to the store, limiter, clock and config.
import express from 'express';
import type { Config } from '../config';
import { clientIpOf } from '../http/ip';
import { loggerFromConfig, type Logger } from '../logging';
import { SlidingWindowRateLimiter, type RateLimiter } from '../shared-state/rate-limit';
import type { GatewayStore } from '../store/gateway/types';
import type { Call } from './call';
import { Pipeline } from './pipeline';
import { authenticationPolicy, type TicketRedeemer } from './policies/authentication';
import { creditsPolicy } from './policies/credits';
import { declaredBodySizePolicy } from './policies/declared-body-size';
import { forwardPolicy } from './policies/forward';
import { ipAllowListPolicy } from './policies/ip-allow-list';
import { planPolicy } from './policies/plan';
import { rateLimitPolicy } from './policies/rate-limit';
import { requestIdPolicy } from './policies/request-id';
import { requestLogPolicy } from './policies/request-log';
import { routePolicy } from './policies/route';
import { scopePolicy } from './policies/scope';
import { ROUTES } from './routes';
import type { CallObserver, EndpointSpec, Forwarder, GatewayContext } from './types';
import { unauthenticatedRefusal } from './unauthenticated';

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
  /** Single-use tickets standing for a key (`?ticket=` on routes with ticketAuth: browsers' WebSockets). */
  tickets?: TicketRedeemer;
}

export function createGateway({
  config,
  store,
  forward,
  targets = {},
  routes = ROUTES,
  rateLimiter,
  now = Date.now,
  tickets,
  logger = loggerFromConfig(config, 'gateway'),
  observers = [],
}: GatewayOptions): express.Router {
  const limiter = rateLimiter ?? new SlidingWindowRateLimiter();
  const refuse = unauthenticatedRefusal({ limiter, perMinute: config.unauthenticatedRequestsPerMinute, now });

  const pipeline = Pipeline.start()
    .use(requestIdPolicy())
    // Once the path is a /v1 path, every outcome (404s included) is a gateway call and is logged.
    .narrow(routePolicy({ routes, refuse }), { armsEndHooks: true })
    .narrow(authenticationPolicy({ store, limiter, refuse, now, logger, tickets }))
    .use(ipAllowListPolicy())
    .use(scopePolicy())
    .use(planPolicy())
    .use(rateLimitPolicy({ limiter, now }))
    .use(declaredBodySizePolicy())
    .use(creditsPolicy({ store, ttlMs: config.creditReservationTtlMs, now, logger }))
    .use(forwardPolicy({ forward, targets }))
    .onEnd(requestLogPolicy({ store, observers, now, logger }));

  const begin = (req: express.Request, res: express.Response): Call => {
    const ctx: GatewayContext = {
      requestId: '',
      startedAt: now(),
      clientIp: clientIpOf(req, config.trustProxy),
      creditsCharged: 0,
      bytesIn: 0,
      bytesOut: 0,
    };
    res.locals.gateway = ctx;
    return { req, res, ctx };
  };

  const router = express.Router();
  router.use(pipeline.handler({ begin, now, logger }));
  return router;
}
