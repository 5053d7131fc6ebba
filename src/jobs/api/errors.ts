// Errors of the jobs endpoints: the gateway's envelope {"error": {"type", "message", "request_id"}} with the job types.
// Every 429 carries Retry-After (a client that honours it never needs to guess).
import type { Response } from 'express';
import { requestIdOf } from '../../http/errors';

export const JOB_ERRORS = {
  invalid_request: 400,
  url_not_allowed: 400,
  url_fetch_failed: 400,
  job_not_found: 404,
  job_not_finished: 409,
  result_gone: 410,
  payload_too_large: 413,
  range_not_satisfiable: 416,
  too_many_jobs: 429,
  internal_error: 500,
  insufficient_storage: 507,
} as const;

export type JobErrorType = keyof typeof JOB_ERRORS;

/** A refusal with its envelope type; thrown inside the handlers and sent by sendJobError. */
export class JobApiError extends Error {
  constructor(
    readonly type: JobErrorType,
    message: string,
  ) {
    super(message);
  }
  get status(): number {
    return JOB_ERRORS[this.type];
  }
}

/** The upload stalled (the gateway's 408 request_timeout, as /denoise answers it). */
export class UploadStalledError extends Error {}

/** `busyRetryAfterS`: the Retry-After every 429 carries (JOBS_BUSY_RETRY_AFTER_SECONDS; the only 429 is `too_many_jobs`). */
export function sendJobError(res: Response, type: JobErrorType, message: string, busyRetryAfterS: number): number {
  const status = JOB_ERRORS[type];
  res.locals.errorType = type;
  // The reason in words, for the request log's error_message and the request line (as the gateway's errors have).
  res.locals.errorMessage = message;
  const ctx = res.locals.gateway as { errorType?: string } | undefined;
  if (ctx) ctx.errorType = type;
  if (res.headersSent) {
    res.destroy();
    return status;
  }
  if (status === 429) res.setHeader('Retry-After', String(busyRetryAfterS));
  res.status(status).json({ error: { type, message, request_id: requestIdOf(res) } });
  return status;
}
