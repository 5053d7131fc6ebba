// How the forwarder words what went wrong: a replica's refusal or error (and the gateway's own limits and clocks)
// mapped to the gateway's error types and statuses, the breaker verdict each one earns, and the reply when no replica
// could take a call. The statuses the request log records for calls that got no envelope (408, 499, 502/504 cut
// mid-body) are named here too.
import type http from 'node:http';
import type { GatewayErrorType } from '../http/errors';
import type { Upstream } from './balancer';
import type { Verdict } from './replicas';

/** The request log's status for a call whose client went away before the answer was complete. */
export const CLIENT_GONE_STATUS = 499;
/** The request log's status for a call whose client stopped reading the answer. */
export const CLIENT_STALLED_STATUS = 408;

/** Upstream error bodies (401/413/503) are read only this far to extract their detail. */
export const MAX_ERROR_BODY = 64 * 1024;

/** An answer for the client in the gateway's envelope, with the headers that go with it. */
export interface GatewayFailure {
  type: GatewayErrorType;
  message: string;
  status: number;
  /** Retry-After value to send. */
  retryAfter?: string;
  /** Close the client's connection after the answer (its upload is not read to the end). */
  closeConnection?: boolean;
}

/** Why an attempt on one replica ended without an answer for the client (nothing of the body was sent). */
export interface Refusal {
  upstream: Upstream;
  /** 'unreachable': connection failed / timed out; 'busy': 503 (busy, starting, draining); 'refused': 401/403. */
  kind: 'unreachable' | 'busy' | 'refused';
  reason: string;
  retryAfter?: string;
}

/** `detail` and `type` of a model-service error body ({"detail", "type", "request_id"}), when it is one. */
export function errorBodyOf(body: Buffer): { detail: string | null; type: string | null } {
  try {
    const parsed = JSON.parse(body.toString('utf8')) as { detail?: unknown; type?: unknown };
    return {
      detail: typeof parsed.detail === 'string' ? parsed.detail.slice(0, 300) : null,
      type: typeof parsed.type === 'string' && /^[a-z_]{1,40}$/.test(parsed.type) ? parsed.type : null,
    };
  } catch {
    return { detail: null, type: null };
  }
}

function detailOf(body: Buffer): string | null {
  return errorBodyOf(body).detail;
}

/** Reads at most MAX_ERROR_BODY bytes of a short error answer; `done` runs once, however the answer ends. */
export function readSmall(up: http.IncomingMessage, done: (body: Buffer) => void): void {
  const chunks: Buffer[] = [];
  let size = 0;
  let called = false;
  const finish = (): void => {
    if (called) return;
    called = true;
    done(Buffer.concat(chunks));
  };
  up.on('data', (c: Buffer) => {
    if (size < MAX_ERROR_BODY) chunks.push(c);
    size += c.length;
  });
  up.on('end', finish);
  up.on('error', finish);
  up.on('close', finish);
}

/** Statuses a replica's answer is turned into the gateway's envelope for (the rest pass through). */
export function isConvertedStatus(status: number): boolean {
  return status === 413 || status === 503 || status === 401 || status === 403;
}

/** Statuses that, before any of the body was sent, move the call to another replica. */
export function isRefusalStatus(status: number): boolean {
  return status === 503 || status === 401 || status === 403;
}

/**
 * A 503 (busy, starting, draining) or 401/403 (our token not accepted) before any of the body went out: the call
 * moves on. Overloaded or restarting is not failing (released); a refused token is, and marks the replica unhealthy.
 */
export function refusalBeforeBody(
  status: number,
  body: Buffer,
  retryAfter: string | string[] | undefined,
): { verdict: Verdict; refusal: Omit<Refusal, 'upstream'>; unhealthy?: string } {
  const detail = detailOf(body) ?? `HTTP ${status}`;
  if (status === 503) {
    return { verdict: 'release', refusal: { kind: 'busy', reason: detail, retryAfter: Array.isArray(retryAfter) ? retryAfter[0] : retryAfter } };
  }
  return {
    verdict: 'failure',
    unhealthy: `refused the gateway's token (HTTP ${status})`,
    refusal: { kind: 'refused', reason: `it refused the gateway's MODEL_SERVICE_TOKEN (HTTP ${status})` },
  };
}

