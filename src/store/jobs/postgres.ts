// The job queue on PostgreSQL, selected by DATABASE_URL: the job tables live in the same database as the gateway
// store, with their own numbered migrations (jobs_schema_migrations). The store itself is ./queue-store.ts; this
// opens the pool (src/db's factory), migrates, and runs statements on it.
import type { Pool, PoolClient } from 'pg';
import { applyPostgresMigrations, createPool, inTransaction } from '../../../db/postgres';
import type { JobStore } from '../../types';
import { POSTGRES, toPositional, type Params, type Row, type Sql, type SqlDatabase } from './dialect';
import { POSTGRES_JOBS_PLAN } from './migrations';
import { createQueueStore } from './queue-store';

export interface PostgresJobStoreOptions {
  databaseUrl: string;
  poolSize?: number;
}

/** Statements on the pool; a transaction takes one connection for its length. */
function postgresDatabase(pool: Pool): SqlDatabase {
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

export async function openPostgresJobStore(opts: PostgresJobStoreOptions): Promise<JobStore> {
  const pool = createPool({
    databaseUrl: opts.databaseUrl,
    max: opts.poolSize ?? 5,
    applicationName: 'noise-suppression-gateway-jobs',
    logTag: '[jobs]',
  });
  try {
    await applyPostgresMigrations(pool, POSTGRES_JOBS_PLAN);
  } catch (err) {
    await pool.end();
    throw err;
  }
  return createQueueStore(postgresDatabase(pool));
}
