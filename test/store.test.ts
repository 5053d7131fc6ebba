// The SQLite gateway store: migrations, tokens (hash only), atomic credits across processes, request log.
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import Database from 'better-sqlite3';
import { openSqliteStore, gatewayDbPath } from '../src/store/sqlite-store';
import { hashToken, randomBase62, TOKEN_PATTERN } from '../src/store/tokens';
import type { GatewayStore, RequestLogEntry } from '../src/store/types';

const run = promisify(execFile);

let dataDir: string;
let store: GatewayStore;

beforeEach(async () => {
  dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'store-test-'));
  store = openSqliteStore({ dataDir: path.join(dataDir, 'nested', 'data') });
});

afterEach(async () => {
  await store.close();
  fs.rmSync(dataDir, { recursive: true, force: true });
});

function logEntry(over: Partial<RequestLogEntry>): RequestLogEntry {
  return {
    requestId: 'req_x',
    time: new Date().toISOString(),
    tokenId: null,
    workspaceId: null,
    method: 'GET',
    service: 'noise-suppressor',
    endpoint: 'models',
    status: 200,
    errorType: null,
    creditsCharged: 0,
    bytesIn: 0,
    bytesOut: 10,
    upstreamMs: 3,
    totalMs: 5,
    clientIp: '127.0.0.1',
    ...over,
  };
}

test('creates the data folder, WAL mode and numbered migrations applied once', async () => {
  const dir = path.join(dataDir, 'nested', 'data');
  const file = gatewayDbPath({ dataDir: dir });
  expect(fs.existsSync(file)).toBe(true);
  const second = openSqliteStore({ dataDir: dir }); // re-open: migrations must not re-run
  await second.close();
  const db = new Database(file, { readonly: true });
  expect(db.pragma('journal_mode', { simple: true })).toBe('wal');
  const versions = db.prepare('SELECT version FROM schema_migrations').all() as Array<{ version: number }>;
  expect(versions.map((v) => v.version)).toEqual([1, 2]);
  const tables = (db.prepare("SELECT name FROM sqlite_master WHERE type='table'").all() as Array<{ name: string }>).map((t) => t.name);
  expect(tables).toEqual(expect.arrayContaining(['workspaces', 'tokens', 'credit_usage', 'request_log', 'settings']));
  db.close();
});

test('workspaces: unique names, plans, enterprise custom limits, exclusions', async () => {
  const ws = await store.createWorkspace('acme', 'free', { requestsPerMinute: 5 });
  expect(ws.customRequestsPerMinute).toBeNull(); // custom limits only on enterprise
  await expect(store.createWorkspace('acme', 'starter')).rejects.toThrow(/already exists/);
  await expect(store.createWorkspace('x', 'gold' as never)).rejects.toThrow(/unknown plan/);
  const ent = await store.setPlan(ws.id, 'enterprise', { requestsPerMinute: 7 });
  expect(ent).toMatchObject({ plan: 'enterprise', customRequestsPerMinute: 7, customCreditsPerMonth: null });
  expect(await store.setPlan(ws.id, 'enterprise', { creditsPerMonth: 99 })).toMatchObject({ customRequestsPerMinute: 7, customCreditsPerMonth: 99 });
  expect(await store.setPlan(ws.id, 'scale')).toMatchObject({ plan: 'scale', customRequestsPerMinute: null });
  expect((await store.setExcludedServices(ws.id, ['noise-suppressor'])).excludedServices).toEqual(['noise-suppressor']);
  expect((await store.getWorkspaceByName('acme'))!.id).toBe(ws.id);
  expect(await store.listWorkspaces()).toHaveLength(1);
});

test('tokens: mw_live_ + 32 base62 chars, only the sha256 is stored, 12-char prefix', async () => {
  const ws = await store.createWorkspace('acme', 'free');
  const seen = new Set<string>();
  for (let i = 0; i < 50; i++) {
    const { token, record } = await store.createToken({ workspaceId: ws.id, name: `k${i}`, scopes: ['*'], allowedIps: [], expiresAt: null });
    expect(token).toMatch(TOKEN_PATTERN);
    expect(record.prefix).toBe(token.slice(0, 12));
    expect((await store.findTokenByHash(hashToken(token)))!.id).toBe(record.id);
    seen.add(token);
  }
  expect(seen.size).toBe(50);
  const { token } = await store.createToken({ workspaceId: ws.id, name: 'last', scopes: ['*'], allowedIps: ['10.0.0.0/8'], expiresAt: null });
  await store.close();
  // The clear token appears nowhere in the database files.
  const dir = path.join(dataDir, 'nested', 'data');
  for (const f of fs.readdirSync(dir)) {
    expect(fs.readFileSync(path.join(dir, f)).includes(Buffer.from(token))).toBe(false);
  }
  store = openSqliteStore({ dataDir: dir });
  expect((await store.findTokenByHash(hashToken(token)))!.allowedIps).toEqual(['10.0.0.0/8']);
});

test('base62 generator is roughly uniform (no modulo bias towards the first characters)', async () => {
  const counts = new Map<string, number>();
  const sample = randomBase62(62 * 2000);
  for (const ch of sample) counts.set(ch, (counts.get(ch) ?? 0) + 1);
  expect(counts.size).toBe(62);
  // Each symbol expects 2000 (sd ~45); with modulo bias 'A'..'H' would get ~2420.
  for (const n of counts.values()) expect(n).toBeLessThan(2200);
});

