// Database CLI: `npm run -s db -- <command>`. Every command is one entry of COMMANDS (usage, summary, run), so a
// new one (e.g. `migrate`) is a new entry, not a new branch.
//
//   backup FILE   online backup of DATA_DIR/gateway.db through SQLite's backup API: consistent and safe while the
//                 server runs (WAL); written to .FILE.partial-<host>-<pid> beside FILE, integrity-checked, then
//                 renamed to FILE. Partial copies of backups that were killed (-9) are removed by the next backup.
//   restore FILE  replaces DATA_DIR/gateway.db with a verified backup; refuses while any process (a running
//                 gateway, the keys CLI) has the database open. The database it replaces is kept beside it.
//   migrate       applies the numbered schema migrations of the configured store (SQLite, or PostgreSQL with
//                 DATABASE_URL) and prints the schema version; the server does the same at start.
//   import-sqlite copies a single box's DATA_DIR/gateway.db into the empty PostgreSQL database of DATABASE_URL.
//
// With PostgreSQL (DATABASE_URL) the database is the PostgreSQL server's: backup runs pg_dump when it is on the
// PATH, restore explains pg_restore; nothing here copies files for it.
import { spawnSync } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import Database from 'better-sqlite3';
import { loadConfig, type Config } from '../config';
import { describeStore, migrateStore } from '../store';
import { copySqliteToPostgres } from '../store/copy-sqlite-to-postgres';
import { gatewayDbPath, openSqliteStore } from '../store/sqlite-store';

export interface DbCliIo {
  out(line: string): void;
  err(line: string): void;
}

export const EXIT = { ok: 0, failure: 1, usage: 2 } as const;

/** A mistake in the command line (exit 2). */
export class UsageError extends Error {}
/** The command cannot be carried out (exit 1), with the reason for the operator. */
export class CommandError extends Error {}

export interface DbCommand {
  usage: string;
  summary: string;
  run(args: string[], ctx: { config: Config; io: DbCliIo }): Promise<void>;
}

/** Options every command accepts: --force (overwrite FILE). */
function parseFileArgs(args: string[], command: string): { file: string; force: boolean } {
  let file: string | undefined;
  let force = false;
  for (const arg of args) {
    if (arg === '--force' || arg === '-f') force = true;
    else if (arg.startsWith('-')) throw new UsageError(`unknown option ${arg} for ${command}`);
    else if (file !== undefined) throw new UsageError(`${command} takes one FILE, got "${file}" and "${arg}"`);
    else file = arg;
  }
  if (!file) throw new UsageError(`${command} needs a FILE`);
  return { file: path.resolve(file), force };
}

/** PostgreSQL connection string when the gateway store is PostgreSQL (the store engine's config field). */
function databaseUrlOf(config: Config): string | null {
  return (config as Config & { databaseUrl?: string | null }).databaseUrl ?? null;
}

function onPath(binary: string): boolean {
  return spawnSync(binary, ['--version'], { stdio: 'ignore' }).status === 0;
}

function bytes(n: number): string {
  return n >= 1024 * 1024 ? `${(n / 1024 / 1024).toFixed(1)} MB` : `${Math.ceil(n / 1024)} KB`;
}

/** Integrity check and a short description of a gateway database file; throws CommandError when unusable. */
export function inspectDatabase(file: string): { schemaVersion: number; workspaces: number; tokens: number; requests: number } {
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
    const tables = new Set(
      (db.prepare("SELECT name FROM sqlite_master WHERE type = 'table'").all() as Array<{ name: string }>).map((t) => t.name),
    );
    for (const t of ['schema_migrations', 'workspaces', 'tokens', 'request_log']) {
      if (!tables.has(t)) throw new CommandError(`${file} is a SQLite database but not a gateway database (no table "${t}")`);
    }
    const count = (table: string) => (db.prepare(`SELECT COUNT(*) AS n FROM ${table}`).get() as { n: number }).n;
    const version = (db.prepare('SELECT MAX(version) AS v FROM schema_migrations').get() as { v: number | null }).v ?? 0;
    return { schemaVersion: version, workspaces: count('workspaces'), tokens: count('tokens'), requests: count('request_log') };
  } finally {
    db.close();
  }
}

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

