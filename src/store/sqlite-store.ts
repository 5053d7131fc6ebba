// GatewayStore on embedded SQLite (better-sqlite3). WAL mode + busy_timeout let the server
// and the keys CLI use the same DATA_DIR/gateway.db at the same time.
import fs from 'node:fs';
import path from 'node:path';
import Database from 'better-sqlite3';
import type { Config } from '../config';
import {
  creditPeriod,
  type CreditCharge,
  type GatewayStore,
  type NewToken,
  type PlanId,
  type RequestLogEntry,
  type RequestLogFilter,
  type TokenRecord,
  type Workspace,
} from './types';
import { displayPrefix, generateToken, hashToken, randomBase62 } from './tokens';

export const PLAN_IDS: readonly PlanId[] = ['free', 'starter', 'scale', 'enterprise'];

export function isPlanId(value: string): value is PlanId {
  return (PLAN_IDS as readonly string[]).includes(value);
}

/** Numbered migrations; each runs once, in order, recorded in schema_migrations. Append only. */
const MIGRATIONS: Array<{ version: number; name: string; sql: string }> = [
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
];

interface WorkspaceRow {
  id: string;
  name: string;
  plan: PlanId;
  custom_rpm: number | null;
  custom_credits: number | null;
  excluded_services: string;
  created_at: string;
}

interface TokenRow {
  id: string;
  workspace_id: string;
  name: string;
  prefix: string;
  scopes: string;
  allowed_ips: string;
  expires_at: string | null;
  revoked_at: string | null;
  last_used_at: string | null;
  created_at: string;
}

interface LogRow {
  request_id: string;
  time: string;
  token_id: string | null;
  workspace_id: string | null;
  method: string;
  service: string | null;
  endpoint: string | null;
  status: number;
  error_type: string | null;
  error_message: string | null;
  credits_charged: number;
  bytes_in: number;
  bytes_out: number;
  upstream_ms: number | null;
  total_ms: number;
  client_ip: string;
}

function toWorkspace(row: WorkspaceRow): Workspace {
  return {
    id: row.id,
    name: row.name,
    plan: row.plan,
    customRequestsPerMinute: row.custom_rpm,
    customCreditsPerMonth: row.custom_credits,
    excludedServices: JSON.parse(row.excluded_services) as string[],
    createdAt: row.created_at,
  };
}

function toToken(row: TokenRow): TokenRecord {
  return {
    id: row.id,
    workspaceId: row.workspace_id,
    name: row.name,
    prefix: row.prefix,
    scopes: JSON.parse(row.scopes) as string[],
    allowedIps: JSON.parse(row.allowed_ips) as string[],
    expiresAt: row.expires_at,
    revokedAt: row.revoked_at,
    lastUsedAt: row.last_used_at,
    createdAt: row.created_at,
  };
}

function toLogEntry(row: LogRow): RequestLogEntry {
  return {
    requestId: row.request_id,
    time: row.time,
    tokenId: row.token_id,
    workspaceId: row.workspace_id,
    method: row.method,
    service: row.service,
    endpoint: row.endpoint,
    status: row.status,
    errorType: row.error_type,
    creditsCharged: row.credits_charged,
    bytesIn: row.bytes_in,
    bytesOut: row.bytes_out,
    upstreamMs: row.upstream_ms,
    totalMs: row.total_ms,
    clientIp: row.client_ip,
    errorMessage: row.error_message,
  };
}

function checkCustomLimit(name: string, value: number | undefined): void {
  if (value === undefined) return;
  if (!Number.isInteger(value) || value < 0) throw new Error(`${name} must be a non-negative integer, got ${value}`);
}

function whereClause(filter: RequestLogFilter): { sql: string; params: unknown[] } {
  const parts: string[] = [];
  const params: unknown[] = [];
  if (filter.workspaceId !== undefined) (parts.push('workspace_id = ?'), params.push(filter.workspaceId));
  if (filter.tokenId !== undefined) (parts.push('token_id = ?'), params.push(filter.tokenId));
  if (filter.status !== undefined) (parts.push('status = ?'), params.push(filter.status));
  if (filter.errorType !== undefined) (parts.push('error_type = ?'), params.push(filter.errorType));
  if (filter.endpoint !== undefined) (parts.push('endpoint = ?'), params.push(filter.endpoint));
  if (filter.since !== undefined) (parts.push('time >= ?'), params.push(filter.since));
  return { sql: parts.length ? `WHERE ${parts.join(' AND ')}` : '', params };
}

/** Path of the database file inside DATA_DIR. */
export function gatewayDbPath(config: Pick<Config, 'dataDir'>): string {
  return path.join(config.dataDir, 'gateway.db');
}

function migrate(db: Database.Database): void {
  db.exec(`CREATE TABLE IF NOT EXISTS schema_migrations (
    version INTEGER PRIMARY KEY,
    name TEXT NOT NULL,
    applied_at TEXT NOT NULL
  )`);
  // IMMEDIATE: two processes starting together must not both apply the same migration.
  const apply = db.transaction(() => {
    const row = db.prepare('SELECT MAX(version) AS v FROM schema_migrations').get() as { v: number | null };
    const current = row.v ?? 0;
    for (const m of MIGRATIONS) {
      if (m.version <= current) continue;
      db.exec(m.sql);
      db.prepare('INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)').run(
        m.version,
        m.name,
        new Date().toISOString(),
      );
    }
  });
  apply.immediate();
}

