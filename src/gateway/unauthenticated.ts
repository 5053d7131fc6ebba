// The refusal of a request that did not authenticate (404/405 on a /v1 path, 401), shared by the route and
// authentication policies. Each client address gets a budget of those per minute; beyond it the answer is 429 with
// Retry-After, and the refusal is not written to the request log (junk traffic must not fill it).
import type { GatewayErrorType } from '../http/errors';
import { addressKey, type RateLimiter } from '../shared-state/rate-limit';
import { reject, type Call } from './call';

export type RefuseUnauthenticated = (call: Call, type: GatewayErrorType, message: string) => Promise<'handled'>;

export interface UnauthenticatedOptions {
  limiter: Pick<RateLimiter, 'hit'>;
  /** Refusals per address per minute (config.unauthenticatedRequestsPerMinute); 0 turns the limit off. */
  perMinute: number;
  now: () => number;
}

export function unauthenticatedRefusal({ limiter, perMinute, now }: UnauthenticatedOptions): RefuseUnauthenticated {
  return async (call, type, message) => {
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
  };
}
