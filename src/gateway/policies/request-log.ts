// Policy 11 of 11, request-log: an end hook, not a check. When a /v1 call's response is out (or the client went
// away: 499), writes its request-log row (status, error type, credits charged, bytes, timings) and then tells the
// observers (structured log line, metrics). Unauthenticated requests over the per-address limit get no row but
// still reach the observers; a key's refusals (402, 403, 429) share one row per minute (aggregateKeyOf). Runs after
// the pipeline is done with the call, so the row carries the final credits.
import type { Response } from 'express';
import type { Logger } from '../../logging';
import type { GatewayStore, RequestLogEntry } from '../../store/gateway/types';
import type { Call, EndHook } from '../call';
import type { CallObserver, CallSummary } from '../types';
import { clip } from './route';

export interface RequestLogOptions {
  store: Pick<GatewayStore, 'logRequest'>;
  /** Told about every finished /v1 call after its row is written. */
  observers: CallObserver[];
  now: () => number;
  logger: Logger;
}

/** Refusals a looping client can repeat without end: over its rate limit or credits, or not allowed (IP, scope, plan). */
const AGGREGATED_STATUSES = new Set([402, 403, 429]);

/**
 * The row a call adds to, for a key's refusals: one row per key, client address, status, error type, endpoint and UTC
 * minute, whose `calls` counts them (a key looping into 429 adds one row a minute, not thousands; a key refused from
 * many addresses still shows each). Null: a row of its own (every call that was served or failed otherwise, and
 * every call without a key: the unauthenticated limit covers those).
 */
export function aggregateKeyOf(e: RequestLogEntry): string | null {
  if (!e.tokenId || !AGGREGATED_STATUSES.has(e.status) || e.creditsCharged !== 0 || e.upstreamMs !== null) return null;
  return [e.tokenId, e.clientIp, e.status, e.errorType ?? '', e.method, e.service ?? '', e.endpoint ?? '', e.time.slice(0, 16)].join(' ');
}

/** The request-log row of a finished call. */
export function requestLogEntry(call: Call, finished: boolean, now: () => number): RequestLogEntry {
  const { ctx, req, res, match } = call;
  const service = match && match.kind !== 'not_v1' ? clip(match.kind === 'ok' ? match.route.service : match.service) : null;
  const endpoint =
    match && match.kind !== 'not_v1' && match.kind !== 'service_not_found' ? clip(match.kind === 'ok' ? match.route.endpoint : match.endpoint) : null;
  const declaredOut = Number(res.getHeader('content-length'));
  return {
    requestId: ctx.requestId,
    clientRequestId: ctx.clientRequestId ?? null,
    time: new Date(ctx.startedAt).toISOString(),
    tokenId: ctx.tokenId ?? null,
    workspaceId: ctx.workspaceId ?? null,
    method: req.method,
    service,
    endpoint,
    // 499: the client went away before a response was sent.
    status: ctx.logStatus ?? (finished || res.headersSent ? res.statusCode : 499),
    errorType: ctx.errorType ?? (res.locals.errorType as string | undefined) ?? null,
    creditsCharged: ctx.creditsCharged,
    bytesIn: ctx.bytesIn,
    bytesOut: ctx.bytesOut || (Number.isFinite(declaredOut) ? declaredOut : 0),
    upstreamMs: ctx.upstreamMs ?? null,
    totalMs: Math.max(0, (call.endedAt ?? now()) - ctx.startedAt),
    clientIp: ctx.clientIp,
    errorMessage: clip(ctx.errorDetail ?? (res.locals.errorMessage as string | undefined), 500),
  };
}

export function requestLogPolicy({ store, observers, now, logger }: RequestLogOptions): EndHook {
  return {
    name: 'request-log',
    async onEnd(call, finished) {
      const entry = requestLogEntry(call, finished, now);
      try {
        // Unauthenticated requests over the per-address limit get no row (junk must not fill the log); they
        // still reach the observers, so metrics count them.
        if (!call.unlogged) await store.logRequest({ ...entry, aggregateKey: aggregateKeyOf(entry) });
      } catch (err) {
        logger.error({ err, request_id: entry.requestId }, 'could not write the request log');
      }
      if (observers.length === 0) return;
      const result = reportedResult(call.res);
      const summary: CallSummary = {
        entry,
        route: call.match?.kind === 'ok' ? call.match.route : undefined,
        creditsReserved: call.credits?.amount ?? 0,
        keyPrefix: call.ctx.keyPrefix ?? null,
        model: result.model,
        audioSeconds: result.audioSeconds,
      };
      for (const observe of observers) {
        try {
          observe(summary);
        } catch (err) {
          logger.error({ err, request_id: entry.requestId }, 'a request observer failed');
        }
      }
    },
  };
}

/** Model and audio seconds from the model service's X-NS-Stats (/denoise) or X-NS-Batch (/denoise/batch) header. */
function reportedResult(res: Response): { model: string | null; audioSeconds: number | null } {
  for (const name of ['x-ns-stats', 'x-ns-batch']) {
    const raw = res.getHeader(name);
    if (typeof raw !== 'string') continue;
    try {
      const parsed = JSON.parse(raw) as { model?: unknown; duration_s?: unknown };
      return {
        model: typeof parsed.model === 'string' ? parsed.model : null,
        audioSeconds: typeof parsed.duration_s === 'number' && Number.isFinite(parsed.duration_s) ? parsed.duration_s : null,
      };
    } catch {
      // not JSON: nothing reported
    }
  }
  return { model: null, audioSeconds: null };
}
