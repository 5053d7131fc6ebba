// Console sessions and the sign-in limiter: the contracts (SessionStore, LoginLimiter) and their in-memory engines
// (the single box). The Redis engines (redis/console-state.ts) implement the same contracts for several replicas; one
// contract suite covers both (test/integration/shared-state-contract.test.ts).
import crypto from 'node:crypto';

export interface PlaygroundKey {
  tokenId: string;
  token: string;
}

export interface ConsoleSession {
  csrfToken: string;
  createdAt: number;
  lastSeenAt: number;
  expiresAt: number;
  /** Clear playground tokens per workspace; held only in the session engine, never in the store. */
  playgroundKeys: Map<string, PlaygroundKey>;
}

export interface SessionOptions {
  /** Session ends after this long without a request. */
  idleTtlMs: number;
  /** Session ends after this long regardless of activity. */
  absoluteTtlMs: number;
}

/**
 * Server-side console sessions, keyed by the sha256 of the cookie value (a leaked table does not leak cookies).
 * A session ends when idle for idleTtlMs or absoluteTtlMs after sign-in; each engine ends it exactly once and hands
 * it to the onEnd handler (the console revokes its playground keys there), whether it was found over by get() or
 * by sweep(). destroy() (sign-out) returns the session instead, for the caller to handle.
 */
export interface SessionStore {
  create(now?: number): Promise<{ sessionId: string; session: ConsoleSession }>;
  /** The live session for a cookie value; refreshes its idle timer. */
  get(sessionId: string | undefined, now?: number): Promise<ConsoleSession | null>;
  destroy(sessionId: string): Promise<ConsoleSession | null>;
  /** Sets (or with null removes) the playground key a session holds for a workspace. */
  setPlaygroundKey(sessionId: string, workspaceId: string, key: PlaygroundKey | null): Promise<void>;
  /** Ends every timed-out session; the console runs it on a timer. */
  sweep(now?: number): Promise<void>;
  /** Who is told about sessions that time out. */
  onEnd(handler: (session: ConsoleSession) => void): void;
  close?(): Promise<void>;
}

/** When the session will end if it stays idle, as ms epoch. */
export function sessionEndsAt(session: ConsoleSession, options: SessionOptions): number {
  return Math.min(session.expiresAt, session.lastSeenAt + options.idleTtlMs);
}

export function sessionIsOver(session: ConsoleSession, options: SessionOptions, now: number): boolean {
  return now >= session.expiresAt || now - session.lastSeenAt >= options.idleTtlMs;
}

export function sessionKey(sessionId: string): string {
  return crypto.createHash('sha256').update(sessionId).digest('hex');
}

export function newSession(now: number, options: SessionOptions): { sessionId: string; session: ConsoleSession } {
  return {
    sessionId: crypto.randomBytes(32).toString('base64url'),
    session: {
      csrfToken: crypto.randomBytes(32).toString('base64url'),
      createdAt: now,
      lastSeenAt: now,
      expiresAt: now + options.absoluteTtlMs,
      playgroundKeys: new Map(),
    },
  };
}

/** Sessions in process memory (the single box). */
export class MemorySessionStore implements SessionStore {
  private readonly sessions = new Map<string, ConsoleSession>();
  private endHandler: (session: ConsoleSession) => void = () => undefined;

  constructor(private readonly options: SessionOptions) {}

  onEnd(handler: (session: ConsoleSession) => void): void {
    this.endHandler = handler;
  }

  private end(key: string, session: ConsoleSession): void {
    this.sessions.delete(key);
    this.endHandler(session);
  }

  async create(now = Date.now()): Promise<{ sessionId: string; session: ConsoleSession }> {
    await this.sweep(now);
    const created = newSession(now, this.options);
    this.sessions.set(sessionKey(created.sessionId), created.session);
    return created;
  }

  async get(sessionId: string | undefined, now = Date.now()): Promise<ConsoleSession | null> {
    if (!sessionId) return null;
    const key = sessionKey(sessionId);
    const session = this.sessions.get(key);
    if (!session) return null;
    if (sessionIsOver(session, this.options, now)) {
      this.end(key, session);
      return null;
    }
    session.lastSeenAt = now;
    return session;
  }

