// Signing in and out of the console: GET /session (am I signed in?), POST /login (admin secret → session cookie
// and CSRF token, limited per client address) and POST /logout. The cookie and the checks are in ../session.ts.
import type express from 'express';
import type { TrustProxySetting } from '../../config/trust-proxy';
import { clientIpOf } from '../../http/ip';
import type { LoginLimiter } from '../../shared-state/sessions';
import { handle, sendError } from '../respond';
import { cookieSessionId, type ConsoleSessions } from '../session';

export interface SignInDeps {
  trustProxy: TrustProxySetting;
  auth: ConsoleSessions;
  loginLimiter: LoginLimiter;
  /** Checks a sign-in attempt against the admin secret. */
  checkSecret(attempt: string): Promise<boolean>;
  /** How long a session may last at most (the cookie's Max-Age). */
  absoluteTtlMs: number;
}

/** GET /session and POST /login: in front of the session check, since they are how a browser gets a session. */
export function registerSignIn(api: express.Router, deps: SignInDeps): void {
  const { auth, loginLimiter } = deps;
  const sessions = auth.store;

  api.get(
    '/session',
    handle(async (req, res) => {
      const session = await sessions.get(cookieSessionId(req));
      if (!session) {
        res.json({ signed_in: false });
        return;
      }
      res.json({ signed_in: true, csrf_token: session.csrfToken, expires_at: auth.endsAtIso(session) });
    }),
  );

  api.post(
    '/login',
    handle(async (req, res) => {
      // JSON only: a cross-site HTML form cannot send application/json without a CORS preflight.
      if (!req.is('application/json')) {
        sendError(res, 415, 'unsupported_media_type', 'send JSON');
        return;
      }
      // The same client address as the gateway and the request log (right-most untrusted X-Forwarded-For entry),
      // so rotating client-written entries buys no fresh attempts.
      const ip = clientIpOf(req, deps.trustProxy);
      const wait = await loginLimiter.retryAfterSeconds(ip);
      if (wait > 0) {
        res.setHeader('Retry-After', String(wait));
        sendError(res, 429, 'too_many_attempts', `too many failed sign-ins; try again in ${wait} s`);
        return;
      }
      const secret = typeof req.body?.secret === 'string' ? req.body.secret : '';
      if (!secret || secret.length > 1024 || !(await deps.checkSecret(secret))) {
        await loginLimiter.recordFailure(ip);
        sendError(res, 401, 'invalid_secret', 'wrong admin secret');
        return;
      }
      await loginLimiter.recordSuccess(ip);
      // A fresh session id on every sign-in (no fixation); an older session from this browser ends.
      await auth.end(cookieSessionId(req));
      const { sessionId, session } = await sessions.create();
      auth.setCookie(req, res, sessionId, deps.absoluteTtlMs);
      res.json({ signed_in: true, csrf_token: session.csrfToken, expires_at: auth.endsAtIso(session) });
    }),
  );
}

/** POST /logout: behind the session check, so it needs the CSRF token like every other write. */
export function registerSignOut(api: express.Router, auth: ConsoleSessions): void {
  api.post(
    '/logout',
    handle(async (req, res) => {
      await auth.end(cookieSessionId(req));
      auth.setCookie(req, res, '', 0);
      res.json({ signed_in: false });
    }),
  );
}
