// The SQLite database files of a DATA_DIR, named in one place: the stores open them, the `db` and `keys` CLIs back
// them up, restore them and warn when they create one.
import path from 'node:path';
import type { Config } from '../config';

export interface DatabaseFiles {
  /** Workspaces, keys, plans, credits, the request log, settings (the gateway store). */
  gateway: string;
  /** Jobs, webhook secrets, webhook deliveries (the job store). Its own file: see docs/jobs.md for why. */
  jobs: string;
}

/** DATA_DIR/gateway.db. */
export function gatewayDbPath(config: Pick<Config, 'dataDir'>): string {
  return path.join(config.dataDir, 'gateway.db');
}

/** DATA_DIR/jobs.db. */
export function jobsDbPath(dataDir: string): string {
  return path.join(dataDir, 'jobs.db');
}

export function databaseFiles(config: Pick<Config, 'dataDir'>): DatabaseFiles {
  return { gateway: gatewayDbPath(config), jobs: jobsDbPath(config.dataDir) };
}
