// Errors the model service answers with (spec part 7: 400/422 for bad requests, 413 for size). The body keeps the
// spec's `detail` and adds `type` (what clients and the request log branch on) and `request_id` (the gateway's
// X-Request-Id, so every error a client sees can be found in the logs):
//   {"detail": "unknown model \"nsm-7\"; use one of ...", "type": "invalid_request", "request_id": "req_..."}
import crypto from 'node:crypto';
import type { Request, Response } from 'express';

/** Machine-readable kinds of model-service errors. */
export type ModelServiceErrorType =
  | 'invalid_request' // 400: a field, the form or the method is wrong
  | 'unauthorized' // 401: no or a wrong MODEL_SERVICE_TOKEN (only the gateway may call)
  | 'invalid_audio' // 422: the upload is not usable audio
  | 'model_not_installed' // 422: a known model whose graphs are missing on this server
  | 'payload_too_large' // 413
  | 'not_found' // 404
  | 'unavailable' // 503: starting, shutting down or too busy
  | 'internal_error'; // 500

const TYPE_BY_STATUS: Record<number, ModelServiceErrorType> = {
  400: 'invalid_request',
  401: 'unauthorized',
  404: 'not_found',
  413: 'payload_too_large',
  422: 'invalid_audio',
  503: 'unavailable',
};

export function defaultErrorType(status: number): ModelServiceErrorType {
  return TYPE_BY_STATUS[status] ?? (status >= 500 ? 'internal_error' : 'invalid_request');
}

export class HttpError extends Error {
  readonly type: ModelServiceErrorType;
  constructor(
    readonly status: number,
    readonly detail: string,
    type?: ModelServiceErrorType,
  ) {
    super(detail);
    this.name = 'HttpError';
    this.type = type ?? defaultErrorType(status);
  }
}

/** The type of an audio error's answer: 413 payload_too_large, 400 invalid_request (files that do not go together), else invalid_audio. */
export function audioErrorType(err: { status: number }): ModelServiceErrorType {
  return err.status === 413 ? 'payload_too_large' : err.status === 400 ? 'invalid_request' : 'invalid_audio';
}

export const badRequest = (detail: string): HttpError => new HttpError(400, detail, 'invalid_request');
export const unprocessable = (detail: string, type: ModelServiceErrorType = 'invalid_audio'): HttpError =>
  new HttpError(422, detail, type);
export const tooLarge = (detail: string): HttpError => new HttpError(413, detail, 'payload_too_large');

/** Same rule as the gateway's: an id the caller sent is used only when it looks like one. */
const SAFE_REQUEST_ID = /^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$/;

/** The request's id: the X-Request-Id the gateway sent, else one minted here (and kept for the rest of the call). */
export function requestIdOf(req: Request, res?: Response): string {
  const kept = res?.locals.requestId as string | undefined;
  if (kept) return kept;
  const sent = req.headers['x-request-id'];
  const candidate = Array.isArray(sent) ? sent[0] : sent;
  const id = candidate && SAFE_REQUEST_ID.test(candidate) ? candidate : 'req_' + crypto.randomUUID().replace(/-/g, '');
  if (res) res.locals.requestId = id;
  return id;
}

/** The JSON body of an error (also for answers written without Express, e.g. "starting"). */
export function errorBody(
  status: number,
  detail: string,
  requestId: string,
  type: ModelServiceErrorType = defaultErrorType(status),
): { detail: string; type: ModelServiceErrorType; request_id: string } {
  return { detail, type, request_id: requestId };
}

export function sendDetail(res: Response, status: number, detail: string, type?: ModelServiceErrorType): void {
  if (res.headersSent) {
    // Too late for a status: the client sees a truncated body instead of a wrong "success".
    res.destroy();
    return;
  }
  res.status(status).json(errorBody(status, detail, requestIdOf(res.req, res), type));
}

/** Sends an HttpError with its own type. */
export function sendHttpError(res: Response, err: HttpError): void {
  sendDetail(res, err.status, err.detail, err.type);
}
