// The JobStore, written once for both engines (./sqlite.ts, ./postgres.ts open the database; src/db/dialect.ts holds
// what differs). Every state change is one statement or one transaction, and every change a runner makes is fenced by
// its lease (WHERE lease_owner = @owner), so processes sharing the queue never step on each other: on PostgreSQL
// claims skip rows other runners hold (SKIP LOCKED) and the per-workspace cap is checked under an advisory lock; on
// SQLite a transaction holds the file's write lock.
import type { Dialect, Sql, SqlDatabase } from '../../db/dialect';
import { timeOrNull } from '../../db/dialect';
import { toDelivery, toJob } from './rows';
import type { ClaimKind, DeliveryAttempt, DeliveryFactory, JobListQuery, JobOutcome, JobStore, NewDelivery, NewJob } from './types';

const COUNT_ACTIVE = "SELECT COUNT(*) AS n FROM jobs WHERE workspace_id = @workspaceId AND status IN ('queued','running')";

const INSERT_DELIVERY = `INSERT INTO webhook_deliveries (id, workspace_id, job_id, event, url, payload, status, attempts,
    next_attempt_at, created_at, give_up_at)
  VALUES (@id, @workspaceId, @jobId, @event, @url, @payload, 'pending', 0, @createdAt, @createdAt, @giveUpAt)`;

/** Rows per page of a list: 1..1000. */
const pageSize = (limit: number): number => Math.min(Math.max(Math.trunc(limit), 1), 1000);

/** True for a row (of table alias `t`) whose input is a URL not fetched yet. */
const needsFetch = (d: Dialect, t: string): string =>
  `(${d.jsonField(`${t}.input`, 'source')} = 'url' AND ${d.jsonField(`${t}.input`, 'bytes')} IS NULL)`;

