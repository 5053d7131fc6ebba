// `db backup` / `db restore` for the single box: gateway.db (workspaces, keys, credits, request log) and jobs.db (jobs,
// webhook secrets, webhook deliveries) together. A backup FILE holds the gateway database; the job queue goes beside
// it as FILE's name with .jobs.db (nsm-2026-11-22.db → nsm-2026-11-22.jobs.db), and restore takes both back.
//
// Both copies come from one SQLite read transaction over the two files (jobs.db attached), so they show the same
// moment while the server keeps writing. They are written into a temporary folder beside FILE, checked, then renamed
// into place: a killed backup leaves only that folder, which the next backup in the same place removes.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import Database from 'better-sqlite3';
import type { Config } from '../config';
import { databaseFiles } from '../db/paths';
import { openSqliteStore } from '../store/gateway/sqlite';
import { openJobStore } from '../store/jobs';
import { PRIVATE_FILE_MODE } from '../startup/private-files';
import { processAlive } from '../startup/process-alive';
import { existingRefusal } from './args';

/** The command cannot be carried out (exit 1), with the reason for the operator. */
export class CommandError extends Error {}

/** Where the job queue of the backup FILE goes: FILE with .db replaced by .jobs.db (or .jobs.db appended). */
export function jobsPartOf(file: string): string {
  return file.endsWith('.db') ? `${file.slice(0, -'.db'.length)}.jobs.db` : `${file}.jobs.db`;
}

function bytes(n: number): string {
  return n >= 1024 * 1024 ? `${(n / 1024 / 1024).toFixed(1)} MB` : `${Math.ceil(n / 1024)} KB`;
}

function stamp(): string {
  return new Date().toISOString().replace(/[:]/g, '-').replace(/\.\d+Z$/, 'Z');
}

type Kind = 'gateway' | 'jobs';

/** The tables that make a file a gateway or a jobs database. */
const TABLES: Record<Kind, string[]> = {
  gateway: ['schema_migrations', 'workspaces', 'tokens', 'request_log'],
  jobs: ['jobs_schema_migrations', 'jobs', 'webhook_secrets', 'webhook_deliveries'],
};

export interface GatewayInfo {
  schemaVersion: number;
  workspaces: number;
  tokens: number;
  requests: number;
}

export interface JobsInfo {
  schemaVersion: number;
  jobs: number;
  webhookSecrets: number;
  deliveries: number;
}

/** Opens `file` read-only, runs the integrity check, checks it is a `kind` database and counts its rows. */
function inspect<T>(file: string, kind: Kind, describe: (count: (table: string) => number, version: (table: string) => number) => T): T {
  let db: Database.Database;
  try {
    db = new Database(file, { readonly: true, fileMustExist: true });
  } catch (err) {
    throw new CommandError(`${file} cannot be opened as a SQLite database: ${(err as Error).message}`);
  }
  try {
    let check: string[];
    try {
      check = (db.pragma('integrity_check') as Array<{ integrity_check: string }>).map((r) => r.integrity_check);
    } catch (err) {
      throw new CommandError(`${file} is not a usable SQLite database: ${(err as Error).message}`);
    }
    if (check.length !== 1 || check[0] !== 'ok') {
      throw new CommandError(`${file} failed SQLite's integrity check: ${check.slice(0, 3).join('; ')}`);
    }
    const tables = new Set((db.prepare("SELECT name FROM sqlite_master WHERE type = 'table'").all() as Array<{ name: string }>).map((t) => t.name));
    const other: Kind = kind === 'gateway' ? 'jobs' : 'gateway';
    for (const t of TABLES[kind]) {
      if (tables.has(t)) continue;
      if (TABLES[other].every((o) => tables.has(o))) {
        throw new CommandError(`${file} is a ${other} database, not a ${kind} database` + (other === 'jobs' ? ` (the jobs part of a backup: restore the file beside it without .jobs)` : ''));
      }
      throw new CommandError(`${file} is a SQLite database but not a ${kind} database (no table "${t}")`);
    }
    const count = (table: string) => (db.prepare(`SELECT COUNT(*) AS n FROM ${table}`).get() as { n: number }).n;
    const version = (table: string) => (db.prepare(`SELECT MAX(version) AS v FROM ${table}`).get() as { v: number | null }).v ?? 0;
    return describe(count, version);
  } finally {
    db.close();
  }
}

