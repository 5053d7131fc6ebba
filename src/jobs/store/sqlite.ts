// JobStore on embedded SQLite: DATA_DIR/jobs.db (its own file, next to gateway.db; see docs/jobs.md for why).
// WAL + busy_timeout so several processes may share it; every state change is one statement or one IMMEDIATE
// transaction, and every change a runner makes is fenced by its lease (WHERE lease_owner = ?).
import fs from 'node:fs';
import path from 'node:path';
import Database from 'better-sqlite3';
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
} from '../types';

/** Numbered migrations of jobs.db; each runs once, in order, recorded in jobs_schema_migrations. Append only. */
const MIGRATIONS: Array<{ version: number; name: string; sql: string }> = [
  {
    version: 1,
    name: 'jobs, webhook secrets, webhook deliveries',
    sql: `
      CREATE TABLE jobs (
        id TEXT PRIMARY KEY,
        workspace_id TEXT NOT NULL,
        token_id TEXT,
        request_id TEXT,
        status TEXT NOT NULL CHECK (status IN ('queued','running','succeeded','failed','canceled')),
        progress REAL NOT NULL DEFAULT 0,
        params TEXT NOT NULL,
        input TEXT NOT NULL,
        webhook_url TEXT,
        created_at INTEGER NOT NULL,
        started_at INTEGER,
        finished_at INTEGER,
        updated_at INTEGER NOT NULL,
        attempts INTEGER NOT NULL DEFAULT 0,
        run_after INTEGER NOT NULL,
        lease_owner TEXT,
        lease_expires_at INTEGER,
        stats TEXT,
        error TEXT,
        result TEXT,
        result_deleted_at INTEGER,
        expires_at INTEGER,
        credits INTEGER NOT NULL DEFAULT 0,
        charged_at INTEGER,
        refund TEXT NOT NULL DEFAULT 'none' CHECK (refund IN ('none','pending','done'))
      );
      CREATE INDEX jobs_workspace_created ON jobs(workspace_id, created_at DESC, id DESC);
      CREATE INDEX jobs_created ON jobs(created_at DESC, id DESC);
      CREATE INDEX jobs_status_run_after ON jobs(status, run_after);
      CREATE INDEX jobs_running_workspace ON jobs(status, workspace_id);
      CREATE INDEX jobs_expires ON jobs(expires_at) WHERE expires_at IS NOT NULL;
      CREATE INDEX jobs_refund ON jobs(refund) WHERE refund = 'pending';
      CREATE TABLE webhook_secrets (
        workspace_id TEXT PRIMARY KEY,
        secret TEXT NOT NULL,
        created_at INTEGER NOT NULL
      );
      CREATE TABLE webhook_deliveries (
        id TEXT PRIMARY KEY,
        workspace_id TEXT NOT NULL,
        job_id TEXT NOT NULL,
        event TEXT NOT NULL,
        url TEXT NOT NULL,
        payload TEXT NOT NULL,
        status TEXT NOT NULL CHECK (status IN ('pending','delivered','failed')),
        attempts INTEGER NOT NULL DEFAULT 0,
        next_attempt_at INTEGER NOT NULL,
        last_attempt_at INTEGER,
        last_status INTEGER,
        last_error TEXT,
        created_at INTEGER NOT NULL,
        give_up_at INTEGER NOT NULL,
        delivered_at INTEGER,
        lease_owner TEXT,
        lease_expires_at INTEGER
      );
      CREATE INDEX deliveries_due ON webhook_deliveries(status, next_attempt_at);
      CREATE INDEX deliveries_workspace ON webhook_deliveries(workspace_id, created_at DESC);
      CREATE INDEX deliveries_job ON webhook_deliveries(job_id);
    `,
  },
];