export function openSqliteStore(config: Pick<Config, 'dataDir'>): GatewayStore {
  fs.mkdirSync(config.dataDir, { recursive: true });
  const db = new Database(gatewayDbPath(config));
  db.pragma('busy_timeout = 5000');
  db.pragma('journal_mode = WAL');
  db.pragma('synchronous = NORMAL');
  db.pragma('foreign_keys = ON');
  migrate(db);

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
    tokensByPrefix: db.prepare('SELECT * FROM tokens WHERE prefix = ?'),
    listTokens: db.prepare('SELECT * FROM tokens ORDER BY created_at, rowid'),
    listTokensOf: db.prepare('SELECT * FROM tokens WHERE workspace_id = ? ORDER BY created_at, rowid'),
    revoke: db.prepare('UPDATE tokens SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL'),
    touch: db.prepare('UPDATE tokens SET last_used_at = ? WHERE id = ?'),
    // One conditional UPSERT: inserts or adds only while the sum stays within the limit,
    // so concurrent chargers (threads or processes) can never overspend.
    charge: db.prepare(
      `INSERT INTO credit_usage (workspace_id, period, used)
         SELECT @ws, @period, @amount WHERE @amount <= @limit
       ON CONFLICT (workspace_id, period)
         DO UPDATE SET used = used + excluded.used WHERE used + excluded.used <= @limit`,
    ),
    refund: db.prepare('UPDATE credit_usage SET used = MAX(used - ?, 0) WHERE workspace_id = ? AND period = ?'),
    used: db.prepare('SELECT used FROM credit_usage WHERE workspace_id = ? AND period = ?'),
    insertLog: db.prepare(
      `INSERT INTO request_log (request_id, time, token_id, workspace_id, method, service, endpoint, status,
         error_type, credits_charged, bytes_in, bytes_out, upstream_ms, total_ms, client_ip, error_message)
       VALUES (@requestId, @time, @tokenId, @workspaceId, @method, @service, @endpoint, @status,
         @errorType, @creditsCharged, @bytesIn, @bytesOut, @upstreamMs, @totalMs, @clientIp, @errorMessage)`,
    ),
    perDay: db.prepare(
      `SELECT substr(time, 1, 10) AS day, COUNT(*) AS count, SUM(CASE WHEN status >= 400 THEN 1 ELSE 0 END) AS errors
       FROM request_log WHERE workspace_id = ? AND time >= ? GROUP BY day`,
    ),
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

  const store: GatewayStore = {
    async createWorkspace(name, plan, custom) {
      const trimmed = name.trim();
      if (!trimmed) throw new Error('workspace name must not be empty');
      if (!isPlanId(plan)) throw new Error(`unknown plan "${plan}" (free, starter, scale, enterprise)`);
      checkCustomLimit('requestsPerMinute', custom?.requestsPerMinute);
      checkCustomLimit('creditsPerMonth', custom?.creditsPerMonth);
      const enterprise = plan === 'enterprise';
      const id = 'ws_' + randomBase62(16);
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
      if (!isPlanId(plan)) throw new Error(`unknown plan "${plan}" (free, starter, scale, enterprise)`);
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
      if (input.scopes.length === 0) throw new Error('a token needs at least one scope');
      if (input.expiresAt !== null && Number.isNaN(Date.parse(input.expiresAt))) {
        throw new Error(`expiresAt is not a date: ${input.expiresAt}`);
      }
      const token = generateToken();
      const id = 'key_' + randomBase62(16);
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
      let row = stmt.tokenById.get(idOrPrefix) as TokenRow | undefined;
      if (!row) {
        const matches = stmt.tokensByPrefix.all(idOrPrefix) as TokenRow[];
        if (matches.length > 1) {
          throw new Error(`prefix ${idOrPrefix} matches ${matches.length} keys; revoke by id instead`);
        }
        row = matches[0];
      }
      if (!row) return null;
      stmt.revoke.run(new Date().toISOString(), row.id);
      return toToken(stmt.tokenById.get(row.id) as TokenRow);
    },
    async touchToken(id, when) {
      stmt.touch.run(when, id);
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

    async logRequest(entry) {
      stmt.insertLog.run({ ...entry, errorMessage: entry.errorMessage ?? null });
    },
    async queryRequests(filter) {
      const { sql, params } = whereClause(filter);
      const limit = Math.min(Math.max(Math.trunc(filter.limit ?? 100), 1), 1000);
      const offset = Math.max(Math.trunc(filter.offset ?? 0), 0);
      const rows = db
        .prepare(`SELECT * FROM request_log ${sql} ORDER BY time DESC, id DESC LIMIT ? OFFSET ?`)
        .all(...params, limit, offset) as LogRow[];
      return rows.map(toLogEntry);
    },
    async countRequests(filter) {
      const { sql, params } = whereClause(filter);
      const row = db.prepare(`SELECT COUNT(*) AS n FROM request_log ${sql}`).get(...params) as { n: number };
      return row.n;
    },
    async requestsPerDay(workspaceId, days) {
      const n = Math.max(1, Math.trunc(days));
      const today = new Date();
      const start = new Date(Date.UTC(today.getUTCFullYear(), today.getUTCMonth(), today.getUTCDate() - (n - 1)));
      const rows = stmt.perDay.all(workspaceId, start.toISOString()) as Array<{ day: string; count: number; errors: number }>;
      const byDay = new Map(rows.map((r) => [r.day, r]));
      // Every day of the range, zeros included, oldest first (ready for a chart).
      const out: Array<{ day: string; count: number; errors: number }> = [];
      for (let i = 0; i < n; i++) {
        const day = new Date(start.getTime() + i * 86_400_000).toISOString().slice(0, 10);
        const r = byDay.get(day);
        out.push({ day, count: r?.count ?? 0, errors: r?.errors ?? 0 });
      }
      return out;
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
