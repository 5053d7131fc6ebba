// GatewayStore on PostgreSQL (node-postgres `pg`, one pool per process), selected by DATABASE_URL. Several gateway
// processes share it: every check-and-change is one SQL statement (or one transaction) that PostgreSQL makes atomic,
// so credits cannot be overspent however many gateways charge at once. Same contract and behaviour as the SQLite
// engine (sqlite-store.ts); the contract tests run against both.
import type { Pool, QueryResultRow } from 'pg';
import { redactUrl, type Config } from '../config';
import type { MigrationResult } from '../db/migrations';
import { applyPostgresMigrations, createPool } from '../db/postgres';
import {
  checkCustomLimit,
  checkNewToken,
  checkPlan,
  findKeyTarget,
  newReservationId,
  newTokenId,
  newWorkspaceId,
} from './common';
import { POSTGRES_PLAN } from './migrations';
import { postgresCreditOutbox } from './postgres-credit-outbox';
import { postgresRequestLog } from './postgres-request-log';
import { toToken, toWorkspace, type TokenRow, type WorkspaceRow } from './postgres-rows';
import { creditPeriod, type GatewayStore, type Workspace } from './types';
import { displayPrefix, generateToken, hashToken } from './tokens';

export type PostgresOptions = Pick<Config, 'databaseUrl' | 'databasePoolSize'>;

/** The store's pool: `databasePoolSize` connections (one when only migrating). */
function storePool(config: PostgresOptions, max = config.databasePoolSize): Pool {
  return createPool({ databaseUrl: config.databaseUrl!, max, applicationName: 'noise-suppression-gateway', logTag: '[store]' });
}

/** Connects, applies pending migrations and disconnects (`npm run -s db -- migrate`). */
export async function migratePostgres(config: PostgresOptions): Promise<MigrationResult> {
  const pool = storePool(config, 1);
  try {
    return await applyPostgresMigrations(pool, POSTGRES_PLAN);
  } finally {
    await pool.end();
  }
}

