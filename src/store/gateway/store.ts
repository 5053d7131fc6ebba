// The GatewayStore, written once for both engines (./sqlite.ts opens DATA_DIR/gateway.db, ./postgres.ts a pool;
// src/db/dialect.ts holds what differs): workspaces, keys, settings and the schema's versions here; credits and holds
// in ./credits.ts, the job queue's credit outbox in ./credit-outbox.ts, the request log in ./request-log.ts. Every
// check-and-change is one statement (an upsert, or an update that returns its row) or one transaction, so several
// processes (the server and the keys CLI on one file, gateway replicas on PostgreSQL) share the store safely.
import type { SqlDatabase } from '../../db/dialect';
import { checkCustomLimit, checkNewToken, checkPlan, findKeyTarget, newTokenId, newWorkspaceId } from './common';
import { creditOutbox } from './credit-outbox';
import { credits } from './credits';
import { requestLog } from './request-log';
import { toToken, toWorkspace } from './rows';
import { displayPrefix, generateToken, hashToken } from './tokens';
import type { GatewayStore, NewToken, Workspace } from './types';

/** An ISO time as stored: what the store writes is always toISOString()'s form. */
const iso = (when: string | null): string | null => (when === null ? null : new Date(when).toISOString());

export function createGatewayStore(db: SqlDatabase): GatewayStore {
  const d = db.dialect;
  const order = `created_at, ${d.insertOrder}`;

  const workspaceBy = async (column: 'id' | 'name', value: string): Promise<Workspace | null> => {
    const [row] = await db.all(`SELECT * FROM workspaces WHERE ${column} = @value`, { value });
    return row ? toWorkspace(d, row) : null;
  };
  async function requireWorkspace(id: string): Promise<Workspace> {
    const ws = await workspaceBy('id', id);
    if (!ws) throw new Error(`workspace ${id} not found`);
    return ws;
  }
  const tokenById = async (id: string) => {
    const [row] = await db.all('SELECT * FROM tokens WHERE id = @id', { id });
    return row ? toToken(d, row) : null;
  };

  const store: GatewayStore = {
    async createWorkspace(name, plan, custom) {
      const trimmed = name.trim();
      if (!trimmed) throw new Error('workspace name must not be empty');
      checkPlan(plan);
      checkCustomLimit('requestsPerMinute', custom?.requestsPerMinute);
      checkCustomLimit('creditsPerMonth', custom?.creditsPerMonth);
      const enterprise = plan === 'enterprise';
      const [row] = await db.all(
        `INSERT INTO workspaces (id, name, plan, custom_rpm, custom_credits, excluded_services, created_at)
         VALUES (@id, @name, @plan, @customRpm, @customCredits, '[]', @createdAt) ON CONFLICT (name) DO NOTHING RETURNING *`,
        {
          id: newWorkspaceId(),
          name: trimmed,
          plan,
          customRpm: enterprise ? (custom?.requestsPerMinute ?? null) : null,
          customCredits: enterprise ? (custom?.creditsPerMonth ?? null) : null,
          createdAt: new Date().toISOString(),
        },
      );
      if (!row) throw new Error(`a workspace named "${trimmed}" already exists`);
      return toWorkspace(d, row);
    },
    async getWorkspace(id) {
      return workspaceBy('id', id);
    },
    async getWorkspaceByName(name) {
      return workspaceBy('name', name.trim());
    },
    async listWorkspaces() {
      return (await db.all(`SELECT * FROM workspaces ORDER BY ${order}`)).map((r) => toWorkspace(d, r));
    },
    async setPlan(workspaceId, plan, custom) {
      checkPlan(plan);
      checkCustomLimit('requestsPerMinute', custom?.requestsPerMinute);
      checkCustomLimit('creditsPerMonth', custom?.creditsPerMonth);
      // Custom limits only mean something on enterprise; values not given are kept.
      const [row] = await db.all(
        `UPDATE workspaces SET plan = @plan,
           custom_rpm = CASE WHEN @plan = 'enterprise' THEN COALESCE(@rpm, custom_rpm) END,
           custom_credits = CASE WHEN @plan = 'enterprise' THEN COALESCE(@credits, custom_credits) END
         WHERE id = @id RETURNING *`,
        { id: workspaceId, plan, rpm: custom?.requestsPerMinute ?? null, credits: custom?.creditsPerMonth ?? null },
      );
      if (!row) throw new Error(`workspace ${workspaceId} not found`);
      return toWorkspace(d, row);
    },
    async setExcludedServices(workspaceId, services) {
      const [row] = await db.all('UPDATE workspaces SET excluded_services = @services WHERE id = @id RETURNING *', {
        id: workspaceId,
        services: JSON.stringify([...new Set(services)]),
      });
      if (!row) throw new Error(`workspace ${workspaceId} not found`);
      return toWorkspace(d, row);
    },

    async createToken(input: NewToken) {
      await requireWorkspace(input.workspaceId);
      checkNewToken(input.scopes, input.expiresAt);
      const token = generateToken();
      const [row] = await db.all(
        `INSERT INTO tokens (id, workspace_id, token_hash, prefix, name, scopes, allowed_ips, expires_at, created_at)
         VALUES (@id, @workspaceId, @hash, @prefix, @name, @scopes, @allowedIps, @expiresAt, @createdAt) RETURNING *`,
        {
          id: newTokenId(),
          workspaceId: input.workspaceId,
          hash: hashToken(token),
          prefix: displayPrefix(token),
          name: input.name,
          scopes: JSON.stringify(input.scopes),
          allowedIps: JSON.stringify(input.allowedIps),
          expiresAt: iso(input.expiresAt),
          createdAt: new Date().toISOString(),
        },
      );
      return { token, record: toToken(d, row) };
    },
    async findTokenByHash(sha256Hex) {
      const [row] = await db.all('SELECT * FROM tokens WHERE token_hash = @hash', { hash: sha256Hex.toLowerCase() });
      return row ? toToken(d, row) : null;
    },
    async getToken(id) {
      return tokenById(id);
    },
    async listTokens(workspaceId) {
      const rows =
        workspaceId === undefined
          ? await db.all(`SELECT * FROM tokens ORDER BY ${order}`)
          : await db.all(`SELECT * FROM tokens WHERE workspace_id = @workspaceId ORDER BY ${order}`, { workspaceId });
      return rows.map((r) => toToken(d, r));
    },
    async revokeToken(idOrPrefix) {
      const target = await findKeyTarget(idOrPrefix, { byId: store.getToken, byHash: store.findTokenByHash, all: () => store.listTokens() });
      if (!target) return null;
      // Revoking twice keeps the first time.
      const [row] = await db.all('UPDATE tokens SET revoked_at = COALESCE(revoked_at, @now) WHERE id = @id RETURNING *', {
        id: target.id,
        now: new Date().toISOString(),
      });
      return toToken(d, row);
    },
    async touchToken(id, when) {
      await db.run('UPDATE tokens SET last_used_at = @when WHERE id = @id', { id, when });
    },
    async reissueToken(id, input) {
      checkNewToken(input.scopes, input.expiresAt);
      const token = generateToken();
      const [row] = await db.all(
        `UPDATE tokens SET token_hash = @hash, prefix = @prefix, scopes = @scopes, expires_at = @expiresAt, revoked_at = NULL
         WHERE id = @id RETURNING *`,
        { id, hash: hashToken(token), prefix: displayPrefix(token), scopes: JSON.stringify(input.scopes), expiresAt: iso(input.expiresAt) },
      );
      return row ? { token, record: toToken(d, row) } : null;
    },

    ...credits(db),
    ...creditOutbox(db),
    ...requestLog(db),

    async getSetting(key) {
      const [row] = await db.all('SELECT value FROM settings WHERE key = @key', { key });
      return row ? (row.value as string) : null;
    },
    async setSetting(key, value) {
      await db.run('INSERT INTO settings (key, value) VALUES (@key, @value) ON CONFLICT (key) DO UPDATE SET value = excluded.value', { key, value });
    },
    async schemaVersions() {
      return (await db.all('SELECT version FROM schema_migrations ORDER BY version')).map((r) => Number(r.version));
    },

    async close() {
      await db.close();
    },
  };
  return store;
}
