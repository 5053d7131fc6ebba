// The job tables on SQLite (DATA_DIR/jobs.db) as numbered migrations, recorded in jobs_schema_migrations. Version N
// is the same change as version N in ./postgres.ts (test/integration/jobs-schema.test.ts compares the resulting schemas).
// APPEND ONLY: never edit a migration that has shipped; add the next number at the end of both lists.
// Times are INTEGER ms since the epoch, JSON is TEXT (PostgreSQL: timestamptz, jsonb).
import type { Migration } from '../../../db/migrations';

export const SQLITE_JOB_MIGRATIONS: Migration[] = [
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
  {
    version: 2,
    name: "one index set on both engines: SQLite takes PostgreSQL's partial indexes",
    sql: `
      DROP INDEX jobs_status_run_after;
      DROP INDEX jobs_running_workspace;
      DROP INDEX jobs_refund;
      DROP INDEX deliveries_due;
      CREATE INDEX jobs_queued ON jobs(run_after, created_at) WHERE status = 'queued';
      CREATE INDEX jobs_running ON jobs(workspace_id, lease_expires_at) WHERE status = 'running';
      CREATE INDEX jobs_refund ON jobs(id) WHERE refund = 'pending';
      CREATE INDEX deliveries_due ON webhook_deliveries(next_attempt_at) WHERE status = 'pending';
    `,
  },
];
