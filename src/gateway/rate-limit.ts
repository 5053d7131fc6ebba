// Per-token request rate limiting behind a small interface, so a shared implementation
// (Redis, ...) can replace the in-memory one when several gateway processes run.

export interface RateLimitState {
  limit: number;
  remaining: number;
  /** Seconds until the current window resets (at least 1). */
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
}

const WINDOW_MS = 60_000;

/** Fixed one-minute windows aligned to the clock minute, kept in process memory. */
export class FixedWindowRateLimiter implements RateLimiter {
  private readonly windows = new Map<string, { start: number; count: number }>();
  private lastSweep = 0;

  async hit(key: string, limit: number, now: number): Promise<RateLimitDecision> {
    const window = this.windowFor(key, now);
    const allowed = window.count < limit;
    if (allowed) window.count++;
    return { allowed, ...this.stateOf(window, limit, now) };
  }

  async peek(key: string, limit: number, now: number): Promise<RateLimitState> {
    return this.stateOf(this.windowFor(key, now), limit, now);
  }

  private windowFor(key: string, now: number): { start: number; count: number } {
    const start = now - (now % WINDOW_MS);
    this.sweep(start);
    let window = this.windows.get(key);
    if (!window || window.start !== start) {
      window = { start, count: 0 };
      this.windows.set(key, window);
    }
    return window;
  }

  private stateOf(window: { start: number; count: number }, limit: number, now: number): RateLimitState {
    return {
      limit,
      remaining: Math.max(0, limit - window.count),
      resetSeconds: Math.max(1, Math.ceil((window.start + WINDOW_MS - now) / 1000)),
    };
  }

  /** Drops finished windows once per minute so idle tokens do not accumulate. */
  private sweep(currentStart: number): void {
    if (currentStart === this.lastSweep) return;
    this.lastSweep = currentStart;
    for (const [key, w] of this.windows) if (w.start < currentStart) this.windows.delete(key);
  }
}
