// Keys CLI: `npm run -s keys -- <command>`. Manages workspaces, plans and access tokens in
// DATA_DIR/gateway.db; safe to run while the server uses the same database (WAL).
import type { Config } from '../config';
import { limitsFor } from '../gateway/plans';
import { parseIpRule } from '../http/ip';
import { DEFAULT_KEY_SCOPES, knownScopes } from '../gateway/routes';
import { openJobStore } from '../store/jobs';
import { newWebhookSecret } from '../jobs/outbound/webhooks';
import { openStore } from '../store';
import { usePrivateUmask } from '../startup/private-files';
import { isPlanId } from '../store/gateway/common';
import { creditPeriod, type GatewayStore, type PlanId, type TokenRecord, type Workspace } from '../store/gateway/types';
import { dataDirFromArgs, parseCommandLine, usageLine, UsageError, USAGE_EXIT, type OptionSpec } from './args';
import { CONFIG_EXIT, configOrExplain } from './environment';
import { watchForNewDatabase } from './databases';
import { InputError, NAME_MAX, requireString } from '../console/validation';

// Run as a command: a gateway.db it creates is this user's only (0600, and SQLite's -wal/-shm with it).
if (require.main === module) usePrivateUmask();

/** The keys CLI needs DATA_DIR, and DATABASE_URL when the store is PostgreSQL. */
export type KeysConfig = Pick<Config, 'dataDir'> & Partial<Pick<Config, 'databaseUrl' | 'databasePoolSize'>>;

export interface KeysCliIo {
  out(line: string): void;
  err(line: string): void;
}

const HELP = `Usage: npm run -s keys -- <command> [options]

Commands:
  create --workspace W [--plan free|starter|scale|enterprise] [--scopes S,S] [--ip CIDR,CIDR]
         [--expires ISO-DATE] [--name N] [--rpm N --credits N (enterprise)]
      Creates the workspace if missing, then a key. The token is printed once, as the last line.
      Default scopes: noise-suppressor:*. Default plan for a new workspace: free.
  list [--workspace W]
      Lists keys (display prefix only; tokens are never stored).
  revoke <key-id|prefix>
      Revokes a key; calls with it get 401 key_revoked. Names it by its id, the start of its id or of its token (at
      least 4 characters after key_ or mw_live_; a start naming several keys is refused), or the whole token.
  plan --workspace W --plan P [--rpm N] [--credits N]
      Changes a workspace's plan (--rpm/--credits set enterprise custom limits).
  usage [--workspace W]
      Credits used and left this month (UTC) and requests logged this month.
  webhook-secret --workspace W [--rotate]
      The workspace's webhook signing secret (created on first use); --rotate replaces it.
  --help
      This text.

Options of every command:
  --data-dir DIR
      The server's data folder (its DATA_DIR), which holds gateway.db; overrides DATA_DIR. Give the keys CLI the
      folder the server uses: keys made in another folder's database answer 401.

Environment: DATA_DIR (default ./data) holds gateway.db; with DATABASE_URL (postgres://…) the keys live in PostgreSQL.`;

interface ParsedArgs {
  command: string | undefined;
  positional: string[];
  options: Map<string, string>;
  help: boolean;
}

const KEYS_OPTIONS: Record<string, OptionSpec> = {
  workspace: { type: 'string' },
  plan: { type: 'string' },
  scopes: { type: 'string' },
  ip: { type: 'string' },
  expires: { type: 'string' },
  name: { type: 'string' },
  rpm: { type: 'string' },
  credits: { type: 'string' },
  rotate: { type: 'boolean' },
  help: { type: 'boolean', short: 'h' },
};

/** The command line (node:util parseArgs, through args.ts): the first positional is the command. */
function parseArgs(argv: string[]): ParsedArgs {
  const line = parseCommandLine(argv, KEYS_OPTIONS, { once: true });
  const options = new Map<string, string>();
  for (const [name, value] of Object.entries(line.values)) {
    if (name === 'help' || value === undefined) continue;
    options.set(name, value === true ? 'true' : String(value).trim());
  }
  const [command, ...positional] = line.positionals;
  return { command, positional, options, help: line.values.help === true };
}

function allowOnly(args: ParsedArgs, allowed: string[], maxPositional = 0): void {
  for (const name of args.options.keys()) {
    if (!allowed.includes(name)) throw new UsageError(`${args.command} does not take --${name}`);
  }
  if (args.positional.length > maxPositional) throw new UsageError(`unexpected argument "${args.positional[maxPositional]}"`);
}

function list(value: string | undefined): string[] {
  return value === undefined ? [] : value.split(',').map((s) => s.trim()).filter(Boolean);
}

