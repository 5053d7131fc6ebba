// What only the SQLite engine has: the file in DATA_DIR, WAL mode, upgrading a file written by an older version.
// Everything both engines promise is in store-contract.test.ts (run against SQLite and PostgreSQL).
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import Database from 'better-sqlite3';
import { SQLITE_MIGRATIONS } from '../../src/store/gateway/migrations/sqlite';
import { openSqliteStore } from '../../src/store/gateway/sqlite';
import { gatewayDbPath } from '../../src/db/paths';
import { randomBase62 } from '../../src/store/gateway/tokens';
import type { GatewayStore } from '../../src/store/gateway/types';

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

test('creates the data folder, WAL mode and numbered migrations applied once', async () => {
  const dir = path.join(dataDir, 'nested', 'data');
  const file = gatewayDbPath({ dataDir: dir });
  expect(fs.existsSync(file)).toBe(true);
  const second = openSqliteStore({ dataDir: dir }); // re-open: migrations must not re-run
  await second.close();
  const db = new Database(file, { readonly: true });
  expect(db.pragma('journal_mode', { simple: true })).toBe('wal');
  const versions = db.prepare('SELECT version FROM schema_migrations').all() as Array<{ version: number }>;
  expect(versions.map((v) => v.version)).toEqual(SQLITE_MIGRATIONS.map((m) => m.version));
  const tables = (db.prepare("SELECT name FROM sqlite_master WHERE type='table'").all() as Array<{ name: string }>).map((t) => t.name);
  expect(tables).toEqual(expect.arrayContaining(['workspaces', 'tokens', 'credit_usage', 'request_log', 'settings']));
  db.close();
});


test('a database written at schema version 1 is upgraded in place, its data kept', async () => {
  const dir = path.join(dataDir, 'v1');
  fs.mkdirSync(dir, { recursive: true });
  const db = new Database(gatewayDbPath({ dataDir: dir }));
  db.exec('CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at TEXT NOT NULL)');
  db.exec(SQLITE_MIGRATIONS[0].sql);
  db.prepare('INSERT INTO schema_migrations VALUES (1, ?, ?)').run(SQLITE_MIGRATIONS[0].name, new Date().toISOString());
  db.prepare("INSERT INTO workspaces (id, name, plan, created_at) VALUES ('ws_old', 'old', 'free', ?)").run(new Date().toISOString());
  db.prepare("INSERT INTO credit_usage (workspace_id, period, used) VALUES ('ws_old', ?, 7)").run(new Date().toISOString().slice(0, 7));
  db.close();
  const upgraded = openSqliteStore({ dataDir: dir });
  try {
    expect(await upgraded.schemaVersions()).toEqual(SQLITE_MIGRATIONS.map((m) => m.version));
    expect(await upgraded.creditsUsed('ws_old', new Date())).toBe(7);
    expect(await upgraded.reserveCredits('ws_old', 3, 10, new Date(), 1000)).toMatchObject({ ok: true, used: 7, reserved: 3 });
  } finally {
    await upgraded.close();
  }
});

test('a database from a newer version is refused with a clear message', async () => {
  const dir = path.join(dataDir, 'nested', 'data');
  await store.close();
  const db = new Database(gatewayDbPath({ dataDir: dir }));
  db.prepare('INSERT INTO schema_migrations VALUES (999, ?, ?)').run('from the future', new Date().toISOString());
  db.close();
  expect(() => openSqliteStore({ dataDir: dir })).toThrow(/schema version 999, newer than this build knows/);
  store = openSqliteStore({ dataDir: path.join(dataDir, 'other') });
});

test('base62 generator is roughly uniform (no modulo bias towards the first characters)', async () => {
  const counts = new Map<string, number>();
  const sample = randomBase62(62 * 2000);
  for (const ch of sample) counts.set(ch, (counts.get(ch) ?? 0) + 1);
  expect(counts.size).toBe(62);
  // Each symbol expects 2000 (sd ~45); with modulo bias 'A'..'H' would get ~2420.
  for (const n of counts.values()) expect(n).toBeLessThan(2200);
});

test('keys revoke: a start of the token or id that names several keys is refused with their ids (issue 35, item 13)', async () => {
  const { findKeyTarget } = await import('../../src/store/gateway/common');
  const rec = (id: string, prefix: string) => ({ id, prefix }) as never;
  const keys = [rec('key_AAAAbbbb1', 'mw_live_Abcd'), rec('key_AAAAcccc2', 'mw_live_Abce'), rec('key_ZZZZ', 'mw_live_Zzzz')];
  const lookup = { byId: async () => null, byHash: async () => null, all: async () => keys };
  await expect(findKeyTarget('mw_live_Abc', lookup)).rejects.toThrow('"mw_live_Abc" is too short');
  await expect(findKeyTarget('key_AAAA', lookup)).rejects.toThrow('"key_AAAA" matches 2 keys (key_AAAAbbbb1, key_AAAAcccc2); give more characters or the key id');
  expect(await findKeyTarget('key_AAAAc', lookup)).toBe(keys[1]);
  expect(await findKeyTarget('mw_live_AbcdXYZW', lookup)).toBe(keys[0]);
  expect(await findKeyTarget('mw_live_Abcf', lookup)).toBeNull();
});