/** A 413, 503 or 401/403 once the body was committed: the model service's {detail} becomes the envelope's message. */
export function convertedAnswer(status: number, body: Buffer, retryAfter: string | undefined): { verdict: Verdict; failure: GatewayFailure } {
  const detail = detailOf(body);
  if (status === 413) {
    return { verdict: 'success', failure: { type: 'payload_too_large', message: detail ?? 'Upload larger than the endpoint allows.', status: 413 } };
  }
  if (status === 503) {
    return {
      verdict: 'release',
      failure: {
        type: 'upstream_unavailable',
        message: `The model service is unavailable${detail ? ` (${detail})` : ''}; retry shortly.`,
        status: 503,
        retryAfter: retryAfter || undefined,
      },
    };
  }
  return {
    verdict: 'failure',
    failure: { type: 'upstream_unavailable', message: `The model service refused the gateway's MODEL_SERVICE_TOKEN (HTTP ${status}).`, status: 502 },
  };
}

/** The verdict on a replica whose answer passed through whole: a 5xx is a failure, anything else a success. */
export function verdictOfAnswer(status: number): Verdict {
  return status >= 500 ? 'failure' : 'success';
}

/** The gateway's own refusals and clocks, worded for the client. */
export const failures = {
  declaredTooLarge: (declared: number, max: number): GatewayFailure => ({
    type: 'payload_too_large',
    message: `Request body of ${declared} bytes exceeds the ${max}-byte limit of this endpoint.`,
    status: 413,
  }),
  streamedTooLarge: (max: number): GatewayFailure => ({
    type: 'payload_too_large',
    message: `Request body exceeds the ${max}-byte limit of this endpoint.`,
    status: 413,
  }),
  restarting: (retryAfterS: number): GatewayFailure => ({
    type: 'upstream_unavailable',
    message: 'The service is restarting; retry after the Retry-After delay.',
    status: 503,
    retryAfter: String(retryAfterS),
    closeConnection: true,
  }),
  noAnswer: (ms: number): GatewayFailure => ({ type: 'upstream_timeout', message: `The model service did not answer within ${ms} ms.`, status: 504 }),
  uploadNotAccepted: (ms: number): GatewayFailure => ({
    type: 'upstream_timeout',
    message: `The model service stopped accepting the upload for ${ms} ms.`,
    status: 504,
  }),
  uploadStalled: (minBytes: number, ms: number): GatewayFailure => ({
    type: 'request_timeout',
    message: `The upload stalled: less than ${minBytes} bytes arrived in ${ms} ms. Nothing was charged.`,
    status: 408,
    closeConnection: true,
  }),
  unreachableMidUpload: (code: string): GatewayFailure => ({
    type: 'upstream_unavailable',
    message: `The model service is unreachable (${code}).`,
    status: 502,
  }),
};

/**
 * No replica could take the call: say why, as precisely as the attempts allow. No attempt at all means every
 * breaker is open (503 circuit_open, Retry-After when the first one lets a trial through); any busy replica makes it
 * a 503 to retry shortly; otherwise every replica was unreachable or refused our token (502).
 */
export function noReplicaFailure(refusals: readonly Refusal[], replicaCount: number, breakerWaitMs: number): GatewayFailure {
  if (refusals.length === 0) {
    return {
      type: 'circuit_open',
      message: 'The model service is failing repeatedly; calls are paused briefly. Retry after the Retry-After delay.',
      status: 503,
      retryAfter: String(Math.max(1, Math.ceil(breakerWaitMs / 1000))),
    };
  }
  const summary = (r: Refusal): string => (replicaCount > 1 ? `${r.upstream.label}: ${r.reason}` : r.reason);
  const busy = refusals.filter((r) => r.kind === 'busy');
  if (busy.length > 0) {
    const after = busy.map((r) => Number(r.retryAfter)).filter((n) => Number.isFinite(n) && n > 0);
    return {
      type: 'upstream_unavailable',
      message: `The model service is unavailable (${busy.map(summary).join('; ')}); retry shortly.`,
      status: 503,
      retryAfter: String(after.length > 0 ? Math.min(...after) : 2),
    };
  }
  return { type: 'upstream_unavailable', message: `The model service is unreachable (${refusals.map(summary).join('; ')}).`, status: 502 };
}

/**
 * Whether an answer means the model service did the work, so the call is paid for: a 2xx, except a batch in which
 * every file failed (X-NS-Batch `succeeded: 0`): it answers 200 with its manifest (v1's promise), but delivered no
 * audio, and rejected input costs nothing.
 */
export function deliveredWork(status: number, headers: http.IncomingHttpHeaders): boolean {
  if (status < 200 || status >= 300) return false;
  const batch = headers['x-ns-batch'];
  if (typeof batch !== 'string') return true;
  try {
    return (JSON.parse(batch) as { succeeded?: unknown }).succeeded !== 0;
  } catch {
    return true;
  }
}
