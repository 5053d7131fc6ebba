// Opens the job queue the configuration selects: SQLite in DATA_DIR/jobs.db by default (nothing else to run), or
// PostgreSQL when DATABASE_URL is set (the same database as the gateway store; several gateway processes share the
// queue). Both apply their own numbered migrations (./migrations) when opened; the store is written once
// (./store.ts) with the engines' differences in src/db/dialect.ts.
import type { Config } from '../../config';
import { openPostgresJobStore } from './postgres';
import { openSqliteJobStore } from './sqlite';
import type { JobStore } from './types';

export type JobStoreConfig = Pick<Config, 'dataDir'> & Partial<Pick<Config, 'databaseUrl' | 'databasePoolSize'>>;

/** Connections of the job queue's own PostgreSQL pool (claims, lease renewals, progress): a few are plenty. */
const JOBS_POOL_SIZE = 4;

export async function openJobStore(config: JobStoreConfig): Promise<JobStore> {
  if (config.databaseUrl) {
    return openPostgresJobStore({ databaseUrl: config.databaseUrl, poolSize: Math.min(JOBS_POOL_SIZE, config.databasePoolSize ?? JOBS_POOL_SIZE) });
  }
  return openSqliteJobStore(config.dataDir);
}
