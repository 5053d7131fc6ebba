// Public surface of the gateway module.
export { createGateway } from './gateway';
export type { GatewayOptions } from './gateway';
export { createGatewayErrorHandler, gatewayErrorHandler, gatewayNotFoundHandler } from './error-handlers';
export { assignRequestId, SAFE_REQUEST_ID } from './policies/request-id';
export { ROUTES, matchRoute, scopesAllow, knownScopes, MULTIPART_OVERHEAD_BYTES, DEFAULT_KEY_SCOPES } from './routes';
export { PLANS, limitsFor, planAllowsService } from './plans';
export { SlidingWindowRateLimiter, addressKey, RATE_WINDOW_MS } from '../shared-state/rate-limit';
export type { RateLimiter, RateLimitDecision, RateLimitState } from '../shared-state/rate-limit';
export { clientIpOf, ipAllowed, normalizeIp, parseIpRule } from '../http/ip';
export * from '../http/errors';
export * from './types';
