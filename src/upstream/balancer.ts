// Several model-service replicas behind one forwarder (MODEL_SERVICE_URL=http://a:8081,http://b:8081): each replica
// has its own circuit breaker, in-flight count and health flag; calls go to the healthy replica with the fewest
// requests in flight whose breaker admits a call.
import http from 'node:http';
import https from 'node:https';
import { CircuitBreaker, type BreakerOptions } from './circuit-breaker';

/**
 * How long a kept-alive connection to a replica may sit idle before the gateway closes it: under the model service's
 * keep-alive timeout (Node's 5 s, which it announces in its Keep-Alive header).
 */
export const IDLE_CONNECTION_MS = 4000;

/** Splits MODEL_SERVICE_URL (one URL or a comma-separated list) into replica base URLs; throws on a bad entry. */
export function parseUpstreamUrls(value: string): string[] {
  const urls = value
    .split(',')
    .map((s) => s.trim().replace(/\/+$/, ''))
    .filter(Boolean);
  if (urls.length === 0) throw new Error('MODEL_SERVICE_URL is empty');
  for (const u of urls) {
    let parsed: URL;
    try {
      parsed = new URL(u);
    } catch {
      throw new Error(`MODEL_SERVICE_URL: not a URL: "${u}"`);
    }
    if (parsed.protocol !== 'http:' && parsed.protocol !== 'https:') {
      throw new Error(`MODEL_SERVICE_URL: only http:// and https:// are supported, got "${u}"`);
    }
  }
  if (new Set(urls).size !== urls.length) throw new Error('MODEL_SERVICE_URL lists the same replica twice');
  return urls;
}

/** One model-service replica as the gateway sees it. */
export class Upstream {
  readonly url: URL;
  /** Path prefix of the base URL (no trailing slash). */
  readonly basePath: string;
  readonly client: typeof http | typeof https;
  /** Calls: kept-alive connections (a new TCP connection per call cost the gateway's thread ~1 ms, measured). */
  readonly agent: http.Agent;
  /** Health checks, and a call retried after a kept-alive connection went stale: a new connection each time. */
  readonly freshAgent: http.Agent;
  readonly breaker: CircuitBreaker;
  /** Calls sent to this replica and not yet finished. */
  inFlight = 0;
  /** Calls sent to this replica since start (attempts included). */
  sent = 0;
  /** Last health verdict (health checks, or a connection that failed); replicas start healthy. */
  healthy = true;
  /** Why it was last marked unhealthy. */
  lastError: string | null = null;

  constructor(baseUrl: string, breaker: BreakerOptions) {
    this.url = new URL(baseUrl.replace(/\/+$/, '') + '/');
    this.basePath = this.url.pathname.replace(/\/+$/, '');
    this.client = this.url.protocol === 'https:' ? https : http;
    // Keep-alive. An idle connection is closed by this side after IDLE_CONNECTION_MS, or earlier when the replica's
    // Keep-Alive header says it closes sooner (Node's agent keeps a 1 s margin under that hint), so the gateway is
    // normally not the one reusing a socket the replica is just closing; when it still happens, the forwarder
    // retries that call once on a fresh connection (nothing of the body was sent: it waits for 100 Continue).
    this.agent = new this.client.Agent({ keepAlive: true, timeout: IDLE_CONNECTION_MS });
    this.freshAgent = new this.client.Agent({ keepAlive: false });
    this.breaker = new CircuitBreaker(breaker);
  }

  /** Display form, e.g. http://127.0.0.1:8081 */
  get label(): string {
    return this.url.toString().replace(/\/$/, '');
  }

  markUnhealthy(reason: string): void {
    this.healthy = false;
    this.lastError = reason;
  }

  markHealthy(): void {
    this.healthy = true;
    this.lastError = null;
  }
}

export class Balancer {
  private rotation = 0;

  constructor(readonly upstreams: Upstream[]) {}

  /**
   * The replica for the next attempt: among those not yet tried whose breaker admits a call, the healthy ones
   * first (an unhealthy one only when no healthy one is left, since a health verdict can be a few seconds old),
   * fewest requests in flight, ties taken in turn. null when none can take the call.
   */
  pick(tried: ReadonlySet<Upstream>): Upstream | null {
    const open = this.upstreams.filter((u) => !tried.has(u) && u.breaker.wouldAdmit());
    if (open.length === 0) return null;
    const healthy = open.filter((u) => u.healthy);
    const pool = healthy.length > 0 ? healthy : open;
    const least = Math.min(...pool.map((u) => u.inFlight));
    const best = pool.filter((u) => u.inFlight === least);
    return best[this.rotation++ % best.length];
  }
}
