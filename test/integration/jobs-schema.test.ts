// The job tables' numbered migrations (src/store/jobs/migrations) on both engines: the same versions, and the same
// schema shape once applied (tables; columns with their types normalised to SQLite's storage classes, NOT NULL,
// primary keys and defaults; indexes with their columns, order and WHERE). A database written by the build that
// shipped version 1 (recorded in jobs_schema_migrations) migrates forward to that same shape, its jobs kept.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import Database from 'better-sqlite3';
import { Client } from 'pg';
import { POSTGRES_JOB_MIGRATIONS } from '../../src/store/jobs/migrations/postgres';
import { SQLITE_JOB_MIGRATIONS } from '../../src/store/jobs/migrations/sqlite';
import { openPostgresJobStore } from '../../src/store/jobs/postgres';
import { jobsDbPath } from '../../src/db/paths';
import { openSqliteJobStore } from '../../src/store/jobs/sqlite';
import { freshJobsDatabase, stopJobsPostgres } from '../helpers/jobs-helpers';
import { serverBinaries } from '../helpers/real-servers';

/** One line per column and per index, sorted: what both engines must agree on. */
type Shape = string[];

const LATEST = SQLITE_JOB_MIGRATIONS.length;
const MIGRATIONS_TABLE = 'jobs_schema_migrations';
/** PostgreSQL types as SQLite stores the same values (times as INTEGER ms, JSON as TEXT). */
const PG_TYPES: Record<string, string> = {
  text: 'text',
  jsonb: 'text',
  integer: 'integer',
  bigint: 'integer',
  'timestamp with time zone': 'integer',
  'double precision': 'real',
};
const expr = (s: string | null): string =>
  s === null ? 'none' : s.replace(/::[a-z ]+/g, '').replace(/[()]/g, '').replace(/\s+/g, ' ').trim().toLowerCase();

function sqliteShape(file: string): { shape: Shape; versions: number[] } {
  const db = new Database(file, { readonly: true });
  try {
    const shape: Shape = [];
    const tables = db.prepare("SELECT name, sql FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' AND name <> ?").all(MIGRATIONS_TABLE) as Array<{ name: string }>;
    for (const { name: t } of tables) {
      for (const c of db.pragma(`table_info(${t})`) as Array<{ name: string; type: string; notnull: number; pk: number; dflt_value: string | null }>) {
        shape.push(`${t}.${c.name} ${c.type.toLowerCase()}${c.notnull || c.pk ? ' not null' : ''}${c.pk ? ' pk' : ''} default ${expr(c.dflt_value)}`);
      }
      for (const i of db.pragma(`index_list(${t})`) as Array<{ name: string; unique: number; origin: string }>) {
        if (i.origin !== 'c') continue; // primary keys are in the column lines
        const cols = (db.pragma(`index_xinfo(${i.name})`) as Array<{ name: string; desc: number; key: number }>)
          .filter((c) => c.key)
          .map((c) => `${c.name}${c.desc ? ' desc' : ''}`);
        const sql = (db.prepare("SELECT sql FROM sqlite_master WHERE type = 'index' AND name = ?").get(i.name) as { sql: string }).sql;
        const where = / WHERE (.*)$/is.exec(sql)?.[1] ?? null;
        shape.push(`index ${t}.${i.name}${i.unique ? ' unique' : ''} (${cols.join(', ')}) where ${expr(where)}`);
      }
    }
    const versions = (db.prepare(`SELECT version FROM ${MIGRATIONS_TABLE} ORDER BY version`).all() as Array<{ version: number }>).map((r) => r.version);
    return { shape: shape.sort(), versions };
  } finally {
    db.close();
  }
}

async function postgresShape(url: string): Promise<{ shape: Shape; versions: number[] }> {
  const c = new Client({ connectionString: url });
  await c.connect();
  try {
    const shape: Shape = [];
    const columns = await c.query(
      `SELECT c.table_name AS t, c.column_name AS name, c.data_type AS type, c.is_nullable AS nullable, c.column_default AS dflt,
         EXISTS (SELECT 1 FROM information_schema.table_constraints k JOIN information_schema.key_column_usage u
                 ON u.constraint_name = k.constraint_name AND u.table_name = k.table_name
                 WHERE k.constraint_type = 'PRIMARY KEY' AND k.table_name = c.table_name AND u.column_name = c.column_name) AS pk
       FROM information_schema.columns c WHERE c.table_schema = 'public' AND c.table_name <> $1`,
      [MIGRATIONS_TABLE],
    );
    for (const r of columns.rows) {
      const type = PG_TYPES[r.type] ?? `unmapped ${r.type}`;
      shape.push(`${r.t}.${r.name} ${type}${r.nullable === 'NO' ? ' not null' : ''}${r.pk ? ' pk' : ''} default ${expr(r.dflt)}`);
    }
    const indexes = await c.query(
      `SELECT i.tablename AS t, i.indexname AS name, i.indexdef AS def FROM pg_indexes i
       JOIN pg_class ic ON ic.relname = i.indexname JOIN pg_index x ON x.indexrelid = ic.oid
       WHERE i.schemaname = 'public' AND NOT x.indisprimary AND i.tablename <> $1`,
      [MIGRATIONS_TABLE],
    );
    for (const r of indexes.rows) {
      const m = /^CREATE (UNIQUE )?INDEX \S+ ON \S+ USING btree \((.*?)\)(?: WHERE (.*))?$/.exec(r.def);
      if (!m) throw new Error(`unexpected index definition: ${r.def}`);
      const cols = m[2].split(', ').map((s) => s.toLowerCase());
      shape.push(`index ${r.t}.${r.name}${m[1] ? ' unique' : ''} (${cols.join(', ')}) where ${expr(m[3] ?? null)}`);
    }
    const versions = (await c.query(`SELECT version FROM ${MIGRATIONS_TABLE} ORDER BY version`)).rows.map((r) => r.version as number);
    return { shape: shape.sort(), versions };
  } finally {
    await c.end();
  }
}

