// Database CLI: `npm run -s db -- <command>`. Every command is one entry of COMMANDS (usage, summary, run), so a
// new one (e.g. `migrate`) is a new entry, not a new branch.
//
//   backup FILE   online backup of DATA_DIR/gateway.db to FILE and of DATA_DIR/jobs.db beside it (FILE's name with
//                 .jobs.db), through SQLite's backup API from one read transaction: consistent and safe while the
//                 server runs (WAL); written to a temporary folder, integrity-checked, then renamed (db-backup.ts).
//   restore FILE  replaces DATA_DIR/gateway.db (and jobs.db, from FILE's jobs part) with a verified backup; refuses
//                 while any process (a running gateway, the keys CLI) has them open. The replaced files are kept.
//   migrate       applies the numbered schema migrations of the configured store (SQLite, or PostgreSQL with
//                 DATABASE_URL) and prints the schema version; the server does the same at start.
//   import-sqlite copies a single box's DATA_DIR/gateway.db into the empty PostgreSQL database of DATABASE_URL.
//
// With PostgreSQL (DATABASE_URL) the database is the PostgreSQL server's (the gateway store and the job queue): backup
// runs pg_dump when it is on the PATH, restore explains pg_restore; nothing here copies files for it.
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import type { Config } from '../config';
import { describeStore, migrateStore } from '../store';
import { copySqliteToPostgres } from '../store/gateway/copy-sqlite-to-postgres';
import { usePrivateUmask } from '../startup/private-files';
import { gatewayDbPath } from '../db/paths';
import { dataDirFromArgs, existingRefusal, flag, parseCommandLine, usageLine, UsageError, type OptionSpec } from './args';
import { watchForNewDatabase } from './databases';
import { backupSqlite, backupsInProgress, CommandError, restoreSqlite } from './db-backup';
import { CONFIG_EXIT, configOrExplain } from './environment';

export interface DbCliIo {
  out(line: string): void;
  err(line: string): void;
}

export const EXIT = { ok: 0, failure: 1, usage: 2, interrupted: 130 } as const;

export { CommandError, UsageError };

export interface DbCommand {
  usage: string;
  summary: string;
  run(args: string[], ctx: { config: Config; io: DbCliIo }): Promise<void>;
}

