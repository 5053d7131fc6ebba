// Policy 3 of 11, authentication: the token from `Authorization: Bearer …` or `X-API-Key: …` (or, on routes marked
// ticketAuth, a single-use `?ticket=` standing for a key: browsers cannot set WebSocket headers) must be known, not
// revoked and not expired, and its workspace must exist (401 missing_token / invalid_token / key_revoked /
// key_expired, refused as unauthenticated requests). Narrows the call to an AuthenticatedCall carrying the token,
// workspace and plan limits; sets the RateLimit-* headers from here on and records the token's last use. Runs after
// route, before ip-allow-list.
import type { Logger } from '../../logging';
import type { RateLimiter } from '../../shared-state/rate-limit';
import { hashToken, TOKEN_PATTERN } from '../../store/gateway/tokens';
import type { GatewayStore } from '../../store/gateway/types';
import type { AuthenticatedCall, Gate, RoutedCall } from '../call';
import { limitsFor } from '../plans';
import type { RefuseUnauthenticated } from '../unauthenticated';
import { setRateLimitHeaders } from './rate-limit';

/** last_used is informational: written at most this often per token, not on every call. */
export const TOUCH_INTERVAL_MS = 5_000;

/**
 * The token from `Authorization: Bearer …` or `X-API-Key: …`; null when neither header is present,
 * '' when a header is present but carries no usable token (→ invalid_token).
 */
function presentedToken(call: RoutedCall): string | null {
  const { headers } = call.req;
  const auth = headers.authorization;
  const bearer = auth === undefined ? undefined : /^Bearer[ \t]+(.*)$/i.exec(auth.trim())?.[1]?.trim();
  if (bearer) return bearer;
  const key = headers['x-api-key'];
  const apiKey = (Array.isArray(key) ? key[0] : key)?.trim();
  if (apiKey) return apiKey;
  // An Authorization header of another scheme (e.g. Basic from a proxy) is not a token.
  return auth !== undefined || key !== undefined ? '' : null;
}

/** Redeems a ticket once: the id of the key it stands for, or null (unknown, used or expired). Shared state: async. */
export interface TicketRedeemer {
  redeem(ticket: string): Promise<string | null> | string | null;
}

export interface AuthenticationOptions {
  store: Pick<GatewayStore, 'findTokenByHash' | 'getToken' | 'getWorkspace' | 'touchToken'>;
  /** Read (not counted) for the RateLimit-* headers. */
  limiter: Pick<RateLimiter, 'peek'>;
  refuse: RefuseUnauthenticated;
  now: () => number;
  logger: Logger;
  tickets?: TicketRedeemer;
}

export function authenticationPolicy({ store, limiter, refuse, now, logger, tickets }: AuthenticationOptions): Gate<RoutedCall, AuthenticatedCall> {
  const lastTouched = new Map<string, number>();
  return {
    name: 'authentication',
    async run(call) {
      const token = presentedToken(call);
      const ticket = call.route.ticketAuth && typeof call.req.query.ticket === 'string' ? call.req.query.ticket : null;
      if (token === null && ticket === null) {
        return refuse(call, 'missing_token', 'Send the access token as "Authorization: Bearer <token>" or "X-API-Key: <token>".');
      }
      let record;
      if (token === null) {
        const tokenId = (await tickets?.redeem(ticket!)) ?? null;
        if (tokenId === null) return refuse(call, 'invalid_token', 'The ticket is not recognised, was used already or expired (tickets last 60 s, once).');
        record = await store.getToken(tokenId);
      } else {
        record = TOKEN_PATTERN.test(token) ? await store.findTokenByHash(hashToken(token)) : null;
      }
      const workspace = record ? await store.getWorkspace(record.workspaceId) : null;
      if (!record || !workspace) return refuse(call, 'invalid_token', 'The access token is not recognised.');
      call.ctx.tokenId = record.id;
      call.ctx.workspaceId = workspace.id;
      call.ctx.keyPrefix = record.prefix;
      if (record.revokedAt) return refuse(call, 'key_revoked', 'This access token has been revoked.');
      const t = now();
      if (record.expiresAt && Date.parse(record.expiresAt) <= t) {
        return refuse(call, 'key_expired', `This access token expired at ${record.expiresAt}.`);
      }
      const authenticated = Object.assign(call, { token: record, workspace, limits: limitsFor(workspace) });
      // From here on every response carries the token's rate-limit state.
      setRateLimitHeaders(call.res, await limiter.peek(record.id, authenticated.limits.requestsPerMinute, t));
      if (t - (lastTouched.get(record.id) ?? 0) >= TOUCH_INTERVAL_MS) {
        lastTouched.set(record.id, t);
        // Informational only: a failed write must not fail the call.
        store.touchToken(record.id, new Date(t).toISOString()).catch((err: unknown) => {
          logger.error({ err, token_id: record.id }, 'could not record the last use of a token');
        });
      }
      return authenticated;
    },
  };
}