export async function openPostgresStore(config: PostgresOptions): Promise<GatewayStore> {
  const pool = storePool(config);
  try {
    await applyPostgresMigrations(pool, POSTGRES_PLAN);
  } catch (err) {
    await pool.end().catch(() => undefined);
    throw new Error(`PostgreSQL at ${redactUrl(config.databaseUrl!)}: ${(err as Error).message}`);
  }

  const q = async <R extends QueryResultRow>(sql: string, params: unknown[] = []): Promise<R[]> =>
    (await pool.query<R>(sql, params)).rows;
  const one = async <R extends QueryResultRow>(sql: string, params: unknown[] = []): Promise<R | null> =>
    (await q<R>(sql, params))[0] ?? null;

  async function requireWorkspace(id: string): Promise<Workspace> {
    const row = await one<WorkspaceRow>('SELECT * FROM workspaces WHERE id = $1', [id]);
    if (!row) throw new Error(`workspace ${id} not found`);
    return toWorkspace(row);
  }

  /**
   * Gives back expired reservations (of one workspace, or all): one statement, rows taken with SKIP LOCKED so two
   * reclaimers, or a reclaimer and a settling gateway, never wait on each other or take the same row twice.
   */
  async function reclaim(workspaceId: string | null, now: Date): Promise<number> {
    const row = await one<{ n: number }>(
      `WITH gone AS (
         DELETE FROM credit_reservations WHERE id IN (
           SELECT id FROM credit_reservations
           WHERE expires_at <= $2 AND ($1::text IS NULL OR workspace_id = $1)
           FOR UPDATE SKIP LOCKED)
         RETURNING workspace_id, period, amount
       ), sums AS (
         SELECT workspace_id, period, SUM(amount) AS amount FROM gone GROUP BY workspace_id, period
       ), upd AS (
         UPDATE credit_usage c SET reserved = GREATEST(c.reserved - sums.amount, 0)
         FROM sums WHERE c.workspace_id = sums.workspace_id AND c.period = sums.period
         RETURNING 1
       )
       SELECT COUNT(*)::int AS n FROM gone`,
      [workspaceId, now],
    );
    return row?.n ?? 0;
  }

  async function usage(workspaceId: string, period: string): Promise<{ used: number; reserved: number }> {
    const row = await one<{ used: string; reserved: string }>(
      'SELECT used, reserved FROM credit_usage WHERE workspace_id = $1 AND period = $2',
      [workspaceId, period],
    );
    return { used: Number(row?.used ?? 0), reserved: Number(row?.reserved ?? 0) };
  }

  const store: GatewayStore = {
    async createWorkspace(name, plan, custom) {
      const trimmed = name.trim();
      if (!trimmed) throw new Error('workspace name must not be empty');
      checkPlan(plan);
      checkCustomLimit('requestsPerMinute', custom?.requestsPerMinute);
      checkCustomLimit('creditsPerMonth', custom?.creditsPerMonth);
      const enterprise = plan === 'enterprise';
      const row = await one<WorkspaceRow>(
        `INSERT INTO workspaces (id, name, plan, custom_rpm, custom_credits, created_at)
         VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (name) DO NOTHING RETURNING *`,
        [
          newWorkspaceId(),
          trimmed,
          plan,
          enterprise ? (custom?.requestsPerMinute ?? null) : null,
          enterprise ? (custom?.creditsPerMonth ?? null) : null,
          new Date(),
        ],
      );
      if (!row) throw new Error(`a workspace named "${trimmed}" already exists`);
      return toWorkspace(row);
    },
    async getWorkspace(id) {
      const row = await one<WorkspaceRow>('SELECT * FROM workspaces WHERE id = $1', [id]);
      return row ? toWorkspace(row) : null;
    },
    async getWorkspaceByName(name) {
      const row = await one<WorkspaceRow>('SELECT * FROM workspaces WHERE name = $1', [name.trim()]);
      return row ? toWorkspace(row) : null;
    },
    async listWorkspaces() {
      return (await q<WorkspaceRow>('SELECT * FROM workspaces ORDER BY created_at, seq')).map(toWorkspace);
    },
    async setPlan(workspaceId, plan, custom) {
      checkPlan(plan);
      checkCustomLimit('requestsPerMinute', custom?.requestsPerMinute);
      checkCustomLimit('creditsPerMonth', custom?.creditsPerMonth);
      // Custom limits only mean something on enterprise; values not given are kept.
      const row = await one<WorkspaceRow>(
        `UPDATE workspaces SET plan = $2,
           custom_rpm = CASE WHEN $2 = 'enterprise' THEN COALESCE($3::integer, custom_rpm) END,
           custom_credits = CASE WHEN $2 = 'enterprise' THEN COALESCE($4::bigint, custom_credits) END
         WHERE id = $1 RETURNING *`,
        [workspaceId, plan, custom?.requestsPerMinute ?? null, custom?.creditsPerMonth ?? null],
      );
      if (!row) throw new Error(`workspace ${workspaceId} not found`);
      return toWorkspace(row);
    },
    async setExcludedServices(workspaceId, services) {
      const row = await one<WorkspaceRow>('UPDATE workspaces SET excluded_services = $2::jsonb WHERE id = $1 RETURNING *', [
        workspaceId,
        JSON.stringify([...new Set(services)]),
      ]);
      if (!row) throw new Error(`workspace ${workspaceId} not found`);
      return toWorkspace(row);
    },

    async createToken(input) {
      await requireWorkspace(input.workspaceId);
      checkNewToken(input.scopes, input.expiresAt);
      const token = generateToken();
      const row = await one<TokenRow>(
        `INSERT INTO tokens (id, workspace_id, token_hash, prefix, name, scopes, allowed_ips, expires_at, created_at)
         VALUES ($1, $2, $3, $4, $5, $6::jsonb, $7::jsonb, $8, $9) RETURNING *`,
        [
          newTokenId(),
          input.workspaceId,
          hashToken(token),
          displayPrefix(token),
          input.name,
          JSON.stringify(input.scopes),
          JSON.stringify(input.allowedIps),
          input.expiresAt === null ? null : new Date(input.expiresAt),
          new Date(),
        ],
      );
      return { token, record: toToken(row!) };
    },
    async findTokenByHash(sha256Hex) {
      const row = await one<TokenRow>('SELECT * FROM tokens WHERE token_hash = $1', [sha256Hex.toLowerCase()]);
      return row ? toToken(row) : null;
    },
    async getToken(id) {
      const row = await one<TokenRow>('SELECT * FROM tokens WHERE id = $1', [id]);
      return row ? toToken(row) : null;
    },
    async listTokens(workspaceId) {
      const rows =
        workspaceId === undefined
          ? await q<TokenRow>('SELECT * FROM tokens ORDER BY created_at, seq')
          : await q<TokenRow>('SELECT * FROM tokens WHERE workspace_id = $1 ORDER BY created_at, seq', [workspaceId]);
      return rows.map(toToken);
    },
    async revokeToken(idOrPrefix) {
      const target = await findKeyTarget(idOrPrefix, { byId: store.getToken, byHash: store.findTokenByHash, all: () => store.listTokens() });
      if (!target) return null;
      const updated = await one<TokenRow>(
        'UPDATE tokens SET revoked_at = COALESCE(revoked_at, $2) WHERE id = $1 RETURNING *',
        [target.id, new Date()],
      );
      return toToken(updated!);
    },
    async touchToken(id, when) {
      await pool.query('UPDATE tokens SET last_used_at = $2 WHERE id = $1', [id, new Date(when)]);
    },
    async reissueToken(id, input) {
      checkNewToken(input.scopes, input.expiresAt);
      const token = generateToken();
      const row = await one<TokenRow>(
        `UPDATE tokens SET token_hash = $2, prefix = $3, scopes = $4::jsonb, expires_at = $5, revoked_at = NULL
         WHERE id = $1 RETURNING *`,
        [id, hashToken(token), displayPrefix(token), JSON.stringify(input.scopes), input.expiresAt === null ? null : new Date(input.expiresAt)],
      );
      return row ? { token, record: toToken(row) } : null;
    },

    async chargeCredits(workspaceId, amount, limit, when) {
      const period = creditPeriod(when);
      if (amount <= 0) return { ok: true, used: await store.creditsUsed(workspaceId, when), limit };
      // One conditional UPSERT: PostgreSQL locks the row and re-checks the condition on its latest version.
      const row = await one<{ used: string }>(
        `INSERT INTO credit_usage AS c (workspace_id, period, used, reserved)
           SELECT $1, $2, $3::bigint, 0 WHERE $3::bigint <= $4::bigint
         ON CONFLICT (workspace_id, period)
           DO UPDATE SET used = c.used + EXCLUDED.used WHERE c.used + c.reserved + EXCLUDED.used <= $4::bigint
         RETURNING c.used`,
        [workspaceId, period, amount, limit],
      );
      if (row) return { ok: true, used: Number(row.used), limit };
      return { ok: false, used: (await usage(workspaceId, period)).used, limit };
    },
    async refundCredits(workspaceId, amount, when) {
      if (amount <= 0) return;
      await pool.query('UPDATE credit_usage SET used = GREATEST(used - $1, 0) WHERE workspace_id = $2 AND period = $3', [
        amount,
        workspaceId,
        creditPeriod(when),
      ]);
    },
    async creditsUsed(workspaceId, when) {
      return (await usage(workspaceId, creditPeriod(when))).used;
    },

    async reserveCredits(workspaceId, amount, limit, when, ttlMs) {
      if (!Number.isInteger(amount) || amount <= 0) throw new Error(`amount must be a positive integer, got ${amount}`);
      const period = creditPeriod(when);
      const id = newReservationId();
      const attempt = () =>
        one<{ used: string; reserved: string }>(
          `WITH up AS (
             INSERT INTO credit_usage AS c (workspace_id, period, used, reserved)
               SELECT $1, $2, 0, $3::bigint WHERE $3::bigint <= $4::bigint
             ON CONFLICT (workspace_id, period)
               DO UPDATE SET reserved = c.reserved + EXCLUDED.reserved
               WHERE c.used + c.reserved + EXCLUDED.reserved <= $4::bigint
             RETURNING c.used, c.reserved
           ), hold AS (
             INSERT INTO credit_reservations (id, workspace_id, period, amount, expires_at)
             SELECT $5, $1, $2, $3, $6 FROM up
           )
           SELECT used, reserved FROM up`,
          [workspaceId, period, amount, limit, id, new Date(when.getTime() + ttlMs)],
        );
      let held = await attempt();
      // Full: first give back what dead gateways still hold (expired reservations), then try once more.
      if (!held && (await reclaim(workspaceId, when)) > 0) held = await attempt();
      if (held) {
        return {
          ok: true,
          used: Number(held.used),
          reserved: Number(held.reserved),
          limit,
          reservation: { id, workspaceId, period, amount },
        };
      }
      const now = await usage(workspaceId, period);
      return { ok: false, used: now.used, reserved: now.reserved, limit, reservation: null };
    },
    async renewReservation(reservation, expiresAt) {
      const r = await pool.query('UPDATE credit_reservations SET expires_at = $2 WHERE id = $1', [reservation.id, expiresAt]);
      return r.rowCount === 1;
    },
    async settleReservation(r, pending) {
      // Deleting the reservation row is what makes it end once; a reclaimed one (gone already) is still charged,
      // since the call delivered. A pending charge (a job's, created next) is written by the same statement.
      await pool.query(
        `WITH gone AS (DELETE FROM credit_reservations WHERE id = $1 RETURNING amount),
         pend AS (
           INSERT INTO credit_pending (key, workspace_id, period, amount, owner, created_at)
           SELECT $5, $2, $3, $4, $6, $7 WHERE $5::text IS NOT NULL
           ON CONFLICT (key) DO UPDATE SET owner = EXCLUDED.owner, created_at = EXCLUDED.created_at
         )
         INSERT INTO credit_usage AS c (workspace_id, period, used, reserved) VALUES ($2, $3, $4, 0)
         ON CONFLICT (workspace_id, period) DO UPDATE SET
           used = c.used + EXCLUDED.used,
           reserved = GREATEST(c.reserved - COALESCE((SELECT amount FROM gone), 0), 0)`,
        [r.id, r.workspaceId, r.period, r.amount, pending?.key ?? null, pending?.owner ?? null, Date.now()],
      );
    },
    async releaseReservation(r) {
      await pool.query(
        `WITH gone AS (DELETE FROM credit_reservations WHERE id = $1 RETURNING workspace_id, period, amount)
         UPDATE credit_usage c SET reserved = GREATEST(c.reserved - gone.amount, 0)
         FROM gone WHERE c.workspace_id = gone.workspace_id AND c.period = gone.period`,
        [r.id],
      );
    },
    async reclaimExpiredReservations(now) {
      return reclaim(null, now);
    },
    async creditsHeld(workspaceId, when) {
      return (await usage(workspaceId, creditPeriod(when))).reserved;
    },

    ...postgresRequestLog(pool),
    ...postgresCreditOutbox(pool),

    async getSetting(key) {
      const row = await one<{ value: string }>('SELECT value FROM settings WHERE key = $1', [key]);
      return row ? row.value : null;
    },
    async setSetting(key, value) {
      await pool.query(
        'INSERT INTO settings (key, value) VALUES ($1, $2) ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value',
        [key, value],
      );
    },
    async schemaVersions() {
      return (await q<{ version: number }>('SELECT version FROM schema_migrations ORDER BY version')).map((r) => r.version);
    },

    async close() {
      if (!pool.ended) await pool.end();
    },
  };
  return store;
}
