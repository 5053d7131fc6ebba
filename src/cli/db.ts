// Database maintenance CLI: `npm run -s db -- <command>`. Works on the store the configuration selects: PostgreSQL
// when DATABASE_URL is set, else the SQLite file DATA_DIR/gateway.db. One entry per command in COMMANDS below
// (add new commands as new entries; each has its own usage line and runner).
import { loadConfig, type Config } from '../config';
import { describeStore, migrateStore } from '../store';
import { copySqliteToPostgres } from '../store/copy-sqlite-to-postgres';
import { gatewayDbPath } from '../store/sqlite-store';

export interface DbCliIo {
  out(line: string): void;
  err(line: string): void;
}

interface DbCommand {
  /** One usage line shown in --help, e.g. 'migrate'. */
  usage: string;
  /** What it does, shown under the usage line. */
  summary: string;
  /** Exit status: 0 done, 1 failed, 2 bad command line. */
  run(args: string[], config: Config, io: DbCliIo): Promise<number>;
}

const COMMANDS: Record<string, DbCommand> = {
  migrate: {
    usage: 'migrate',
    summary:
      'Applies the numbered schema migrations not yet applied and prints the schema version. The server does the\n' +
      'same at start; run this before rolling out a new version to several replicas. Safe to run concurrently.',
    async run(args, config, io) {
      if (args.length > 0) {
        io.err(`db migrate: unexpected argument "${args[0]}"`);
        return 2;
      }
      const where = describeStore(config);
      const { applied, version } = await migrateStore(config);
      io.out(
        applied.length > 0
          ? `${where}: applied migration${applied.length > 1 ? 's' : ''} ${applied.join(', ')}; schema version ${version}`
          : `${where}: up to date, schema version ${version}`,
      );
      return 0;
    },
  },
  'import-sqlite': {
    usage: 'import-sqlite [--data-dir DIR]',
    summary:
      'Copies the single-box SQLite store (DIR/gateway.db; default DATA_DIR) into the empty PostgreSQL database of\n' +
      'DATABASE_URL: workspaces, keys (their hashes), credit usage, settings, request log, ids kept. Stop the\n' +
      'single box first. One transaction: all or nothing.',
    async run(args, config, io) {
      let dataDir = config.dataDir;
      for (let i = 0; i < args.length; i++) {
        if (args[i] === '--data-dir' && args[i + 1]) dataDir = args[++i];
        else if (args[i].startsWith('--data-dir=')) dataDir = args[i].slice('--data-dir='.length);
        else {
          io.err(`db import-sqlite: unexpected argument "${args[i]}"`);
          return 2;
        }
      }
      if (!config.databaseUrl) {
        io.err('db import-sqlite: set DATABASE_URL to the PostgreSQL database to copy into');
        return 2;
      }
      io.out(`copying ${gatewayDbPath({ dataDir })} into ${describeStore(config)} ...`);
      const n = await copySqliteToPostgres({ dataDir }, { databaseUrl: config.databaseUrl }, io.out);
      io.out(
        `copied ${n.workspaces} workspaces, ${n.tokens} keys, ${n.creditPeriods} credit periods, ${n.settings} settings, ` +
          `${n.requestLogRows} request-log rows`,
      );
      return 0;
    },
  },
};

function help(): string {
  const lines = ['Usage: npm run -s db -- <command>', '', 'Commands:'];
  for (const c of Object.values(COMMANDS)) {
    lines.push(`  ${c.usage}`);
    for (const l of c.summary.split('\n')) lines.push(`      ${l}`);
  }
  lines.push('  --help', '      This text.', '');
  lines.push('Environment: DATABASE_URL (postgres://…) selects PostgreSQL; otherwise DATA_DIR (default ./data) holds gateway.db.');
  return lines.join('\n');
}

const consoleIo: DbCliIo = {
  out: (line) => process.stdout.write(line + '\n'),
  err: (line) => process.stderr.write(line + '\n'),
};

export async function runDbCli(argv: string[], config: Config, io: DbCliIo = consoleIo): Promise<number> {
  const [name, ...rest] = argv;
  if (name === undefined || name === '--help' || name === '-h' || name === 'help') {
    (name === undefined ? io.err : io.out)(help());
    return name === undefined ? 2 : 0;
  }
  const command = COMMANDS[name];
  if (!command) {
    io.err(`db: unknown command "${name}"\n\n${help()}`);
    return 2;
  }
  try {
    return await command.run(rest, config, io);
  } catch (err) {
    io.err(`db ${name}: ${(err as Error).message}`);
    return 1;
  }
}

if (require.main === module) {
  let config: Config;
  try {
    config = loadConfig();
  } catch (err) {
    process.stderr.write(`db: ${(err as Error).message}\n`);
    process.exit(2);
  }
  void runDbCli(process.argv.slice(2), config).then((code) => {
    process.exitCode = code;
  });
}