/** Integrity check and a short description of a gateway database file; throws CommandError when unusable. */
export function inspectDatabase(file: string): GatewayInfo {
  return inspect(file, 'gateway', (count, version) => ({
    schemaVersion: version('schema_migrations'),
    workspaces: count('workspaces'),
    tokens: count('tokens'),
    requests: count('request_log'),
  }));
}

/** The same for a jobs database (jobs.db). */
export function inspectJobsDatabase(file: string): JobsInfo {
  return inspect(file, 'jobs', (count, version) => ({
    schemaVersion: version('jobs_schema_migrations'),
    jobs: count('jobs'),
    webhookSecrets: count('webhook_secrets'),
    deliveries: count('webhook_deliveries'),
  }));
}

const describeGateway = (i: GatewayInfo) => `schema v${i.schemaVersion}, ${i.workspaces} workspaces, ${i.tokens} keys, ${i.requests} logged requests`;
const describeJobs = (i: JobsInfo) => `schema v${i.schemaVersion}, ${i.jobs} jobs, ${i.webhookSecrets} webhook secrets, ${i.deliveries} webhook deliveries`;

/**
 * Whether another connection has the database open. Leaving WAL mode needs exclusive access, so SQLite refuses it
 * (SQLITE_BUSY) while any other process holds a connection; this works across containers sharing the volume.
 * On success the file is left in rollback-journal mode with no -wal/-shm, ready to be moved.
 */
export function databaseInUse(file: string): boolean {
  const db = new Database(file, { fileMustExist: true, timeout: 0 });
  try {
    return db.pragma('journal_mode = DELETE', { simple: true }) !== 'delete';
  } catch (err) {
    if ((err as { code?: string }).code === 'SQLITE_BUSY') return true;
    throw err;
  } finally {
    db.close();
  }
}

// ---- temporary folders of backups in progress --------------------------------------------------------------------

const TEMP_PREFIX = '.nsm-backup-';
/** A leftover of another host (a container sharing the folder) is removed only when nothing touched it this long. */
const FOREIGN_LEFTOVER_AGE_MS = 3600_000;

/** Folders of backups still running in this process: the signal handler of `db` removes them before exiting. */
export const backupsInProgress = new Set<string>();


function newestMtime(dir: string): number {
  let newest = fs.statSync(dir).mtimeMs;
  for (const name of fs.readdirSync(dir)) newest = Math.max(newest, fs.statSync(path.join(dir, name)).mtimeMs);
  return newest;
}

/**
 * Removes what killed backups left in `dir`: temporary folders whose process (named with its host and pid) is gone —
 * at once when it ran on this host, after an hour untouched when on another one — and FILE.partial /
 * FILE.partial-journal from the single-file backups of earlier versions. Returns the names removed.
 */
export function removeBackupLeftovers(dir: string, target: string, now = Date.now()): string[] {
  const removed: string[] = [];
  const host = os.hostname();
  for (const name of fs.readdirSync(dir)) {
    const full = path.join(dir, name);
    const m = /^\.nsm-backup-(.+)-(\d+)-[^-]+$/.exec(name);
    let stale = false;
    if (m) {
      try {
        stale = m[1] === host ? !processAlive(Number(m[2])) : now - newestMtime(full) > FOREIGN_LEFTOVER_AGE_MS;
      } catch {
        stale = false; // vanished meanwhile: its own backup finished
      }
    } else if (name === `${path.basename(target)}.partial` || name === `${path.basename(target)}.partial-journal`) {
      stale = true;
    }
    if (stale && !backupsInProgress.has(full)) {
      fs.rmSync(full, { recursive: true, force: true });
      removed.push(name);
    }
  }
  return removed;
}