function positiveInt(name: string, value: string | undefined): number | undefined {
  if (value === undefined) return undefined;
  if (!/^\d+$/.test(value) || Number(value) < 1) throw new UsageError(`--${name} must be a positive integer, got "${value}"`);
  return Number(value);
}

function planOption(value: string | undefined): PlanId | undefined {
  if (value === undefined) return undefined;
  if (!isPlanId(value)) throw new UsageError(`unknown plan "${value}"; use free, starter, scale or enterprise`);
  return value;
}

function customLimits(args: ParsedArgs, plan: PlanId): { requestsPerMinute?: number; creditsPerMonth?: number } {
  const requestsPerMinute = positiveInt('rpm', args.options.get('rpm'));
  const creditsPerMonth = positiveInt('credits', args.options.get('credits'));
  if ((requestsPerMinute !== undefined || creditsPerMonth !== undefined) && plan !== 'enterprise') {
    throw new UsageError('--rpm and --credits are custom limits of the enterprise plan; add --plan enterprise');
  }
  return { requestsPerMinute, creditsPerMonth };
}

async function requireWorkspace(store: GatewayStore, name: string | undefined): Promise<Workspace> {
  if (name === undefined) throw new UsageError('--workspace is required');
  const ws = await store.getWorkspaceByName(name);
  if (!ws) throw new Error(`no workspace named "${name}"`);
  return ws;
}

function tokenStatus(t: TokenRecord, now: number): string {
  if (t.revokedAt) return 'revoked';
  if (t.expiresAt && Date.parse(t.expiresAt) <= now) return 'expired';
  return 'active';
}

function describeWorkspace(ws: Workspace): string {
  const l = limitsFor(ws);
  return `${ws.name} (${ws.id}) plan=${ws.plan} rpm=${l.requestsPerMinute} credits/month=${l.creditsPerMonth}`;
}

function table(rows: string[][]): string[] {
  const widths = rows[0].map((_, c) => Math.max(...rows.map((r) => r[c].length)));
  return rows.map((r) => r.map((cell, c) => cell.padEnd(widths[c])).join('  ').trimEnd());
}

/** A new workspace's or key's name, held to the console's rule for names (80 characters, no control characters). */
function consoleName(value: string, what: string, option: string): string {
  try {
    return requireString(value, what, NAME_MAX);
  } catch (err) {
    if (err instanceof InputError) throw new UsageError(`${option}: ${err.message}`);
    throw err;
  }
}

async function cmdCreate(store: GatewayStore, args: ParsedArgs, io: KeysCliIo): Promise<void> {
  const wsName = args.options.get('workspace');
  if (wsName === undefined) throw new UsageError('--workspace is required');
  const requestedPlan = planOption(args.options.get('plan'));

  const scopes = args.options.has('scopes') ? list(args.options.get('scopes')) : [...DEFAULT_KEY_SCOPES];
  if (scopes.length === 0) throw new UsageError('--scopes must name at least one scope');
  const valid = knownScopes();
  for (const s of scopes) if (!valid.includes(s)) throw new UsageError(`unknown scope "${s}"; known: ${valid.join(', ')}`);

  const ips = list(args.options.get('ip'));
  for (const rule of ips) {
    try {
      parseIpRule(rule);
    } catch (err) {
      throw new UsageError(`--ip: ${(err as Error).message}`);
    }
  }

  let expiresAt: string | null = null;
  const expires = args.options.get('expires');
  if (expires !== undefined) {
    const t = Date.parse(expires);
    if (Number.isNaN(t)) throw new UsageError(`--expires is not an ISO date: "${expires}"`);
    if (t <= Date.now()) throw new UsageError(`--expires must be in the future, got ${new Date(t).toISOString()}`);
    expiresAt = new Date(t).toISOString();
  }

  // Every check before anything is written: a refused key leaves no new workspace behind.
  const name = consoleName(args.options.get('name') ?? `key-${new Date().toISOString().slice(0, 10)}`, 'key name', '--name');
  let ws = await store.getWorkspaceByName(wsName);
  if (ws) {
    if (requestedPlan !== undefined && requestedPlan !== ws.plan) {
      throw new UsageError(`workspace "${ws.name}" is on the ${ws.plan} plan; change it with: keys plan --workspace ${ws.name} --plan ${requestedPlan}`);
    }
    if (args.options.has('rpm') || args.options.has('credits')) {
      throw new UsageError(`workspace "${ws.name}" exists; change its limits with: keys plan --workspace ${ws.name} ...`);
    }
  } else {
    const plan = requestedPlan ?? 'free';
    ws = await store.createWorkspace(consoleName(wsName, 'workspace name', '--workspace'), plan, customLimits(args, plan));
    io.out(`created workspace ${ws.name}`);
  }

  const { token, record } = await store.createToken({ workspaceId: ws.id, name, scopes, allowedIps: ips, expiresAt });
  io.out(`workspace:   ${describeWorkspace(ws)}`);
  io.out(`key id:      ${record.id}`);
  io.out(`name:        ${record.name}`);
  io.out(`prefix:      ${record.prefix}`);
  io.out(`scopes:      ${record.scopes.join(',')}`);
  io.out(`allowed IPs: ${record.allowedIps.length ? record.allowedIps.join(',') : 'any'}`);
  io.out(`expires:     ${record.expiresAt ?? 'never'}`);
  io.out('token (shown only now; only its hash is stored):');
  io.out(token);
}

