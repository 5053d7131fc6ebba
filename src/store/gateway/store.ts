// GatewayStore on embedded SQLite (better-sqlite3). WAL mode + busy_timeout let the server
// and the keys CLI use the same DATA_DIR/gateway.db at the same time.
import type { Config } from '../config';
import type { MigrationResult } from '../db/migrations';
import { gatewayDbPath } from '../db/paths';
import { applySqliteMigrations, openSqliteFile } from '../db/sqlite';
import {
  checkCustomLimit,
  checkNewToken,
  checkPlan,
  findKeyTarget,
  newReservationId,
  newTokenId,
  newWorkspaceId,
} from './common';
import { SQLITE_PLAN } from './migrations';
import { pendingChargeWriter, sqliteCreditOutbox } from './sqlite-credit-outbox';
import { sqliteRequestLog } from './sqlite-request-log';
import { toToken, toWorkspace, type TokenRow, type WorkspaceRow } from './sqlite-rows';
import { creditPeriod, type CreditCharge, type CreditReservation, type GatewayStore, type NewToken, type PendingCharge, type Workspace } from './types';
import { displayPrefix, generateToken, hashToken } from './tokens';

export { PLAN_IDS, isPlanId } from './common';

export { gatewayDbPath };

/** Opens (creating when missing) DATA_DIR/gateway.db, applies pending migrations and closes it again. */
export function migrateSqlite(config: Pick<Config, 'dataDir'>): MigrationResult {
  const db = openSqliteFile(gatewayDbPath(config));
  try {
    return applySqliteMigrations(db, SQLITE_PLAN);
  } finally {
    db.close();
  }
}

