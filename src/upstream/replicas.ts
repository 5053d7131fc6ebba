// The model-service replicas as one shared set: the forwarder (synchronous calls) and the job runner (job streams)
// both take a replica from here, so a replica that is down, unhealthy or whose breaker is open is skipped by both,
// and both feed the same breakers. A ReplicaCall is one admitted call to one replica: it counts as in flight until
// it ends, gets exactly one breaker verdict, and opens the HTTP request to that replica.
import type http from 'node:http';
import type { Config } from '../config';
import { Balancer, parseUpstreamUrls, Upstream } from './balancer';
import type { BreakerState } from './circuit-breaker';
import { HealthChecker } from './health';

export type ReplicasConfig = Pick<Config, 'breakerThreshold' | 'breakerCooldownMs' | 'upstreamConnectTimeoutMs' | 'upstreamHealthIntervalMs'>;

export interface ReplicasOptions {
  config: ReplicasConfig;
  /** Model service root, e.g. http://127.0.0.1:8081, or a comma-separated list of replicas. */
  baseUrl: string;
  /** Sent as `Authorization: Bearer <token>` to the model service (MODEL_SERVICE_TOKEN). */
  token?: string | null;
  /** Clock for the breakers (tests). */
  now?: () => number;
}

/** One upstream's breaker as metrics and readiness see it. */
export interface UpstreamState {
  upstream: string;
  state: BreakerState;
  consecutiveFailures: number;
  /** Last health verdict (health checks with several replicas, or a failed connection). */
  healthy: boolean;
  inFlight: number;
}

/** What a call tells its replica's breaker: it worked, it failed, or it says nothing about the replica. */
export type Verdict = 'success' | 'failure' | 'release';

export interface ReplicaRequest {
  /** Path under the replica's base URL, with its query. */
  path: string;
  method: string;
  headers: http.OutgoingHttpHeaders;
  /** On a new connection instead of a kept-alive one (a retry after a stale connection; long job streams). */
  fresh: boolean;
}

/** One call admitted by a replica's breaker: in flight until end(), judged exactly once. */
export class ReplicaCall {
  private judged = false;
  private ended = false;

  constructor(
    readonly upstream: Upstream,
    /** The half-open breaker's single trial call. */
    readonly trial: boolean,
  ) {
    upstream.inFlight++;
    upstream.sent++;
  }

  /** The breaker's verdict on this call; only the first one counts. */
  judge(verdict: Verdict): void {
    if (this.judged) return;
    this.judged = true;
    this.upstream.breaker[verdict](this.trial);
  }

  /** The call no longer occupies the replica. */
  end(): void {
    if (this.ended) return;
    this.ended = true;
    this.upstream.inFlight--;
  }

  /** Opens the HTTP request to this replica (headers are the caller's: the token is in `headers` when needed). */
  request(r: ReplicaRequest): http.ClientRequest {
    const up = this.upstream;
    return up.client.request({
      protocol: up.url.protocol,
      hostname: up.url.hostname,
      port: up.url.port,
      path: up.basePath + r.path,
      method: r.method,
      headers: r.headers,
      agent: r.fresh ? up.freshAgent : up.agent,
    });
  }
}

export class ModelServiceReplicas {
  readonly upstreams: Upstream[];
  readonly token: string | null;
  private readonly balancer: Balancer;
  private readonly health: HealthChecker;
  private readonly cooldownMs: number;

  constructor(opts: ReplicasOptions) {
    const { config } = opts;
    this.token = opts.token ?? null;
    this.cooldownMs = config.breakerCooldownMs;
    const breakerOptions = { threshold: config.breakerThreshold, cooldownMs: config.breakerCooldownMs, now: opts.now };
    this.upstreams = parseUpstreamUrls(opts.baseUrl).map((u) => new Upstream(u, breakerOptions));
    this.balancer = new Balancer(this.upstreams);
    this.health = new HealthChecker(this.upstreams, {
      intervalMs: config.upstreamHealthIntervalMs,
      timeoutMs: Math.min(config.upstreamConnectTimeoutMs, Math.max(500, config.upstreamHealthIntervalMs)),
      token: this.token,
    });
    // With one replica there is nothing to choose between; its breaker alone decides.
    if (this.upstreams.length > 1) this.health.start();
  }

  /**
   * The next replica for a call, admitted by its breaker, among those not in `tried` (each one picked is added to
   * it): healthy ones first, fewest calls in flight (balancer.ts). null when none can take the call.
   */
  acquire(tried: Set<Upstream>): ReplicaCall | null {
    for (;;) {
      const up = this.balancer.pick(tried);
      if (!up) return null;
      tried.add(up);
      const call = this.admit(up);
      if (call) return call;
    }
  }

  /** A call on this very replica, when its breaker admits one. */
  admit(up: Upstream): ReplicaCall | null {
    const admission = up.breaker.admit();
    return admission.allowed ? new ReplicaCall(up, admission.trial) : null;
  }

  /** How long until the first open breaker lets a trial call through (the cool-down when none is waiting). */
  breakerWaitMs(): number {
    const waits = this.upstreams.map((u) => u.breaker.retryAfterMs()).filter((ms) => ms > 0);
    return waits.length > 0 ? Math.min(...waits) : this.cooldownMs;
  }

  /** Every replica with its breaker state, read when asked (a /metrics scrape, /readyz). */
  states(): UpstreamState[] {
    return this.upstreams.map((u) => ({ upstream: u.label, ...u.breaker.snapshot(), healthy: u.healthy, inFlight: u.inFlight }));
  }

  /** Stops the health checks. */
  close(): void {
    this.health.stop();
  }
}