/** Which host wrote a partial backup (pids are only comparable on one host). */
const HOST_TAG = crypto.createHash('sha256').update(os.hostname()).digest('hex').slice(0, 8);
const PARTIAL = /^\..+\.partial-([0-9a-f]{8})-(\d+)(?:-journal|-wal|-shm)?$/;

function processRunning(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/**
 * Removes what killed backups left in `dir`: partial copies (and SQLite's journal of them) written on this host by
 * a process that is gone, and the FILE.partial* names of earlier versions for this FILE. Another backup still
 * running beside this one keeps its files.
 */
function sweepKilledBackups(dir: string, file: string): void {
  let names: string[] = [];
  try {
    names = fs.readdirSync(dir);
  } catch {
    return;
  }
  const legacy = new Set(['', '-journal', '-wal', '-shm'].map((suffix) => `${path.basename(file)}.partial${suffix}`));
  for (const name of names) {
    const m = PARTIAL.exec(name);
    const dead = m !== null && m[1] === HOST_TAG && Number(m[2]) !== process.pid && !processRunning(Number(m[2]));
    if (dead || legacy.has(name)) fs.rmSync(path.join(dir, name), { force: true });
  }
}

function stamp(): string {
  return new Date().toISOString().replace(/[:]/g, '-').replace(/\.\d+Z$/, 'Z');
}

export const COMMANDS: Record<string, DbCommand> = {
  backup: {
    usage: 'backup FILE [--force]',
    summary:
      'Online backup of the gateway database to FILE (SQLite backup API: consistent while the server runs). ' +
      'Checked with SQLite\'s integrity check before it is renamed into place. --force replaces an existing FILE.',
    async run(args, { config, io }) {
      const { file, force } = parseFileArgs(args, 'backup');
      const url = databaseUrlOf(config);
      if (url) {
        if (!onPath('pg_dump')) {
          throw new CommandError(
            'the gateway store is PostgreSQL (DATABASE_URL): back it up with pg_dump, e.g. ' +
              `pg_dump --format=custom --file ${file} "$DATABASE_URL" (pg_dump is not on the PATH here)`,
          );
        }
        if (fs.existsSync(file) && !force) throw new CommandError(`${file} exists; pass --force to replace it`);
        const r = spawnSync('pg_dump', ['--format=custom', '--file', file, url], { stdio: ['ignore', 'inherit', 'inherit'] });
        if (r.status !== 0) throw new CommandError(`pg_dump failed with exit code ${r.status}`);
        io.out(`backed up PostgreSQL (pg_dump, custom format) to ${file} (${bytes(fs.statSync(file).size)})`);
        return;
      }
      const source = gatewayDbPath(config);
      if (!fs.existsSync(source)) throw new CommandError(`no database at ${source} (DATA_DIR=${config.dataDir})`);
      if (fs.existsSync(file) && !force) throw new CommandError(`${file} exists; pass --force to replace it`);
      if (path.resolve(file) === path.resolve(source)) throw new CommandError('FILE is the live database itself');
      // A backup killed with -9 cannot tidy up after itself; the next one does (its copy and SQLite's journal of it).
      sweepKilledBackups(path.dirname(path.resolve(file)), file);
      const partial = path.join(path.dirname(path.resolve(file)), `.${path.basename(file)}.partial-${HOST_TAG}-${process.pid}`);
      const leftovers = [partial, ...['-journal', '-wal', '-shm'].map((suffix) => partial + suffix)];
      // A backup stopped by a signal, or failing, removes its own.
      const tidy = (): void => leftovers.forEach((f) => fs.rmSync(f, { force: true }));
      tidy();
      const onSignal = (signal: NodeJS.Signals): void => {
        tidy();
        process.kill(process.pid, signal);
      };
      for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) process.once(signal, onSignal);
      // A read-write connection (it writes nothing): as the last one to close it tidies the -wal/-shm files away.
      const db = new Database(source, { fileMustExist: true });
      const started = Date.now();
      try {
        // Copies in steps, letting the server write between them; restarts by itself if pages change meanwhile.
        await db.backup(partial);
      } catch (err) {
        db.close();
        tidy();
        throw new CommandError(`backup failed: ${(err as Error).message}`);
      } finally {
        if (db.open) db.close();
      }
      let info;
      try {
        // A standalone file: rollback-journal mode, no -wal/-shm beside it (the server turns WAL on again at open).
        const copy = new Database(partial, { fileMustExist: true });
        copy.pragma('journal_mode = DELETE');
        copy.close();
        info = inspectDatabase(partial);
      } catch (err) {
        tidy();
        throw err;
      } finally {
        for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) process.off(signal, onSignal);
      }
      fs.renameSync(partial, file);
      io.out(
        `backed up ${source} to ${file} (${bytes(fs.statSync(file).size)}, ${Date.now() - started} ms): integrity ok, ` +
          `schema v${info.schemaVersion}, ${info.workspaces} workspaces, ${info.tokens} keys, ${info.requests} logged requests`,
      );
    },
  },

  restore: {
    usage: 'restore FILE',
    summary:
      'Replaces the gateway database with the backup FILE after checking it. Stop the server first: the command ' +
      'refuses while any process has the database open. The replaced database is kept as gateway.db.before-restore-<time>.',
    async run(args, { config, io }) {
      const { file } = parseFileArgs(args, 'restore');
      if (databaseUrlOf(config)) {
        throw new CommandError(
          'the gateway store is PostgreSQL (DATABASE_URL): stop the gateways, then restore with pg_restore, e.g. ' +
            `pg_restore --clean --if-exists --dbname "$DATABASE_URL" ${file}`,
        );
      }
      if (!fs.existsSync(file)) throw new CommandError(`backup not found: ${file}`);
      const info = inspectDatabase(file);
      const target = gatewayDbPath(config);
      fs.mkdirSync(config.dataDir, { recursive: true });
      let keptAs: string | null = null;
      if (fs.existsSync(target)) {
        if (databaseInUse(target)) {
          throw new CommandError(
            `${target} is in use by another process (a running gateway or keys CLI): stop the server first ` +
              '(docker compose stop gateway, systemctl stop ..., or Ctrl-C), then run restore again',
          );
        }
        keptAs = `${target}.before-restore-${stamp()}`;
        fs.renameSync(target, keptAs);
        for (const side of ['-wal', '-shm']) fs.rmSync(target + side, { force: true });
      }
      const incoming = `${target}.restoring`;
      try {
        fs.copyFileSync(file, incoming);
        fs.renameSync(incoming, target);
        inspectDatabase(target);
        // Opening it as the server will: runs any newer migrations, proves the store can use it.
        await openSqliteStore(config).close();
      } catch (err) {
        fs.rmSync(incoming, { force: true });
        if (keptAs) {
          fs.rmSync(target, { force: true });
          fs.renameSync(keptAs, target);
        }
        throw new CommandError(`restore failed, the previous database is back in place: ${(err as Error).message}`);
      }
      io.out(
        `restored ${target} from ${file}: integrity ok, schema v${info.schemaVersion}, ${info.workspaces} workspaces, ` +
          `${info.tokens} keys, ${info.requests} logged requests` + (keptAs ? `; the previous database is kept as ${keptAs}` : ''),
      );
    },
  },
};

