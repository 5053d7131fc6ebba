// Active health checks of the model-service replicas: GET /health (with the gateway's token) every interval.
// 200 marks a replica healthy (and, once its breaker's cool-down is over, closes the breaker: the replica came
// back); anything else, or no answer within the timeout, marks it unhealthy so the balancer skips it.
import type { Upstream } from './balancer';

export interface HealthCheckerOptions {
  intervalMs: number;
  timeoutMs: number;
  token: string | null;
}

export class HealthChecker {
  private timer: NodeJS.Timeout | null = null;
  private running = false;

  constructor(
    private readonly upstreams: Upstream[],
    private readonly opts: HealthCheckerOptions,
  ) {}

  start(): void {
    if (this.timer) return;
    const tick = (): void => {
      void this.checkAll().finally(() => {
        if (this.timer) this.timer = setTimeout(tick, this.opts.intervalMs).unref();
      });
    };
    this.timer = setTimeout(tick, 0).unref();
  }

  stop(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
  }

  /** Checks every replica once (concurrently). */
  async checkAll(): Promise<void> {
    if (this.running) return;
    this.running = true;
    try {
      await Promise.all(this.upstreams.map((u) => this.check(u)));
    } finally {
      this.running = false;
    }
  }

  private check(up: Upstream): Promise<void> {
    return new Promise<void>((resolve) => {
      let done = false;
      const verdict = (ok: boolean, reason: string): void => {
        if (done) return;
        done = true;
        clearTimeout(timer);
        if (ok) {
          up.markHealthy();
          up.breaker.probeSucceeded();
        } else {
          up.markUnhealthy(reason);
        }
        resolve();
      };
      const headers: Record<string, string> = {};
      if (this.opts.token) headers.authorization = `Bearer ${this.opts.token}`;
      const req = up.client.request({
        protocol: up.url.protocol,
        hostname: up.url.hostname,
        port: up.url.port,
        path: `${up.basePath}/health`,
        method: 'GET',
        headers,
        agent: up.freshAgent, // a probe of reachability: its own connection, never a kept-alive one gone stale
      });
      const timer = setTimeout(() => {
        req.destroy();
        verdict(false, `health check: no answer within ${this.opts.timeoutMs} ms`);
      }, this.opts.timeoutMs);
      req.on('error', (err: NodeJS.ErrnoException) => verdict(false, `health check: ${err.code ?? err.message}`));
      req.on('response', (res) => {
        res.resume();
        res.on('end', () => verdict(res.statusCode === 200, `health check: HTTP ${res.statusCode}`));
        res.on('error', () => verdict(false, 'health check: response cut'));
      });
      req.end();
    });
  }
}
