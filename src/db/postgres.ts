// PostgreSQL side of the persistence toolkit (node-postgres `pg`): the one pool factory every PostgreSQL user here
// goes through (gateway store, job queue, the SQLite import), transactions on one pooled connection, the migration
// driver (one transaction under an advisory lock, so replicas starting together migrate once), and the stores'
// statements on a pool (postgresDatabase).
import type { Pool, PoolClient } from 'pg';
import { POSTGRES, toPositional, type Params, type Row, type Sql, type SqlDatabase } from './dialect';
import { migrationSteps, runMigrations, type MigrationPlan, type MigrationResult, type MigrationStep } from './migrations';

// Loaded with the first pool: a box on SQLite (the default) does not load the driver (~80 ms of CPU at every start).
let pgModule: typeof import('pg') | null = null;
const pg = (): typeof import('pg') => (pgModule ??= require('pg') as typeof import('pg'));

export interface PoolOptions {
  databaseUrl: string;
  /** Most connections this pool opens. */
  max: number;
  /** Shown in pg_stat_activity, so an operator can tell the pools apart. */
  applicationName: string;
  /** Prefix of the log line when an idle connection breaks, e.g. "[store]". */
  logTag: string;
}

/** A pool with the service's timeouts: 10 s to connect, idle connections closed after 30 s, statements ≤ 30 s. */
export function createPool(options: PoolOptions): Pool {
  if (!options.databaseUrl) throw new Error('DATABASE_URL is not set');
  const pool = new (pg().Pool)({
    connectionString: options.databaseUrl,
    max: options.max,
    connectionTimeoutMillis: 10_000,
    idleTimeoutMillis: 30_000,
    // No statement may hold a connection (and its row locks) for long.
    statement_timeout: 30_000,
    application_name: options.applicationName,
  });
  // An idle pooled connection that breaks (server restart) emits here; the pool replaces it on next use.
  pool.on('error', (err) => console.error(`${options.logTag} idle PostgreSQL connection failed:`, err.message));
  return pool;
}

/** Runs `fn` in one transaction on one pooled connection: COMMIT when it resolves, ROLLBACK when it throws. */
export async function inTransaction<T>(pool: Pool, fn: (client: PoolClient) => Promise<T>): Promise<T> {
  const client = await pool.connect();
  try {
    await client.query('BEGIN');
    const out = await fn(client);
    await client.query('COMMIT');
    return out;
  } catch (err) {
    await client.query('ROLLBACK').catch(() => undefined);
    throw err;
  } finally {
    client.release();
  }
}

/** Applies the plan's pending migrations in one transaction holding the advisory lock `plan.lock`. */
async function migrateOn(client: PoolClient, plan: MigrationPlan): Promise<MigrationResult> {
  const answer = async (step: MigrationStep): Promise<number | void> => {
    switch (step.do) {
      case 'begin':
        await client.query('BEGIN');
        await client.query('SELECT pg_advisory_xact_lock($1)', [step.lock]);
        await client.query(`CREATE TABLE IF NOT EXISTS ${step.table} (
          version integer PRIMARY KEY,
          name text NOT NULL,
          applied_at timestamptz NOT NULL DEFAULT now()
        )`);
        return;
      case 'current': {
        const { rows } = await client.query<{ v: number | null }>(`SELECT MAX(version) AS v FROM ${step.table}`);
        return rows[0].v ?? 0;
      }
      case 'apply':
        await client.query(step.migration.sql);
        await client.query(`INSERT INTO ${step.table} (version, name) VALUES ($1, $2)`, [step.migration.version, step.migration.name]);
        return;
      case 'commit':
        await client.query('COMMIT');
        return;
    }
  };
  const rollback = async (): Promise<void> => void (await client.query('ROLLBACK'));
  return runMigrations(migrationSteps(plan, 'the database is'), answer, rollback);
}

/** Applies the plan's pending migrations on a connection of `pool` (see migrateOn). */
export async function applyPostgresMigrations(pool: Pool, plan: MigrationPlan): Promise<MigrationResult> {
  const client = await pool.connect();
  try {
    return await migrateOn(client, plan);
  } finally {
    client.release();
  }
}

/** The stores' statements on a pool (`@name` placeholders compiled once per SQL text); a transaction takes one
 *  connection for its length. */
export function postgresDatabase(pool: Pool): SqlDatabase {
  const compiled = new Map<string, { text: string; names: string[] }>();
  const query = async (on: Pool | PoolClient, sql: string, params: Params = {}) => {
    let c = compiled.get(sql);
    if (!c) compiled.set(sql, (c = toPositional(sql)));
    const values = c.names.map((name) => {
      if (!(name in params)) throw new Error(`no value for @${name}`);
      return params[name];
    });
    return on.query<Row>(c.text, values);
  };
  const on = (client: Pool | PoolClient): Sql => ({
    dialect: POSTGRES,
    all: async (sql, params) => (await query(client, sql, params)).rows,
    run: async (sql, params) => (await query(client, sql, params)).rowCount ?? 0,
  });
  let ended = false;
  return {
    ...on(pool),
    transaction: (fn) => inTransaction(pool, (client) => fn(on(client))),
    async close() {
      if (ended) return;
      ended = true;
      await pool.end();
    },
  };
}
