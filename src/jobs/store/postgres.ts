// JobStore on PostgreSQL (node-postgres `pg`), selected by DATABASE_URL: the job tables live in the same database as
// the gateway store, with their own numbered migrations (jobs_schema_migrations) applied under an advisory lock.
// Several gateway processes share the queue: claims use FOR UPDATE SKIP LOCKED (runners never wait on each other's
// rows, and never claim the same job), the per-workspace cap is checked under a per-workspace advisory lock, and every
// runner write is fenced by its lease like in the SQLite engine. The contract tests run against both engines.
import { Pool, type PoolClient, type QueryResultRow } from 'pg';
import type {
  DeliveryAttempt,
  DeliveryFactory,
  DeliveryRecord,
  JobListQuery,
  JobOutcome,
  JobRecord,
  JobStore,
  NewDelivery,
  NewJob,
  RefundState,
} from '../types';

/** Advisory lock key of the jobs migrations (distinct from the gateway store's). */
const MIGRATION_LOCK_KEY = 7_426_117_302;

/** Numbered migrations of the job tables on PostgreSQL (same versions as the SQLite engine's). Append only. */
const MIGRATIONS: Array<{ version: number; name: string; sql: string }> = [
  {
    version: 1,
    name: 'jobs, webhook secrets, webhook deliveries',
    sql: `
      CREATE TABLE jobs (
        id text PRIMARY KEY,
        workspace_id text NOT NULL,
        token_id text,
        request_id text,
        status text NOT NULL CHECK (status IN ('queued','running','succeeded','failed','canceled')),
        progress double precision NOT NULL DEFAULT 0,
        params jsonb NOT NULL,
        input jsonb NOT NULL,
        webhook_url text,
        created_at timestamptz NOT NULL,
        started_at timestamptz,
        finished_at timestamptz,
        updated_at timestamptz NOT NULL,
        attempts integer NOT NULL DEFAULT 0,
        run_after timestamptz NOT NULL,
        lease_owner text,
        lease_expires_at timestamptz,
        stats jsonb,
        error jsonb,
        result jsonb,
        result_deleted_at timestamptz,
        expires_at timestamptz,
        credits integer NOT NULL DEFAULT 0,
        charged_at timestamptz,
        refund text NOT NULL DEFAULT 'none' CHECK (refund IN ('none','pending','done'))
      );
      CREATE INDEX jobs_workspace_created ON jobs (workspace_id, created_at DESC, id DESC);
      CREATE INDEX jobs_created ON jobs (created_at DESC, id DESC);
      CREATE INDEX jobs_queued ON jobs (run_after, created_at) WHERE status = 'queued';
      CREATE INDEX jobs_running ON jobs (workspace_id, lease_expires_at) WHERE status = 'running';
      CREATE INDEX jobs_expires ON jobs (expires_at) WHERE expires_at IS NOT NULL;
      CREATE INDEX jobs_refund ON jobs (id) WHERE refund = 'pending';
      CREATE TABLE webhook_secrets (
        workspace_id text PRIMARY KEY,
        secret text NOT NULL,
        created_at timestamptz NOT NULL
      );
      CREATE TABLE webhook_deliveries (
        id text PRIMARY KEY,
        workspace_id text NOT NULL,
        job_id text NOT NULL,
        event text NOT NULL,
        url text NOT NULL,
        payload text NOT NULL,
        status text NOT NULL CHECK (status IN ('pending','delivered','failed')),
        attempts integer NOT NULL DEFAULT 0,
        next_attempt_at timestamptz NOT NULL,
        last_attempt_at timestamptz,
        last_status integer,
        last_error text,
        created_at timestamptz NOT NULL,
        give_up_at timestamptz NOT NULL,
        delivered_at timestamptz,
        lease_owner text,
        lease_expires_at timestamptz
      );
      CREATE INDEX deliveries_due ON webhook_deliveries (next_attempt_at) WHERE status = 'pending';
      CREATE INDEX deliveries_workspace ON webhook_deliveries (workspace_id, created_at DESC);
      CREATE INDEX deliveries_job ON webhook_deliveries (job_id);
    `,
  },
];

