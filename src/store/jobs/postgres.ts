// The job queue on PostgreSQL, selected by DATABASE_URL: the job tables live in the same database as the gateway
// store, with their own numbered migrations (jobs_schema_migrations). The store itself is ./store.ts; this opens the
// pool (src/db's factory) and migrates (src/db/postgres.ts runs the statements).
import { applyPostgresMigrations, createPool, postgresDatabase } from '../../db/postgres';
import { POSTGRES_JOBS_PLAN } from './migrations';
import { createJobStore } from './store';
import type { JobStore } from './types';

export interface PostgresJobStoreOptions {
  databaseUrl: string;
  poolSize?: number;
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
  return createJobStore(postgresDatabase(pool));
}
