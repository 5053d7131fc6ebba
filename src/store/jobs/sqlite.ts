// The job queue on embedded SQLite: DATA_DIR/jobs.db (its own file, next to gateway.db; see docs/jobs.md for why),
// WAL + busy_timeout so several processes may share it. The store itself is ./store.ts; this opens the file and
// migrates it (src/db/sqlite.ts runs the statements).
import { jobsDbPath } from '../../db/paths';
import { applySqliteMigrations, openSqliteFile, sqliteDatabase } from '../../db/sqlite';
import { SQLITE_JOBS_PLAN } from './migrations';
import { createJobStore } from './store';
import type { JobStore } from './types';

export function openSqliteJobStore(dataDir: string): JobStore {
  const db = openSqliteFile(jobsDbPath(dataDir));
  try {
    applySqliteMigrations(db, SQLITE_JOBS_PLAN);
  } catch (err) {
    db.close();
    throw err;
  }
  return createJobStore(sqliteDatabase(db));
}
