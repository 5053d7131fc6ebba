// The job tables on PostgreSQL (the gateway store's database, DATABASE_URL) as numbered migrations, recorded in
// jobs_schema_migrations. Version N is the same change as version N in ./sqlite.ts (test/integration/jobs-schema.test.ts compares
// the resulting schemas). APPEND ONLY: never edit a migration that has shipped; add the next number at the end of
// both lists.
import type { Migration } from '../../../db/migrations';

export const POSTGRES_JOB_MIGRATIONS: Migration[] = [
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
  {
    version: 2,
    name: "one index set on both engines: SQLite takes PostgreSQL's partial indexes",
    // Version 1 created them here already; only SQLite's change.
    sql: `SELECT 1`,
  },
];
