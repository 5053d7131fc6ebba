// How the console's JSON API answers: the error body every route shares, the route wrapper that turns input errors
// into 400s, and the API's tail (404 for unknown endpoints, JSON for thrown errors and bad bodies).
import type { NextFunction, Request, Response } from 'express';
import { InputError } from './validation';

export type ConsoleErrorType =
  | 'not_signed_in'
  | 'csrf_failed'
  | 'invalid_secret'
  | 'too_many_attempts'
  | 'bad_request'
  | 'not_found'
  | 'unsupported_media_type';

export function sendError(res: Response, status: number, type: ConsoleErrorType, message: string): void {
  res.status(status).json({ error: { type, message } });
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
    sendError(res, 400, 'bad_request', 'body too large');
    return;
  }
  if (!res.headersSent) res.status(500).json({ error: { type: 'internal_error', message: 'console error' } });
}
