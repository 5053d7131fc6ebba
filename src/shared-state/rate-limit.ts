// Request rate limiting behind a small interface: the in-memory engine here (one process: the single box) and a
// Redis engine (src/shared-state/redis/rate-limiter.ts, several gateway replicas) implement the same sliding-window contract,
// and the same contract tests run against both.
//
// The window is a sliding log: a request is admitted when fewer than `limit` requests were admitted for the key in
// the 60 s before it. Unlike fixed windows aligned to the clock minute (which let 2 × limit through across a minute
// boundary), no 60-second span ever holds more than `limit` admitted requests.

export interface RateLimitState {
  limit: number;
  remaining: number;
  /**
   * Seconds until another request would be admitted once the budget is used up: until the oldest request still
   * counted leaves the window (the full window, 60, when nothing is counted). At least 1.
   */
  resetSeconds: number;
}

export interface RateLimitDecision extends RateLimitState {
  allowed: boolean;
}

/** Asynchronous so that a shared engine (Redis) implements the same contract as the in-memory default. */
export interface RateLimiter {
  /** Counts one request for `key` if it fits in the window. */
  hit(key: string, limit: number, now: number): Promise<RateLimitDecision>;
  /** Current state without counting a request. */
  peek(key: string, limit: number, now: number): Promise<RateLimitState>;
  /** Releases what the engine holds (connections, timers). */
  close?(): Promise<void>;
}

export const RATE_WINDOW_MS = 60_000;

/**
 * The decision both engines compute from the admission times still in the window (ascending, oldest first):
 * `count` of them, and `at(i)` giving the i-th oldest.
 */
export function decide(count: number, at: (i: number) => number, limit: number, now: number): RateLimitState {
  let resetAt = now + RATE_WINDOW_MS;
  if (count > 0) {
    // The request that must leave before one more fits: the oldest, or deeper when the limit was lowered meanwhile.
    const idx = count >= limit ? count - limit : 0;
    resetAt = at(Math.min(idx, count - 1)) + RATE_WINDOW_MS;
  }
  return {
    limit,
    remaining: Math.max(0, limit - count),
    resetSeconds: Math.max(1, Math.ceil((resetAt - now) / 1000)),
  };
}

/** Admission times of one key, ascending; `head` skips the expired ones until the array is compacted. */
interface Log {
  times: number[];
  head: number;
}

export interface MemoryRateLimiterOptions {
  /** Keys kept at most; beyond it the least recently used key is forgotten. */
  maxKeys?: number;
}

/** Sliding-window log kept in process memory, bounded in keys (LRU) and in entries per key (the key's limit). */
export class SlidingWindowRateLimiter implements RateLimiter {
  private readonly logs = new Map<string, Log>();
  private readonly maxKeys: number;
  private lastSweep = -Infinity;

  constructor(options: MemoryRateLimiterOptions = {}) {
    this.maxKeys = Math.max(1, options.maxKeys ?? 100_000);
  }

  async hit(key: string, limit: number, now: number): Promise<RateLimitDecision> {
    const log = this.logFor(key, now);
    let count = log.times.length - log.head;
    const allowed = count < limit;
    if (allowed) {
      // A clock that stepped back must not unsort the log.
      log.times.push(Math.max(now, log.times[log.times.length - 1] ?? now));
      count++;
    }
    return { allowed, ...decide(count, (i) => log.times[log.head + i], limit, now) };
  }

  async peek(key: string, limit: number, now: number): Promise<RateLimitState> {
    const log = this.logFor(key, now);
    return decide(log.times.length - log.head, (i) => log.times[log.head + i], limit, now);
  }

  async close(): Promise<void> {
    this.logs.clear();
  }

  /** Keys currently held (for tests and metrics). */
  get size(): number {
    return this.logs.size;
  }

  private logFor(key: string, now: number): Log {
    this.sweep(now);
    let log = this.logs.get(key);
    if (log) {
      this.logs.delete(key); // re-inserted below: Map order is least → most recently used
      this.prune(log, now);
    } else {
      log = { times: [], head: 0 };
      if (this.logs.size >= this.maxKeys) {
        const oldest = this.logs.keys().next().value;
        if (oldest !== undefined) this.logs.delete(oldest);
      }
    }
    this.logs.set(key, log);
    return log;
  }

  private prune(log: Log, now: number): void {
    const cutoff = now - RATE_WINDOW_MS;
    while (log.head < log.times.length && log.times[log.head] <= cutoff) log.head++;
    if (log.head > 32 && log.head * 2 > log.times.length) {
      log.times = log.times.slice(log.head);
      log.head = 0;
    }
  }

  /** Once per window: forget keys with nothing left in their window, so idle tokens and addresses do not pile up. */
  private sweep(now: number): void {
    if (now - this.lastSweep < RATE_WINDOW_MS) return;
    this.lastSweep = now;
    for (const [key, log] of this.logs) {
      this.prune(log, now);
      if (log.head >= log.times.length) this.logs.delete(key);
    }
  }
}

/**
 * The key the unauthenticated limit counts under: the address itself for IPv4, its /64 for IPv6 (one host is
 * commonly given a whole /64, so counting single IPv6 addresses would give it 2^64 budgets).
 */
export function addressKey(ip: string): string {
  if (!ip.includes(':')) return `ip:${ip}`;
  const [head, tail = ''] = ip.split('::');
  const left = head ? head.split(':') : [];
  const right = tail ? tail.split(':') : [];
  const groups = ip.includes('::') ? [...left, ...Array(Math.max(0, 8 - left.length - right.length)).fill('0'), ...right] : left;
  const prefix = groups.slice(0, 4).map((g) => (parseInt(g, 16) || 0).toString(16));
  return `ip6:${prefix.join(':')}::/64`;
}