const dirs: string[] = [];
const tempDir = (): string => {
  const d = fs.mkdtempSync(path.join(os.tmpdir(), 'jobs-schema-'));
  dirs.push(d);
  return d;
};

beforeAll(() => serverBinaries());
afterAll(async () => {
  await stopJobsPostgres();
  for (const d of dirs) fs.rmSync(d, { recursive: true, force: true });
});

test('both engines know the same numbered migrations, 1, 2, 3, … in order', () => {
  expect(POSTGRES_JOB_MIGRATIONS.map((m) => [m.version, m.name])).toEqual(SQLITE_JOB_MIGRATIONS.map((m) => [m.version, m.name]));
  expect(SQLITE_JOB_MIGRATIONS.map((m) => m.version)).toEqual(SQLITE_JOB_MIGRATIONS.map((_, i) => i + 1));
});

test('a fresh queue on either engine reaches the same version and the same schema shape', async () => {
  const dir = tempDir();
  await openSqliteJobStore(dir).close();
  const url = await freshJobsDatabase();
  await (await openPostgresJobStore({ databaseUrl: url })).close();
  const sqlite = sqliteShape(jobsDbPath(dir));
  const postgres = await postgresShape(url);
  expect(sqlite.versions).toEqual(Array.from({ length: LATEST }, (_, i) => i + 1));
  expect(postgres.versions).toEqual(sqlite.versions);
  expect(sqlite.shape.length).toBeGreaterThan(40);
  expect(postgres.shape).toEqual(sqlite.shape);
});

describe('a database the version-1 build wrote migrates forward, its jobs kept', () => {
  const V1_JOB = `INSERT INTO jobs (id, workspace_id, status, params, input, created_at, updated_at, run_after)
    VALUES ('job_v1', 'ws_v1', 'queued', '{"model":"nsm-2"}', '{"source":"upload"}', $at, $at, $at)`;

  test('sqlite', async () => {
    const fresh = tempDir();
    await openSqliteJobStore(fresh).close();
    const dir = tempDir();
    const db = new Database(jobsDbPath(dir));
    // As the version-1 build created it.
    db.exec(`CREATE TABLE ${MIGRATIONS_TABLE} (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at TEXT NOT NULL)`);
    db.exec(SQLITE_JOB_MIGRATIONS[0].sql);
    db.prepare(`INSERT INTO ${MIGRATIONS_TABLE} VALUES (1, ?, ?)`).run(SQLITE_JOB_MIGRATIONS[0].name, new Date().toISOString());
    db.exec(V1_JOB.replaceAll('$at', '1800000000000'));
    db.close();
    const store = openSqliteJobStore(dir);
    expect(await store.getJob('job_v1')).toMatchObject({ status: 'queued', params: { model: 'nsm-2' }, createdAt: 1_800_000_000_000 });
    await store.close();
    const upgraded = sqliteShape(jobsDbPath(dir));
    expect(upgraded.versions).toEqual(Array.from({ length: LATEST }, (_, i) => i + 1));
    expect(upgraded.shape).toEqual(sqliteShape(jobsDbPath(fresh)).shape);
  });

  test('postgres', async () => {
    const fresh = await freshJobsDatabase();
    await (await openPostgresJobStore({ databaseUrl: fresh })).close();
    const url = await freshJobsDatabase();
    const c = new Client({ connectionString: url });
    await c.connect();
    try {
      await c.query(`CREATE TABLE ${MIGRATIONS_TABLE} (version integer PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())`);
      await c.query(POSTGRES_JOB_MIGRATIONS[0].sql);
      await c.query(`INSERT INTO ${MIGRATIONS_TABLE} (version, name) VALUES (1, $1)`, [POSTGRES_JOB_MIGRATIONS[0].name]);
      await c.query(V1_JOB.replaceAll('$at', "to_timestamp(1800000000)"));
    } finally {
      await c.end();
    }
    const store = await openPostgresJobStore({ databaseUrl: url });
    expect(await store.getJob('job_v1')).toMatchObject({ status: 'queued', params: { model: 'nsm-2' }, createdAt: 1_800_000_000_000 });
    await store.close();
    const upgraded = await postgresShape(url);
    expect(upgraded.versions).toEqual(Array.from({ length: LATEST }, (_, i) => i + 1));
    expect(upgraded.shape).toEqual((await postgresShape(fresh)).shape);
  });
});

test('a jobs.db newer than this build is refused with a clear message', async () => {
  const dir = tempDir();
  await openSqliteJobStore(dir).close();
  const db = new Database(jobsDbPath(dir));
  db.prepare(`INSERT INTO ${MIGRATIONS_TABLE} VALUES (999, 'from the future', ?)`).run(new Date().toISOString());
  db.close();
  expect(() => openSqliteJobStore(dir)).toThrow(/jobs\.db is at schema version 999, newer than this build knows/);
});