async function cmdList(store: GatewayStore, args: ParsedArgs, io: KeysCliIo): Promise<void> {
  const wsName = args.options.get('workspace');
  const ws = wsName === undefined ? undefined : await requireWorkspace(store, wsName);
  const tokens = await store.listTokens(ws?.id);
  if (tokens.length === 0) {
    io.out('no keys');
    return;
  }
  const names = new Map((await store.listWorkspaces()).map((w) => [w.id, w.name]));
  const now = Date.now();
  const rows = [['ID', 'PREFIX', 'WORKSPACE', 'NAME', 'STATUS', 'SCOPES', 'IPS', 'EXPIRES', 'LAST USED']];
  for (const t of tokens) {
    rows.push([
      t.id,
      t.prefix + '…',
      names.get(t.workspaceId) ?? t.workspaceId,
      t.name,
      tokenStatus(t, now),
      t.scopes.join(','),
      t.allowedIps.length ? t.allowedIps.join(',') : 'any',
      t.expiresAt ?? 'never',
      t.lastUsedAt ?? 'never',
    ]);
  }
  for (const line of table(rows)) io.out(line);
}

async function cmdRevoke(store: GatewayStore, args: ParsedArgs, io: KeysCliIo): Promise<void> {
  const target = args.positional[0];
  if (target === undefined) throw new UsageError('revoke needs a key id or prefix');
  const record = await store.revokeToken(target);
  if (!record) throw new Error(`no key with id or prefix "${target}"`);
  io.out(`revoked ${record.id} (${record.prefix}…) at ${record.revokedAt}`);
}

async function cmdPlan(store: GatewayStore, args: ParsedArgs, io: KeysCliIo): Promise<void> {
  const plan = planOption(args.options.get('plan'));
  if (plan === undefined) throw new UsageError('--plan is required');
  const custom = customLimits(args, plan);
  const ws = await requireWorkspace(store, args.options.get('workspace'));
  const updated = await store.setPlan(ws.id, plan, custom);
  io.out(`workspace:   ${describeWorkspace(updated)}`);
}

async function cmdUsage(store: GatewayStore, args: ParsedArgs, io: KeysCliIo): Promise<void> {
  const wsName = args.options.get('workspace');
  const workspaces = wsName === undefined ? await store.listWorkspaces() : [await requireWorkspace(store, wsName)];
  if (workspaces.length === 0) {
    io.out('no workspaces');
    return;
  }
  const now = new Date();
  const monthStart = new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), 1)).toISOString();
  const rows = [['WORKSPACE', 'PLAN', 'PERIOD', 'CREDITS USED', 'CREDITS LEFT', 'CREDIT LIMIT', 'REQUESTS', 'ERRORS', 'RPM']];
  for (const ws of workspaces) {
    const limits = limitsFor(ws);
    const used = await store.creditsUsed(ws.id, now);
    const requests = await store.countRequests({ workspaceId: ws.id, since: monthStart });
    const errors = (await store.requestsPerDay(ws.id, now.getUTCDate())).reduce((sum, d) => sum + d.errors, 0);
    rows.push([
      ws.name,
      ws.plan,
      creditPeriod(now),
      String(used),
      String(Math.max(0, limits.creditsPerMonth - used)),
      String(limits.creditsPerMonth),
      String(requests),
      String(errors),
      String(limits.requestsPerMinute),
    ]);
  }
  for (const line of table(rows)) io.out(line);
}