interface JobRow {
  id: string;
  workspace_id: string;
  token_id: string | null;
  request_id: string | null;
  status: JobRecord['status'];
  progress: number;
  params: string;
  input: string;
  webhook_url: string | null;
  created_at: number;
  started_at: number | null;
  finished_at: number | null;
  updated_at: number;
  attempts: number;
  run_after: number;
  lease_owner: string | null;
  lease_expires_at: number | null;
  stats: string | null;
  error: string | null;
  result: string | null;
  result_deleted_at: number | null;
  expires_at: number | null;
  credits: number;
  charged_at: number | null;
  refund: JobRecord['refund'];
}

interface DeliveryRow {
  id: string;
  workspace_id: string;
  job_id: string;
  event: DeliveryRecord['event'];
  url: string;
  payload: string;
  status: DeliveryRecord['status'];
  attempts: number;
  next_attempt_at: number;
  last_attempt_at: number | null;
  last_status: number | null;
  last_error: string | null;
  created_at: number;
  give_up_at: number;
  delivered_at: number | null;
}

const json = <T>(text: string | null): T | null => (text === null ? null : (JSON.parse(text) as T));

export function toJob(row: JobRow): JobRecord {
  return {
    id: row.id,
    workspaceId: row.workspace_id,
    tokenId: row.token_id,
    requestId: row.request_id,
    status: row.status,
    progress: row.progress,
    params: JSON.parse(row.params),
    input: JSON.parse(row.input),
    webhookUrl: row.webhook_url,
    createdAt: Number(row.created_at),
    startedAt: row.started_at === null ? null : Number(row.started_at),
    finishedAt: row.finished_at === null ? null : Number(row.finished_at),
    updatedAt: Number(row.updated_at),
    attempts: row.attempts,
    runAfter: Number(row.run_after),
    leaseOwner: row.lease_owner,
    leaseExpiresAt: row.lease_expires_at === null ? null : Number(row.lease_expires_at),
    stats: json(row.stats),
    error: json(row.error),
    result: json(row.result),
    resultDeletedAt: row.result_deleted_at === null ? null : Number(row.result_deleted_at),
    expiresAt: row.expires_at === null ? null : Number(row.expires_at),
    credits: row.credits,
    chargedAt: row.charged_at === null ? null : Number(row.charged_at),
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
    nextAttemptAt: Number(row.next_attempt_at),
    lastAttemptAt: row.last_attempt_at === null ? null : Number(row.last_attempt_at),
    lastStatus: row.last_status,
    lastError: row.last_error,
    createdAt: Number(row.created_at),
    giveUpAt: Number(row.give_up_at),
    deliveredAt: row.delivered_at === null ? null : Number(row.delivered_at),
  };
}

export function jobsDbPath(dataDir: string): string {
  return path.join(dataDir, 'jobs.db');
}

function migrate(db: Database.Database): void {
  db.exec(`CREATE TABLE IF NOT EXISTS jobs_schema_migrations (
    version INTEGER PRIMARY KEY,
    name TEXT NOT NULL,
    applied_at TEXT NOT NULL
  )`);
  const apply = db.transaction(() => {
    const row = db.prepare('SELECT MAX(version) AS v FROM jobs_schema_migrations').get() as { v: number | null };
    const current = row.v ?? 0;
    for (const m of MIGRATIONS) {
      if (m.version <= current) continue;
      db.exec(m.sql);
      db.prepare('INSERT INTO jobs_schema_migrations (version, name, applied_at) VALUES (?, ?, ?)').run(
        m.version,
        m.name,
        new Date().toISOString(),
      );
    }
  });
  apply.immediate();
}

