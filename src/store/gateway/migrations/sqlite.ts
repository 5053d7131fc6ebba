// The SQLite schema as numbered migrations. Each runs once, in order, inside one transaction, and is recorded in
// schema_migrations. APPEND ONLY: never edit a migration that has shipped; add the next number at the end, and add
// the same version to ./postgres.ts so both engines stay at the same schema version.
import type { Migration } from '../../../db/migrations';

export const SQLITE_MIGRATIONS: Migration[] = [
  {
    version: 1,
    name: 'initial schema',
    sql: `
      CREATE TABLE workspaces (
        id TEXT PRIMARY KEY,
        name TEXT NOT NULL UNIQUE,
        plan TEXT NOT NULL CHECK (plan IN ('free','starter','scale','enterprise')),
        custom_rpm INTEGER,
        custom_credits INTEGER,
        excluded_services TEXT NOT NULL DEFAULT '[]',
        created_at TEXT NOT NULL
      );
      CREATE TABLE tokens (
        id TEXT PRIMARY KEY,
        workspace_id TEXT NOT NULL REFERENCES workspaces(id),
        token_hash TEXT NOT NULL UNIQUE,
        prefix TEXT NOT NULL,
        name TEXT NOT NULL,
        scopes TEXT NOT NULL,
        allowed_ips TEXT NOT NULL,
        expires_at TEXT,
        revoked_at TEXT,
        last_used_at TEXT,
        created_at TEXT NOT NULL
      );
      CREATE INDEX tokens_workspace ON tokens(workspace_id);
      CREATE INDEX tokens_prefix ON tokens(prefix);
      CREATE TABLE credit_usage (
        workspace_id TEXT NOT NULL REFERENCES workspaces(id),
        period TEXT NOT NULL,
        used INTEGER NOT NULL DEFAULT 0 CHECK (used >= 0),
        PRIMARY KEY (workspace_id, period)
      );
      CREATE TABLE request_log (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        request_id TEXT NOT NULL,
        time TEXT NOT NULL,
        token_id TEXT,
        workspace_id TEXT,
        method TEXT NOT NULL,
        service TEXT,
        endpoint TEXT,
        status INTEGER NOT NULL,
        error_type TEXT,
        credits_charged INTEGER NOT NULL DEFAULT 0,
        bytes_in INTEGER NOT NULL DEFAULT 0,
        bytes_out INTEGER NOT NULL DEFAULT 0,
        upstream_ms REAL,
        total_ms REAL NOT NULL,
        client_ip TEXT NOT NULL
      );
      CREATE INDEX request_log_time ON request_log(time);
      CREATE INDEX request_log_request_id ON request_log(request_id);
      CREATE INDEX request_log_workspace_time ON request_log(workspace_id, time);
      CREATE INDEX request_log_token_time ON request_log(token_id, time);
      CREATE INDEX request_log_status_time ON request_log(status, time);
      CREATE INDEX request_log_error_time ON request_log(error_type, time);
      CREATE INDEX request_log_endpoint_time ON request_log(endpoint, time);
      CREATE TABLE settings (
        key TEXT PRIMARY KEY,
        value TEXT NOT NULL
      );
    `,
  },
  {
    version: 2,
    name: 'request_log.error_message: the reason of a failed call in words',
    sql: `ALTER TABLE request_log ADD COLUMN error_message TEXT;`,
  },
  {
    version: 3,
    name: 'credit reservations, client request ids',
    sql: `
      ALTER TABLE credit_usage ADD COLUMN reserved INTEGER NOT NULL DEFAULT 0 CHECK (reserved >= 0);
      CREATE TABLE credit_reservations (
        id TEXT PRIMARY KEY,
        workspace_id TEXT NOT NULL REFERENCES workspaces(id),
        period TEXT NOT NULL,
        amount INTEGER NOT NULL CHECK (amount > 0),
        expires_at INTEGER NOT NULL
      );
      CREATE INDEX credit_reservations_workspace_expiry ON credit_reservations(workspace_id, expires_at);
      CREATE INDEX credit_reservations_expiry ON credit_reservations(expires_at);
      ALTER TABLE request_log ADD COLUMN client_request_id TEXT;
    `,
  },
  {
    version: 4,
    name: 'request_log: refusals aggregated per key, status, error, endpoint and minute (calls, aggregate_key)',
    sql: `
      ALTER TABLE request_log ADD COLUMN calls INTEGER NOT NULL DEFAULT 1 CHECK (calls >= 1);
      ALTER TABLE request_log ADD COLUMN aggregate_key TEXT;
      CREATE UNIQUE INDEX request_log_aggregate ON request_log(aggregate_key);
    `,
  },
  {
    version: 5,
    name: 'credits across the job queue: charges waiting for their job, refunds applied once',
    sql: `
      CREATE TABLE credit_pending (
        key TEXT PRIMARY KEY,
        workspace_id TEXT NOT NULL REFERENCES workspaces(id),
        period TEXT NOT NULL,
        amount INTEGER NOT NULL CHECK (amount > 0),
        owner TEXT NOT NULL,
        created_at INTEGER NOT NULL
      );
      CREATE TABLE credit_refunds (
        key TEXT PRIMARY KEY,
        workspace_id TEXT NOT NULL,
        period TEXT NOT NULL,
        amount INTEGER NOT NULL,
        refunded_at INTEGER NOT NULL
      );
      CREATE INDEX credit_refunds_time ON credit_refunds(refunded_at);
    `,
  },
];
