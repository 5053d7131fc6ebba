// The gateway's state: one contract (types.ts), one implementation (store.ts) on two engines. openStore picks the
// engine from the config: the embedded SQLite file in DATA_DIR by default (nothing else to run), PostgreSQL when
// DATABASE_URL is set (several gateway processes share it). Both apply their numbered migrations when opened.
import { redactUrl, type Config } from '../../config';
import { gatewayDbPath } from '../../db/paths';
import { migratePostgres, openPostgresStore } from './postgres';
import { migrateSqlite, openSqliteStore } from './sqlite';
import type { GatewayStore } from './types';

export type { GatewayStore } from './types';

/** What selects and sizes the engine (the rest of Config is not needed; absent DATABASE_URL means SQLite). */
export type StoreConfig = Pick<Config, 'dataDir'> & Partial<Pick<Config, 'databaseUrl' | 'databasePoolSize'>>;

/** Opens the store the configuration selects and brings its schema up to date. */
export async function openStore(config: StoreConfig): Promise<GatewayStore> {
  if (config.databaseUrl) return openPostgresStore({ databaseUrl: config.databaseUrl, databasePoolSize: config.databasePoolSize ?? 10 });
  return openSqliteStore(config);
}

/** Human-readable name of the selected engine and where it lives (passwords hidden). */
export function describeStore(config: StoreConfig): string {
  return config.databaseUrl ? `PostgreSQL ${redactUrl(config.databaseUrl)}` : `SQLite ${gatewayDbPath(config)}`;
}

/** Applies pending migrations of the selected engine without starting anything else. */
export async function migrateStore(config: StoreConfig): Promise<{ applied: number[]; version: number }> {
  if (config.databaseUrl) return migratePostgres({ databaseUrl: config.databaseUrl, databasePoolSize: 1 });
  return migrateSqlite(config);
}
