// Every environment variable the service reads, in one zod schema: what each accepts, its default and what it is
// for. loadConfig (index.ts) parses the environment with it, and `npm run docs:config` renders the table of
// docs/operations.md from the same entries, so the docs and the checks cannot disagree.
import { z } from 'zod';
import { redactUrl } from './redact';
import { parseTrustProxy } from './trust-proxy';

export const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const;
export type LogLevel = (typeof LOG_LEVELS)[number];

/** Node's timers take at most this many ms (about 24.8 days); a longer delay would fire at once. */
const MAX_TIMER_MS = 2_147_483_647;

/**
 * What each value schema accepts, in words: `accepts` for the docs' table, `must` for the error about a bad value
 * ("WORKERS must be an integer from 1 to 256"; default: "be " + accepts).
 */
const accepting = z.registry<{ accepts: string; must?: string }>();

function described<S extends z.ZodType>(schema: S, accepts: string, must?: string): S {
  accepting.add(schema as z.ZodType, must === undefined ? { accepts } : { accepts, must });
  return schema;
}

/** An integer in [min, max], written as digits: "1.5", "1e4" or "0x10" are refused, not rounded or expanded. */
function int(min: number, max: number) {
  return described(
    z.string().trim().regex(/^[+-]?\d+$/).transform(Number).pipe(z.int().min(min).max(max)),
    `an integer from ${min} to ${max}`,
  );
}

/** A decimal number (no exponent, no Infinity) from min (inclusive, or above it with `above`) to max. */
function decimal(range: { min: number; max?: number; above?: boolean }) {
  let n = z.number();
  n = range.above ? n.gt(range.min) : n.gte(range.min);
  if (range.max !== undefined) n = n.lte(range.max);
  const words = range.max !== undefined
    ? `a number from ${range.min} to ${range.max}`
    : `a number ${range.above ? 'greater than' : 'of at least'} ${range.min}`;
  return described(z.string().trim().regex(/^[+-]?(\d+(\.\d*)?|\.\d+)$/).transform(Number).pipe(n), words);
}

/** Exactly `true` or `false`. */
function bool() {
  return described(z.stringbool({ truthy: ['true'], falsy: ['false'], case: 'sensitive' }), 'true or false');
}

function oneOf<const T extends readonly [string, ...string[]]>(values: T) {
  return described(z.string().trim().toLowerCase().pipe(z.enum(values)), `one of ${values.join(', ')}`);
}

function text(accepts = 'any text') {
  return described(z.string(), accepts);
}

/** A URL with one of the given schemes (e.g. 'postgres:'). */
function urlWith(schemes: string[]) {
  const words = schemes.map((s) => `${s}//`).join(' or ');
  return described(
    z.string().trim().refine((raw) => {
      try {
        return schemes.includes(new URL(raw).protocol);
      } catch {
        return false;
      }
    }),
    `a URL starting with ${words}`,
    `start with ${words}`,
  );
}

/** One http(s) URL or a comma-separated list of distinct ones (the model-service replicas). */
function httpUrlList() {
  return described(
    z.string().trim().refine((raw) => {
      const urls = raw.split(',').map((u) => u.trim().replace(/\/+$/, '')).filter(Boolean);
      const ok = urls.every((u) => {
        try {
          return ['http:', 'https:'].includes(new URL(u).protocol);
        } catch {
          return false;
        }
      });
      return ok && urls.length > 0 && new Set(urls).size === urls.length;
    }),
    'an http:// or https:// URL, or a comma-separated list of distinct ones',
  );
}

function trustProxy() {
  return described(
    z.string().transform((raw, ctx) => {
      try {
        return parseTrustProxy(raw);
      } catch (err) {
        // The message stays generic ("must be ..."): the accepted forms say more than proxy-addr's reason.
        ctx.addIssue({ code: 'custom', message: (err as Error).message });
        return z.NEVER;
      }
    }),
    'true, false, a hop count from 0 to 32, or a comma-separated list of proxy IPs/CIDRs (loopback, linklocal, uniquelocal)',
  );
}

/** One variable: its value schema and what the docs say about it. */
interface Variable<S extends z.ZodType = z.ZodType> {
  schema: S;
  /** The default as the docs show it (Markdown); when omitted, the schema's .default() value. */
  default?: string;
  meaning: string;
  /** How a refused value is quoted in the error: secrets never, URLs without their password. */
  quote?: 'as-is' | 'url' | 'never';
  /** An empty value is kept as it is instead of meaning "unset" (REDIS_KEY_PREFIX= for no prefix). */
  emptyIsValue?: boolean;
}