interface JobRow extends QueryResultRow {
  id: string;
  workspace_id: string;
  token_id: string | null;
  request_id: string | null;
  status: JobRecord['status'];
  progress: number;
  params: JobRecord['params'];
  input: JobRecord['input'];
  webhook_url: string | null;
  created_at: Date;
  started_at: Date | null;
  finished_at: Date | null;
  updated_at: Date;
  attempts: number;
  run_after: Date;
  lease_owner: string | null;
  lease_expires_at: Date | null;
  stats: Record<string, unknown> | null;
  error: JobRecord['error'];
  result: JobRecord['result'];
  result_deleted_at: Date | null;
  expires_at: Date | null;
  credits: number;
  charged_at: Date | null;
  refund: RefundState;
}

interface DeliveryRow extends QueryResultRow {
  id: string;
  workspace_id: string;
  job_id: string;
  event: DeliveryRecord['event'];
  url: string;
  payload: string;
  status: DeliveryRecord['status'];
  attempts: number;
  next_attempt_at: Date;
  last_attempt_at: Date | null;
  last_status: number | null;
  last_error: string | null;
  created_at: Date;
  give_up_at: Date;
  delivered_at: Date | null;
}

const ms = (d: Date | null): number | null => (d === null ? null : d.getTime());
const at = (t: number | null): Date | null => (t === null ? null : new Date(t));

function toJob(row: JobRow): JobRecord {
  return {
    id: row.id,
    workspaceId: row.workspace_id,
    tokenId: row.token_id,
    requestId: row.request_id,
    status: row.status,
    progress: row.progress,
    params: row.params,
    input: row.input,
    webhookUrl: row.webhook_url,
    createdAt: row.created_at.getTime(),
    startedAt: ms(row.started_at),
    finishedAt: ms(row.finished_at),
    updatedAt: row.updated_at.getTime(),
    attempts: row.attempts,
    runAfter: row.run_after.getTime(),
    leaseOwner: row.lease_owner,
    leaseExpiresAt: ms(row.lease_expires_at),
    stats: row.stats,
    error: row.error,
    result: row.result,
    resultDeletedAt: ms(row.result_deleted_at),
    expiresAt: ms(row.expires_at),
    credits: row.credits,
    chargedAt: ms(row.charged_at),
    refund: row.refund,
  };
}

function toDelivery(row: DeliveryRow): DeliveryRecord {
  return {
    id: row.id,
    workspaceId: row.workspace_id,
    jobId: row.job_id,
    event: row.event,
    url: row.url,
    payload: row.payload,
    status: row.status,
    attempts: row.attempts,
    nextAttemptAt: row.next_attempt_at.getTime(),
    lastAttemptAt: ms(row.last_attempt_at),
    lastStatus: row.last_status,
    lastError: row.last_error,
    createdAt: row.created_at.getTime(),
    giveUpAt: row.give_up_at.getTime(),
    deliveredAt: ms(row.delivered_at),
  };
}

async function migrate(client: PoolClient): Promise<void> {
  await client.query('BEGIN');
  try {
    await client.query('SELECT pg_advisory_xact_lock($1)', [MIGRATION_LOCK_KEY]);
    await client.query(`CREATE TABLE IF NOT EXISTS jobs_schema_migrations (
      version integer PRIMARY KEY,
      name text NOT NULL,
      applied_at timestamptz NOT NULL DEFAULT now()
    )`);
    const { rows } = await client.query<{ v: number | null }>('SELECT MAX(version) AS v FROM jobs_schema_migrations');
    const current = rows[0].v ?? 0;
    const latest = MIGRATIONS[MIGRATIONS.length - 1].version;
    if (current > latest) {
      throw new Error(`the job tables are at schema version ${current}, newer than this build knows (${latest}); upgrade the service`);
    }
    for (const m of MIGRATIONS) {
      if (m.version <= current) continue;
      await client.query(m.sql);
      await client.query('INSERT INTO jobs_schema_migrations (version, name) VALUES ($1, $2)', [m.version, m.name]);
    }
    await client.query('COMMIT');
  } catch (err) {
    await client.query('ROLLBACK').catch(() => undefined);
    throw err;
  }
}

