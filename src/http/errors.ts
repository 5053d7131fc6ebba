// The gateway's error envelope (spec part 7): {"error":{"type","message","request_id"}}.
import type { Response } from 'express';

export const GATEWAY_ERRORS = {
  missing_token: 401,
  invalid_token: 401,
  key_revoked: 401,
  key_expired: 401,
  ip_not_allowed: 403,
  scope_denied: 403,
  plan_forbids_service: 403,
  service_not_found: 404,
  endpoint_not_found: 404,
  method_not_allowed: 405,
  request_timeout: 408,
  quota_exhausted: 402,
  payload_too_large: 413,
  rate_limited: 429,
  upstream_unavailable: 502,
  upstream_timeout: 504,
  circuit_open: 503,
  internal_error: 500,
} as const;

export type GatewayErrorType = keyof typeof GATEWAY_ERRORS;

export interface ErrorEnvelope {
  error: { type: GatewayErrorType; message: string; request_id: string };
}

/** The envelope as JSON text, for answers written without Express (probes, /metrics, Node's own refusals). */
export function envelopeText(type: string, message: string, requestId: string): string {
  return JSON.stringify({ error: { type, message, request_id: requestId } });
}

/** Request id of this response; set by the request-id policy before anything else runs. */
export function requestIdOf(res: Response): string {
  return (res.locals.requestId as string | undefined) ?? '';
}

/**
 * Sends the envelope. `status` overrides the default for types that have two statuses
 * (upstream_unavailable is 502, or 503 while the model service restarts).
 */
export function sendGatewayError(res: Response, type: GatewayErrorType, message: string, status?: number): void {
  const body: ErrorEnvelope = { error: { type, message, request_id: requestIdOf(res) } };
  res.locals.errorType = type;
  res.locals.errorMessage = message;
  if (res.headersSent) {
    res.destroy();
    return;
  }
  res.status(status ?? GATEWAY_ERRORS[type]).json(body);
}