export function createJobStore(db: SqlDatabase): JobStore {
  const d = db.dialect;
  /** Run first in the transaction that checks and creates a workspace's jobs (param @key); null: not needed. */
  const workspaceLock = d.advisoryLock('key');
  const json = (value: unknown): string | null => (value === null || value === undefined ? null : JSON.stringify(value));

  const insertDelivery = async (sql: Sql, delivery: NewDelivery | null): Promise<void> => {
    if (!delivery) return;
    await sql.run(INSERT_DELIVERY, { ...delivery, createdAt: d.time(delivery.createdAt), giveUpAt: d.time(delivery.giveUpAt) });
  };
  const getJob = async (sql: Sql, id: string, lock = ''): Promise<ReturnType<typeof toJob> | null> => {
    const [row] = await sql.all(`SELECT * FROM jobs WHERE id = @id ${lock}`, { id });
    return row ? toJob(d, row) : null;
  };

  /** The SQL condition of a claim kind on table alias `t`. */
  const ofKind = (kind: ClaimKind, t: string): string =>
    kind === 'fetch' ? needsFetch(d, t) : kind === 'ready' ? `NOT ${needsFetch(d, t)}` : 'TRUE';

  let closed = false;
  const store: JobStore = {
    async createJob(job: NewJob, maxActive) {
      return db.transaction(async (tx) => {
        // Serialises creations per workspace (across processes) so the cap holds.
        if (workspaceLock) await tx.all(workspaceLock, { key: `jobs:${job.workspaceId}` });
        const active = Number((await tx.all(COUNT_ACTIVE, { workspaceId: job.workspaceId }))[0].n);
        if (active >= maxActive) return { ok: false as const, active };
        const [row] = await tx.all(
          `INSERT INTO jobs (id, workspace_id, token_id, request_id, status, progress, params, input, webhook_url,
             created_at, updated_at, run_after, credits, charged_at)
           VALUES (@id, @workspaceId, @tokenId, @requestId, 'queued', 0, @params, @input, @webhookUrl,
             @createdAt, @createdAt, @createdAt, @credits, @chargedAt)
           RETURNING *`,
          {
            id: job.id,
            workspaceId: job.workspaceId,
            tokenId: job.tokenId,
            requestId: job.requestId,
            params: json(job.params),
            input: json(job.input),
            webhookUrl: job.webhookUrl,
            createdAt: d.time(job.createdAt),
            credits: job.credits,
            chargedAt: timeOrNull(d, job.chargedAt),
          },
        );
        return { ok: true as const, job: toJob(d, row) };
      });
    },
    async getJob(id) {
      return getJob(db, id);
    },
    async listJobs(q: JobListQuery) {
      const where: string[] = [];
      const params: Record<string, unknown> = { limit: pageSize(q.limit) };
      if (q.workspaceId !== undefined) (where.push('workspace_id = @workspaceId'), (params.workspaceId = q.workspaceId));
      if (q.status !== undefined) (where.push('status = @status'), (params.status = q.status));
      if (q.before) {
        where.push('(created_at, id) < (@beforeAt, @beforeId)');
        Object.assign(params, { beforeAt: d.time(q.before.createdAt), beforeId: q.before.id });
      }
      const rows = await db.all(
        `SELECT * FROM jobs ${where.length ? 'WHERE ' + where.join(' AND ') : ''} ORDER BY created_at DESC, id DESC LIMIT @limit`,
        params,
      );
      return rows.map((r) => toJob(d, r));
    },
    async countActive(workspaceId) {
      return Number((await db.all(COUNT_ACTIVE, { workspaceId }))[0].n);
    },
    async claimJob(owner, leaseMs, now, kind: ClaimKind = 'any') {
      // The due job of the workspace with the fewest running jobs of the same kind (downloads and processing are
      // separate slots), then the oldest; rows other runners are claiming right now are skipped, not waited for.
      const [row] = await db.all(
        `WITH running AS (
           SELECT workspace_id, COUNT(*) AS n FROM jobs WHERE status = 'running' AND ${ofKind(kind, 'jobs')} GROUP BY workspace_id
         ), next AS (
           SELECT j.id FROM jobs j LEFT JOIN running r ON r.workspace_id = j.workspace_id
           WHERE j.status = 'queued' AND j.run_after <= @now AND ${ofKind(kind, 'j')}
           ORDER BY COALESCE(r.n, 0), j.created_at, j.id
           LIMIT 1
           ${d.skipLocked('j')}
         )
         UPDATE jobs SET status = 'running', lease_owner = @owner, lease_expires_at = @lease, attempts = attempts + 1,
           started_at = @now, updated_at = @now, progress = 0
         WHERE id = (SELECT id FROM next) AND status = 'queued'
         RETURNING *`,
        { owner, lease: d.time(now + leaseMs), now: d.time(now) },
      );
      return row ? toJob(d, row) : null;
    },
    async waitingWorkspaces(now, kind) {
      const rows = await db.all(
        `SELECT DISTINCT j.workspace_id FROM jobs j WHERE j.status = 'queued' AND j.run_after <= @now AND ${ofKind(kind, 'j')} LIMIT 100`,
        { now: d.time(now) },
      );
      return rows.map((r) => r.workspace_id as string);
    },
    async renewLease(id, owner, leaseMs, now, progress) {
      const changed = await db.run(
        `UPDATE jobs SET lease_expires_at = @lease, updated_at = @now, progress = COALESCE(@progress, progress)
         WHERE id = @id AND status = 'running' AND lease_owner = @owner`,
        { id, owner, lease: d.time(now + leaseMs), now: d.time(now), progress: progress ?? null },
      );
      return changed === 1;
    },
    async setInputBytes(id, owner, bytes) {
      const changed = await db.run(
        `UPDATE jobs SET input = ${d.jsonSetNumber('input', 'bytes', 'bytes')} WHERE id = @id AND status = 'running' AND lease_owner = @owner`,
        { id, owner, bytes },
      );
      return changed === 1;
    },
    async finishJob(id, owner, outcome: JobOutcome, now, delivery?: DeliveryFactory) {
      return db.transaction(async (tx) => {
        const [row] = await tx.all(
          `UPDATE jobs SET status = @status, progress = CASE WHEN @status = 'succeeded' THEN 1 ELSE progress END,
             finished_at = @now, updated_at = @now, lease_owner = NULL, lease_expires_at = NULL,
             result = @result, stats = @stats, error = @error, expires_at = @expiresAt,
             refund = CASE WHEN @status = 'failed' AND credits > 0 THEN 'pending' ELSE refund END
           WHERE id = @id AND status = 'running' AND lease_owner = @owner
           RETURNING *`,
          {
            id,
            owner,
            now: d.time(now),
            status: outcome.status,
            result: outcome.status === 'succeeded' ? json(outcome.result) : null,
            stats: outcome.status === 'succeeded' ? json(outcome.stats) : null,
            error: outcome.status === 'failed' ? json(outcome.error) : null,
            expiresAt: d.time(outcome.expiresAt),
          },
        );
        if (!row) return null;
        const job = toJob(d, row);
        if (delivery) await insertDelivery(tx, delivery(job));
        return job;
      });
    },
    async retryJob(id, owner, runAfter, error, countAttempt, now) {
      const changed = await db.run(
        `UPDATE jobs SET status = 'queued', run_after = @runAfter, updated_at = @now, lease_owner = NULL,
           lease_expires_at = NULL, progress = 0, error = @error, attempts = attempts - @undo
         WHERE id = @id AND status = 'running' AND lease_owner = @owner`,
        { id, owner, runAfter: d.time(runAfter), now: d.time(now), error: error ? json(error) : null, undo: countAttempt ? 0 : 1 },
      );
      return changed === 1;
    },
    async reclaimExpired(now, maxAttempts, expiresAt, delivery) {
      return db.transaction(async (tx) => {
        const requeued: string[] = [];
        const failed: string[] = [];
        const at = d.time(now);
        const expired = await tx.all(
          `SELECT * FROM jobs WHERE status = 'running' AND lease_expires_at < @now
           ORDER BY lease_expires_at LIMIT 100 ${d.skipLocked()}`,
          { now: at },
        );
        for (const row of expired) {
          const id = row.id as string;
          const attempts = row.attempts as number;
          if (attempts >= maxAttempts) {
            const error = {
              type: 'processing_failed',
              message: `the job's runner stopped ${attempts} times while working on it (crash or restart); giving up`,
            };
            const [out] = await tx.all(
              `UPDATE jobs SET status = 'failed', finished_at = @now, updated_at = @now, lease_owner = NULL,
                 lease_expires_at = NULL, error = @error, expires_at = @expiresAt,
                 refund = CASE WHEN credits > 0 THEN 'pending' ELSE refund END
               WHERE id = @id AND status = 'running' AND lease_expires_at < @now
               RETURNING *`,
              { id, now: at, error: json(error), expiresAt: d.time(expiresAt) },
            );
            if (out) {
              failed.push(id);
              if (delivery) await insertDelivery(tx, delivery(toJob(d, out)));
            }
          } else {
            const changed = await tx.run(
              `UPDATE jobs SET status = 'queued', run_after = @now, updated_at = @now, lease_owner = NULL,
                 lease_expires_at = NULL, progress = 0
               WHERE id = @id AND status = 'running' AND lease_expires_at < @now`,
              { id, now: at },
            );
            if (changed === 1) requeued.push(id);
          }
        }
        return { requeued, failed };
      });
    },
    async cancelJob(id, workspaceId, now, expiresAt) {
      return db.transaction(async (tx) => {
        const job = await getJob(tx, id, d.forUpdate);
        if (!job || (workspaceId !== null && job.workspaceId !== workspaceId)) return null;
        const [out] = await tx.all(
          `UPDATE jobs SET status = 'canceled', finished_at = @now, updated_at = @now, lease_owner = NULL,
             lease_expires_at = NULL, expires_at = @expiresAt,
             refund = CASE WHEN credits > 0 THEN 'pending' ELSE refund END
           WHERE id = @id AND status IN ('queued','running')
           RETURNING *`,
          { id, now: d.time(now), expiresAt: d.time(expiresAt) },
        );
        return out ? { job: toJob(d, out), wasActive: true } : { job, wasActive: false };
      });
    },
    async deleteResult(id, workspaceId, now) {
      return db.transaction(async (tx) => {
        const job = await getJob(tx, id, d.forUpdate);
        if (!job || (workspaceId !== null && job.workspaceId !== workspaceId)) return null;
        const [out] = await tx.all(
          `UPDATE jobs SET result = NULL, result_deleted_at = @now, updated_at = @now
           WHERE id = @id AND result IS NOT NULL AND status IN ('succeeded','failed','canceled')
           RETURNING *`,
          { id, now: d.time(now) },
        );
        return out ? toJob(d, out) : job;
      });
    },
    async expiredJobs(now, limit) {
      const rows = await db.all(
        `SELECT * FROM jobs WHERE expires_at IS NOT NULL AND expires_at <= @now AND status IN ('succeeded','failed','canceled')
         ORDER BY expires_at LIMIT @limit`,
        { now: d.time(now), limit },
      );
      return rows.map((r) => toJob(d, r));
    },
    async deleteJob(id) {
      await db.run('DELETE FROM jobs WHERE id = @id', { id });
    },
    async pendingRefunds(limit) {
      return (await db.all("SELECT * FROM jobs WHERE refund = 'pending' LIMIT @limit", { limit })).map((r) => toJob(d, r));
    },
    async setRefund(id, from, to) {
      return (await db.run('UPDATE jobs SET refund = @to WHERE id = @id AND refund = @from', { id, from, to })) === 1;
    },
    async knownJobIds() {
      return new Set((await db.all('SELECT id FROM jobs')).map((r) => r.id as string));
    },

    async webhookSecret(workspaceId) {
      const [row] = await db.all('SELECT secret FROM webhook_secrets WHERE workspace_id = @workspaceId', { workspaceId });
      return row ? (row.secret as string) : null;
    },
    async ensureWebhookSecret(workspaceId, fresh) {
      await db.run(
        `INSERT INTO webhook_secrets (workspace_id, secret, created_at) VALUES (@workspaceId, @secret, @now)
         ON CONFLICT (workspace_id) DO NOTHING`,
        { workspaceId, secret: fresh(), now: d.time(Date.now()) },
      );
      return (await store.webhookSecret(workspaceId))!;
    },
    async setWebhookSecret(workspaceId, secret) {
      await db.run(
        `INSERT INTO webhook_secrets (workspace_id, secret, created_at) VALUES (@workspaceId, @secret, @now)
         ON CONFLICT (workspace_id) DO UPDATE SET secret = excluded.secret, created_at = excluded.created_at`,
        { workspaceId, secret, now: d.time(Date.now()) },
      );
    },

    async enqueueDelivery(delivery) {
      await insertDelivery(db, delivery);
    },
    async claimDeliveries(owner, leaseMs, now, limit, skipPrefixes = []) {
      const skip: Record<string, string> = {};
      skipPrefixes.forEach((p, i) => (skip[`skip${i}`] = p));
      const skipSql = Object.keys(skip)
        .map((k) => ` AND substr(url, 1, length(@${k})) <> @${k}`)
        .join('');
      const rows = await db.all(
        `UPDATE webhook_deliveries SET lease_owner = @owner, lease_expires_at = @lease
         WHERE id IN (
           SELECT id FROM webhook_deliveries
           WHERE status = 'pending' AND next_attempt_at <= @now AND (lease_expires_at IS NULL OR lease_expires_at < @now)${skipSql}
           ORDER BY next_attempt_at LIMIT @limit
           ${d.skipLocked()})
         RETURNING *`,
        { owner, lease: d.time(now + leaseMs), now: d.time(now), limit, ...skip },
      );
      return rows.map((r) => toDelivery(d, r)).sort((a, b) => a.nextAttemptAt - b.nextAttemptAt);
    },
    async recordDeliveryAttempt(id, owner, a: DeliveryAttempt) {
      const newStatus = a.ok ? 'delivered' : a.nextAttemptAt === null ? 'failed' : 'pending';
      await db.run(
        `UPDATE webhook_deliveries SET attempts = attempts + 1, last_attempt_at = @at, last_status = @status,
           last_error = @error, status = @newStatus, next_attempt_at = COALESCE(@next, next_attempt_at),
           delivered_at = CASE WHEN @newStatus = 'delivered' THEN @at ELSE delivered_at END,
           lease_owner = NULL, lease_expires_at = NULL
         WHERE id = @id AND lease_owner = @owner AND status = 'pending'`,
        { id, owner, at: d.time(a.at), status: a.status, error: a.error, newStatus, next: timeOrNull(d, a.nextAttemptAt) },
      );
    },
    async listDeliveries(q) {
      const where: string[] = [];
      const params: Record<string, unknown> = { limit: pageSize(q.limit) };
      if (q.workspaceId !== undefined) (where.push('workspace_id = @workspaceId'), (params.workspaceId = q.workspaceId));
      if (q.jobId !== undefined) (where.push('job_id = @jobId'), (params.jobId = q.jobId));
      const rows = await db.all(
        `SELECT * FROM webhook_deliveries ${where.length ? 'WHERE ' + where.join(' AND ') : ''}
         ORDER BY created_at DESC, id DESC LIMIT @limit`,
        params,
      );
      return rows.map((r) => toDelivery(d, r));
    },
    async purgeDeliveries(before) {
      return db.run("DELETE FROM webhook_deliveries WHERE status <> 'pending' AND created_at < @before", { before: d.time(before) });
    },

    async close() {
      if (closed) return;
      closed = true;
      await db.close();
    },
  };
  return store;
}
