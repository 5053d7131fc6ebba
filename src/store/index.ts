// The gateway's state: one contract (types.ts), engines behind it. openStore picks the engine from the config;
// the embedded SQLite file in DATA_DIR is the default and needs nothing else running.
import type { Config } from '../config';
import { openSqliteStore } from './sqlite-store';
import type { GatewayStore } from './types';

export type { GatewayStore } from './types';

/** Opens the store the configuration selects (today: SQLite in config.dataDir). */
export async function openStore(config: Pick<Config, 'dataDir'>): Promise<GatewayStore> {
  return openSqliteStore(config);
}