const v = <S extends z.ZodType>(schema: S, doc: Omit<Variable<S>, 'schema'>): Variable<S> => ({ schema, ...doc });

/** The variables, in the order the docs list them. Unset (or empty) means the default. */
export const VARIABLES = {
  PORT: v(int(0, 65535).default(8080), { meaning: 'port of the public server (API, console, probes, metrics); 0 picks a free one' }),
  HOST: v(text('an interface address or host name').default('0.0.0.0'), { meaning: 'interface the public server binds' }),
  DATA_DIR: v(text('a directory').optional(), { default: '`./data` (in the clone)', meaning: '`gateway.db` (SQLite, WAL), `jobs.db` and `jobs/` (job queue and files), temporary files' }),
  WORKERS: v(int(1, 256).optional(), { default: "the container's CPU limit (cgroup quota, `--cpus`) rounded down, else the cores", meaning: 'inference worker threads (also the batch concurrency)' }),
  LIVE_WORKERS: v(int(1, 64).optional(), { default: '2 where the container may use 2 or more CPUs (as `WORKERS` counts them), else 1', meaning: 'worker threads for live streams, apart from the file workers (started with the first stream; each takes up to a core)' }),
  LIVE_TICK_MS: v(decimal({ min: 0, max: 20 }).default(2), { meaning: 'least time between the starts of two ticks of a live worker (one tick runs every stream\'s waiting audio together): larger batches cost less CPU per stream, at up to this much added latency; 0: as soon as the previous tick is done' }),
  FILE_WORK_PROCESS: v(bool().default(true), { meaning: '`npm start` without `MODEL_SERVICE_URL`: file work (uploads, batches, jobs) runs in a child process of its own, a model service on a loopback port, at the file-work priority, while live streams stay in the server\'s process; `false`: all in one process' }),
  FILE_WORK_IDLE: v(bool().default(true), { meaning: 'file workers and their ffmpeg processes also run under Linux\'s SCHED_IDLE policy (set with util-linux `chrt`): they only get CPU time that live streams and the HTTP thread leave; `false`: niceness only' }),
  FILE_WORK_RESTART_SECONDS: v(decimal({ min: 0.05, max: 10 }).default(0.5), { meaning: 'wait before restarting a file-work process that died; twice as long after each further death in a row, at most 10 s (20 times this when that is more); back to this after a minute up' }),
  FILE_WORK_NICE: v(int(0, 19).default(10), { meaning: 'niceness of the file workers and their ffmpeg processes (Linux): when the CPU is short, live streams and the HTTP thread run first; 0 turns it off' }),
  MODELS_DIR: v(text('a directory').optional(), { default: '`./models` (in the clone)', meaning: 'ONNX graphs, `manifest.json`, `sample.wav`' }),
  FFMPEG_PATH: v(text('a path to an ffmpeg binary').optional(), { default: 'the binary in `@ffmpeg-installer/ffmpeg`', meaning: 'ffmpeg to use' }),
  FFPROBE_PATH: v(text('a path to an ffprobe binary').optional(), { default: 'the binary in `@ffprobe-installer/ffprobe`', meaning: 'ffprobe to use (describes every input: its JSON output)' }),
  TMP_DIR: v(text('a directory').optional(), { default: '`DATA_DIR/tmp`', meaning: 'uploads and outputs while a request runs (always removed)' }),
  ADMIN_SECRET: v(text().optional(), { default: 'generated on first start into `DATA_DIR/admin-secret` (mode 0600), stored hashed', meaning: 'console sign-in', quote: 'never' }),
  DEFAULT_ATTENUATION_LIMIT_DB: v(decimal({ min: 0, max: 100 }).default(0), { meaning: '`attenuation_limit_db` when a request omits it' }),

  MODEL_SERVICE_URL: v(httpUrlList().optional(), { default: 'unset (npm start runs its own: FILE_WORK_PROCESS)', meaning: 'forward to a separate model service, or a comma-separated list of replicas' }),
  MODEL_SERVICE_TOKEN: v(text().optional(), {
    default: 'unset (npm start\'s own: random per start)',
    meaning: 'secret the gateway presents to the model service; required by `npm run model-service` (16 characters or more) and with `MODEL_SERVICE_URL`',
    quote: 'never',
  }),
  MODEL_SERVICE_HOST: v(text('an interface address or host name').default('127.0.0.1'), { meaning: 'interface `npm run model-service` binds' }),
  MODEL_SERVICE_PORT: v(int(0, 65535).default(8081), { meaning: 'port of `npm run model-service`' }),
  MODEL_QUEUE_PER_WORKER: v(int(1, 1000).default(4), { meaning: 'admission control: calls a model service admits at once per worker (`503` + `Retry-After` beyond)' }),
  UPSTREAM_TIMEOUT_MS: v(int(1, MAX_TIMER_MS).default(600_000), { meaning: 'processing time after the upload until the model service answers (`504 upstream_timeout`)' }),
  UPSTREAM_IDLE_TIMEOUT_MS: v(int(100, MAX_TIMER_MS).default(30_000), { meaning: 'model service accepts no upload bytes / sends no answer bytes this long → failure' }),
  UPSTREAM_CONNECT_TIMEOUT_MS: v(int(100, MAX_TIMER_MS).default(5_000), { meaning: 'connection + `100 Continue` from a replica, else the next one' }),
  UPSTREAM_HEALTH_INTERVAL_MS: v(int(100, MAX_TIMER_MS).default(5_000), { meaning: 'health checks of each replica (with several)' }),
  CLIENT_IDLE_TIMEOUT_MS: v(int(100, MAX_TIMER_MS).default(30_000), { meaning: 'window over which an upload must keep `CLIENT_MIN_BYTES_PER_S` (else `408`), and how long a client may stop reading' }),
  CLIENT_MIN_BYTES_PER_S: v(int(0, MAX_TIMER_MS).default(1024), { meaning: 'slowest upload rate still counted as progress' }),
  BREAKER_THRESHOLD: v(int(1, 1000).default(5), { meaning: 'consecutive failures that open a replica\'s circuit breaker' }),
  BREAKER_COOLDOWN_MS: v(int(0, MAX_TIMER_MS).default(30_000), { meaning: 'how long an open breaker skips its replica before a trial call' }),
  SHUTDOWN_GRACE_MS: v(int(0, MAX_TIMER_MS).default(60_000), { meaning: 'after SIGTERM, time for in-flight calls; the rest get `503` + `Retry-After`' }),
  TRUST_PROXY: v(trustProxy().optional(), {
    default: '`false`',
    meaning: 'reverse proxies in front: `true`/`1` one proxy, `N` hops, or a list of proxy IPs/CIDRs; the client is the right-most untrusted `X-Forwarded-For` address ([docs/gateway.md](gateway.md#client-ips))',
  }),

  LOG_REQUESTS: v(bool().optional(), { default: '`true` (`false` under tests)', meaning: 'one JSON log line per API call on stdout' }),
  LOG_FORMAT: v(oneOf(['json', 'pretty'] as const).default('json'), { meaning: '`json` (pino, one object per line) or `pretty` (for humans)' }),
  LOG_LEVEL: v(oneOf(LOG_LEVELS).default('info'), { meaning: 'lowest level logged' }),
  METRICS_TOKEN: v(text().optional(), { default: 'unset (open)', meaning: 'when set, `GET /metrics` needs `Authorization: Bearer <METRICS_TOKEN>`', quote: 'never' }),

  DATABASE_URL: v(urlWith(['postgres:', 'postgresql:']).optional(), {
    default: 'unset (SQLite in `DATA_DIR`)',
    meaning: '`postgres://user:pass@host:5432/db`: the gateway store and the job queue in PostgreSQL, shared by several gateways ([docs/scaling.md](scaling.md))',
    quote: 'url',
  }),
  DATABASE_POOL_SIZE: v(int(1, 1000).default(10), { meaning: 'PostgreSQL connections per gateway process' }),
  REDIS_URL: v(urlWith(['redis:', 'rediss:']).optional(), {
    default: 'unset (in memory)',
    meaning: 'rate limits, console sessions and sign-in limits in Redis, shared by several gateways',
    quote: 'url',
  }),
  REDIS_KEY_PREFIX: v(text().default('nsg:'), { meaning: 'prefix of every Redis key (several deployments can share one Redis); empty for none', emptyIsValue: true }),
  REQUEST_LOG_RETENTION_DAYS: v(int(0, 36_500).default(90), { meaning: 'request-log rows older than this are deleted in the background (`0` keeps them)' }),
  UNAUTHENTICATED_REQUESTS_PER_MINUTE: v(int(0, 1_000_000).default(60), {
    meaning: 'per client address, for `/v1` requests without a valid token; beyond → `429` and not logged (`0` = no limit)',
  }),
  CREDIT_RESERVATION_TTL_MS: v(int(1_000, MAX_TIMER_MS).default(120_000), {
    meaning: 'a credit held by a call in flight is given back after this long unless its gateway renews it (it does while the call runs)',
  }),

  STREAMS_ENTERPRISE_MAX: v(int(1, 1_000_000).default(1000), {
    meaning: 'concurrent live streams per enterprise workspace (free 2, starter 10, scale 100: docs/streaming.md)',
  }),
  MAX_AUDIO_SECONDS: v(decimal({ min: 0, above: true }).default(14_400), { default: '`14400` (4 h)', meaning: 'longest audio per file: `413 payload_too_large` beyond (from the header, and again while decoding)' }),
  MIN_SAMPLE_RATE: v(int(1, 1_000_000).default(8000), { meaning: 'lowest input sample rate accepted, Hz (`422` below)' }),
  MAX_SAMPLE_RATE: v(int(1, 1_000_000).default(384_000), { meaning: 'highest input sample rate accepted, Hz (`422` above)' }),
  MAX_CHANNELS: v(int(1, 64).default(16), { meaning: 'most channels per file (`422` beyond)' }),
  MAX_DECODED_SAMPLES: v(int(1, Number.MAX_SAFE_INTEGER).default(1_382_400_000), { default: '`1382400000` (4 h of 48 kHz stereo)', meaning: 'most samples one file may decode to, over all channels (duration × input sample rate × channels): `413 payload_too_large` beyond, decided from the probe before decoding and again while decoding' }),
  TMP_MIN_FREE_DISK_MB: v(int(0, 1_048_576).default(1024), { meaning: 'free-space floor on `TMP_DIR` for the files of synchronous calls (uploads, outputs): `503` with `Retry-After` when a call would cross it' }),

  JOBS_DIR: v(text('a directory').optional(), { default: '`DATA_DIR/jobs`', meaning: 'job uploads, inputs and results (shared by every gateway when they share a queue through `DATABASE_URL`)' }),
  JOBS_MAX_UPLOAD_MB: v(int(1, 1_048_576).default(2048), { meaning: 'largest job upload or fetched file (MB = 1,048,576 bytes)' }),
  JOB_RETENTION_HOURS: v(decimal({ min: 0, above: true }).default(24), { meaning: 'job results and records are deleted this long after the job finished' }),
  JOBS_CONCURRENCY: v(int(1, 256).optional(), {
    default: 'half of `WORKERS`, at least 1',
    meaning: 'job streams at once per runner and per model service (the rest of the workers stay for synchronous calls)',
  }),
  JOBS_ALLOW_PRIVATE_URLS: v(bool().default(false), { meaning: 'let job `url`/`webhook_url` reach loopback/private addresses (tests, closed networks)' }),
  JOBS_RUNNER: v(bool().default(true), { meaning: '`false`: this process serves the API but runs no jobs and sends no webhooks' }),
  JOBS_LEASE_SECONDS: v(int(1, 86_400).default(30), { meaning: 'a running job whose runner stops renewing for this long is re-queued' }),
  JOBS_RETRY_SECONDS: v(decimal({ min: 0.1, max: 600 }).default(10), { meaning: 'wait before a job\'s second attempt after a transient failure; each later wait is 4 times longer, at most 10 minutes' }),
  JOBS_HOUSEKEEPING_SECONDS: v(decimal({ min: 0.1, max: 3600 }).default(5), { meaning: 'time between the runner\'s housekeeping passes (re-queue jobs of dead runners once their lease expired, settle pending refunds)' }),
  JOBS_MAX_ACTIVE_PER_WORKSPACE: v(int(1, 100_000).default(20), { meaning: 'queued + running jobs per workspace (`429 too_many_jobs` beyond)' }),
  JOBS_BUSY_RETRY_AFTER_SECONDS: v(int(1, 3600).default(5), { meaning: 'Retry-After of `429 too_many_jobs`: a slot frees when one of the workspace\'s jobs ends, which the server cannot foresee; set it near your jobs\' typical run' }),
  JOBS_MIN_FREE_DISK_MB: v(int(0, 1_048_576).default(1024), { meaning: 'free-space floor on `DATA_DIR` for new jobs (`507`)' }),
  JOBS_CRASH_AT: v(oneOf(['after-charge', 'after-refund'] as const).optional(), {
    default: 'unset',
    meaning: 'fault injection for recovery tests only: the process kills itself (SIGKILL) between two writes: `after-charge`, a job\'s credit settled but the job not created; `after-refund`, a failed job\'s credit given back but not yet marked so in the job queue ([docs/reliability.md](reliability.md))',
  }),
  NSM_URL: v(urlWith(['http:', 'https:']).default('http://localhost:8080'), { meaning: 'server of `nsm jobs`', quote: 'url' }),
  NSM_TOKEN: v(text().optional(), { default: 'unset', meaning: 'token of `nsm jobs` (or `--token`)', quote: 'never' }),
};

