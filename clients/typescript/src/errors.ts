// Errors as typed classes: every failure the API reports (the gateway's {"error": {type, message, request_id}}, the
// model service's {detail, type, request_id}, a stream's {"type": "error"} message) becomes an NsmError subclass
// chosen by HTTP status, carrying the server's type, message, request id and Retry-After.

export interface NsmErrorInit {
  status?: number | null;
  type: string;
  message: string;
  request_id?: string | null;
  retryAfter?: number | null;
  body?: unknown;
  closeCode?: number | null;
}

export class NsmError extends Error {
  /** HTTP status (null for a connection failure or a mid-stream error). */
  readonly status: number | null;
  /** The server's error type (`rate_limited`, `invalid_audio`, ...); branch on this. */
  readonly type: string;
  /** The server's X-Request-Id for this call (quote it in support requests). */
  readonly request_id: string | null;
  /** Seconds the server asked to wait (Retry-After), if it said. */
  readonly retryAfter: number | null;
  /** The parsed error body, as the server sent it. */
  readonly body: unknown;
  /** WebSocket close code, for errors of a live stream. */
  readonly closeCode: number | null;

  constructor(init: NsmErrorInit) {
    super(init.message);
    this.name = new.target.name;
    this.status = init.status ?? null;
    this.type = init.type;
    this.request_id = init.request_id ?? null;
    this.retryAfter = init.retryAfter ?? null;
    this.body = init.body;
    this.closeCode = init.closeCode ?? null;
  }
}

/** 400, 405 and 422: the request or its audio was refused (nothing was charged). */
export class InvalidRequestError extends NsmError {}
/** 401: the token is missing, unknown, revoked or expired (or a ticket was used or expired). */
export class AuthenticationError extends NsmError {}
/** 402: the workspace's credits are used up until the next period or an upgrade. */
export class QuotaExhaustedError extends NsmError {}
/** 403: scope, IP allow-list or plan. */
export class PermissionDeniedError extends NsmError {}
/** 404: no such endpoint, job or sample. */
export class NotFoundError extends NsmError {}
/** 408: the upload stalled. */
export class RequestTimeoutError extends NsmError {}
/** 409: a job's result was asked for before the job succeeded. */
export class ConflictError extends NsmError {}
/** 410: a job's result was deleted. */
export class GoneError extends NsmError {}
/** 413: the upload is larger than the endpoint takes. */
export class PayloadTooLargeError extends NsmError {}
/** 429: rate limit, too many active jobs or too many concurrent streams; `retryAfter` says when to come back. */
export class RateLimitError extends NsmError {}
/** 500, 502, 503, 504, 507: the service could not do it now. */
export class ServerError extends NsmError {}
/** No HTTP answer at all: refused, reset or cut connection, DNS failure. */
export class ConnectionError extends NsmError {}
/** A live stream ended in an error message or an abnormal close. */
export class StreamError extends NsmError {}

const BY_STATUS: Record<number, typeof NsmError> = {
  400: InvalidRequestError,
  405: InvalidRequestError,
  422: InvalidRequestError,
  401: AuthenticationError,
  402: QuotaExhaustedError,
  403: PermissionDeniedError,
  404: NotFoundError,
  408: RequestTimeoutError,
  409: ConflictError,
  410: GoneError,
  413: PayloadTooLargeError,
  416: InvalidRequestError,
  426: InvalidRequestError,
  429: RateLimitError,
};

/** Seconds from a Retry-After header (delta-seconds or an HTTP date), or null. */
export function parseRetryAfter(value: string | null | undefined, now = Date.now()): number | null {
  if (value == null || value.trim() === '') return null;
  const n = Number(value);
  if (Number.isFinite(n)) return Math.max(0, n);
  const at = Date.parse(value);
  return Number.isNaN(at) ? null : Math.max(0, Math.ceil((at - now) / 1000));
}

/** The error for an HTTP answer that is not a success, from its status, headers and body text. */
export function errorFromResponse(status: number, headers: { get(name: string): string | null }, text: string): NsmError {
  let body: unknown = text;
  let type = `http_${status}`;
  let message = text.slice(0, 500) || `HTTP ${status}`;
  let requestId = headers.get('x-request-id');
  try {
    body = JSON.parse(text);
  } catch {
    // not JSON (a proxy's HTML page, an empty body): keep the text
  }
  if (body && typeof body === 'object') {
    const b = body as Record<string, any>;
    if (b.error && typeof b.error === 'object' && typeof b.error.type === 'string') {
      // The gateway's envelope.
      type = b.error.type;
      message = String(b.error.message ?? message);
      requestId = b.error.request_id ?? requestId;
    } else if (typeof b.detail === 'string') {
      // The model service's {detail, type, request_id}.
      type = typeof b.type === 'string' ? b.type : status === 422 ? 'invalid_audio' : 'invalid_request';
      message = b.detail;
      requestId = b.request_id ?? requestId;
    }
  }
  const Class = BY_STATUS[status] ?? (status >= 500 ? ServerError : NsmError);
  return new Class({ status, type, message, request_id: requestId, retryAfter: parseRetryAfter(headers.get('retry-after')), body });
}

/** Whether an error body is the gateway's own envelope (the gateway answered: its refund rule applies). */
export function isGatewayEnvelope(err: NsmError): boolean {
  const b = err.body as Record<string, any> | null;
  return !!b && typeof b === 'object' && !!b.error && typeof b.error.type === 'string';
}