/** Webhook signing secrets live with the jobs (src/jobs); see docs/jobs.md for how receivers verify them. */
async function cmdWebhookSecret(store: GatewayStore, args: ParsedArgs, io: KeysCliIo, ctx: CommandContext): Promise<void> {
  const ws = await requireWorkspace(store, args.options.get('workspace'));
  const jobs = await openJobStore(ctx.config);
  ctx.afterOpen();
  try {
    let secret: string;
    if (args.options.has('rotate')) {
      secret = newWebhookSecret();
      await jobs.setWebhookSecret(ws.id, secret);
      io.out(`rotated the webhook signing secret of ${ws.name}; deliveries from now on are signed with:`);
    } else {
      secret = await jobs.ensureWebhookSecret(ws.id, newWebhookSecret);
      io.out(`webhook signing secret of ${ws.name} (X-NS-Signature: t=<unix>,v1=<hex HMAC-SHA256 of "t.body">):`);
    }
    io.out(secret);
  } finally {
    await jobs.close();
  }
}

/** What a command gets besides the store: the configuration, and a hook to call after opening another database. */
interface CommandContext {
  config: KeysConfig;
  afterOpen(): void;
}

type CommandRun = (store: GatewayStore, args: ParsedArgs, io: KeysCliIo, ctx: CommandContext) => Promise<void>;

/** Each command with the options it takes and how many positional arguments: checked before any database is opened. */
const COMMANDS: Record<string, { run: CommandRun; options: string[]; positional?: number }> = {
  create: { run: cmdCreate, options: ['workspace', 'plan', 'scopes', 'ip', 'expires', 'name', 'rpm', 'credits'] },
  list: { run: cmdList, options: ['workspace'] },
  revoke: { run: cmdRevoke, options: [], positional: 1 },
  plan: { run: cmdPlan, options: ['workspace', 'plan', 'rpm', 'credits'] },
  usage: { run: cmdUsage, options: ['workspace'] },
  'webhook-secret': { run: cmdWebhookSecret, options: ['workspace', 'rotate'] },
};

const consoleIo: KeysCliIo = {
  out: (line) => process.stdout.write(line + '\n'),
  err: (line) => process.stderr.write(line + '\n'),
};

/**
 * Runs one keys command against the store of `config.dataDir`.
 * Returns the exit status: 0 success, 1 failure (e.g. unknown workspace or key), 2 bad command line.
 */
export async function runKeysCli(argv: string[], config: KeysConfig, io: KeysCliIo = consoleIo): Promise<number> {
  const usage = (message: string): number => {
    io.err(usageLine('keys', message, 'keys --help'));
    return USAGE_EXIT;
  };
  let args: ParsedArgs;
  try {
    args = parseArgs(argv);
  } catch (err) {
    if (!(err instanceof UsageError)) throw err;
    return usage(err.message);
  }
  if (args.help || args.command === 'help') {
    io.out(HELP);
    return 0;
  }
  if (args.command === undefined) return usage('a command is required');
  const command = COMMANDS[args.command];
  if (!command) return usage(`unknown command "${args.command}"`);
  try {
    allowOnly(args, command.options, command.positional ?? 0);
  } catch (err) {
    return usage((err as Error).message);
  }
  let store: GatewayStore | undefined;
  // A DATA_DIR other than the server's would silently get a database of its own: say so when one is created.
  const created = watchForNewDatabase(config, (line) => io.err(`keys: ${line}`));
  try {
    store = await openStore(config);
    created.check();
    await command.run(store, args, io, { config, afterOpen: created.check });
    return 0;
  } catch (err) {
    if (err instanceof UsageError) return usage(err.message);
    io.err(`keys ${args.command}: ${(err as Error).message}`);
    return 1;
  } finally {
    await store?.close();
  }
}

/**
 * `keys usage | head`: once the reader is gone, further output has nowhere to go. Stop quietly, as command-line
 * tools do on SIGPIPE, instead of dying on an unhandled EPIPE with a stack trace.
 */
export function exitQuietlyOnClosedPipe(stream: NodeJS.WriteStream = process.stdout): void {
  stream.on('error', (err: NodeJS.ErrnoException) => {
    if (err.code === 'EPIPE') process.exit(0);
    throw err;
  });
}

/** The process's command line: `--data-dir DIR` (anywhere) stands for DATA_DIR, then the configuration is loaded. */
export async function keysMain(argv: string[], env: NodeJS.ProcessEnv = process.env, io: KeysCliIo = consoleIo): Promise<number> {
  let line: { argv: string[]; env: NodeJS.ProcessEnv };
  try {
    line = dataDirFromArgs(argv, env);
  } catch (err) {
    if (!(err instanceof UsageError)) throw err;
    io.err(usageLine('keys', err.message, 'keys --help'));
    return USAGE_EXIT;
  }
  const config = configOrExplain(io.err, line.env);
  if (!config) return CONFIG_EXIT;
  return runKeysCli(line.argv, config, io);
}

if (require.main === module) {
  exitQuietlyOnClosedPipe(process.stdout);
  void keysMain(process.argv.slice(2)).then((code) => {
    process.exitCode = code;
  });
}
