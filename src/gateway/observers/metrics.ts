// Gateway metrics (prom-client): a call observer counting finished /v1 calls by endpoint, status and error type,
// latency histograms, credits and rate limiting, and the upstream breakers' state read at scrape time.
import client, { type Registry } from 'prom-client';
import type { CallObserver } from '../types';

/** Seconds buckets from 5 ms to 10 min: GET calls are milliseconds, a 100 MB denoise is minutes. */
const LATENCY_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600];

export interface UpstreamBreaker {
  upstream: string;
  state: 'closed' | 'open' | 'half-open';
  consecutiveFailures: number;
}

export const BREAKER_STATES = ['closed', 'half-open', 'open'] as const;

/**
 * Gateway metrics, fed by the gateway's call observer (one call per finished /v1 request) and by the upstream
 * breakers read at scrape time.
 */
export function createGatewayMetrics(registry: Registry, sources: { upstreams: () => UpstreamBreaker[] }): { observe: CallObserver } {
  const requests = new client.Counter({
    name: 'ns_http_requests_total',
    help: 'Gateway API calls (/v1) by endpoint, method, status and error type ("none" on success).',
    labelNames: ['endpoint', 'method', 'status', 'error_type'] as const,
    registers: [registry],
  });
  const duration = new client.Histogram({
    name: 'ns_http_request_duration_seconds',
    help: 'Gateway time per API call, from the first byte in to the last byte out (seconds).',
    labelNames: ['endpoint'] as const,
    buckets: LATENCY_BUCKETS,
    registers: [registry],
  });
  const upstream = new client.Histogram({
    name: 'ns_upstream_request_duration_seconds',
    help: 'Time until the model service answered a forwarded call (X-Gateway-Upstream-Ms, seconds).',
    labelNames: ['endpoint'] as const,
    buckets: LATENCY_BUCKETS,
    registers: [registry],
  });
  const charged = new client.Counter({
    name: 'ns_credits_charged_total',
    help: 'Credits charged before forwarding (refunds are counted separately).',
    labelNames: ['endpoint'] as const,
    registers: [registry],
  });
  const refunded = new client.Counter({
    name: 'ns_credits_refunded_total',
    help: 'Credits refunded because the model service did not deliver a result.',
    labelNames: ['endpoint'] as const,
    registers: [registry],
  });
  const rateLimited = new client.Counter({
    name: 'ns_rate_limited_total',
    help: 'Calls refused with 429 rate_limited.',
    labelNames: ['endpoint'] as const,
    registers: [registry],
  });
  new client.Gauge({
    name: 'ns_upstream_breaker_state',
    help: 'Circuit breaker per model-service upstream: 1 for its current state (closed, half-open, open), 0 otherwise.',
    labelNames: ['upstream', 'state'] as const,
    registers: [registry],
    collect() {
      this.reset();
      for (const u of sources.upstreams()) {
        for (const state of BREAKER_STATES) this.set({ upstream: u.upstream, state }, u.state === state ? 1 : 0);
      }
    },
  });
  new client.Gauge({
    name: 'ns_upstream_consecutive_failures',
    help: 'Consecutive failed calls per model-service upstream (the breaker opens at BREAKER_THRESHOLD).',
    labelNames: ['upstream'] as const,
    registers: [registry],
    collect() {
      this.reset();
      for (const u of sources.upstreams()) this.set({ upstream: u.upstream }, u.consecutiveFailures);
    },
  });

  const observe: CallObserver = ({ entry, route, creditsReserved }) => {
    const endpoint = route?.endpoint ?? 'other';
    requests.inc({ endpoint, method: entry.method, status: String(entry.status), error_type: entry.errorType ?? 'none' });
    duration.observe({ endpoint }, entry.totalMs / 1000);
    if (entry.upstreamMs !== null) upstream.observe({ endpoint }, entry.upstreamMs / 1000);
    if (creditsReserved > 0) {
      charged.inc({ endpoint }, creditsReserved);
      const back = creditsReserved - entry.creditsCharged;
      if (back > 0) refunded.inc({ endpoint }, back);
    }
    if (entry.errorType === 'rate_limited') rateLimited.inc({ endpoint });
  };
  return { observe };
}