// ---- backup --------------------------------------------------------------------------------------------------------

// `attached` picks which database of the connection is copied: better-sqlite3 has it, its type package lags behind.
const BACKUP_MAIN = { attached: 'main' } as unknown as Database.BackupOptions;
const BACKUP_JOBS = { attached: 'jobs' } as unknown as Database.BackupOptions;

/** Backs up gateway.db to `file` and, when there is one, jobs.db to jobsPartOf(file). Returns the lines to print. */
export async function backupSqlite(config: Pick<Config, 'dataDir'>, file: string, force: boolean): Promise<string[]> {
  const live = databaseFiles(config);
  if (!fs.existsSync(live.gateway)) throw new CommandError(`no database at ${live.gateway} (DATA_DIR=${config.dataDir})`);
  const withJobs = fs.existsSync(live.jobs);
  const jobsFile = jobsPartOf(file);
  if (fs.existsSync(file) && fs.statSync(file).isDirectory()) {
    throw new CommandError(`${file} is a directory; name the backup file, e.g. ${path.join(file, `nsm-${stamp().slice(0, 10)}.db`)}`);
  }
  if ([file, jobsFile].some((f) => f === live.gateway || f === live.jobs)) throw new CommandError('FILE is a live database itself');
  // An existing jobs part is replaced too (or removed, when there is no jobs.db now): a restore must not pair this
  // gateway copy with an older job queue.
  for (const f of [file, jobsFile]) {
    const existing = existingRefusal(f, force);
    if (existing) throw new CommandError(existing);
  }
  // FILE's folder is made when missing (`backup /data/backups/nsm-….db` on a fresh volume), and said so.
  const dir = path.dirname(file);
  const made: string[] = [];
  if (!fs.existsSync(dir)) {
    try {
      fs.mkdirSync(dir, { recursive: true });
    } catch (err) {
      throw new CommandError(`cannot create the folder ${dir}: ${(err as Error).message}`);
    }
    made.push(`created the folder ${dir}`);
  }

  removeBackupLeftovers(dir, file);
  const temp = fs.mkdtempSync(path.join(dir, `${TEMP_PREFIX}${os.hostname()}-${process.pid}-`));
  backupsInProgress.add(temp);
  const copies = { gateway: path.join(temp, 'gateway.db'), jobs: path.join(temp, 'jobs.db') };
  const started = Date.now();
  try {
    // A read-write connection (it writes nothing): as the last one to close it tidies the -wal/-shm files away.
    const db = new Database(live.gateway, { fileMustExist: true });
    try {
      if (withJobs) db.prepare("ATTACH DATABASE ? AS jobs").run(live.jobs);
      // One read transaction over both files: each copy is of the moment it began, whatever the server writes meanwhile.
      db.exec('BEGIN');
      db.prepare('SELECT COUNT(*) FROM main.sqlite_master').get();
      if (withJobs) db.prepare('SELECT COUNT(*) FROM jobs.sqlite_master').get();
      await db.backup(copies.gateway, BACKUP_MAIN);
      if (withJobs) await db.backup(copies.jobs, BACKUP_JOBS);
      db.exec('COMMIT');
    } catch (err) {
      throw new CommandError(`backup failed: ${(err as Error).message}`);
    } finally {
      db.close();
    }
    // Standalone files: rollback-journal mode, no -wal/-shm beside them (the server turns WAL on again at open).
    for (const copy of withJobs ? [copies.gateway, copies.jobs] : [copies.gateway]) {
      const c = new Database(copy, { fileMustExist: true });
      c.pragma('journal_mode = DELETE');
      c.close();
    }
    // This user's only, whatever the umask (the copies hold key hashes and webhook secrets); the folder is mkdtemp's 0700.
    for (const copy of withJobs ? [copies.gateway, copies.jobs] : [copies.gateway]) fs.chmodSync(copy, PRIVATE_FILE_MODE);
    const gatewayInfo = inspectDatabase(copies.gateway);
    const jobsInfo = withJobs ? inspectJobsDatabase(copies.jobs) : null;
    const ms = Date.now() - started;
    fs.renameSync(copies.gateway, file);
    if (withJobs) fs.renameSync(copies.jobs, jobsFile);
    else fs.rmSync(jobsFile, { force: true });
    const lines = [...made, `backed up ${live.gateway} to ${file} (${bytes(fs.statSync(file).size)}, ${ms} ms): integrity ok, ${describeGateway(gatewayInfo)}`];
    if (jobsInfo) lines.push(`backed up ${live.jobs} to ${jobsFile} (${bytes(fs.statSync(jobsFile).size)}): integrity ok, ${describeJobs(jobsInfo)}`);
    return lines;
  } finally {
    fs.rmSync(temp, { recursive: true, force: true });
    backupsInProgress.delete(temp);
  }
}