export interface PostgresJobStoreOptions {
  databaseUrl: string;
  poolSize?: number;
}

export async function openPostgresJobStore(opts: PostgresJobStoreOptions): Promise<JobStore> {
  const pool = new Pool({
    connectionString: opts.databaseUrl,
    max: opts.poolSize ?? 5,
    connectionTimeoutMillis: 10_000,
    idleTimeoutMillis: 30_000,
    statement_timeout: 30_000,
    application_name: 'noise-suppression-gateway-jobs',
  });
  pool.on('error', (err) => console.error('[jobs] idle PostgreSQL connection failed:', err.message));
  const first = await pool.connect();
  try {
    await migrate(first);
  } catch (err) {
    first.release();
    await pool.end();
    throw err;
  }
  first.release();

  const q = async <R extends QueryResultRow>(sql: string, params: unknown[] = [], client: Pool | PoolClient = pool): Promise<R[]> =>
    (await client.query<R>(sql, params)).rows;

  /** Runs `fn` in one transaction on one connection. */
  async function tx<T>(fn: (c: PoolClient) => Promise<T>): Promise<T> {
    const c = await pool.connect();
    try {
      await c.query('BEGIN');
      const out = await fn(c);
      await c.query('COMMIT');
      return out;
    } catch (err) {
      await c.query('ROLLBACK').catch(() => undefined);
      throw err;
    } finally {
      c.release();
    }
  }

  const insertDelivery = async (c: PoolClient | Pool, d: NewDelivery | null): Promise<void> => {
    if (!d) return;
    await c.query(
      `INSERT INTO webhook_deliveries (id, workspace_id, job_id, event, url, payload, status, attempts, next_attempt_at,
         created_at, give_up_at)
       VALUES ($1, $2, $3, $4, $5, $6, 'pending', 0, $7, $7, $8)`,
      [d.id, d.workspaceId, d.jobId, d.event, d.url, d.payload, at(d.createdAt), at(d.giveUpAt)],
    );
  };

  let closed = false;
  const store: JobStore = {
    async createJob(job: NewJob, maxActive) {
      return tx(async (c) => {
        // Serialises creations per workspace (across processes) so the cap holds.
        await c.query('SELECT pg_advisory_xact_lock(hashtextextended($1, 0))', [`jobs:${job.workspaceId}`]);
        const [{ n }] = await q<{ n: string }>(
          "SELECT COUNT(*) AS n FROM jobs WHERE workspace_id = $1 AND status IN ('queued','running')",
          [job.workspaceId],
          c,
        );
        const active = Number(n);
        if (active >= maxActive) return { ok: false as const, active };
        const [row] = await q<JobRow>(
          `INSERT INTO jobs (id, workspace_id, token_id, request_id, status, progress, params, input, webhook_url,
             created_at, updated_at, run_after, credits, charged_at)
           VALUES ($1, $2, $3, $4, 'queued', 0, $5, $6, $7, $8, $8, $8, $9, $10)
           RETURNING *`,
          [
            job.id,
            job.workspaceId,
            job.tokenId,
            job.requestId,
            JSON.stringify(job.params),
            JSON.stringify(job.input),
            job.webhookUrl,
            at(job.createdAt),
            job.credits,
            at(job.chargedAt),
          ],
          c,
        );
        return { ok: true as const, job: toJob(row) };
      });
    },
    async getJob(id) {
      const [row] = await q<JobRow>('SELECT * FROM jobs WHERE id = $1', [id]);
      return row ? toJob(row) : null;
    },
    async listJobs(query: JobListQuery) {
      const where: string[] = [];
      const params: unknown[] = [];
      const add = (sql: string, ...values: unknown[]): void => {
        let s = sql;
        for (const v of values) {
          params.push(v);
          s = s.replace('?', `$${params.length}`);
        }
        where.push(s);
      };
      if (query.workspaceId !== undefined) add('workspace_id = ?', query.workspaceId);
      if (query.status !== undefined) add('status = ?', query.status);
      if (query.before) add('(created_at, id) < (?, ?)', at(query.before.createdAt), query.before.id);
      params.push(Math.min(Math.max(Math.trunc(query.limit), 1), 1000));
      const rows = await q<JobRow>(
        `SELECT * FROM jobs ${where.length ? 'WHERE ' + where.join(' AND ') : ''}
         ORDER BY created_at DESC, id DESC LIMIT $${params.length}`,
        params,
      );
      return rows.map(toJob);
    },
    async countActive(workspaceId) {
      const [{ n }] = await q<{ n: string }>("SELECT COUNT(*) AS n FROM jobs WHERE workspace_id = $1 AND status IN ('queued','running')", [
        workspaceId,
      ]);
      return Number(n);
    },
    async claimJob(owner, leaseMs, now) {
      // The due job of the workspace with the fewest running jobs, then the oldest; rows other runners are
      // claiming right now are skipped, not waited for.
      const [row] = await q<JobRow>(
        `WITH running AS (
           SELECT workspace_id, COUNT(*) AS n FROM jobs WHERE status = 'running' GROUP BY workspace_id
         ), next AS (
           SELECT j.id FROM jobs j LEFT JOIN running r ON r.workspace_id = j.workspace_id
           WHERE j.status = 'queued' AND j.run_after <= $3
           ORDER BY COALESCE(r.n, 0), j.created_at, j.id
           LIMIT 1
           FOR UPDATE OF j SKIP LOCKED
         )
         UPDATE jobs SET status = 'running', lease_owner = $1, lease_expires_at = $2, attempts = attempts + 1,
           started_at = $3, updated_at = $3, progress = 0
         FROM next WHERE jobs.id = next.id
         RETURNING jobs.*`,
        [owner, at(now + leaseMs), at(now)],
      );
      return row ? toJob(row) : null;
    },
    async renewLease(id, owner, leaseMs, now, progress) {
      const rows = await q(
        `UPDATE jobs SET lease_expires_at = $3, updated_at = $4, progress = COALESCE($5, progress)
         WHERE id = $1 AND status = 'running' AND lease_owner = $2 RETURNING id`,
        [id, owner, at(now + leaseMs), at(now), progress ?? null],
      );
      return rows.length === 1;
    },
    async setInputBytes(id, owner, bytes) {
      const rows = await q(
        `UPDATE jobs SET input = jsonb_set(input, '{bytes}', to_jsonb($3::bigint))
         WHERE id = $1 AND status = 'running' AND lease_owner = $2 RETURNING id`,
        [id, owner, bytes],
      );
      return rows.length === 1;
    },
    async finishJob(id, owner, outcome: JobOutcome, now, delivery?: DeliveryFactory) {
      return tx(async (c) => {
        const [row] = await q<JobRow>(
          `UPDATE jobs SET status = $3, progress = CASE WHEN $3 = 'succeeded' THEN 1 ELSE progress END,
             finished_at = $4, updated_at = $4, lease_owner = NULL, lease_expires_at = NULL,
             result = $5, stats = $6, error = $7, expires_at = $8,
             refund = CASE WHEN $3 = 'failed' AND credits > 0 THEN 'pending' ELSE refund END
           WHERE id = $1 AND status = 'running' AND lease_owner = $2
           RETURNING *`,
          [
            id,
            owner,
            outcome.status,
            at(now),
            outcome.status === 'succeeded' ? JSON.stringify(outcome.result) : null,
            outcome.status === 'succeeded' ? JSON.stringify(outcome.stats) : null,
            outcome.status === 'failed' ? JSON.stringify(outcome.error) : null,
            at(outcome.expiresAt),
          ],
          c,
        );
        if (!row) return null;
        const job = toJob(row);
        if (delivery) await insertDelivery(c, delivery(job));
        return job;
      });
    },
    async retryJob(id, owner, runAfter, error, countAttempt, now) {
      const rows = await q(
        `UPDATE jobs SET status = 'queued', run_after = $3, updated_at = $4, lease_owner = NULL, lease_expires_at = NULL,
           progress = 0, error = $5, attempts = attempts - $6
         WHERE id = $1 AND status = 'running' AND lease_owner = $2 RETURNING id`,
        [id, owner, at(runAfter), at(now), error ? JSON.stringify(error) : null, countAttempt ? 0 : 1],
      );
      return rows.length === 1;
    },
    async reclaimExpired(now, maxAttempts, expiresAt, delivery) {
      return tx(async (c) => {
        const requeued: string[] = [];
        const failed: string[] = [];
        const expired = await q<JobRow>(
          `SELECT * FROM jobs WHERE status = 'running' AND lease_expires_at < $1
           ORDER BY lease_expires_at LIMIT 100 FOR UPDATE SKIP LOCKED`,
          [at(now)],
          c,
        );
        for (const row of expired) {
          if (row.attempts >= maxAttempts) {
            const error = {
              type: 'processing_failed',
              message: `the job's runner stopped ${row.attempts} times while working on it (crash or restart); giving up`,
            };
            const [out] = await q<JobRow>(
              `UPDATE jobs SET status = 'failed', finished_at = $2, updated_at = $2, lease_owner = NULL,
                 lease_expires_at = NULL, error = $3, expires_at = $4,
                 refund = CASE WHEN credits > 0 THEN 'pending' ELSE refund END
               WHERE id = $1 RETURNING *`,
              [row.id, at(now), JSON.stringify(error), at(expiresAt)],
              c,
            );
            failed.push(row.id);
            if (delivery) await insertDelivery(c, delivery(toJob(out)));
          } else {
            await c.query(
              `UPDATE jobs SET status = 'queued', run_after = $2, updated_at = $2, lease_owner = NULL,
                 lease_expires_at = NULL, progress = 0
               WHERE id = $1`,
              [row.id, at(now)],
            );
            requeued.push(row.id);
          }
        }
        return { requeued, failed };
      });
    },
    async cancelJob(id, workspaceId, now, expiresAt) {
      return tx(async (c) => {
        const [row] = await q<JobRow>('SELECT * FROM jobs WHERE id = $1 FOR UPDATE', [id], c);
        if (!row || (workspaceId !== null && row.workspace_id !== workspaceId)) return null;
        if (row.status !== 'queued' && row.status !== 'running') return { job: toJob(row), wasActive: false };
        const [out] = await q<JobRow>(
          `UPDATE jobs SET status = 'canceled', finished_at = $2, updated_at = $2, lease_owner = NULL,
             lease_expires_at = NULL, expires_at = $3,
             refund = CASE WHEN credits > 0 THEN 'pending' ELSE refund END
           WHERE id = $1 RETURNING *`,
          [id, at(now), at(expiresAt)],
          c,
        );
        return { job: toJob(out), wasActive: true };
      });
    },
    async deleteResult(id, workspaceId, now) {
      return tx(async (c) => {
        const [row] = await q<JobRow>('SELECT * FROM jobs WHERE id = $1 FOR UPDATE', [id], c);
        if (!row || (workspaceId !== null && row.workspace_id !== workspaceId)) return null;
        const [out] = await q<JobRow>(
          `UPDATE jobs SET result = NULL, result_deleted_at = $2, updated_at = $2
           WHERE id = $1 AND result IS NOT NULL AND status IN ('succeeded','failed','canceled') RETURNING *`,
          [id, at(now)],
          c,
        );
        return toJob(out ?? row);
      });
    },
    async expiredJobs(now, limit) {
      const rows = await q<JobRow>(
        `SELECT * FROM jobs WHERE expires_at IS NOT NULL AND expires_at <= $1 AND status IN ('succeeded','failed','canceled')
         ORDER BY expires_at LIMIT $2`,
        [at(now), limit],
      );
      return rows.map(toJob);
    },
    async deleteJob(id) {
      await q('DELETE FROM jobs WHERE id = $1', [id]);
    },
    async pendingRefunds(limit) {
      return (await q<JobRow>("SELECT * FROM jobs WHERE refund = 'pending' LIMIT $1", [limit])).map(toJob);
    },
    async setRefund(id, from, to) {
      return (await q('UPDATE jobs SET refund = $3 WHERE id = $1 AND refund = $2 RETURNING id', [id, from, to])).length === 1;
    },
    async knownJobIds() {
      return new Set((await q<{ id: string }>('SELECT id FROM jobs')).map((r) => r.id));
    },

    async webhookSecret(workspaceId) {
      const [row] = await q<{ secret: string }>('SELECT secret FROM webhook_secrets WHERE workspace_id = $1', [workspaceId]);
      return row?.secret ?? null;
    },
    async ensureWebhookSecret(workspaceId, fresh) {
      await q(
        'INSERT INTO webhook_secrets (workspace_id, secret, created_at) VALUES ($1, $2, now()) ON CONFLICT (workspace_id) DO NOTHING',
        [workspaceId, fresh()],
      );
      const [row] = await q<{ secret: string }>('SELECT secret FROM webhook_secrets WHERE workspace_id = $1', [workspaceId]);
      return row.secret;
    },
    async setWebhookSecret(workspaceId, secret) {
      await q(
        `INSERT INTO webhook_secrets (workspace_id, secret, created_at) VALUES ($1, $2, now())
         ON CONFLICT (workspace_id) DO UPDATE SET secret = excluded.secret, created_at = excluded.created_at`,
        [workspaceId, secret],
      );
    },

    async enqueueDelivery(d) {
      await insertDelivery(pool, d);
    },
    async claimDeliveries(owner, leaseMs, now, limit) {
      const rows = await q<DeliveryRow>(
        `UPDATE webhook_deliveries SET lease_owner = $1, lease_expires_at = $2
         WHERE id IN (
           SELECT id FROM webhook_deliveries
           WHERE status = 'pending' AND next_attempt_at <= $3 AND (lease_expires_at IS NULL OR lease_expires_at < $3)
           ORDER BY next_attempt_at LIMIT $4
           FOR UPDATE SKIP LOCKED)
         RETURNING *`,
        [owner, at(now + leaseMs), at(now), limit],
      );
      return rows.map(toDelivery).sort((a, b) => a.nextAttemptAt - b.nextAttemptAt);
    },
    async recordDeliveryAttempt(id, owner, a: DeliveryAttempt) {
      const newStatus = a.ok ? 'delivered' : a.nextAttemptAt === null ? 'failed' : 'pending';
      await q(
        `UPDATE webhook_deliveries SET attempts = attempts + 1, last_attempt_at = $3, last_status = $4, last_error = $5,
           status = $6, next_attempt_at = COALESCE($7, next_attempt_at),
           delivered_at = CASE WHEN $6 = 'delivered' THEN $3 ELSE delivered_at END,
           lease_owner = NULL, lease_expires_at = NULL
         WHERE id = $1 AND lease_owner = $2 AND status = 'pending'`,
        [id, owner, at(a.at), a.status, a.error, newStatus, at(a.nextAttemptAt)],
      );
    },
    async listDeliveries(query) {
      const where: string[] = [];
      const params: unknown[] = [];
      if (query.workspaceId !== undefined) (params.push(query.workspaceId), where.push(`workspace_id = $${params.length}`));
      if (query.jobId !== undefined) (params.push(query.jobId), where.push(`job_id = $${params.length}`));
      params.push(Math.min(Math.max(Math.trunc(query.limit), 1), 1000));
      const rows = await q<DeliveryRow>(
        `SELECT * FROM webhook_deliveries ${where.length ? 'WHERE ' + where.join(' AND ') : ''}
         ORDER BY created_at DESC, id DESC LIMIT $${params.length}`,
        params,
      );
      return rows.map(toDelivery);
    },
    async purgeDeliveries(before) {
      const rows = await q("DELETE FROM webhook_deliveries WHERE status <> 'pending' AND created_at < $1 RETURNING id", [at(before)]);
      return rows.length;
    },

    async close() {
      if (closed) return;
      closed = true;
      await pool.end();
    },
  };
  return store;
}
