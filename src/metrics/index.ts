// Prometheus metrics (prom-client, the maintained Prometheus client for Node). One registry per process:
//
//   gateway (npm start)             ns_http_*, ns_upstream_*, ns_credits_*, ns_rate_limited_total
//                                   + the model-service metrics below when the model service runs in-process
//   model service (its own process) ns_audio_seconds_total, ns_processing_seconds_total, ns_rtf, ns_files_total,
//                                   ns_engine_* on its own GET /metrics (MODEL_SERVICE_PORT)
//
// Gauges that describe live state (engine queue, busy workers, breaker state) are read at scrape time through small
// accessors, so one or many upstreams and engines report without bookkeeping here. Labels are bounded: endpoints
// are the route table's (anything else is "other"), error types and models come from fixed lists.
import crypto from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import client, { type Registry } from 'prom-client';
import type { CallObserver } from '../gateway/types';
import type { PoolState } from '../inference/types';

export type { Registry };

export const METRICS_CONTENT_TYPE = client.Registry.PROMETHEUS_CONTENT_TYPE;

/** A fresh registry; `processMetrics` adds prom-client's process metrics (CPU, memory, event loop lag, GC). */
export function createRegistry(opts: { service: string; processMetrics?: boolean }): Registry {
  const registry = new client.Registry();
  registry.setDefaultLabels({ service: opts.service });
  if (opts.processMetrics) client.collectDefaultMetrics({ register: registry, prefix: 'ns_' });
  return registry;
}

/** Seconds buckets from 5 ms to 10 min: GET calls are milliseconds, a 100 MB denoise is minutes. */
const LATENCY_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600];
/** Real-time factor buckets (processing seconds per audio second). */
const RTF_BUCKETS = [0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2];

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

/** What the model service reports per denoised file. */
export interface FileStats {
  model: string;
  duration_s: number;
  processing_s: number;
  rtf: number;
}

export interface ModelServiceMetrics {
  /** One file denoised (each item of a batch counts). */
  fileDone(stats: FileStats): void;
}

/** Model-service metrics: audio processed per model and the engine's live state (read at scrape time). */
export function createModelServiceMetrics(registry: Registry, sources: { engine: () => PoolState | null }): ModelServiceMetrics {
  const audio = new client.Counter({
    name: 'ns_audio_seconds_total',
    help: 'Seconds of audio denoised, by model.',
    labelNames: ['model'] as const,
    registers: [registry],
  });
  const processing = new client.Counter({
    name: 'ns_processing_seconds_total',
    help: 'Wall seconds spent denoising files (decode, inference, encode), by model.',
    labelNames: ['model'] as const,
    registers: [registry],
  });
  const files = new client.Counter({
    name: 'ns_files_total',
    help: 'Files denoised, by model (each item of a batch counts).',
    labelNames: ['model'] as const,
    registers: [registry],
  });
  const rtf = new client.Histogram({
    name: 'ns_rtf',
    help: 'Real-time factor per file (processing seconds per audio second), by model.',
    labelNames: ['model'] as const,
    buckets: RTF_BUCKETS,
    registers: [registry],
  });
  const gauge = (name: string, help: string, pick: (s: PoolState) => number) =>
    new client.Gauge({
      name,
      help,
      registers: [registry],
      collect() {
        const state = sources.engine();
        if (state) this.set(pick(state));
      },
    });
  gauge('ns_engine_workers', 'Inference worker threads in the pool.', (s) => s.size);
  gauge('ns_engine_busy_workers', 'Workers running an inference job now.', (s) => s.busy);
  gauge('ns_engine_queue_depth', 'Inference jobs waiting for a free worker.', (s) => s.queued);
  gauge('ns_engine_streams', 'Files being denoised now (open engine streams).', (s) => s.streams);
  gauge('ns_engine_worker_restarts', 'Workers restarted after a crash since the engine started.', (s) => s.restarts);

  return {
    fileDone(stats) {
      const labels = { model: stats.model };
      audio.inc(labels, Math.max(0, stats.duration_s));
      processing.inc(labels, Math.max(0, stats.processing_s));
      files.inc(labels);
      if (stats.duration_s > 0) rtf.observe(labels, stats.rtf);
    },
  };
}

function sameSecret(a: string, b: string): boolean {
  const ha = crypto.createHash('sha256').update(a).digest();
  const hb = crypto.createHash('sha256').update(b).digest();
  return crypto.timingSafeEqual(ha, hb);
}

/**
 * GET /metrics for a plain Node or Express server. With a token, `Authorization: Bearer <token>` is required
 * (401 otherwise); without one the endpoint is open (bind to a private network or set METRICS_TOKEN).
 */
export function metricsHandler(registry: Registry, token: string | null) {
  return (req: IncomingMessage, res: ServerResponse): void => {
    if (token) {
      const auth = req.headers.authorization ?? '';
      const sent = /^Bearer[ \t]+(.+)$/i.exec(auth.trim())?.[1]?.trim() ?? '';
      if (!sent || !sameSecret(sent, token)) {
        const body = JSON.stringify({ error: { type: 'invalid_token', message: 'GET /metrics needs "Authorization: Bearer <METRICS_TOKEN>".' } });
        res.writeHead(401, {
          'Content-Type': 'application/json; charset=utf-8',
          'Content-Length': Buffer.byteLength(body),
          'WWW-Authenticate': 'Bearer realm="metrics"',
          'Cache-Control': 'no-store',
        });
        res.end(body);
        return;
      }
    }
    registry.metrics().then(
      (text) => {
        res.writeHead(200, { 'Content-Type': METRICS_CONTENT_TYPE, 'Cache-Control': 'no-store' });
        res.end(req.method === 'HEAD' ? undefined : text);
      },
      (err: unknown) => {
        res.writeHead(500, { 'Content-Type': 'text/plain; charset=utf-8' });
        res.end(`metrics collection failed: ${err instanceof Error ? err.message : String(err)}\n`);
      },
    );
  };
}