export function openSqliteStore(config: Pick<Config, 'dataDir'>): GatewayStore {
  const db = openSqliteFile(gatewayDbPath(config), { foreignKeys: true });
  try {
    applySqliteMigrations(db, SQLITE_PLAN);
  } catch (err) {
    db.close();
    throw err;
  }

  const stmt = {
    workspaceById: db.prepare('SELECT * FROM workspaces WHERE id = ?'),
    workspaceByName: db.prepare('SELECT * FROM workspaces WHERE name = ?'),
    listWorkspaces: db.prepare('SELECT * FROM workspaces ORDER BY created_at, rowid'),
    insertWorkspace: db.prepare(
      `INSERT INTO workspaces (id, name, plan, custom_rpm, custom_credits, excluded_services, created_at)
       VALUES (@id, @name, @plan, @custom_rpm, @custom_credits, '[]', @created_at)`,
    ),
    updatePlan: db.prepare('UPDATE workspaces SET plan = ?, custom_rpm = ?, custom_credits = ? WHERE id = ?'),
    updateExcluded: db.prepare('UPDATE workspaces SET excluded_services = ? WHERE id = ?'),
    insertToken: db.prepare(
      `INSERT INTO tokens (id, workspace_id, token_hash, prefix, name, scopes, allowed_ips, expires_at, created_at)
       VALUES (@id, @workspace_id, @token_hash, @prefix, @name, @scopes, @allowed_ips, @expires_at, @created_at)`,
    ),
    tokenByHash: db.prepare('SELECT * FROM tokens WHERE token_hash = ?'),
    tokenById: db.prepare('SELECT * FROM tokens WHERE id = ?'),
    listTokens: db.prepare('SELECT * FROM tokens ORDER BY created_at, rowid'),
    listTokensOf: db.prepare('SELECT * FROM tokens WHERE workspace_id = ? ORDER BY created_at, rowid'),
    revoke: db.prepare('UPDATE tokens SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL'),
    touch: db.prepare('UPDATE tokens SET last_used_at = ? WHERE id = ?'),
    reissue: db.prepare(
      'UPDATE tokens SET token_hash = @token_hash, prefix = @prefix, scopes = @scopes, expires_at = @expires_at, revoked_at = NULL WHERE id = @id',
    ),
    // One conditional UPSERT: inserts or adds only while the sum stays within the limit,
    // so concurrent chargers (threads or processes) can never overspend.
    charge: db.prepare(
      `INSERT INTO credit_usage (workspace_id, period, used)
         SELECT @ws, @period, @amount WHERE @amount <= @limit
       ON CONFLICT (workspace_id, period)
         DO UPDATE SET used = used + excluded.used WHERE used + reserved + excluded.used <= @limit`,
    ),
    refund: db.prepare('UPDATE credit_usage SET used = MAX(used - ?, 0) WHERE workspace_id = ? AND period = ?'),
    used: db.prepare('SELECT used FROM credit_usage WHERE workspace_id = ? AND period = ?'),
    usage: db.prepare('SELECT used, reserved FROM credit_usage WHERE workspace_id = ? AND period = ?'),
    ensureUsage: db.prepare('INSERT OR IGNORE INTO credit_usage (workspace_id, period, used, reserved) VALUES (?, ?, 0, 0)'),
    addReserved: db.prepare('UPDATE credit_usage SET reserved = MAX(reserved + ?, 0) WHERE workspace_id = ? AND period = ?'),
    addUsed: db.prepare(
      `INSERT INTO credit_usage (workspace_id, period, used, reserved) VALUES (?, ?, ?, 0)
       ON CONFLICT (workspace_id, period) DO UPDATE SET used = used + excluded.used`,
    ),
    insertReservation: db.prepare(
      'INSERT INTO credit_reservations (id, workspace_id, period, amount, expires_at) VALUES (?, ?, ?, ?, ?)',
    ),
    reservationById: db.prepare('SELECT workspace_id, period, amount FROM credit_reservations WHERE id = ?'),
    deleteReservation: db.prepare('DELETE FROM credit_reservations WHERE id = ?'),
    renewReservation: db.prepare('UPDATE credit_reservations SET expires_at = ? WHERE id = ?'),
    expiredOf: db.prepare(
      `SELECT period, SUM(amount) AS amount FROM credit_reservations WHERE workspace_id = ? AND expires_at <= ? GROUP BY period`,
    ),
    deleteExpiredOf: db.prepare('DELETE FROM credit_reservations WHERE workspace_id = ? AND expires_at <= ?'),
    expiredWorkspaces: db.prepare('SELECT DISTINCT workspace_id FROM credit_reservations WHERE expires_at <= ?'),
    versions: db.prepare('SELECT version FROM schema_migrations ORDER BY version'),
    getSetting: db.prepare('SELECT value FROM settings WHERE key = ?'),
    setSetting: db.prepare(
      'INSERT INTO settings (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value',
    ),
  };

  function requireWorkspace(id: string): Workspace {
    const row = stmt.workspaceById.get(id) as WorkspaceRow | undefined;
    if (!row) throw new Error(`workspace ${id} not found`);
    return toWorkspace(row);
  }

  const chargeTx = db.transaction((workspaceId: string, amount: number, limit: number, period: string) => {
    const info = stmt.charge.run({ ws: workspaceId, period, amount, limit });
    const row = stmt.used.get(workspaceId, period) as { used: number } | undefined;
    return { ok: info.changes === 1, used: row?.used ?? 0 };
  });

  /** Gives back the expired reservations of one workspace; runs inside the caller's transaction. */
  const reclaimOf = (workspaceId: string, nowMs: number): number => {
    const expired = stmt.expiredOf.all(workspaceId, nowMs) as Array<{ period: string; amount: number }>;
    if (expired.length === 0) return 0;
    const info = stmt.deleteExpiredOf.run(workspaceId, nowMs);
    for (const e of expired) stmt.addReserved.run(-e.amount, workspaceId, e.period);
    return info.changes;
  };

  // IMMEDIATE transactions: the check and the hold happen under the write lock, so processes cannot interleave.
  const reserveTx = db.transaction(
    (workspaceId: string, amount: number, limit: number, period: string, nowMs: number, ttlMs: number) => {
      reclaimOf(workspaceId, nowMs);
      stmt.ensureUsage.run(workspaceId, period);
      const row = stmt.usage.get(workspaceId, period) as { used: number; reserved: number };
      if (row.used + row.reserved + amount > limit) return { ok: false, used: row.used, reserved: row.reserved, id: null };
      const id = newReservationId();
      stmt.insertReservation.run(id, workspaceId, period, amount, nowMs + ttlMs);
      stmt.addReserved.run(amount, workspaceId, period);
      return { ok: true, used: row.used, reserved: row.reserved + amount, id };
    },
  );

  /** Ends a reservation: `settle` moves its credits to used; otherwise they are given back. */
  const writePending = pendingChargeWriter(db);
  const endReservationTx = db.transaction((r: CreditReservation, settle: boolean, pending?: PendingCharge) => {
    const row = stmt.reservationById.get(r.id) as { workspace_id: string; period: string; amount: number } | undefined;
    if (row) {
      stmt.deleteReservation.run(r.id);
      stmt.addReserved.run(-row.amount, row.workspace_id, row.period);
    }
    // Reclaimed already (its gateway stalled past the expiry) yet delivered: the work was done, so it is charged.
    if (settle) stmt.addUsed.run(r.workspaceId, r.period, r.amount);
    if (settle && pending) writePending(pending, r.workspaceId, r.period, r.amount);
  });

  const reclaimAllTx = db.transaction((nowMs: number) => {
    let n = 0;
    for (const { workspace_id } of stmt.expiredWorkspaces.all(nowMs) as Array<{ workspace_id: string }>) {
      n += reclaimOf(workspace_id, nowMs);
    }
    return n;
  });

  const store: GatewayStore = {
    async createWorkspace(name, plan, custom) {
      const trimmed = name.trim();
      if (!trimmed) throw new Error('workspace name must not be empty');
      checkPlan(plan);
      checkCustomLimit('requestsPerMinute', custom?.requestsPerMinute);
      checkCustomLimit('creditsPerMonth', custom?.creditsPerMonth);
      const enterprise = plan === 'enterprise';
      const id = newWorkspaceId();
      if (stmt.workspaceByName.get(trimmed)) throw new Error(`a workspace named "${trimmed}" already exists`);
      stmt.insertWorkspace.run({
        id,
        name: trimmed,
        plan,
        custom_rpm: enterprise ? (custom?.requestsPerMinute ?? null) : null,
        custom_credits: enterprise ? (custom?.creditsPerMonth ?? null) : null,
        created_at: new Date().toISOString(),
      });
      return requireWorkspace(id);
    },
    async getWorkspace(id) {
      const row = stmt.workspaceById.get(id) as WorkspaceRow | undefined;
      return row ? toWorkspace(row) : null;
    },
    async getWorkspaceByName(name) {
      const row = stmt.workspaceByName.get(name.trim()) as WorkspaceRow | undefined;
      return row ? toWorkspace(row) : null;
    },
    async listWorkspaces() {
      return (stmt.listWorkspaces.all() as WorkspaceRow[]).map(toWorkspace);
    },
    async setPlan(workspaceId, plan, custom) {
      checkPlan(plan);
      checkCustomLimit('requestsPerMinute', custom?.requestsPerMinute);
      checkCustomLimit('creditsPerMonth', custom?.creditsPerMonth);
      const current = requireWorkspace(workspaceId);
      // Custom limits only mean something on enterprise; values not given are kept.
      const enterprise = plan === 'enterprise';
      const rpm = enterprise ? (custom?.requestsPerMinute ?? current.customRequestsPerMinute) : null;
      const credits = enterprise ? (custom?.creditsPerMonth ?? current.customCreditsPerMonth) : null;
      stmt.updatePlan.run(plan, rpm, credits, workspaceId);
      return requireWorkspace(workspaceId);
    },
    async setExcludedServices(workspaceId, services) {
      requireWorkspace(workspaceId);
      stmt.updateExcluded.run(JSON.stringify([...new Set(services)]), workspaceId);
      return requireWorkspace(workspaceId);
    },

    async createToken(input: NewToken) {
      requireWorkspace(input.workspaceId);
      checkNewToken(input.scopes, input.expiresAt);
      const token = generateToken();
      const id = newTokenId();
      stmt.insertToken.run({
        id,
        workspace_id: input.workspaceId,
        token_hash: hashToken(token),
        prefix: displayPrefix(token),
        name: input.name,
        scopes: JSON.stringify(input.scopes),
        allowed_ips: JSON.stringify(input.allowedIps),
        expires_at: input.expiresAt === null ? null : new Date(input.expiresAt).toISOString(),
        created_at: new Date().toISOString(),
      });
      return { token, record: toToken(stmt.tokenById.get(id) as TokenRow) };
    },
    async findTokenByHash(sha256Hex) {
      const row = stmt.tokenByHash.get(sha256Hex.toLowerCase()) as TokenRow | undefined;
      return row ? toToken(row) : null;
    },
    async getToken(id) {
      const row = stmt.tokenById.get(id) as TokenRow | undefined;
      return row ? toToken(row) : null;
    },
    async listTokens(workspaceId) {
      const rows = (workspaceId === undefined ? stmt.listTokens.all() : stmt.listTokensOf.all(workspaceId)) as TokenRow[];
      return rows.map(toToken);
    },
    async revokeToken(idOrPrefix) {
      const target = await findKeyTarget(idOrPrefix, { byId: store.getToken, byHash: store.findTokenByHash, all: () => store.listTokens() });
      if (!target) return null;
      stmt.revoke.run(new Date().toISOString(), target.id);
      return toToken(stmt.tokenById.get(target.id) as TokenRow);
    },
    async touchToken(id, when) {
      stmt.touch.run(when, id);
    },
    async reissueToken(id, input) {
      checkNewToken(input.scopes, input.expiresAt);
      const token = generateToken();
      const changed = stmt.reissue.run({
        id,
        token_hash: hashToken(token),
        prefix: displayPrefix(token),
        scopes: JSON.stringify(input.scopes),
        expires_at: input.expiresAt === null ? null : new Date(input.expiresAt).toISOString(),
      }).changes;
      return changed === 0 ? null : { token, record: toToken(stmt.tokenById.get(id) as TokenRow) };
    },

    async chargeCredits(workspaceId, amount, limit, when): Promise<CreditCharge> {
      const period = creditPeriod(when);
      if (amount <= 0) return { ok: true, used: await store.creditsUsed(workspaceId, when), limit };
      const result = chargeTx.immediate(workspaceId, amount, limit, period);
      return { ok: result.ok, used: result.used, limit };
    },
    async refundCredits(workspaceId, amount, when) {
      if (amount <= 0) return;
      stmt.refund.run(amount, workspaceId, creditPeriod(when));
    },
    async creditsUsed(workspaceId, when) {
      const row = stmt.used.get(workspaceId, creditPeriod(when)) as { used: number } | undefined;
      return row?.used ?? 0;
    },

    async reserveCredits(workspaceId, amount, limit, when, ttlMs) {
      if (!Number.isInteger(amount) || amount <= 0) throw new Error(`amount must be a positive integer, got ${amount}`);
      const period = creditPeriod(when);
      const r = reserveTx.immediate(workspaceId, amount, limit, period, when.getTime(), ttlMs);
      return {
        ok: r.ok,
        used: r.used,
        reserved: r.reserved,
        limit,
        reservation: r.id ? { id: r.id, workspaceId, period, amount } : null,
      };
    },
    async renewReservation(reservation, expiresAt) {
      return stmt.renewReservation.run(expiresAt.getTime(), reservation.id).changes === 1;
    },
    async settleReservation(reservation, pending) {
      endReservationTx.immediate(reservation, true, pending);
    },
    async releaseReservation(reservation) {
      endReservationTx.immediate(reservation, false);
    },
    async reclaimExpiredReservations(now) {
      return reclaimAllTx.immediate(now.getTime());
    },
    async creditsHeld(workspaceId, when) {
      const row = stmt.usage.get(workspaceId, creditPeriod(when)) as { used: number; reserved: number } | undefined;
      return row?.reserved ?? 0;
    },

    ...sqliteRequestLog(db),
    ...sqliteCreditOutbox(db),
    async schemaVersions() {
      return (stmt.versions.all() as Array<{ version: number }>).map((r) => r.version);
    },

    async getSetting(key) {
      const row = stmt.getSetting.get(key) as { value: string } | undefined;
      return row ? row.value : null;
    },
    async setSetting(key, value) {
      stmt.setSetting.run(key, value);
    },

    async close() {
      if (db.open) db.close();
    },
  };
  return store;
}