// Schema migrations and the move to PostgreSQL (issue 12; src/store/migrations, src/store/copy-sqlite-to-postgres.ts).
COMMANDS.migrate = {
  usage: 'migrate',
  summary:
    'Applies the numbered schema migrations not yet applied to the configured store (SQLite in DATA_DIR, or ' +
    'PostgreSQL with DATABASE_URL) and prints the schema version. The server does the same at start; run it ' +
    'before rolling out a new version to several replicas. Safe to run concurrently.',
  async run(args, { config, io }) {
    if (args.length > 0) throw new UsageError(`migrate takes no arguments, got "${args[0]}"`);
    const where = describeStore(config);
    let result: { applied: number[]; version: number };
    try {
      result = await migrateStore(config);
    } catch (err) {
      throw new CommandError(`could not migrate ${where}: ${(err as Error).message}`);
    }
    const { applied, version } = result;
    io.out(
      applied.length > 0
        ? `${where}: applied migration${applied.length > 1 ? 's' : ''} ${applied.join(', ')}; schema version ${version}`
        : `${where}: up to date, schema version ${version}`,
    );
  },
};

COMMANDS['import-sqlite'] = {
  usage: 'import-sqlite [--data-dir DIR]',
  summary:
    'Copies the single-box SQLite store (DIR/gateway.db; default DATA_DIR) into the empty PostgreSQL database of ' +
    'DATABASE_URL: workspaces, keys (their hashes), credit usage, settings and the request log, ids kept. Stop the ' +
    'single box first. One transaction: all or nothing.',
  async run(args, { config, io }) {
    let dataDir = config.dataDir;
    for (let i = 0; i < args.length; i++) {
      if (args[i] === '--data-dir' && args[i + 1]) dataDir = path.resolve(args[++i]);
      else if (args[i].startsWith('--data-dir=')) dataDir = path.resolve(args[i].slice('--data-dir='.length));
      else throw new UsageError(`unexpected argument "${args[i]}"`);
    }
    if (!config.databaseUrl) throw new UsageError('set DATABASE_URL to the PostgreSQL database to copy into');
    io.out(`copying ${gatewayDbPath({ dataDir })} into ${describeStore(config)} ...`);
    let n;
    try {
      n = await copySqliteToPostgres({ dataDir }, { databaseUrl: config.databaseUrl }, io.out);
    } catch (err) {
      throw new CommandError(`import failed, nothing was copied: ${(err as Error).message}`);
    }
    io.out(
      `copied ${n.workspaces} workspaces, ${n.tokens} keys, ${n.creditPeriods} credit periods, ${n.settings} settings, ` +
        `${n.requestLogRows} request-log rows`,
    );
  },
};

