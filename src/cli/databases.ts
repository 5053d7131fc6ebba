// The warning when a CLI creates one of the SQLite files (src/db/paths.ts: DATA_DIR/gateway.db, DATA_DIR/jobs.db):
// a DATA_DIR other than the server's silently gets databases of its own, and keys made there answer 401.
import fs from 'node:fs';
import type { Config } from '../config';
import { databaseFiles } from '../db/paths';

/**
 * Notes which database files exist now; `check()` (after opening a store) reports each one that has appeared since,
 * once, through `warn`. Nothing with DATABASE_URL: PostgreSQL databases are not created by opening them.
 */
export function watchForNewDatabase(config: Pick<Config, 'dataDir'> & Partial<Pick<Config, 'databaseUrl'>>, warn: (line: string) => void): { check(): void } {
  if (config.databaseUrl) return { check: () => undefined };
  const files = Object.values(databaseFiles(config));
  const missing = new Set(files.filter((f) => !fs.existsSync(f)));
  return {
    check() {
      for (const file of missing) {
        if (!fs.existsSync(file)) continue;
        missing.delete(file);
        warn(`created a new database at ${file} (DATA_DIR=${config.dataDir}); is the server using the same DATA_DIR?`);
      }
    },
  };
}
