// The job queue on embedded SQLite: DATA_DIR/jobs.db (its own file, next to gateway.db; see docs/jobs.md for why),
// WAL + busy_timeout so several processes may share it. The store itself is ./queue-store.ts; this opens the file,
// migrates it, and runs statements on its one connection.
import path from 'node:path';
import type Database from 'better-sqlite3';
import { applySqliteMigrations, openSqliteFile } from '../../../db/sqlite';
import type { JobStore } from '../../types';
import { SQLITE, type Params, type Row, type Sql, type SqlDatabase } from './dialect';
import { SQLITE_JOBS_PLAN } from './migrations';
import { createQueueStore } from './queue-store';

export function jobsDbPath(dataDir: string): string {
  return path.join(dataDir, 'jobs.db');
}

/**
 * Statements on one better-sqlite3 connection. A transaction is BEGIN IMMEDIATE (the write lock, so processes
 * cannot interleave); while one is open, this process's other statements wait their turn instead of running inside it.
 */
function sqliteDatabase(db: Database.Database): SqlDatabase {
  const statements = new Map<string, Database.Statement>();
  const prepare = (sql: string): Database.Statement => {
    let stmt = statements.get(sql);
    if (!stmt) statements.set(sql, (stmt = db.prepare(sql)));
    return stmt;
  };
  const now: Sql = {
    dialect: SQLITE,
    all: async (sql: string, params: Params = {}) => prepare(sql).all(params) as Row[],
    run: async (sql: string, params: Params = {}) => prepare(sql).run(params).changes,
  };
  let turn: Promise<unknown> = Promise.resolve();
  const inTurn = <T>(fn: () => Promise<T>): Promise<T> => {
    const out = turn.then(fn);
    turn = out.catch(() => undefined);
    return out;
  };
  return {
    dialect: SQLITE,
    all: (sql, params) => inTurn(() => now.all(sql, params)),
    run: (sql, params) => inTurn(() => now.run(sql, params)),
    transaction: (fn) =>
      inTurn(async () => {
        db.exec('BEGIN IMMEDIATE');
        try {
          const out = await fn(now);
          db.exec('COMMIT');
          return out;
        } catch (err) {
          if (db.inTransaction) db.exec('ROLLBACK');
          throw err;
        }
      }),
    close: () =>
      inTurn(async () => {
        db.close();
      }),
  };
}

export function openSqliteJobStore(dataDir: string): JobStore {
  const db = openSqliteFile(jobsDbPath(dataDir));
  try {
    applySqliteMigrations(db, SQLITE_JOBS_PLAN);
  } catch (err) {
    db.close();
    throw err;
  }
  return createQueueStore(sqliteDatabase(db));
}
