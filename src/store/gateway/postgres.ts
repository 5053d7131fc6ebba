// The gateway store on PostgreSQL (node-postgres `pg`, one pool per process), selected by DATABASE_URL: several
// gateway processes share it. The store itself is ./store.ts, the same as on SQLite; this opens the pool (src/db's
// factory) and migrates (src/db/postgres.ts runs the statements).
import type { Pool } from 'pg';
import { redactUrl, type Config } from '../../config';
import type { MigrationResult } from '../../db/migrations';
import { applyPostgresMigrations, createPool, postgresDatabase } from '../../db/postgres';
import { POSTGRES_PLAN } from './migrations';
import { createGatewayStore } from './store';
import type { GatewayStore } from './types';

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
  return createGatewayStore(postgresDatabase(pool));
}
