// Prometheus metrics (prom-client, the maintained Prometheus client for Node). One registry per process:
//
//   gateway (npm start)             ns_http_*, ns_upstream_*, ns_credits_*, ns_rate_limited_total
//                                   (gateway/observers/metrics.ts), ns_stream* (streaming/metrics.ts) + the
//                                   model-service metrics when the model service runs in-process, or those of
//                                   the file-work process (src/file-process), merged in at each scrape
//   model service (its own process) ns_audio_seconds_total, ns_processing_seconds_total, ns_rtf, ns_files_total,
//                                   ns_engine_* (model-service/metrics.ts) on its own GET /metrics
//
// This file holds what both share: the registry and the GET /metrics handler. Gauges that describe live state are read
// at scrape time through small accessors. Labels are bounded: endpoints are the route table's (anything else is
// "other"), error types and models come from fixed lists.
import crypto from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import client, { type Registry } from 'prom-client';
import { envelopeText } from '../http/errors';
import { ensureRequestId } from '../http/request-id';

export type { Registry };

export const METRICS_CONTENT_TYPE = client.Registry.PROMETHEUS_CONTENT_TYPE;

/** A fresh registry; `processMetrics` adds prom-client's process metrics (CPU, memory, event loop lag, GC). */
export function createRegistry(opts: { service: string; processMetrics?: boolean }): Registry {
  const registry = new client.Registry();
  registry.setDefaultLabels({ service: opts.service });
  if (opts.processMetrics) client.collectDefaultMetrics({ register: registry, prefix: 'ns_' });
  return registry;
}


function sameSecret(a: string, b: string): boolean {
  const ha = crypto.createHash('sha256').update(a).digest();
  const hb = crypto.createHash('sha256').update(b).digest();
  return crypto.timingSafeEqual(ha, hb);
}

function sendError(res: ServerResponse, status: number, type: string, message: string, headers: Record<string, string> = {}): void {
  const body = envelopeText(type, message, ensureRequestId(res));
  res.writeHead(status, {
    'Content-Type': 'application/json; charset=utf-8',
    'Content-Length': Buffer.byteLength(body),
    'Cache-Control': 'no-store',
    ...headers,
  });
  res.end(body);
}

/**
 * GET /metrics for a plain Node or Express server. With a token, `Authorization: Bearer <token>` is required
 * (401 otherwise); without one the endpoint is open (bind to a private network or set METRICS_TOKEN). Every answer
 * carries an X-Request-Id; errors are the envelope {"error": {"type", "message", "request_id"}}.
 */
/** Another process's registry as getMetricsAsJSON() gives it. */
export type MetricsJson = Awaited<ReturnType<Registry['getMetricsAsJSON']>>;

/**
 * This registry's metrics plus `others` (another process's, read as JSON) in one exposition. Families both have are
 * merged: their series differ by the `service` label, so prom-client's aggregation only has to put them side by side
 * ("sum" over series of one; its per-family aggregators would drop some, e.g. the start time).
 */
async function mergedText(registry: Registry, others: MetricsJson): Promise<string> {
  const own = await registry.getMetricsAsJSON();
  const asSeries = (list: MetricsJson) => list.map((m) => ({ ...m, aggregator: 'sum' as const }));
  return client.AggregatorRegistry.aggregate([asSeries(own), asSeries(others)]).metrics();
}

export function metricsHandler(registry: Registry, token: string | null, others?: () => Promise<MetricsJson>) {
  return (req: IncomingMessage, res: ServerResponse): void => {
    ensureRequestId(res);
    if (token) {
      const auth = req.headers.authorization ?? '';
      const sent = /^Bearer[ \t]+(.+)$/i.exec(auth.trim())?.[1]?.trim() ?? '';
      if (!sent || !sameSecret(sent, token)) {
        // As the gateway says it: no Authorization header at all is missing_token; one that does not match, invalid.
        const type = req.headers.authorization === undefined ? 'missing_token' : 'invalid_token';
        sendError(res, 401, type, 'GET /metrics needs "Authorization: Bearer <METRICS_TOKEN>".', {
          'WWW-Authenticate': 'Bearer realm="metrics"',
        });
        return;
      }
    }
    (others ? others().then((o) => mergedText(registry, o)) : registry.metrics()).then(
      (text) => {
        res.writeHead(200, { 'Content-Type': METRICS_CONTENT_TYPE, 'Cache-Control': 'no-store' });
        res.end(req.method === 'HEAD' ? undefined : text);
      },
      (err: unknown) => {
        sendError(res, 500, 'internal_error', `metrics collection failed: ${err instanceof Error ? err.message : String(err)}`);
      },
    );
  };
}
