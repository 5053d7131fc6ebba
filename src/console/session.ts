// The console's sign-in state over HTTP: the session cookie (read and write), the session lookup, and the checks
// in front of /console/api: cross-site requests refused, then a live session and, for state-changing calls, the
// CSRF header. The sessions themselves live in shared state (src/shared-state/sessions.ts): memory or Redis.
import type { Request, RequestHandler, Response } from 'express';
import type { TrustProxySetting } from '../config/trust-proxy';
import { fromTrustedProxy } from '../http/ip';
import { sessionEndsAt, type ConsoleSession, type PlaygroundKey, type SessionOptions, type SessionStore } from '../shared-state/sessions';
import { constantTimeEqual } from './auth';
import { sendError } from './respond';

export const SESSION_COOKIE = 'ns_console_session';
export const CSRF_HEADER = 'x-csrf-token';

/** A Cookie header as name → value; the first of repeated names wins, a value that does not decode is kept as sent. */
export function parseCookies(header: string | undefined): Record<string, string> {
  const out: Record<string, string> = {};
  if (!header) return out;
  for (const part of header.split(';')) {
    const eq = part.indexOf('=');
    if (eq < 0) continue;
    const name = part.slice(0, eq).trim();
    const value = part.slice(eq + 1).trim();
    if (name && !(name in out)) {
      try {
        out[name] = decodeURIComponent(value);
      } catch {
        out[name] = value;
      }
    }
  }
  return out;
}

/** The session cookie's value, if the browser sent one. */
export function cookieSessionId(req: Request): string | undefined {
  return parseCookies(req.headers.cookie)[SESSION_COOKIE];
}

export interface ConsoleSessionDeps {
  /** Whose X-Forwarded-Proto is believed when deciding on the cookie's Secure flag. */
  trustProxy: TrustProxySetting;
  /** The session engine (memory or Redis), already made for these options. */
  sessions: SessionStore;
  options: SessionOptions;
  /** Revokes one playground key (unless another session now holds its current secret); used when its session ends. */
  revokePlaygroundKey(key: PlaygroundKey): Promise<unknown>;
  /** Aborted when the app closes: the periodic sweep stops (the session engine it calls is closing too). */
  signal?: AbortSignal;
}

/** What the console's routes use of the sign-in state. */
export interface ConsoleSessions {
  readonly store: SessionStore;
  /** Sets the session cookie, scoped to where the console is mounted; value '' with 0 ms clears it. */
  setCookie(req: Request, res: Response, value: string, maxAgeMs: number): void;
  /** Ends a session (sign-out, or an older one at sign-in) and revokes its playground keys. */
  end(sessionId: string | undefined): Promise<void>;
  /** When the session ends if it stays idle, as the API reports it. */
  endsAtIso(session: ConsoleSession): string;
  /** Refuses requests the browser marks as cross-site. */
  refuseCrossSite: RequestHandler;
  /** Needs a live session; state-changing methods also need its CSRF token in the x-csrf-token header. */
  requireSession: RequestHandler;
}

/** The signed-in session of a request that passed requireSession. */
export function signedIn(res: Response): { sessionId: string; session: ConsoleSession } {
  return { sessionId: res.locals.consoleSessionId as string, session: res.locals.consoleSession as ConsoleSession };
}

const stateChanging = (req: Request): boolean => !['GET', 'HEAD', 'OPTIONS'].includes(req.method);

export function consoleSessions(deps: ConsoleSessionDeps): ConsoleSessions {
  const { sessions, options, trustProxy } = deps;

  const isHttps = (req: Request): boolean =>
    req.secure ||
    (fromTrustedProxy(req, trustProxy) &&
      String(req.headers['x-forwarded-proto'] ?? '').split(',').pop()!.trim() === 'https');

  // Revokes the playground keys a session created: they are useless once their clear token is gone.
  const dropPlaygroundKeys = (session: ConsoleSession): void => {
    for (const key of session.playgroundKeys.values()) {
      deps.revokePlaygroundKey(key).catch(() => undefined); // already gone, or the store is closing
    }
    session.playgroundKeys.clear();
  };

  // A timed-out session's playground keys are revoked too, not left valid until their expiry.
  sessions.onEnd(dropPlaygroundKeys);
  const sweeper = setInterval(() => {
    sessions.sweep().catch((err: unknown) => console.error('[console] session sweep failed:', (err as Error).message));
  }, Math.max(1000, Math.min(options.idleTtlMs, 60_000)));
  sweeper.unref();
  deps.signal?.addEventListener('abort', () => clearInterval(sweeper), { once: true });

  return {
    store: sessions,

    setCookie(req, res, value, maxAgeMs) {
      const attrs = [
        `${SESSION_COOKIE}=${value}`,
        `Path=${req.baseUrl || '/'}`,
        'HttpOnly',
        'SameSite=Strict',
        `Max-Age=${Math.max(0, Math.floor(maxAgeMs / 1000))}`,
      ];
      if (isHttps(req)) attrs.push('Secure');
      res.append('Set-Cookie', attrs.join('; '));
    },

    async end(sessionId) {
      if (!sessionId) return;
      const session = await sessions.destroy(sessionId);
      if (session) dropPlaygroundKeys(session);
    },

    endsAtIso: (session) => new Date(sessionEndsAt(session, options)).toISOString(),

    // Cross-site requests never reach the API (belt and braces on top of SameSite=Strict + CSRF).
    refuseCrossSite(req, res, next) {
      const site = req.headers['sec-fetch-site'];
      if (site === 'cross-site') {
        sendError(res, 403, 'csrf_failed', 'cross-site request refused');
        return;
      }
      next();
    },

    requireSession(req, res, next) {
      const sessionId = cookieSessionId(req);
      sessions.get(sessionId).then((session) => {
        if (!session) {
          sendError(res, 401, 'not_signed_in', 'sign in first');
          return;
        }
        if (stateChanging(req)) {
          const sent = req.headers[CSRF_HEADER];
          if (typeof sent !== 'string' || !constantTimeEqual(sent, session.csrfToken)) {
            sendError(res, 403, 'csrf_failed', 'missing or wrong CSRF token');
            return;
          }
        }
        res.locals.consoleSession = session;
        res.locals.consoleSessionId = sessionId;
        next();
      }, next);
    },
  };
}