export type VariableName = keyof typeof VARIABLES;
type Shape = { [K in VariableName]: (typeof VARIABLES)[K]['schema'] };

const shape = Object.fromEntries(Object.entries(VARIABLES).map(([name, variable]) => [name, variable.schema])) as Shape;

/** The whole environment; checks that need two variables come after the single ones. */
const environment = z.object(shape).superRefine((env, ctx) => {
  if (env.MIN_SAMPLE_RATE > env.MAX_SAMPLE_RATE) {
    ctx.addIssue({ code: 'custom', path: ['MIN_SAMPLE_RATE'], message: `must not exceed MAX_SAMPLE_RATE (${env.MAX_SAMPLE_RATE})` });
  }
});

export type Environment = z.output<typeof environment>;

/** A variable with a value it does not accept. The message names the variable and what it accepts. */
export class ConfigError extends Error {
  constructor(
    readonly variable: string,
    message: string,
  ) {
    super(message);
    this.name = 'ConfigError';
  }
}

/** What a value schema accepts, in words (looked up through its .default()/.optional() wrappers). */
function wordsOf(schema: z.ZodType): { accepts: string; must: string } {
  let s: z.ZodType = schema;
  for (;;) {
    const meta = accepting.get(s);
    if (meta) return { accepts: meta.accepts, must: meta.must ?? `be ${meta.accepts}` };
    if (s instanceof z.ZodDefault || s instanceof z.ZodOptional) s = s.unwrap() as z.ZodType;
    else throw new Error('a variable schema without words for what it accepts');
  }
}

