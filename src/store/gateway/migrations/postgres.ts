// The PostgreSQL schema as numbered migrations, the same versions as ./sqlite.ts (version N is the same change in
// both engines). They run at start (and with `npm run -s db -- migrate`) in one transaction under an advisory lock,
// so several gateway replicas starting together apply each migration exactly once. APPEND ONLY: never edit a
// migration that has shipped; add the next number at the end of both lists.
import type { Migration } from '../../../db/migrations';

export const POSTGRES_MIGRATIONS: Migration[] = [
  {
    version: 1,
    name: 'initial schema',
    sql: `
      CREATE TABLE workspaces (
        id text PRIMARY KEY,
        seq bigint GENERATED ALWAYS AS IDENTITY,
        name text NOT NULL UNIQUE,
        plan text NOT NULL CHECK (plan IN ('free','starter','scale','enterprise')),
        custom_rpm integer,
        custom_credits bigint,
        excluded_services jsonb NOT NULL DEFAULT '[]'::jsonb,
        created_at timestamptz NOT NULL
      );
      CREATE TABLE tokens (
        id text PRIMARY KEY,
        seq bigint GENERATED ALWAYS AS IDENTITY,
        workspace_id text NOT NULL REFERENCES workspaces(id),
        token_hash text NOT NULL UNIQUE,
        prefix text NOT NULL,
        name text NOT NULL,
        scopes jsonb NOT NULL,
        allowed_ips jsonb NOT NULL,
        expires_at timestamptz,
        revoked_at timestamptz,
        last_used_at timestamptz,
        created_at timestamptz NOT NULL
      );
      CREATE INDEX tokens_workspace ON tokens(workspace_id);
      CREATE INDEX tokens_prefix ON tokens(prefix);
      CREATE TABLE credit_usage (
        workspace_id text NOT NULL REFERENCES workspaces(id),
        period text NOT NULL,
        used bigint NOT NULL DEFAULT 0 CHECK (used >= 0),
        PRIMARY KEY (workspace_id, period)
      );
      CREATE TABLE request_log (
        id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        request_id text NOT NULL,
        time timestamptz NOT NULL,
        token_id text,
        workspace_id text,
        method text NOT NULL,
        service text,
        endpoint text,
        status integer NOT NULL,
        error_type text,
        credits_charged integer NOT NULL DEFAULT 0,
        bytes_in bigint NOT NULL DEFAULT 0,
        bytes_out bigint NOT NULL DEFAULT 0,
        upstream_ms double precision,
        total_ms double precision NOT NULL,
        client_ip text NOT NULL
      );
      CREATE INDEX request_log_time ON request_log(time);
      CREATE INDEX request_log_request_id ON request_log(request_id);
      CREATE INDEX request_log_workspace_time ON request_log(workspace_id, time);
      CREATE INDEX request_log_token_time ON request_log(token_id, time);
      CREATE INDEX request_log_status_time ON request_log(status, time);
      CREATE INDEX request_log_error_time ON request_log(error_type, time);
      CREATE INDEX request_log_endpoint_time ON request_log(endpoint, time);
      CREATE TABLE settings (
        key text PRIMARY KEY,
        value text NOT NULL
      );
    `,
  },
  {
    version: 2,
    name: 'request_log.error_message: the reason of a failed call in words',
    sql: `ALTER TABLE request_log ADD COLUMN error_message text;`,
  },
  {
    version: 3,
    name: 'credit reservations, client request ids',
    sql: `
      ALTER TABLE credit_usage ADD COLUMN reserved bigint NOT NULL DEFAULT 0 CHECK (reserved >= 0);
      CREATE TABLE credit_reservations (
        id text PRIMARY KEY,
        workspace_id text NOT NULL REFERENCES workspaces(id),
        period text NOT NULL,
        amount integer NOT NULL CHECK (amount > 0),
        expires_at timestamptz NOT NULL
      );
      CREATE INDEX credit_reservations_workspace_expiry ON credit_reservations(workspace_id, expires_at);
      CREATE INDEX credit_reservations_expiry ON credit_reservations(expires_at);
      ALTER TABLE request_log ADD COLUMN client_request_id text;
    `,
  },
  {
    version: 4,
    name: 'request_log: refusals aggregated per key, status, error, endpoint and minute (calls, aggregate_key)',
    sql: `
      ALTER TABLE request_log ADD COLUMN calls integer NOT NULL DEFAULT 1 CHECK (calls >= 1);
      ALTER TABLE request_log ADD COLUMN aggregate_key text;
      CREATE UNIQUE INDEX request_log_aggregate ON request_log(aggregate_key);
    `,
  },
  {
    version: 5,
    name: 'credits across the job queue: charges waiting for their job, refunds applied once',
    sql: `
      CREATE TABLE credit_pending (
        key text PRIMARY KEY,
        workspace_id text NOT NULL REFERENCES workspaces(id),
        period text NOT NULL,
        amount integer NOT NULL CHECK (amount > 0),
        owner text NOT NULL,
        created_at bigint NOT NULL
      );
      CREATE TABLE credit_refunds (
        key text PRIMARY KEY,
        workspace_id text NOT NULL,
        period text NOT NULL,
        amount integer NOT NULL,
        refunded_at bigint NOT NULL
      );
      CREATE INDEX credit_refunds_time ON credit_refunds(refunded_at);
    `,
  },
];
