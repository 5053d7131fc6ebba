// Errors the model service answers with {"detail": "..."} (spec part 7: 400/422 for bad requests, 413 for size).
import type { Response } from 'express';

export class HttpError extends Error {
  constructor(
    readonly status: number,
    readonly detail: string,
  ) {
    super(detail);
    this.name = 'HttpError';
  }
}

export const badRequest = (detail: string): HttpError => new HttpError(400, detail);
export const unprocessable = (detail: string): HttpError => new HttpError(422, detail);
export const tooLarge = (detail: string): HttpError => new HttpError(413, detail);

export function sendDetail(res: Response, status: number, detail: string): void {
  if (res.headersSent) {
    // Too late for a status: the client sees a truncated body instead of a wrong "success".
    res.destroy();
    return;
  }
  res.status(status).json({ detail });
}
