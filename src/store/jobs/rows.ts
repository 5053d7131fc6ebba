// Rows of the job tables (jobs, webhook_deliveries) as either engine returns them, mapped to the queue contract's
// records; times and JSON are read through the engine's dialect.
import { readJsonOrNull, readTimeOrNull, type Dialect, type Row } from '../../db/dialect';
import type { DeliveryRecord, JobRecord } from './types';

export function toJob(d: Dialect, row: Row): JobRecord {
  return {
    id: row.id as string,
    workspaceId: row.workspace_id as string,
    tokenId: row.token_id as string | null,
    requestId: row.request_id as string | null,
    status: row.status as JobRecord['status'],
    progress: row.progress as number,
    params: d.readJson(row.params) as JobRecord['params'],
    input: d.readJson(row.input) as JobRecord['input'],
    webhookUrl: row.webhook_url as string | null,
    createdAt: d.readTime(row.created_at),
    startedAt: readTimeOrNull(d, row.started_at),
    finishedAt: readTimeOrNull(d, row.finished_at),
    updatedAt: d.readTime(row.updated_at),
    attempts: row.attempts as number,
    runAfter: d.readTime(row.run_after),
    leaseOwner: row.lease_owner as string | null,
    leaseExpiresAt: readTimeOrNull(d, row.lease_expires_at),
    stats: readJsonOrNull(d, row.stats) as JobRecord['stats'],
    error: readJsonOrNull(d, row.error) as JobRecord['error'],
    result: readJsonOrNull(d, row.result) as JobRecord['result'],
    resultDeletedAt: readTimeOrNull(d, row.result_deleted_at),
    expiresAt: readTimeOrNull(d, row.expires_at),
    credits: row.credits as number,
    chargedAt: readTimeOrNull(d, row.charged_at),
    refund: row.refund as JobRecord['refund'],
  };
}

export function toDelivery(d: Dialect, row: Row): DeliveryRecord {
  return {
    id: row.id as string,
    workspaceId: row.workspace_id as string,
    jobId: row.job_id as string,
    event: row.event as DeliveryRecord['event'],
    url: row.url as string,
    payload: row.payload as string,
    status: row.status as DeliveryRecord['status'],
    attempts: row.attempts as number,
    nextAttemptAt: d.readTime(row.next_attempt_at),
    lastAttemptAt: readTimeOrNull(d, row.last_attempt_at),
    lastStatus: row.last_status as number | null,
    lastError: row.last_error as string | null,
    createdAt: d.readTime(row.created_at),
    giveUpAt: d.readTime(row.give_up_at),
    deliveredAt: readTimeOrNull(d, row.delivered_at),
  };
}