/** `backup FILE [--force]` and `restore FILE`: one FILE, and the options the command takes. */
function parseFileArgs(args: string[], command: string, options: Record<string, OptionSpec>): { file: string; force: boolean } {
  const line = parseCommandLine(args, options);
  const [file, extra] = line.positionals;
  if (!file) throw new UsageError(`${command} needs a FILE`);
  if (extra !== undefined) throw new UsageError(`${command} takes one FILE, got "${file}" and "${extra}"`);
  return { file: path.resolve(file), force: flag(line, 'force') };
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

export const COMMANDS: Record<string, DbCommand> = {
  backup: {
    usage: 'backup FILE [--force]',
    summary:
      'Online backup of the gateway database to FILE and of the job queue (jobs.db: jobs, webhook secrets and ' +
      'deliveries) to FILE with .jobs.db for .db, both from one moment (SQLite backup API: consistent while the ' +
      'server runs), integrity-checked before they are renamed into place. --force replaces existing files.',
    async run(args, { config, io }) {
      const { file, force } = parseFileArgs(args, 'backup', { force: { type: 'boolean', short: 'f' } });
      const url = databaseUrlOf(config);
      if (url) {
        if (!onPath('pg_dump')) {
          throw new CommandError(
            'the gateway store and the job queue are in PostgreSQL (DATABASE_URL): back them up with pg_dump, e.g. ' +
              `pg_dump --format=custom --file ${file} "$DATABASE_URL" (pg_dump is not on the PATH here)`,
          );
        }
        const existing = existingRefusal(file, force);
        if (existing) throw new CommandError(existing);
        const r = spawnSync('pg_dump', ['--format=custom', '--file', file, url], { stdio: ['ignore', 'inherit', 'inherit'] });
        if (r.status !== 0) throw new CommandError(`pg_dump failed with exit code ${r.status}`);
        io.out(`backed up PostgreSQL (pg_dump, custom format; gateway store and job queue) to ${file} (${bytes(fs.statSync(file).size)})`);
        return;
      }
      for (const line of await backupSqlite(config, file, force)) io.out(line);
    },
  },

  restore: {
    usage: 'restore FILE',
    summary:
      'Replaces the gateway database with the backup FILE, and the job queue with its jobs part when there is one, ' +
      'after checking them. Stop the server first: the command refuses while any process has the databases open. ' +
      'The replaced files are kept as gateway.db.before-restore-<time> and jobs.db.before-restore-<time>.',
    async run(args, { config, io }) {
      const { file } = parseFileArgs(args, 'restore', {});
      if (databaseUrlOf(config)) {
        throw new CommandError(
          'the gateway store and the job queue are in PostgreSQL (DATABASE_URL): stop the gateways, then restore with ' +
            `pg_restore, e.g. pg_restore --clean --if-exists --dbname "$DATABASE_URL" ${file}`,
        );
      }
      for (const line of await restoreSqlite(config, file)) io.out(line);
    },
  },
};

// Schema migrations and the move to PostgreSQL (issue 12; src/store/gateway/migrations, src/store/gateway/copy-sqlite-to-postgres.ts).
COMMANDS.migrate = {
  usage: 'migrate',
  summary:
    'Applies the numbered schema migrations not yet applied to the configured store (SQLite in DATA_DIR, or ' +
    'PostgreSQL with DATABASE_URL) and prints the schema version. The server does the same at start; run it ' +
    'before rolling out a new version to several replicas. Safe to run concurrently.',
  async run(args, { config, io }) {
    const line = parseCommandLine(args, {});
    if (line.positionals.length > 0) throw new UsageError(`migrate takes no arguments, got "${line.positionals[0]}"`);
    const where = describeStore(config);
    const created = watchForNewDatabase(config, (text) => io.err(`db: ${text}`));
    let result: { applied: number[]; version: number };
    try {
      result = await migrateStore(config);
    } catch (err) {
      throw new CommandError(`could not migrate ${where}: ${(err as Error).message}`);
    }
    created.check();
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
    // --data-dir DIR is every command's option (runDbCli): here it names the folder to copy from.
    const line = parseCommandLine(args, {});
    if (line.positionals.length > 0) throw new UsageError(`unexpected argument "${line.positionals[0]}"`);
    const dataDir = config.dataDir;
    if (!config.databaseUrl) throw new UsageError('set DATABASE_URL to the PostgreSQL database to copy into');
    io.out(`copying ${gatewayDbPath({ dataDir })} into ${describeStore(config)} ...`);
    let n;
    try {
      n = await copySqliteToPostgres({ dataDir }, { databaseUrl: config.databaseUrl }, io.out);
    } catch (err) {
      throw new CommandError(`import failed, nothing was copied: ${(err as Error).message}`);
    }
    io.out(
      `copied ${n.workspaces} workspaces, ${n.tokens} keys, ${n.creditPeriods} credit periods, ${n.pendingCharges} pending charges, ${n.refunds} refunds, ${n.settings} settings, ` +
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
    'Options of every command:',
    '  --data-dir DIR',
    "      The server's data folder (its DATA_DIR), which holds gateway.db and jobs.db; overrides DATA_DIR.",
    '',
    'Environment: DATA_DIR (default ./data) holds gateway.db; DATABASE_URL (postgres://…) selects PostgreSQL instead.',
  );
  return lines.join('\n');
}

export async function runDbCli(argvGiven: string[], io: DbCliIo, envGiven: NodeJS.ProcessEnv = process.env): Promise<number> {
  // `--data-dir DIR`, before or after the command, stands for DATA_DIR=DIR.
  let argv: string[];
  let env: NodeJS.ProcessEnv;
  try {
    ({ argv, env } = dataDirFromArgs(argvGiven, envGiven));
  } catch (err) {
    if (!(err instanceof UsageError)) throw err;
    io.err(usageLine('db', err.message, 'db --help'));
    return EXIT.usage;
  }
  const [name, ...args] = argv;
  if (!name || name === '--help' || name === '-h' || name === 'help') {
    io.out(helpText());
    return name ? EXIT.ok : EXIT.usage;
  }
  const command = COMMANDS[name];
  if (!command) {
    io.err(usageLine('db', name.startsWith('-') ? `unknown option ${name}` : `unknown command "${name}"`, 'db --help'));
    return EXIT.usage;
  }
  if (args.includes('--help') || args.includes('-h')) {
    io.out(`Usage: npm run -s db -- ${command.usage}\n  ${command.summary}`);
    return EXIT.ok;
  }
  const config = configOrExplain(io.err, env);
  if (!config) return CONFIG_EXIT;
  try {
    await command.run(args, { config, io });
    return EXIT.ok;
  } catch (err) {
    if (err instanceof UsageError) {
      io.err(usageLine('db', err.message, `db ${name} --help`));
      return EXIT.usage;
    }
    io.err(err instanceof CommandError ? err.message : `${name} failed: ${(err as Error).stack ?? err}`);
    return EXIT.failure;
  }
}

if (require.main === module) {
  usePrivateUmask(); // backups and databases it writes are this user's only
  // Ctrl-C or a kill during a backup: remove its temporary folder, so nothing half-written stays beside FILE.
  const stop = (): void => {
    for (const dir of backupsInProgress) fs.rmSync(dir, { recursive: true, force: true });
    process.stderr.write('db: interrupted\n');
    process.exit(EXIT.interrupted);
  };
  process.once('SIGINT', stop);
  process.once('SIGTERM', stop);
  runDbCli(process.argv.slice(2), {
    out: (line) => process.stdout.write(line + '\n'),
    err: (line) => process.stderr.write(line + '\n'),
  }).then((code) => {
    process.exitCode = code;
  });
}
