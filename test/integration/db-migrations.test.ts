// The one migration runner (src/db) on both drivers, against a real SQLite file and a real PostgreSQL server: pending
// migrations applied once, in order, recorded; a failing one leaves nothing behind; a newer database and a plan with
// gaps are refused; processes migrating at the same moment apply each migration exactly once.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type Database from 'better-sqlite3';
import type { Pool } from 'pg';
import type { Migration, MigrationPlan } from '../../src/db/migrations';
import { createPool, applyPostgresMigrations } from '../../src/db/postgres';
import { applySqliteMigrations, openSqliteFile } from '../../src/db/sqlite';
import { startPostgres, type PostgresServer, serverBinaries } from '../helpers/real-servers';

const M1: Migration = { version: 1, name: 'things', sql: 'CREATE TABLE things (id integer PRIMARY KEY, label text NOT NULL)' };
const M2: Migration = { version: 2, name: 'things.note', sql: 'ALTER TABLE things ADD COLUMN note text' };
const BROKEN: Migration = { version: 3, name: 'broken', sql: 'CREATE TABLE more (id integer); SELECT * FROM no_such_table' };
const plan = (migrations: Migration[], subject?: string): MigrationPlan => ({ table: 'test_migrations', lock: 91_001, migrations, subject });

let dir: string;
beforeEach(() => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'db-migrations-'));
});
afterEach(() => fs.rmSync(dir, { recursive: true, force: true }));

describe('SQLite driver', () => {
  let db: Database.Database;
  beforeEach(() => {
    db = openSqliteFile(path.join(dir, 'nested', 'x.db'));
  });
  afterEach(() => db.close());
  const tables = (): string[] =>
    (db.prepare("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name").all() as Array<{ name: string }>).map((r) => r.name);

  test('applies pending migrations once, in order, and records them', () => {
    expect(applySqliteMigrations(db, plan([M1]))).toEqual({ applied: [1], version: 1 });
    expect(applySqliteMigrations(db, plan([M1, M2]))).toEqual({ applied: [2], version: 2 });
    expect(applySqliteMigrations(db, plan([M1, M2]))).toEqual({ applied: [], version: 2 });
    const rows = db.prepare('SELECT version, name, applied_at FROM test_migrations ORDER BY version').all() as Array<Record<string, unknown>>;
    expect(rows.map((r) => [r.version, r.name])).toEqual([[1, 'things'], [2, 'things.note']]);
    expect(Number.isNaN(Date.parse(String(rows[0].applied_at)))).toBe(false);
    expect(db.pragma('journal_mode', { simple: true })).toBe('wal');
  });

  test('a failing migration rolls back every migration of the run', () => {
    expect(() => applySqliteMigrations(db, plan([M1, M2, BROKEN]))).toThrow(/no_such_table/);
    expect(tables()).toEqual([]);
    expect(db.inTransaction).toBe(false);
  });

  test('a newer database and a plan with a gap are refused', () => {
    applySqliteMigrations(db, plan([M1, M2]));
    expect(() => applySqliteMigrations(db, plan([M1]))).toThrow(/x\.db is at schema version 2, newer than this build knows \(1\)/);
    expect(() => applySqliteMigrations(db, plan([M1], 'the things are'))).toThrow(/^the things are at schema version 2/);
    expect(() => applySqliteMigrations(db, plan([M1, { ...M2, version: 3 }]))).toThrow(/migration #2 has version 3/);
    expect(() => applySqliteMigrations(db, { ...plan([M1]), table: 'x; DROP TABLE things' })).toThrow(/bad migrations table name/);
    expect(tables()).toEqual(['test_migrations', 'things']);
  });
});

describe('PostgreSQL driver', () => {
  let pg: PostgresServer;
  let n = 0;
  const pools: Pool[] = [];
  const pool = async (url?: string): Promise<Pool> => {
    const p = createPool({ databaseUrl: url ?? (await pg.createDatabase(`mig_${process.pid}_${++n}`)), max: 2, applicationName: 'db-test', logTag: '[test]' });
    pools.push(p);
    return p;
  };
  beforeAll(async () => {
    serverBinaries();
    pg = await startPostgres();
  });
  afterAll(async () => {
    await Promise.all(pools.map((p) => p.end()));
    await pg?.stop();
  });

  test('applies pending migrations once, in order, and records them; the pool names itself', async () => {
    const p = await pool();
    expect(await applyPostgresMigrations(p, plan([M1]))).toEqual({ applied: [1], version: 1 });
    expect(await applyPostgresMigrations(p, plan([M1, M2]))).toEqual({ applied: [2], version: 2 });
    expect(await applyPostgresMigrations(p, plan([M1, M2]))).toEqual({ applied: [], version: 2 });
    const { rows } = await p.query('SELECT version, name, applied_at FROM test_migrations ORDER BY version');
    expect(rows.map((r) => [r.version, r.name])).toEqual([[1, 'things'], [2, 'things.note']]);
    expect(rows[0].applied_at).toBeInstanceOf(Date);
    const me = await p.query("SELECT current_setting('application_name') AS a, current_setting('statement_timeout') AS t");
    expect(me.rows[0]).toEqual({ a: 'db-test', t: '30s' });
  });

  test('a failing migration rolls back every migration of the run; newer databases and gaps are refused', async () => {
    const p = await pool();
    await expect(applyPostgresMigrations(p, plan([M1, M2, BROKEN]))).rejects.toThrow(/no_such_table/);
    const tables = async (): Promise<string[]> =>
      (await p.query("SELECT tablename FROM pg_tables WHERE schemaname = 'public' ORDER BY 1")).rows.map((r) => r.tablename);
    expect(await tables()).toEqual([]);
    await applyPostgresMigrations(p, plan([M1, M2]));
    await expect(applyPostgresMigrations(p, plan([M1]))).rejects.toThrow(/^the database is at schema version 2, newer than this build knows \(1\)/);
    await expect(applyPostgresMigrations(p, plan([M1], 'the things are'))).rejects.toThrow(/^the things are at schema version 2/);
    await expect(applyPostgresMigrations(p, plan([{ ...M1, version: 0 }]))).rejects.toThrow(/migration #1 has version 0/);
    expect(await tables()).toEqual(['test_migrations', 'things']);
  });

  test('processes migrating at the same moment apply each migration exactly once (advisory lock)', async () => {
    const first = await pool();
    const url = `postgres://postgres@127.0.0.1:${pg.port}/mig_${process.pid}_${n}`;
    const others = await Promise.all(Array.from({ length: 5 }, () => pool(url)));
    const results = await Promise.all([first, ...others].map((p) => applyPostgresMigrations(p, plan([M1, M2]))));
    expect(results.flatMap((r) => r.applied).sort()).toEqual([1, 2]);
    for (const r of results) expect(r.version).toBe(2);
  });
});
