// Policy 7 of 11, rate-limit: counts the call against its token's requests per minute (the workspace's plan) in a
// sliding window, shared across replicas when the limiter is Redis. Over the limit: 429 rate_limited with Retry-After.
// Sets RateLimit-Limit/-Remaining/-Reset either way. Runs after plan, before declared-body-size.
import type { Response } from 'express';
import type { RateLimiter, RateLimitState } from '../../shared-state/rate-limit';
import { reject, type AuthenticatedCall, type Policy } from '../call';

/** The RateLimit-* headers of a token's state (not once the response has started). */
export function setRateLimitHeaders(res: Response, state: RateLimitState): void {
  if (res.headersSent) return;
  res.setHeader('RateLimit-Limit', String(state.limit));
  res.setHeader('RateLimit-Remaining', String(state.remaining));
  res.setHeader('RateLimit-Reset', String(state.resetSeconds));
}

export interface RateLimitOptions {
  limiter: Pick<RateLimiter, 'hit'>;
  now: () => number;
}

export function rateLimitPolicy({ limiter, now }: RateLimitOptions): Policy<AuthenticatedCall> {
  return {
    name: 'rate-limit',
    async run(call) {
      const decision = await limiter.hit(call.token.id, call.limits.requestsPerMinute, now());
      setRateLimitHeaders(call.res, decision);
      if (decision.allowed) return 'continue';
      call.res.setHeader('Retry-After', String(decision.resetSeconds));
      return reject(call, 'rate_limited', `Rate limit of ${decision.limit} requests per minute reached; retry in ${decision.resetSeconds} s.`);
    },
  };
}