export function openSqliteJobStore(dataDir: string): JobStore {
  fs.mkdirSync(dataDir, { recursive: true });
  const db = new Database(jobsDbPath(dataDir));
  db.pragma('busy_timeout = 5000');
  db.pragma('journal_mode = WAL');
  db.pragma('synchronous = NORMAL');
  migrate(db);

  const stmt = {
    insert: db.prepare(
      `INSERT INTO jobs (id, workspace_id, token_id, request_id, status, progress, params, input, webhook_url,
         created_at, updated_at, run_after, credits, charged_at)
       VALUES (@id, @workspaceId, @tokenId, @requestId, 'queued', 0, @params, @input, @webhookUrl,
         @createdAt, @createdAt, @createdAt, @credits, @chargedAt)`,
    ),
    get: db.prepare('SELECT * FROM jobs WHERE id = ?'),
    countActive: db.prepare("SELECT COUNT(*) AS n FROM jobs WHERE workspace_id = ? AND status IN ('queued','running')"),
    claim: db.prepare(
      `UPDATE jobs SET status = 'running', lease_owner = @owner, lease_expires_at = @lease, attempts = attempts + 1,
         started_at = @now, updated_at = @now, progress = 0
       WHERE id = (
         SELECT j.id FROM jobs j WHERE j.status = 'queued' AND j.run_after <= @now
         ORDER BY (SELECT COUNT(*) FROM jobs r WHERE r.status = 'running' AND r.workspace_id = j.workspace_id),
           j.created_at, j.id
         LIMIT 1)
       AND status = 'queued'
       RETURNING *`,
    ),
    renew: db.prepare(
      `UPDATE jobs SET lease_expires_at = @lease, updated_at = @now, progress = COALESCE(@progress, progress)
       WHERE id = @id AND status = 'running' AND lease_owner = @owner`,
    ),
    setInputBytes: db.prepare(
      `UPDATE jobs SET input = json_set(input, '$.bytes', @bytes) WHERE id = @id AND status = 'running' AND lease_owner = @owner`,
    ),
    finish: db.prepare(
      `UPDATE jobs SET status = @status, progress = CASE WHEN @status = 'succeeded' THEN 1 ELSE progress END,
         finished_at = @now, updated_at = @now, lease_owner = NULL, lease_expires_at = NULL,
         result = @result, stats = @stats, error = @error, expires_at = @expiresAt,
         refund = CASE WHEN @status = 'failed' AND credits > 0 THEN 'pending' ELSE refund END
       WHERE id = @id AND status = 'running' AND lease_owner = @owner
       RETURNING *`,
    ),
    retry: db.prepare(
      `UPDATE jobs SET status = 'queued', run_after = @runAfter, updated_at = @now, lease_owner = NULL,
         lease_expires_at = NULL, progress = 0, error = @error, attempts = attempts - @undo
       WHERE id = @id AND status = 'running' AND lease_owner = @owner`,
    ),
    expiredLeases: db.prepare(
      "SELECT * FROM jobs WHERE status = 'running' AND lease_expires_at < ? ORDER BY lease_expires_at LIMIT 100",
    ),
    requeue: db.prepare(
      `UPDATE jobs SET status = 'queued', run_after = @now, updated_at = @now, lease_owner = NULL, lease_expires_at = NULL,
         progress = 0
       WHERE id = @id AND status = 'running' AND lease_expires_at < @now`,
    ),
    failExpired: db.prepare(
      `UPDATE jobs SET status = 'failed', finished_at = @now, updated_at = @now, lease_owner = NULL,
         lease_expires_at = NULL, error = @error, expires_at = @expiresAt,
         refund = CASE WHEN credits > 0 THEN 'pending' ELSE refund END
       WHERE id = @id AND status = 'running' AND lease_expires_at < @now
       RETURNING *`,
    ),
    cancel: db.prepare(
      `UPDATE jobs SET status = 'canceled', finished_at = @now, updated_at = @now, lease_owner = NULL,
         lease_expires_at = NULL, expires_at = @expiresAt,
         refund = CASE WHEN credits > 0 THEN 'pending' ELSE refund END
       WHERE id = @id AND status IN ('queued','running')
       RETURNING *`,
    ),
    deleteResult: db.prepare(
      `UPDATE jobs SET result = NULL, result_deleted_at = @now, updated_at = @now
       WHERE id = @id AND result IS NOT NULL AND status IN ('succeeded','failed','canceled')`,
    ),
    expired: db.prepare(
      `SELECT * FROM jobs WHERE expires_at IS NOT NULL AND expires_at <= ? AND status IN ('succeeded','failed','canceled')
       ORDER BY expires_at LIMIT ?`,
    ),
    delete: db.prepare('DELETE FROM jobs WHERE id = ?'),
    pendingRefunds: db.prepare("SELECT * FROM jobs WHERE refund = 'pending' LIMIT ?"),
    setRefund: db.prepare('UPDATE jobs SET refund = @to WHERE id = @id AND refund = @from'),
    allIds: db.prepare('SELECT id FROM jobs'),
    getSecret: db.prepare('SELECT secret FROM webhook_secrets WHERE workspace_id = ?'),
    insertSecret: db.prepare(
      'INSERT INTO webhook_secrets (workspace_id, secret, created_at) VALUES (?, ?, ?) ON CONFLICT (workspace_id) DO NOTHING',
    ),
    setSecret: db.prepare(
      `INSERT INTO webhook_secrets (workspace_id, secret, created_at) VALUES (?, ?, ?)
       ON CONFLICT (workspace_id) DO UPDATE SET secret = excluded.secret, created_at = excluded.created_at`,
    ),
    insertDelivery: db.prepare(
      `INSERT INTO webhook_deliveries (id, workspace_id, job_id, event, url, payload, status, attempts, next_attempt_at,
         created_at, give_up_at)
       VALUES (@id, @workspaceId, @jobId, @event, @url, @payload, 'pending', 0, @createdAt, @createdAt, @giveUpAt)`,
    ),
    dueDeliveries: db.prepare(
      `SELECT id FROM webhook_deliveries WHERE status = 'pending' AND next_attempt_at <= @now
         AND (lease_expires_at IS NULL OR lease_expires_at < @now)
       ORDER BY next_attempt_at LIMIT @limit`,
    ),
    leaseDelivery: db.prepare(
      `UPDATE webhook_deliveries SET lease_owner = @owner, lease_expires_at = @lease
       WHERE id = @id AND status = 'pending' AND (lease_expires_at IS NULL OR lease_expires_at < @now)
       RETURNING *`,
    ),
    recordDelivery: db.prepare(
      `UPDATE webhook_deliveries SET attempts = attempts + 1, last_attempt_at = @at, last_status = @status,
         last_error = @error, status = @newStatus, next_attempt_at = COALESCE(@next, next_attempt_at),
         delivered_at = CASE WHEN @newStatus = 'delivered' THEN @at ELSE delivered_at END,
         lease_owner = NULL, lease_expires_at = NULL
       WHERE id = @id AND lease_owner = @owner AND status = 'pending'`,
    ),
    purgeDeliveries: db.prepare("DELETE FROM webhook_deliveries WHERE status != 'pending' AND created_at < ?"),
  };

  const insertJob = db.transaction((job: NewJob, maxActive: number) => {
    const active = (stmt.countActive.get(job.workspaceId) as { n: number }).n;
    if (active >= maxActive) return { ok: false as const, active };
    stmt.insert.run({
      id: job.id,
      workspaceId: job.workspaceId,
      tokenId: job.tokenId,
      requestId: job.requestId,
      params: JSON.stringify(job.params),
      input: JSON.stringify(job.input),
      webhookUrl: job.webhookUrl,
      createdAt: job.createdAt,
      credits: job.credits,
      chargedAt: job.chargedAt,
    });
    return { ok: true as const, job: toJob(stmt.get.get(job.id) as JobRow) };
  });

  const enqueue = (d: NewDelivery | null): void => {
    if (d) stmt.insertDelivery.run(d);
  };

  const finishTx = db.transaction((id: string, owner: string, outcome: JobOutcome, now: number, delivery?: DeliveryFactory) => {
    const row = stmt.finish.get({
      id,
      owner,
      now,
      status: outcome.status,
      result: outcome.status === 'succeeded' ? JSON.stringify(outcome.result) : null,
      stats: outcome.status === 'succeeded' ? JSON.stringify(outcome.stats) : null,
      error: outcome.status === 'failed' ? JSON.stringify(outcome.error) : null,
      expiresAt: outcome.expiresAt,
    }) as JobRow | undefined;
    if (!row) return null;
    const job = toJob(row);
    if (delivery) enqueue(delivery(job));
    return job;
  });

  const reclaimTx = db.transaction((now: number, maxAttempts: number, expiresAt: number, delivery?: DeliveryFactory) => {
    const requeued: string[] = [];
    const failed: string[] = [];
    for (const row of stmt.expiredLeases.all(now) as JobRow[]) {
      if (row.attempts >= maxAttempts) {
        const error = {
          type: 'processing_failed',
          message: `the job's runner stopped ${row.attempts} times while working on it (crash or restart); giving up`,
        };
        const out = stmt.failExpired.get({ id: row.id, now, error: JSON.stringify(error), expiresAt }) as JobRow | undefined;
        if (out) {
          failed.push(row.id);
          if (delivery) enqueue(delivery(toJob(out)));
        }
      } else if (stmt.requeue.run({ id: row.id, now }).changes === 1) {
        requeued.push(row.id);
      }
    }
    return { requeued, failed };
  });

  const claimDeliveriesTx = db.transaction((owner: string, leaseMs: number, now: number, limit: number) => {
    const ids = stmt.dueDeliveries.all({ now, limit }) as Array<{ id: string }>;
    const out: DeliveryRecord[] = [];
    for (const { id } of ids) {
      const row = stmt.leaseDelivery.get({ id, owner, lease: now + leaseMs, now }) as DeliveryRow | undefined;
      if (row) out.push(toDelivery(row));
    }
    return out;
  });

  let closed = false;
  const store: JobStore = {
    async createJob(job, maxActive) {
      return insertJob.immediate(job, maxActive);
    },
    async getJob(id) {
      const row = stmt.get.get(id) as JobRow | undefined;
      return row ? toJob(row) : null;
    },
    async listJobs(q: JobListQuery) {
      const where: string[] = [];
      const params: unknown[] = [];
      if (q.workspaceId !== undefined) (where.push('workspace_id = ?'), params.push(q.workspaceId));
      if (q.status !== undefined) (where.push('status = ?'), params.push(q.status));
      if (q.before) {
        where.push('(created_at < ? OR (created_at = ? AND id < ?))');
        params.push(q.before.createdAt, q.before.createdAt, q.before.id);
      }
      const limit = Math.min(Math.max(Math.trunc(q.limit), 1), 1000);
      const rows = db
        .prepare(`SELECT * FROM jobs ${where.length ? 'WHERE ' + where.join(' AND ') : ''} ORDER BY created_at DESC, id DESC LIMIT ?`)
        .all(...params, limit) as JobRow[];
      return rows.map(toJob);
    },
    async countActive(workspaceId) {
      return (stmt.countActive.get(workspaceId) as { n: number }).n;
    },
    async claimJob(owner, leaseMs, now) {
      const row = db.transaction(() => stmt.claim.get({ owner, lease: now + leaseMs, now }) as JobRow | undefined).immediate();
      return row ? toJob(row) : null;
    },
    async renewLease(id, owner, leaseMs, now, progress) {
      return stmt.renew.run({ id, owner, lease: now + leaseMs, now, progress: progress ?? null }).changes === 1;
    },
    async setInputBytes(id, owner, bytes) {
      return stmt.setInputBytes.run({ id, owner, bytes }).changes === 1;
    },
    async finishJob(id, owner, outcome, now, delivery) {
      return finishTx.immediate(id, owner, outcome, now, delivery);
    },
    async retryJob(id, owner, runAfter, error, countAttempt, now) {
      return (
        stmt.retry.run({ id, owner, runAfter, now, error: error ? JSON.stringify(error) : null, undo: countAttempt ? 0 : 1 })
          .changes === 1
      );
    },
    async reclaimExpired(now, maxAttempts, expiresAt, delivery) {
      return reclaimTx.immediate(now, maxAttempts, expiresAt, delivery);
    },
    async cancelJob(id, workspaceId, now, expiresAt) {
      return db
        .transaction(() => {
          const row = stmt.get.get(id) as JobRow | undefined;
          if (!row || (workspaceId !== null && row.workspace_id !== workspaceId)) return null;
          const out = stmt.cancel.get({ id, now, expiresAt }) as JobRow | undefined;
          return out ? { job: toJob(out), wasActive: true } : { job: toJob(row), wasActive: false };
        })
        .immediate();
    },
    async deleteResult(id, workspaceId, now) {
      return db
        .transaction(() => {
          const row = stmt.get.get(id) as JobRow | undefined;
          if (!row || (workspaceId !== null && row.workspace_id !== workspaceId)) return null;
          stmt.deleteResult.run({ id, now });
          return toJob(stmt.get.get(id) as JobRow);
        })
        .immediate();
    },
    async expiredJobs(now, limit) {
      return (stmt.expired.all(now, limit) as JobRow[]).map(toJob);
    },
    async deleteJob(id) {
      stmt.delete.run(id);
    },
    async pendingRefunds(limit) {
      return (stmt.pendingRefunds.all(limit) as JobRow[]).map(toJob);
    },
    async setRefund(id, from, to) {
      return stmt.setRefund.run({ id, from, to }).changes === 1;
    },
    async knownJobIds() {
      return new Set((stmt.allIds.all() as Array<{ id: string }>).map((r) => r.id));
    },

    async webhookSecret(workspaceId) {
      return (stmt.getSecret.get(workspaceId) as { secret: string } | undefined)?.secret ?? null;
    },
    async ensureWebhookSecret(workspaceId, fresh) {
      stmt.insertSecret.run(workspaceId, fresh(), Date.now());
      return (stmt.getSecret.get(workspaceId) as { secret: string }).secret;
    },
    async setWebhookSecret(workspaceId, secret) {
      stmt.setSecret.run(workspaceId, secret, Date.now());
    },

    async enqueueDelivery(d) {
      stmt.insertDelivery.run(d);
    },
    async claimDeliveries(owner, leaseMs, now, limit) {
      return claimDeliveriesTx.immediate(owner, leaseMs, now, limit);
    },
    async recordDeliveryAttempt(id, owner, a: DeliveryAttempt) {
      const newStatus = a.ok ? 'delivered' : a.nextAttemptAt === null ? 'failed' : 'pending';
      stmt.recordDelivery.run({ id, owner, at: a.at, status: a.status, error: a.error, newStatus, next: a.nextAttemptAt });
    },
    async listDeliveries(q) {
      const where: string[] = [];
      const params: unknown[] = [];
      if (q.workspaceId !== undefined) (where.push('workspace_id = ?'), params.push(q.workspaceId));
      if (q.jobId !== undefined) (where.push('job_id = ?'), params.push(q.jobId));
      const limit = Math.min(Math.max(Math.trunc(q.limit), 1), 1000);
      const rows = db
        .prepare(
          `SELECT * FROM webhook_deliveries ${where.length ? 'WHERE ' + where.join(' AND ') : ''}
           ORDER BY created_at DESC, id DESC LIMIT ?`,
        )
        .all(...params, limit) as DeliveryRow[];
      return rows.map(toDelivery);
    },
    async purgeDeliveries(before) {
      return stmt.purgeDeliveries.run(before).changes;
    },

    async close() {
      if (closed) return;
      closed = true;
      db.close();
    },
  };
  return store;
}
