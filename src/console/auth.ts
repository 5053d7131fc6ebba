// Console authentication: the admin secret, server-side sessions, CSRF tokens and a
// sign-in rate limiter. Nothing here is persisted except the admin secret's hash.
import crypto from 'node:crypto';
import type { Config } from '../config';
import type { GatewayStore } from '../store/types';

/** Settings key holding the scrypt hash of a generated admin secret. */
export const ADMIN_SECRET_SETTING = 'console.admin_secret_hash';

const SCRYPT_KEYLEN = 32;
const SCRYPT_PARAMS = { N: 16384, r: 8, p: 1 };

/** `scrypt$<salt b64url>$<hash b64url>`: a slow hash, since the secret guards the whole console. */
export function hashAdminSecret(secret: string): string {
  const salt = crypto.randomBytes(16);
  const hash = crypto.scryptSync(secret, salt, SCRYPT_KEYLEN, SCRYPT_PARAMS);
  return `scrypt$${salt.toString('base64url')}$${hash.toString('base64url')}`;
}

export function verifyAdminSecretHash(secret: string, stored: string): boolean {
  const [kind, saltB64, hashB64] = stored.split('$');
  if (kind !== 'scrypt' || !saltB64 || !hashB64) return false;
  const expected = Buffer.from(hashB64, 'base64url');
  const actual = crypto.scryptSync(secret, Buffer.from(saltB64, 'base64url'), expected.length, SCRYPT_PARAMS);
  return expected.length === actual.length && crypto.timingSafeEqual(expected, actual);
}

/** Compares two strings in time independent of where they differ (hashing first equalises lengths). */
export function constantTimeEqual(a: string, b: string): boolean {
  const ha = crypto.createHash('sha256').update(a, 'utf8').digest();
  const hb = crypto.createHash('sha256').update(b, 'utf8').digest();
  return crypto.timingSafeEqual(ha, hb) && a.length === b.length;
}

/**
 * Makes sure the console has an admin secret. With ADMIN_SECRET set nothing is stored.
 * Otherwise, on the very first start, a random secret is generated, only its hash is kept in
 * the store settings, and the clear secret is printed once through `log`.
 * Returns the generated secret (first start only) or null.
 */
export async function ensureAdminSecret(
  config: Config,
  store: GatewayStore,
  log: (line: string) => void = (line) => process.stdout.write(line + '\n'),
): Promise<string | null> {
  if (config.adminSecret) return null;
  if (await store.getSetting(ADMIN_SECRET_SETTING)) return null;
  const secret = crypto.randomBytes(24).toString('base64url');
  await store.setSetting(ADMIN_SECRET_SETTING, hashAdminSecret(secret));
  log(
    `[console] No ADMIN_SECRET set: generated a console admin secret (shown once, only its hash is stored):\n` +
      `[console]   ${secret}\n` +
      `[console] Sign in at /console. Set ADMIN_SECRET to choose your own.`,
  );
  return secret;
}

/** Checks a sign-in attempt against ADMIN_SECRET, else against the stored hash. */
export async function checkAdminSecret(config: Config, store: GatewayStore, attempt: string): Promise<boolean> {
  if (config.adminSecret) return constantTimeEqual(attempt, config.adminSecret);
  const stored = await store.getSetting(ADMIN_SECRET_SETTING);
  if (!stored) return false;
  return verifyAdminSecretHash(attempt, stored);
}

export interface PlaygroundKey {
  tokenId: string;
  token: string;
}

export interface ConsoleSession {
  csrfToken: string;
  createdAt: number;
  lastSeenAt: number;
  expiresAt: number;
  /** Clear playground tokens per workspace; held only here, never in the store. */
  playgroundKeys: Map<string, PlaygroundKey>;
}

export interface SessionOptions {
  /** Session ends after this long without a request. */
  idleTtlMs: number;
  /** Session ends after this long regardless of activity. */
  absoluteTtlMs: number;
}

/** In-memory sessions keyed by the sha256 of the cookie value (a leaked map does not leak cookies). */
export class SessionStore {
  private readonly sessions = new Map<string, ConsoleSession>();

  /** `onEnd` runs for sessions that time out (not for destroy(), whose caller handles it). */
  constructor(
    private readonly options: SessionOptions,
    private readonly onEnd: (session: ConsoleSession) => void = () => undefined,
  ) {}

  private isOver(s: ConsoleSession, now: number): boolean {
    return now >= s.expiresAt || now - s.lastSeenAt >= this.options.idleTtlMs;
  }

  private end(key: string, session: ConsoleSession): void {
    this.sessions.delete(key);
    this.onEnd(session);
  }

  private static key(sessionId: string): string {
    return crypto.createHash('sha256').update(sessionId).digest('hex');
  }

  create(now = Date.now()): { sessionId: string; session: ConsoleSession } {
    this.sweep(now);
    const sessionId = crypto.randomBytes(32).toString('base64url');
    const session: ConsoleSession = {
      csrfToken: crypto.randomBytes(32).toString('base64url'),
      createdAt: now,
      lastSeenAt: now,
      expiresAt: now + this.options.absoluteTtlMs,
      playgroundKeys: new Map(),
    };
    this.sessions.set(SessionStore.key(sessionId), session);
    return { sessionId, session };
  }

  /** The live session for a cookie value; refreshes its idle timer. */
  get(sessionId: string | undefined, now = Date.now()): ConsoleSession | null {
    if (!sessionId) return null;
    const key = SessionStore.key(sessionId);
    const session = this.sessions.get(key);
    if (!session) return null;
    if (this.isOver(session, now)) {
      this.end(key, session);
      return null;
    }
    session.lastSeenAt = now;
    return session;
  }

  destroy(sessionId: string): ConsoleSession | null {
    const key = SessionStore.key(sessionId);
    const session = this.sessions.get(key) ?? null;
    this.sessions.delete(key);
    return session;
  }

  /** When the session will end if it stays idle, as ms epoch. */
  endsAt(session: ConsoleSession): number {
    return Math.min(session.expiresAt, session.lastSeenAt + this.options.idleTtlMs);
  }

  /** Ends every timed-out session; runs at each sign-in and on a timer. */
  sweep(now = Date.now()): void {
    for (const [key, s] of this.sessions) {
      if (this.isOver(s, now)) this.end(key, s);
    }
  }
}

export interface LoginLimiterOptions {
  /** Failed attempts allowed per client IP within the window. */
  maxFailures: number;
  windowMs: number;
}

/** Fixed-window counter of failed sign-ins per client IP. */
export class LoginRateLimiter {
  private readonly failures = new Map<string, { count: number; windowStart: number }>();

  constructor(private readonly options: LoginLimiterOptions) {}

  /** Seconds the IP must wait, or 0 when it may try now. */
  retryAfterSeconds(ip: string, now = Date.now()): number {
    const entry = this.failures.get(ip);
    if (!entry) return 0;
    if (now - entry.windowStart >= this.options.windowMs) {
      this.failures.delete(ip);
      return 0;
    }
    if (entry.count < this.options.maxFailures) return 0;
    return Math.max(1, Math.ceil((entry.windowStart + this.options.windowMs - now) / 1000));
  }

  recordFailure(ip: string, now = Date.now()): void {
    const entry = this.failures.get(ip);
    if (!entry || now - entry.windowStart >= this.options.windowMs) {
      if (this.failures.size > 10_000) this.failures.clear(); // bound memory under a spray of IPs
      this.failures.set(ip, { count: 1, windowStart: now });
    } else {
      entry.count += 1;
    }
  }

  recordSuccess(ip: string): void {
    this.failures.delete(ip);
  }
}