test('revoke by id or prefix; touch sets last used', async () => {
  const ws = await store.createWorkspace('acme', 'free');
  const a = await store.createToken({ workspaceId: ws.id, name: 'a', scopes: ['*'], allowedIps: [], expiresAt: null });
  const b = await store.createToken({ workspaceId: ws.id, name: 'b', scopes: ['*'], allowedIps: [], expiresAt: null });
  expect((await store.revokeToken(a.record.prefix))!.revokedAt).not.toBeNull();
  expect((await store.revokeToken(b.record.id))!.revokedAt).not.toBeNull();
  expect(await store.revokeToken('mw_live_none')).toBeNull();
  await store.touchToken(a.record.id, '2030-01-01T00:00:00.000Z');
  expect((await store.getToken(a.record.id))!.lastUsedAt).toBe('2030-01-01T00:00:00.000Z');
  expect((await store.listTokens(ws.id)).map((t) => t.name)).toEqual(['a', 'b']);
});

test('credits: conditional charge per UTC month, refunds, never over the limit', async () => {
  const ws = await store.createWorkspace('acme', 'free');
  const may = new Date('2030-05-31T23:59:59Z');
  const june = new Date('2030-06-01T00:00:00Z');
  expect(await store.chargeCredits(ws.id, 1, 3, may)).toEqual({ ok: true, used: 1, limit: 3 });
  expect(await store.chargeCredits(ws.id, 2, 3, may)).toEqual({ ok: true, used: 3, limit: 3 });
  expect(await store.chargeCredits(ws.id, 1, 3, may)).toEqual({ ok: false, used: 3, limit: 3 });
  expect((await store.chargeCredits(ws.id, 1, 3, june)).ok).toBe(true); // new period
  expect((await store.chargeCredits(ws.id, 5, 3, new Date('2030-07-02T00:00:00Z'))).ok).toBe(false); // first charge above limit
  await store.refundCredits(ws.id, 1, may);
  expect(await store.creditsUsed(ws.id, may)).toBe(2);
  expect(await store.creditsUsed(ws.id, june)).toBe(1);
  expect(await store.creditsUsed(ws.id, new Date('2030-07-02T00:00:00Z'))).toBe(0);
});

test('credits: two processes charging the same workspace concurrently never overspend', async () => {
  const ws = await store.createWorkspace('acme', 'free');
  const dir = path.join(dataDir, 'nested', 'data');
  const storeModule = path.join(__dirname, '../src/store/sqlite-store.js');
  const script = `
    const { openSqliteStore } = require(${JSON.stringify(storeModule)});
    (async () => {
      const s = openSqliteStore({ dataDir: ${JSON.stringify(dir)} });
      let ok = 0;
      for (let i = 0; i < 2000; i++) if ((await s.chargeCredits(${JSON.stringify(ws.id)}, 1, 3000, new Date())).ok) ok++;
      await s.close();
      process.stdout.write(String(ok));
    })();
  `;
  const results = await Promise.all([run(process.execPath, ['-e', script]), run(process.execPath, ['-e', script])]);
  // This process charges too, while the children run.
  let mine = 0;
  for (let i = 0; i < 1000; i++) if ((await store.chargeCredits(ws.id, 1, 3000, new Date())).ok) mine++;
  const total = results.reduce((sum, r) => sum + Number(r.stdout), mine);
  expect(total).toBe(3000);
  expect(await store.creditsUsed(ws.id, new Date())).toBe(3000);
});

test('request log: filters, counts, per-day series, settings', async () => {
  const ws = await store.createWorkspace('acme', 'free');
  const now = Date.now();
  await store.logRequest(logEntry({ requestId: 'r1', workspaceId: ws.id, tokenId: 't1', time: new Date(now - 2000).toISOString() }));
  await store.logRequest(logEntry({ requestId: 'r2', workspaceId: ws.id, tokenId: 't1', status: 401, errorType: 'invalid_token', time: new Date(now - 1000).toISOString() }));
  await store.logRequest(logEntry({ requestId: 'r3', workspaceId: ws.id, tokenId: 't2', endpoint: 'denoise', method: 'POST', creditsCharged: 1, time: new Date(now).toISOString() }));
  await store.logRequest(logEntry({ requestId: 'old', workspaceId: ws.id, time: new Date(now - 3 * 86_400_000).toISOString() }));
  expect((await store.queryRequests({ workspaceId: ws.id })).map((r) => r.requestId)).toEqual(['r3', 'r2', 'r1', 'old']);
  expect((await store.queryRequests({ tokenId: 't1' })).map((r) => r.requestId)).toEqual(['r2', 'r1']);
  expect((await store.queryRequests({ status: 401 }))[0]).toMatchObject({ requestId: 'r2', errorType: 'invalid_token' });
  expect(await store.queryRequests({ errorType: 'invalid_token' })).toHaveLength(1);
  expect((await store.queryRequests({ endpoint: 'denoise' }))[0]).toMatchObject({ requestId: 'r3', creditsCharged: 1, method: 'POST' });
  expect((await store.queryRequests({ workspaceId: ws.id, limit: 1, offset: 1 })).map((r) => r.requestId)).toEqual(['r2']);
  expect(await store.countRequests({ workspaceId: ws.id, since: new Date(now - 86_400_000).toISOString() })).toBe(3);
  const days = await store.requestsPerDay(ws.id, 7);
  expect(days).toHaveLength(7);
  expect(days.reduce((s, d) => s + d.count, 0)).toBe(4);
  expect(days.reduce((s, d) => s + d.errors, 0)).toBe(1);
  expect(days[6].day).toBe(new Date().toISOString().slice(0, 10));
  expect(await store.getSetting('admin_secret_hash')).toBeNull();
  await store.setSetting('admin_secret_hash', 'a');
  await store.setSetting('admin_secret_hash', 'b');
  expect(await store.getSetting('admin_secret_hash')).toBe('b');
});
