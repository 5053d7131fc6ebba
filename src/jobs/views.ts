// The job object as the API, webhooks, the CLI and the console show it.
import type { DeliveryRecord, JobRecord } from '../store/jobs/types';

export const API_PREFIX = '/v1/noise-suppressor';

const iso = (ms: number | null): string | null => (ms === null ? null : new Date(ms).toISOString());

export function jobPath(id: string): string {
  return `${API_PREFIX}/jobs/${id}`;
}

export interface JobView {
  id: string;
  object: 'job';
  status: JobRecord['status'];
  progress: number;
  created_at: string;
  started_at: string | null;
  finished_at: string | null;
  params: JobRecord['params'];
  input: JobRecord['input'];
  webhook_url: string | null;
  attempts: number;
  stats: Record<string, unknown> | null;
  error: JobRecord['error'];
  /** Download of the cleaned audio: a path on this server (resolve it against the API's base URL). */
  result: { url: string; bytes: number; expires_at: string | null; speech_segments?: Array<{ start_s: number; end_s: number }> } | null;
  result_deleted_at: string | null;
  /** When the job and its files are deleted (set once it finished). */
  expires_at: string | null;
}

export function jobView(job: JobRecord): JobView {
  return {
    id: job.id,
    object: 'job',
    status: job.status,
    progress: Math.round(Math.min(1, Math.max(0, job.progress)) * 1000) / 1000,
    created_at: iso(job.createdAt)!,
    started_at: iso(job.startedAt),
    finished_at: iso(job.finishedAt),
    params: job.params,
    input: job.input,
    webhook_url: job.webhookUrl,
    attempts: job.attempts,
    stats: job.stats,
    error: job.error,
    result:
      job.status === 'succeeded' && job.result
        ? {
            url: `${jobPath(job.id)}/result`, bytes: job.result.bytes, expires_at: iso(job.expiresAt),
            ...(job.result.speechSegments ? { speech_segments: job.result.speechSegments } : {}),
          }
        : null,
    result_deleted_at: iso(job.resultDeletedAt),
    expires_at: iso(job.expiresAt),
  };
}

export function deliveryView(d: DeliveryRecord) {
  return {
    id: d.id,
    job_id: d.jobId,
    workspace_id: d.workspaceId,
    event: d.event,
    url: d.url,
    status: d.status,
    attempts: d.attempts,
    created_at: iso(d.createdAt),
    last_attempt_at: iso(d.lastAttemptAt),
    last_status: d.lastStatus,
    last_error: d.lastError,
    next_attempt_at: d.status === 'pending' ? iso(d.nextAttemptAt) : null,
    delivered_at: iso(d.deliveredAt),
    give_up_at: iso(d.giveUpAt),
  };
}

/** Opaque list cursor: the (created_at, id) of the last job on the page. */
export function encodeCursor(job: JobRecord): string {
  return Buffer.from(JSON.stringify([job.createdAt, job.id]), 'utf8').toString('base64url');
}

export function decodeCursor(cursor: string): { createdAt: number; id: string } | null {
  try {
    const [createdAt, id] = JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8')) as [unknown, unknown];
    if (typeof createdAt !== 'number' || !Number.isFinite(createdAt) || typeof id !== 'string' || id.length > 64) return null;
    return { createdAt, id };
  } catch {
    return null;
  }
}