  async destroy(sessionId: string): Promise<ConsoleSession | null> {
    const key = sessionKey(sessionId);
    const session = this.sessions.get(key) ?? null;
    this.sessions.delete(key);
    return session;
  }

  async setPlaygroundKey(sessionId: string, workspaceId: string, key: PlaygroundKey | null): Promise<void> {
    const session = this.sessions.get(sessionKey(sessionId));
    if (!session) return;
    if (key) session.playgroundKeys.set(workspaceId, key);
    else session.playgroundKeys.delete(workspaceId);
  }

  async sweep(now = Date.now()): Promise<void> {
    for (const [key, s] of this.sessions) {
      if (sessionIsOver(s, this.options, now)) this.end(key, s);
    }
  }
}

export interface LoginLimiterOptions {
  /** Failed attempts allowed per client IP within the window. */
  maxFailures: number;
  /** The window starts at an address's first failure. */
  windowMs: number;
}

/** Counts failed sign-ins per client address; after maxFailures within windowMs the address waits. */
export interface LoginLimiter {
  /** Seconds the address must wait, or 0 when it may try now. */
  retryAfterSeconds(ip: string, now?: number): Promise<number>;
  recordFailure(ip: string, now?: number): Promise<void>;
  recordSuccess(ip: string): Promise<void>;
  close?(): Promise<void>;
}

/**
 * The in-memory sign-in limiter. Bounded: beyond maxEntries addresses, expired windows are dropped first and then
 * the least recently used address is forgotten, one at a time. An address that keeps trying stays the most
 * recently used, so spraying other addresses cannot unlock it (the old table was emptied at 10,001 addresses).
 */
export class MemoryLoginLimiter implements LoginLimiter {
  private readonly failures = new Map<string, { count: number; windowStart: number }>();
  private readonly maxEntries: number;

  constructor(private readonly options: LoginLimiterOptions & { maxEntries?: number }) {
    this.maxEntries = Math.max(1, options.maxEntries ?? 10_000);
  }

  /** Addresses currently held (for tests and metrics). */
  get size(): number {
    return this.failures.size;
  }

  private expired(entry: { windowStart: number }, now: number): boolean {
    return now - entry.windowStart >= this.options.windowMs;
  }

  /** Reads an entry and marks it most recently used (Map order is least → most recent). */
  private touch(ip: string, now: number): { count: number; windowStart: number } | undefined {
    const entry = this.failures.get(ip);
    if (!entry) return undefined;
    this.failures.delete(ip);
    if (this.expired(entry, now)) return undefined;
    this.failures.set(ip, entry);
    return entry;
  }

  async retryAfterSeconds(ip: string, now = Date.now()): Promise<number> {
    const entry = this.touch(ip, now);
    if (!entry || entry.count < this.options.maxFailures) return 0;
    return Math.max(1, Math.ceil((entry.windowStart + this.options.windowMs - now) / 1000));
  }

  async recordFailure(ip: string, now = Date.now()): Promise<void> {
    const entry = this.touch(ip, now);
    if (entry) {
      entry.count += 1;
      return;
    }
    if (this.failures.size >= this.maxEntries) {
      for (const [key, e] of this.failures) if (this.expired(e, now)) this.failures.delete(key);
      while (this.failures.size >= this.maxEntries) {
        const lru = this.failures.keys().next().value;
        if (lru === undefined) break;
        this.failures.delete(lru);
      }
    }
    this.failures.set(ip, { count: 1, windowStart: now });
  }

  async recordSuccess(ip: string): Promise<void> {
    this.failures.delete(ip);
  }
}

/** Builds the session store and sign-in limiter the console uses; the memory engines unless told otherwise. */
export interface ConsoleStateEngines {
  sessions(options: SessionOptions): SessionStore;
  loginLimiter(options: LoginLimiterOptions): LoginLimiter;
}

export const memoryConsoleState: ConsoleStateEngines = {
  sessions: (options) => new MemorySessionStore(options),
  loginLimiter: (options) => new MemoryLoginLimiter(options),
};
