// Opens the job queue the configuration selects: SQLite in DATA_DIR/jobs.db (default, nothing else to run).
import type { Config } from '../../config';
import type { JobStore } from '../types';
import { openSqliteJobStore } from './sqlite';

export async function openJobStore(config: Pick<Config, 'dataDir'>): Promise<JobStore> {
  return openSqliteJobStore(config.dataDir);
}