export function helpText(): string {
  const lines = ['Usage: npm run -s db -- <command> [options]', '', 'Commands:'];
  for (const cmd of Object.values(COMMANDS)) {
    lines.push(`  ${cmd.usage}`);
    lines.push(`      ${cmd.summary}`);
  }
  lines.push(
    '  --help',
    '      This text.',
    '',
    'Environment: DATA_DIR (default ./data) holds gateway.db; DATABASE_URL (postgres://…) selects PostgreSQL instead.',
  );
  return lines.join('\n');
}

export async function runDbCli(argv: string[], io: DbCliIo, env: NodeJS.ProcessEnv = process.env): Promise<number> {
  const [name, ...args] = argv;
  if (!name || name === '--help' || name === '-h' || name === 'help') {
    io.out(helpText());
    return name ? EXIT.ok : EXIT.usage;
  }
  const command = COMMANDS[name];
  if (!command) {
    io.err(`unknown command "${name}"\n\n${helpText()}`);
    return EXIT.usage;
  }
  if (args.includes('--help') || args.includes('-h')) {
    io.out(`Usage: npm run -s db -- ${command.usage}\n  ${command.summary}`);
    return EXIT.ok;
  }
  try {
    await command.run(args, { config: loadConfig(env), io });
    return EXIT.ok;
  } catch (err) {
    if (err instanceof UsageError) {
      io.err(`${err.message}\nUsage: npm run -s db -- ${command.usage}`);
      return EXIT.usage;
    }
    io.err(err instanceof CommandError ? err.message : `${name} failed: ${(err as Error).stack ?? err}`);
    return EXIT.failure;
  }
}

if (require.main === module) {
  runDbCli(process.argv.slice(2), {
    out: (line) => process.stdout.write(line + '\n'),
    err: (line) => process.stderr.write(line + '\n'),
  }).then((code) => {
    process.exitCode = code;
  });
}
