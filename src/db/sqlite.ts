// SQLite side of the persistence toolkit (better-sqlite3, synchronous): opening a database file the way every store
// here uses it, the migration driver, and the stores' statements on a connection (sqliteDatabase). WAL +
// busy_timeout let several processes (server, CLI) share one file.
import fs from 'node:fs';
import path from 'node:path';
import Database from 'better-sqlite3';
import { PRIVATE_DIR_MODE, PRIVATE_FILE_MODE, tightenDatabaseFiles } from '../startup/private-files';
import { SQLITE, type Params, type Row, type Sql, type SqlDatabase } from './dialect';
import { migrationSteps, runMigrationsSync, type MigrationPlan, type MigrationResult, type MigrationStep } from './migrations';

export interface SqliteOpenOptions {
  /** Enforce REFERENCES clauses (the gateway store's schema has them). */
  foreignKeys?: boolean;
}

/** Opens (creating it and its folder when missing) a database file: WAL, 5 s busy timeout, synchronous=NORMAL. */
export function openSqliteFile(file: string, options: SqliteOpenOptions = {}): Database.Database {
  fs.mkdirSync(path.dirname(file), { recursive: true, mode: PRIVATE_DIR_MODE });
  // 0600 whatever the umask: a new file is created so (an empty file is an empty database), an older looser one is
  // tightened, and SQLite gives its -wal and -shm files the database's mode.
  fs.closeSync(fs.openSync(file, 'a', PRIVATE_FILE_MODE));
  tightenDatabaseFiles(file);
  const db = new Database(file);
  try {
    db.pragma('busy_timeout = 5000');
    db.pragma('journal_mode = WAL');
    db.pragma('synchronous = NORMAL');
    if (options.foreignKeys) db.pragma('foreign_keys = ON');
  } catch (err) {
    db.close();
    throw err;
  }
  return db;
}

/**
 * Applies the plan's pending migrations in one BEGIN IMMEDIATE transaction: the database's write lock keeps a second
 * process that starts at the same moment waiting (busy_timeout), so each migration runs once (`plan.lock` is not used).
 */
export function applySqliteMigrations(db: Database.Database, plan: MigrationPlan): MigrationResult {
  const answer = (step: MigrationStep): number | void => {
    switch (step.do) {
      case 'begin':
        db.exec('BEGIN IMMEDIATE');
        db.exec(`CREATE TABLE IF NOT EXISTS ${step.table} (
          version INTEGER PRIMARY KEY,
          name TEXT NOT NULL,
          applied_at TEXT NOT NULL
        )`);
        return;
      case 'current':
        return (db.prepare(`SELECT MAX(version) AS v FROM ${step.table}`).get() as { v: number | null }).v ?? 0;
      case 'apply':
        db.exec(step.migration.sql);
        db.prepare(`INSERT INTO ${step.table} (version, name, applied_at) VALUES (?, ?, ?)`).run(
          step.migration.version,
          step.migration.name,
          new Date().toISOString(),
        );
        return;
      case 'commit':
        db.exec('COMMIT');
        return;
    }
  };
  const rollback = (): void => {
    if (db.inTransaction) db.exec('ROLLBACK');
  };
  return runMigrationsSync(migrationSteps(plan, `${db.name} is`), answer, rollback);
}

/**
 * Turns of the connections of this process, one queue per database file. A transaction is BEGIN IMMEDIATE (the file's
 * write lock, so processes cannot interleave) and stays open across the awaits of its statements; meanwhile every
 * other statement of this process on the same file waits its turn here instead of running inside it, or (on a second
 * connection to the file) blocking the thread on the write lock this thread itself holds until busy_timeout gives up.
 * When nothing is waiting, a statement runs at once, in the call, as better-sqlite3 runs it.
 */
const turns = new Map<string, { tail: Promise<unknown>; pending: number; connections: number }>();

function turnOf(file: string): { inTurn<T>(fn: () => Promise<T>): Promise<T>; release(): void } {
  const key = path.resolve(file);
  let entry = turns.get(key);
  if (!entry) turns.set(key, (entry = { tail: Promise.resolve(), pending: 0, connections: 0 }));
  entry.connections++;
  const queue = entry;
  return {
    inTurn<T>(fn: () => Promise<T>): Promise<T> {
      const out = queue.pending === 0 ? fn() : queue.tail.then(fn);
      queue.pending++;
      const done = (): void => void queue.pending--;
      queue.tail = out.then(done, done);
      return out;
    },
    release() {
      if (--queue.connections === 0 && turns.get(key) === queue) turns.delete(key);
    },
  };
}

/** The stores' statements on one better-sqlite3 connection (prepared once per SQL text), in turns (see `turns`). */
export function sqliteDatabase(db: Database.Database): SqlDatabase {
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
  const turn = turnOf(db.name);
  let closed = false;
  return {
    dialect: SQLITE,
    all: (sql, params) => turn.inTurn(() => now.all(sql, params)),
    run: (sql, params) => turn.inTurn(() => now.run(sql, params)),
    transaction: (fn) =>
      turn.inTurn(async () => {
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
      turn.inTurn(async () => {
        if (closed) return;
        closed = true;
        turn.release();
        db.close();
      }),
  };
}