// ---- restore -------------------------------------------------------------------------------------------------------

/**
 * Replaces gateway.db with the backup `file` and jobs.db with its jobs part when there is one, after checking both,
 * and only while no process has either database open. The replaced files are kept beside them; on any failure they
 * are put back. Returns the lines to print.
 */
export async function restoreSqlite(config: Pick<Config, 'dataDir'>, file: string): Promise<string[]> {
  if (!fs.existsSync(file)) throw new CommandError(`backup not found: ${file}`);
  const gatewayInfo = inspectDatabase(file);
  const jobsFile = jobsPartOf(file);
  const jobsInfo = fs.existsSync(jobsFile) ? inspectJobsDatabase(jobsFile) : null;
  const live = databaseFiles(config);
  const parts: Array<{ from: string; to: string }> = [{ from: file, to: live.gateway }];
  if (jobsInfo) parts.push({ from: jobsFile, to: live.jobs });

  fs.mkdirSync(config.dataDir, { recursive: true });
  for (const { to } of parts) {
    if (fs.existsSync(to) && databaseInUse(to)) {
      throw new CommandError(
        `${to} is in use by another process (a running gateway or keys CLI): stop the server first ` +
          '(docker compose stop gateway, systemctl stop ..., or Ctrl-C), then run restore again',
      );
    }
  }
  const when = stamp();
  const kept = new Map<string, string>();
  const touched: string[] = [];
  try {
    for (const { from, to } of parts) {
      if (fs.existsSync(to)) {
        const keptAs = `${to}.before-restore-${when}`;
        fs.renameSync(to, keptAs);
        kept.set(to, keptAs);
        for (const side of ['-wal', '-shm']) fs.rmSync(to + side, { force: true });
      }
      touched.push(to); // from here on `to` is ours to remove if anything fails
      const incoming = `${to}.restoring`;
      fs.copyFileSync(from, incoming);
      fs.renameSync(incoming, to);
    }
    // Opening them as the server will: runs any newer migrations, proves the stores can use them.
    await openSqliteStore(config).close();
    if (jobsInfo) await (await openJobStore({ dataDir: config.dataDir })).close();
  } catch (err) {
    // Only what this restore moved or wrote is undone.
    for (const to of touched) {
      fs.rmSync(`${to}.restoring`, { force: true });
      fs.rmSync(to, { force: true });
      const keptAs = kept.get(to);
      if (keptAs) fs.renameSync(keptAs, to);
    }
    throw new CommandError(`restore failed, the previous databases are back in place: ${(err as Error).message}`);
  }
  const keptNote = (to: string) => (kept.has(to) ? `; the previous database is kept as ${kept.get(to)}` : '');
  const lines = [`restored ${live.gateway} from ${file}: integrity ok, ${describeGateway(gatewayInfo)}${keptNote(live.gateway)}`];
  lines.push(
    jobsInfo
      ? `restored ${live.jobs} from ${jobsFile}: integrity ok, ${describeJobs(jobsInfo)}${keptNote(live.jobs)}`
      : `no jobs part beside the backup (${jobsFile}): ${live.jobs} not touched`,
  );
  return lines;
}
