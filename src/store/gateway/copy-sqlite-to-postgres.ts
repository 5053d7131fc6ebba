// Moving a single box to PostgreSQL: copies everything in DATA_DIR/gateway.db (workspaces, tokens — hashes only, as
// stored —, credit usage, settings such as the console admin-secret hash, and the request log) into an empty
// PostgreSQL database, keeping every id, so existing keys keep working and this month's credits carry over.
// One transaction: either all of it is copied or nothing. Run with the single box stopped (`npm run -s db --
// import-sqlite`); credit holds of calls in flight are not copied (there are none once the server is stopped).
import fs from 'node:fs';
import Database from 'better-sqlite3';
import type { PoolClient } from 'pg';
import { gatewayDbPath } from '../../db/paths';
import { createPool, inTransaction } from '../../db/postgres';
import { migratePostgres } from './postgres';
import { migrateSqlite } from './sqlite';

export interface CopyCounts {
  workspaces: number;
  tokens: number;
  creditPeriods: number;
  settings: number;
  requestLogRows: number;
}

const LOG_BATCH = 1_000;

export async function copySqliteToPostgres(
  from: { dataDir: string },
  to: { databaseUrl: string },
  progress: (line: string) => void = () => undefined,
): Promise<CopyCounts> {
  const file = gatewayDbPath(from);
  if (!fs.existsSync(file)) throw new Error(`no SQLite store at ${file}`);
  migrateSqlite(from); // both sides at the same schema version before copying
  await migratePostgres({ databaseUrl: to.databaseUrl, databasePoolSize: 1 });
  const db = new Database(file, { readonly: true, fileMustExist: true });
  const pool = createPool({ databaseUrl: to.databaseUrl, max: 1, applicationName: 'noise-suppression-db-import', logTag: '[db]' });
  try {
    return await inTransaction(pool, async (client) => copyRows(db, client, progress));
  } finally {
    await pool.end();
    db.close();
  }
}

async function copyRows(db: Database.Database, client: PoolClient, progress: (line: string) => void): Promise<CopyCounts> {
  const existing = await client.query<{ n: string }>('SELECT COUNT(*) AS n FROM workspaces');
  if (Number(existing.rows[0].n) > 0) {
    throw new Error('the PostgreSQL database already has workspaces; import only into an empty one');
  }
  const counts: CopyCounts = { workspaces: 0, tokens: 0, creditPeriods: 0, settings: 0, requestLogRows: 0 };

  for (const w of db.prepare('SELECT * FROM workspaces ORDER BY created_at, rowid').iterate() as Iterable<Record<string, unknown>>) {
    await client.query(
      `INSERT INTO workspaces (id, name, plan, custom_rpm, custom_credits, excluded_services, created_at)
       VALUES ($1, $2, $3, $4, $5, $6::jsonb, $7)`,
      [w.id, w.name, w.plan, w.custom_rpm, w.custom_credits, w.excluded_services, w.created_at],
    );
    counts.workspaces++;
  }
  for (const t of db.prepare('SELECT * FROM tokens ORDER BY created_at, rowid').iterate() as Iterable<Record<string, unknown>>) {
    await client.query(
      `INSERT INTO tokens (id, workspace_id, token_hash, prefix, name, scopes, allowed_ips, expires_at, revoked_at,
         last_used_at, created_at)
       VALUES ($1, $2, $3, $4, $5, $6::jsonb, $7::jsonb, $8, $9, $10, $11)`,
      [t.id, t.workspace_id, t.token_hash, t.prefix, t.name, t.scopes, t.allowed_ips, t.expires_at, t.revoked_at, t.last_used_at, t.created_at],
    );
    counts.tokens++;
  }
  for (const c of db.prepare('SELECT workspace_id, period, used FROM credit_usage').iterate() as Iterable<Record<string, unknown>>) {
    await client.query('INSERT INTO credit_usage (workspace_id, period, used, reserved) VALUES ($1, $2, $3, 0)', [c.workspace_id, c.period, c.used]);
    counts.creditPeriods++;
  }
  for (const s of db.prepare('SELECT key, value FROM settings').iterate() as Iterable<Record<string, unknown>>) {
    await client.query('INSERT INTO settings (key, value) VALUES ($1, $2)', [s.key, s.value]);
    counts.settings++;
  }
  // The log can be large: batched multi-row inserts, oldest first.
  const columns = [
    'request_id', 'client_request_id', 'time', 'token_id', 'workspace_id', 'method', 'service', 'endpoint', 'status',
    'error_type', 'credits_charged', 'bytes_in', 'bytes_out', 'upstream_ms', 'total_ms', 'client_ip', 'error_message',
    'calls', 'aggregate_key',
  ];
  let batch: unknown[][] = [];
  const flush = async (): Promise<void> => {
    if (batch.length === 0) return;
    const values = batch
      .map((_, r) => `(${columns.map((__, c) => `$${r * columns.length + c + 1}`).join(', ')})`)
      .join(', ');
    await client.query(`INSERT INTO request_log (${columns.join(', ')}) VALUES ${values}`, batch.flat());
    counts.requestLogRows += batch.length;
    batch = [];
    if (counts.requestLogRows % 100_000 === 0) progress(`  request log: ${counts.requestLogRows} rows`);
  };
  for (const row of db.prepare(`SELECT ${columns.join(', ')} FROM request_log ORDER BY id`).iterate() as Iterable<Record<string, unknown>>) {
    batch.push(columns.map((c) => row[c]));
    if (batch.length === LOG_BATCH) await flush();
  }
  await flush();
  return counts;
}
