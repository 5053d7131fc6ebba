// How the console's JSON API answers: the request id every console response carries, the error body every route
// shares ({"error": {"type", "message", "request_id"}}), the route wrapper that turns input errors into 400s, and the
// API's tail (404 for unknown endpoints, JSON for thrown errors and bad bodies).
import type { NextFunction, Request, Response } from 'express';
import { ensureRequestId } from '../http/request-id';
import { InputError } from './validation';

export type ConsoleErrorType =
  | 'not_signed_in'
  | 'csrf_failed'
  | 'invalid_secret'
  | 'too_many_attempts'
  | 'bad_request'
  | 'not_found'
  | 'unsupported_media_type'
  | 'payload_too_large';

/** First on the console's router: an X-Request-Id on every page and API answer (the app's own, when it gave one). */
export function requestIds(_req: Request, res: Response, next: NextFunction): void {
  ensureRequestId(res);
  next();
}

export function sendError(res: Response, status: number, type: ConsoleErrorType | 'internal_error', message: string): void {
  res.status(status).json({ error: { type, message, request_id: ensureRequestId(res) } });
}

/** Route handler wrapper (sync or async): turns InputError into 400 and other throws into next(err). */
export function handle(fn: (req: Request, res: Response) => unknown) {
  return (req: Request, res: Response, next: NextFunction) => {
    const fail = (err: unknown): void => {
      if (err instanceof InputError) sendError(res, 400, 'bad_request', err.message);
      else next(err);
    };
    try {
      const out = fn(req, res);
      if (out instanceof Promise) out.catch(fail);
    } catch (err) {
      fail(err);
    }
  };
}

/** The last route of the API: no endpoint matched. */
export function apiNotFound(_req: Request, res: Response): void {
  sendError(res, 404, 'not_found', 'no such console endpoint');
}

/** JSON errors for the API (bad JSON bodies land here too). */
export function apiErrorHandler(err: unknown, _req: Request, res: Response, _next: NextFunction): void {
  const e = err as { status?: number; type?: string; message?: string };
  if (e && (e.status === 400 || e.type === 'entity.parse.failed')) {
    sendError(res, 400, 'bad_request', 'malformed JSON body');
    return;
  }
  if (e && e.status === 413) {
    sendError(res, 413, 'payload_too_large', 'the JSON body is larger than 64 KB');
    return;
  }
  if (!res.headersSent) sendError(res, 500, 'internal_error', 'console error');
}