export const acceptsOf = (schema: z.ZodType): string => wordsOf(schema).accepts;

function quoted(name: VariableName, raw: string): string {
  const how = (VARIABLES[name] as Variable).quote ?? 'as-is';
  if (how === 'never') return '';
  if (how === 'url') {
    // Unparsable: at most the scheme (the rest may hold a password); otherwise the password starred.
    const shown = redactUrl(raw);
    if (shown !== '(unparsable URL)') return ` (got "${shown}")`;
    const scheme = /^[A-Za-z][A-Za-z0-9+.-]*:/.exec(raw.trim());
    return scheme ? ` (got "${scheme[0]}…")` : '';
  }
  return ` (got "${raw}")`;
}

/**
 * Parses every variable of the environment. Unset and empty variables take their defaults; a bad one throws a
 * ConfigError whose one-line message names it, what it accepts and the value it got (and any other bad ones).
 */
export function parseEnvironment(env: NodeJS.ProcessEnv): Environment {
  const input: Record<string, string | undefined> = {};
  for (const [name, variable] of Object.entries(VARIABLES) as Array<[VariableName, Variable]>) {
    const raw = env[name];
    input[name] = raw === '' && !variable.emptyIsValue ? undefined : raw;
  }
  const result = environment.safeParse(input);
  if (result.success) return result.data;
  const bad = [...new Set(result.error.issues.map((i) => String(i.path[0])))] as VariableName[];
  const first = result.error.issues[0];
  const name = bad[0];
  // A check across variables words its own requirement ("must not exceed ..."); a single value, what it accepts.
  const requirement = first.code === 'custom' && first.message.startsWith('must ') ? first.message : `must ${wordsOf(VARIABLES[name].schema).must}`;
  let message = `${name} ${requirement}${quoted(name, input[name] ?? '')}`;
  if (bad.length > 1) message += `; also invalid: ${bad.slice(1).join(', ')}`;
  throw new ConfigError(name, message);
}

/** The default as the docs show it: the Markdown text of the entry, else the schema's default value as code. */
export function defaultOf(variable: Variable): string {
  if (variable.default !== undefined) return variable.default;
  if (variable.schema instanceof z.ZodDefault) return `\`${String(variable.schema.def.defaultValue)}\``;
  throw new Error('a variable without a default needs a default text');
}

/** The docs' table of variables, rendered from VARIABLES (Markdown). */
export function variablesTable(): string {
  const cell = (s: string) => s.replace(/\|/g, '\\|');
  const lines = ['| variable | accepts | default | meaning |', '|---|---|---|---|'];
  for (const [name, variable] of Object.entries(VARIABLES) as Array<[VariableName, Variable]>) {
    lines.push(`| \`${name}\` | ${cell(acceptsOf(variable.schema))} | ${cell(defaultOf(variable))} | ${cell(variable.meaning)} |`);
  }
  return lines.join('\n');
}
