// The gateway store on embedded SQLite: DATA_DIR/gateway.db, WAL + busy_timeout so the server and the keys CLI use
// the same file at the same time. The store itself is ./store.ts; this opens the file (foreign keys on) and migrates
// it (src/db/sqlite.ts runs the statements).
import type { Config } from '../../config';
import type { MigrationResult } from '../../db/migrations';
import { gatewayDbPath } from '../../db/paths';
import { applySqliteMigrations, openSqliteFile, sqliteDatabase } from '../../db/sqlite';
import { SQLITE_PLAN } from './migrations';
import { createGatewayStore } from './store';
import type { GatewayStore } from './types';

/** Opens (creating when missing) DATA_DIR/gateway.db, applies pending migrations and closes it again. */
export function migrateSqlite(config: Pick<Config, 'dataDir'>): MigrationResult {
  const db = openSqliteFile(gatewayDbPath(config));
  try {
    return applySqliteMigrations(db, SQLITE_PLAN);
  } finally {
    db.close();
  }
}

export function openSqliteStore(config: Pick<Config, 'dataDir'>): GatewayStore {
  const db = openSqliteFile(gatewayDbPath(config), { foreignKeys: true });
  try {
    applySqliteMigrations(db, SQLITE_PLAN);
  } catch (err) {
    db.close();
    throw err;
  }
  return createGatewayStore(sqliteDatabase(db));
}
