// Circuit breaker for the model service: closed → (threshold consecutive failures) → open → (cool-down) →
// half-open: exactly one trial call; its success closes the circuit, its failure opens it again.

export type BreakerState = 'closed' | 'open' | 'half-open';

export interface BreakerOptions {
  threshold: number;
  cooldownMs: number;
  now?: () => number;
}

export type Admission = { allowed: true; trial: boolean } | { allowed: false; retryAfterMs: number };

export class CircuitBreaker {
  private state: BreakerState = 'closed';
  private failures = 0;
  private openedAt = 0;
  private trialInFlight = false;
  private readonly now: () => number;

  constructor(private readonly opts: BreakerOptions) {
    this.now = opts.now ?? Date.now;
  }

  /** Asks to make a call. A granted call must end with exactly one of success(), failure() or release(). */
  admit(): Admission {
    if (this.state === 'open') {
      const waited = this.now() - this.openedAt;
      if (waited < this.opts.cooldownMs) return { allowed: false, retryAfterMs: this.opts.cooldownMs - waited };
      this.state = 'half-open';
    }
    if (this.state === 'half-open') {
      // While the trial runs, everybody else still waits: do not hammer a service that may be down.
      if (this.trialInFlight) return { allowed: false, retryAfterMs: Math.max(1000, this.opts.cooldownMs) };
      this.trialInFlight = true;
      return { allowed: true, trial: true };
    }
    return { allowed: true, trial: false };
  }

  /** Whether admit() would grant a call now, without changing anything (for choosing among replicas). */
  wouldAdmit(): boolean {
    if (this.state === 'closed') return true;
    if (this.state === 'open' && this.now() - this.openedAt < this.opts.cooldownMs) return false;
    return !this.trialInFlight;
  }

  /** While open: how long until a trial call is allowed (0 when one would be allowed now). */
  retryAfterMs(): number {
    if (this.state === 'open') return Math.max(0, this.opts.cooldownMs - (this.now() - this.openedAt));
    if (this.state === 'half-open' && this.trialInFlight) return Math.max(1000, this.opts.cooldownMs);
    return 0;
  }

  /**
   * A health probe of the service succeeded. Once the cool-down is over this counts as the trial call and closes the
   * circuit, so a replica that came back takes traffic again without a client call having to risk the trial. Also while
   * a trial call is still running (a long one, such as a job's upload): the probe has already shown the service
   * answers, and other calls should not be refused for as long as that trial takes. The trial's own outcome then
   * counts as any call's.
   */
  probeSucceeded(): void {
    if (this.snapshot().state === 'half-open') {
      this.state = 'closed';
      this.failures = 0;
    }
  }

  success(trial: boolean): void {
    if (trial) this.trialInFlight = false;
    this.failures = 0;
    this.state = 'closed';
  }

  failure(trial: boolean): void {
    if (trial) this.trialInFlight = false;
    if (this.state === 'half-open') {
      this.open();
      return;
    }
    this.failures++;
    if (this.state === 'closed' && this.failures >= this.opts.threshold) this.open();
  }

  /** The call ended without telling anything about the service (e.g. the client went away). */
  release(trial: boolean): void {
    if (trial) this.trialInFlight = false;
  }

  snapshot(): { state: BreakerState; consecutiveFailures: number } {
    // Report 'half-open' once the cool-down is over even before a call arrives.
    const state = this.state === 'open' && this.now() - this.openedAt >= this.opts.cooldownMs ? 'half-open' : this.state;
    return { state, consecutiveFailures: this.failures };
  }

  private open(): void {
    this.state = 'open';
    this.openedAt = this.now();
    this.failures = 0;
  }
}
