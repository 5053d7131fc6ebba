// The one place that reads the environment. Everything else receives a Config.
import os from 'node:os';
import path from 'node:path';
import { parseTrustProxy, type TrustProxySetting } from './trust-proxy';

export interface Config {
  /** HTTP port of the public server (gateway + console). */
  port: number;
  /** Interface to bind. */
  host: string;
  /** Where gateway.db and other state live. */
  dataDir: string;
  /** Inference worker threads in the pool. */
  workers: number;
  /** ffmpeg binary: FFMPEG_PATH, else the one shipped in @ffmpeg-installer/ffmpeg. */
  ffmpegPath: string;
  /** Directory holding the generated ONNX graphs and manifest.json. */
  modelsDir: string;
  /**
   * When set, the gateway forwards over HTTP to this model service instead of the in-process one; a comma-separated
   * list names several replicas (balanced by fewest requests in flight, each with its own breaker and health check).
   */
  modelServiceUrl: string | null;
  /** Port for `npm run model-service` (the model service alone). */
  modelServicePort: number;
  /** Gateway → model service: give up after this long (504 upstream_timeout). */
  upstreamTimeoutMs: number;
  /** Consecutive upstream failures that open the circuit breaker. */
  breakerThreshold: number;
  /** How long the breaker stays open before letting a trial call through. */
  breakerCooldownMs: number;
  /** Console admin secret; null means generate one on first start. */
  adminSecret: string | null;
  /** attenuation_limit_db applied when a request omits it. */
  defaultAttenuationLimitDb: number;
  // -- reliability and security hardening (issue 9 / 12) --------------------------------------------------------
  /** TRUST_PROXY: hop count or trusted proxy list; who the client is behind reverse proxies (see src/http/ip.ts). */
  trustProxy: TrustProxySetting;
  /** Shared secret the gateway presents to the model service (Authorization: Bearer). Required for a remote one. */
  modelServiceToken: string | null;
  /** Interface `npm run model-service` binds (loopback unless said otherwise). */
  modelServiceHost: string;
  /** A client whose upload delivers less than clientMinBytesPerSecond over this long gets 408 (its own fault). */
  clientIdleTimeoutMs: number;
  /** Slowest upload rate still counted as progress, averaged over clientIdleTimeoutMs. */
  clientMinBytesPerSecond: number;
  /** Upstream silent this long while we wait on it (accepting the upload, or sending the response body) → failure. */
  upstreamIdleTimeoutMs: number;
  /** Connecting to a model service (and its 100 Continue) takes longer than this → try another replica. */
  upstreamConnectTimeoutMs: number;
  /** How often each model-service replica is health-checked when there are several. */
  upstreamHealthIntervalMs: number;
  /** Model service admission: requests admitted at once per inference worker; more get 503 + Retry-After at once. */
  modelQueuePerWorker: number;
  /** On SIGTERM: how long in-flight requests get to finish; what cannot finish gets 503 + Retry-After. */
  shutdownGraceMs: number;
  /** Directory for temporary uploads and outputs. */
  tmpDir: string;
  /** Log each request line to stdout. */
  logRequests: boolean;

  // ---- shared state for several gateway replicas (docs/scaling.md); all optional ----
  /** PostgreSQL connection string (postgres://…): the gateway store lives there instead of DATA_DIR/gateway.db. */
  databaseUrl: string | null;
  /** Connections each process keeps in its PostgreSQL pool. */
  databasePoolSize: number;
  /** Redis URL (redis:// or rediss://): rate limits, console sessions and sign-in limits live there instead of in memory. */
  redisUrl: string | null;
  /** Prefix of every Redis key this service writes (several deployments can share one Redis). */
  redisKeyPrefix: string;
  /** Request-log rows older than this many days are deleted in the background; 0 keeps them forever. */
  requestLogRetentionDays: number;
  /** Requests per minute per client address that did not authenticate (missing/invalid token, unknown path); 0 = no limit. */
  unauthenticatedRequestsPerMinute: number;
  /** A credit reserved for a call in flight is given back after this long unless its gateway renews it (it does, every third of it). */
  creditReservationTtlMs: number;
  // --- Audio input limits (src/audio/limits.ts): checked from the header before any decoding, and again while
  // decoding (headers lie). Too long → 413 payload_too_large; rate or channels out of range → 422.
  /** Longest audio accepted per file, seconds (MAX_AUDIO_SECONDS, default 4 h). */
  /** Concurrent live streams per enterprise workspace (other plans: src/streaming/index.ts STREAMS_PER_PLAN). */
  streamsEnterpriseMax: number;
  maxAudioSeconds: number;
  /** Lowest and highest input sample rates accepted, Hz (MIN_SAMPLE_RATE 8000, MAX_SAMPLE_RATE 384000). */
  minSampleRate: number;
  maxSampleRate: number;
  /** Most channels accepted per file (MAX_CHANNELS, default 16). */
  maxChannels: number;

  // ---- operations: logs, metrics (engineer "ops") ----
  /** LOG_FORMAT: 'json' (one JSON object per line, pino) or 'pretty' (coloured lines for humans, pino-pretty). */
  logFormat: 'json' | 'pretty';
  /** LOG_LEVEL: fatal, error, warn, info, debug, trace or silent. */
  logLevel: LogLevel;
  /** METRICS_TOKEN: when set, GET /metrics needs `Authorization: Bearer <token>`; unset = open. */
  metricsToken: string | null;

  // ---- asynchronous jobs (src/jobs, docs/jobs.md) ----
  jobs: JobsConfig;
}

/** Asynchronous jobs (src/jobs): queue, runner, URL fetching, webhooks, the `nsm jobs` client. */
export interface JobsConfig {
  /** Uploads, inputs and results of jobs (JOBS_DIR, default DATA_DIR/jobs). Several gateways sharing one queue
   * (DATABASE_URL) must share this folder too (one host, or a shared volume). */
  dir: string;
  /** Largest upload or fetched file per job, bytes (JOBS_MAX_UPLOAD_MB, default 2048 MB). */
  maxUploadBytes: number;
  /** Results (and the job records) are deleted this long after the job finished (JOB_RETENTION_HOURS, 24 h). */
  retentionMs: number;
  /** Let `url` and `webhook_url` reach loopback/private/link-local addresses (JOBS_ALLOW_PRIVATE_URLS; tests only). */
  allowPrivateUrls: boolean;
  /** Job streams one runner (and one model service) works on at once (JOBS_CONCURRENCY, default half the workers). */
  concurrency: number;
  /** Whether this process runs queued jobs and delivers webhooks (JOBS_RUNNER, default true). */
  runner: boolean;
  /** A running job whose runner has not renewed its lease for this long is re-queued (JOBS_LEASE_SECONDS, 30 s). */
  leaseMs: number;
  /** Queued + running jobs one workspace may have at once (JOBS_MAX_ACTIVE_PER_WORKSPACE, 20). */
  maxActivePerWorkspace: number;
  /** New jobs are refused while DATA_DIR would have less than this free (JOBS_MIN_FREE_DISK_MB, 1024 MB). */
  minFreeDiskBytes: number;
  /** Runs of one job before it is failed for good (crashes, unreachable model service). */
  maxAttempts: number;
  /** `nsm jobs`: the server to talk to (NSM_URL, default http://localhost:8080) and the token (NSM_TOKEN). */
  clientUrl: string;
  clientToken: string | null;
}

export const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const;
export type LogLevel = (typeof LOG_LEVELS)[number];

function oneOf<T extends string>(env: NodeJS.ProcessEnv, name: string, allowed: readonly T[], fallback: T): T {
  const raw = env[name]?.trim().toLowerCase();
  if (raw === undefined || raw === '') return fallback;
  if (!(allowed as readonly string[]).includes(raw)) throw new Error(`${name} must be one of ${allowed.join(', ')}, got "${env[name]}"`);
  return raw as T;
}

function int(env: NodeJS.ProcessEnv, name: string, fallback: number): number {
  const raw = env[name];
  if (raw === undefined || raw === '') return fallback;
  const n = Number(raw);
  if (!Number.isFinite(n)) throw new Error(`${name} must be a number, got "${raw}"`);
  return n;
}

function positive(env: NodeJS.ProcessEnv, name: string, fallback: number): number {
  const n = int(env, name, fallback);
  if (!(n > 0)) throw new Error(`${name} must be a positive number, got "${env[name]}"`);
  return n;
}

function bool(env: NodeJS.ProcessEnv, name: string, fallback: boolean): boolean {
  const raw = env[name];
  if (raw === undefined || raw === '') return fallback;
  return /^(1|true|yes|on)$/i.test(raw);
}

/** A URL variable restricted to the given schemes; unset or empty → null. */
function urlOf(env: NodeJS.ProcessEnv, name: string, schemes: string[]): string | null {
  const raw = env[name]?.trim();
  if (!raw) return null;
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw new Error(`${name} is not a URL (expected ${schemes.map((s) => s + '//…').join(' or ')})`);
  }
  if (!schemes.includes(url.protocol)) {
    throw new Error(`${name} must start with ${schemes.map((s) => s + '//').join(' or ')}, got "${url.protocol}//…"`);
  }
  return raw;
}

function defaultFfmpeg(): string {
  try {
    // eslint-disable-next-line @typescript-eslint/no-var-requires
    return (require('@ffmpeg-installer/ffmpeg') as { path: string }).path;
  } catch {
    return 'ffmpeg';
  }
}

/** Project root: the folder above dist/ (compiled: dist/src/config/index.js), or two above src/config/index.ts. */
export const PROJECT_ROOT = (() => {
  const here = __dirname;
  const parts = here.split(path.sep);
  const distIdx = parts.lastIndexOf('dist');
  if (distIdx >= 0) return parts.slice(0, distIdx).join(path.sep) || path.sep;
  return path.resolve(here, '..', '..');
})();

export function loadConfig(env: NodeJS.ProcessEnv = process.env): Config {
  const dataDir = path.resolve(env.DATA_DIR || path.join(PROJECT_ROOT, 'data'));
  return {
    port: int(env, 'PORT', 8080),
    host: env.HOST || '0.0.0.0',
    dataDir,
    workers: Math.max(1, int(env, 'WORKERS', os.availableParallelism ? os.availableParallelism() : os.cpus().length)),
    ffmpegPath: env.FFMPEG_PATH || defaultFfmpeg(),
    modelsDir: path.resolve(env.MODELS_DIR || path.join(PROJECT_ROOT, 'models')),
    modelServiceUrl: env.MODEL_SERVICE_URL?.trim() ? env.MODEL_SERVICE_URL.trim() : null,
    modelServicePort: int(env, 'MODEL_SERVICE_PORT', 8081),
    upstreamTimeoutMs: int(env, 'UPSTREAM_TIMEOUT_MS', 600_000),
    breakerThreshold: Math.max(1, int(env, 'BREAKER_THRESHOLD', 5)),
    breakerCooldownMs: int(env, 'BREAKER_COOLDOWN_MS', 30_000),
    adminSecret: env.ADMIN_SECRET || null,
    defaultAttenuationLimitDb: int(env, 'DEFAULT_ATTENUATION_LIMIT_DB', 0),
    trustProxy: parseTrustProxy(env.TRUST_PROXY),
    modelServiceToken: env.MODEL_SERVICE_TOKEN || null,
    modelServiceHost: env.MODEL_SERVICE_HOST || '127.0.0.1',
    clientIdleTimeoutMs: Math.max(100, int(env, 'CLIENT_IDLE_TIMEOUT_MS', 30_000)),
    clientMinBytesPerSecond: Math.max(0, int(env, 'CLIENT_MIN_BYTES_PER_S', 1024)),
    upstreamIdleTimeoutMs: Math.max(100, int(env, 'UPSTREAM_IDLE_TIMEOUT_MS', 30_000)),
    upstreamConnectTimeoutMs: Math.max(100, int(env, 'UPSTREAM_CONNECT_TIMEOUT_MS', 5_000)),
    upstreamHealthIntervalMs: Math.max(100, int(env, 'UPSTREAM_HEALTH_INTERVAL_MS', 5_000)),
    modelQueuePerWorker: Math.max(1, int(env, 'MODEL_QUEUE_PER_WORKER', 4)),
    shutdownGraceMs: Math.max(0, int(env, 'SHUTDOWN_GRACE_MS', 60_000)),
    tmpDir: path.resolve(env.TMP_DIR || path.join(dataDir, 'tmp')),
    logRequests: bool(env, 'LOG_REQUESTS', env.NODE_ENV !== 'test' && !env.JEST_WORKER_ID),

    databaseUrl: urlOf(env, 'DATABASE_URL', ['postgres:', 'postgresql:']),
    databasePoolSize: Math.max(1, Math.trunc(int(env, 'DATABASE_POOL_SIZE', 10))),
    redisUrl: urlOf(env, 'REDIS_URL', ['redis:', 'rediss:']),
    redisKeyPrefix: env.REDIS_KEY_PREFIX ?? 'nsg:',
    requestLogRetentionDays: Math.max(0, int(env, 'REQUEST_LOG_RETENTION_DAYS', 90)),
    unauthenticatedRequestsPerMinute: Math.max(0, Math.trunc(int(env, 'UNAUTHENTICATED_REQUESTS_PER_MINUTE', 60))),
    creditReservationTtlMs: Math.max(1_000, int(env, 'CREDIT_RESERVATION_TTL_MS', 120_000)),
    streamsEnterpriseMax: positive(env, 'STREAMS_ENTERPRISE_MAX', 1000),
    maxAudioSeconds: positive(env, 'MAX_AUDIO_SECONDS', 4 * 3600),
    minSampleRate: positive(env, 'MIN_SAMPLE_RATE', 8000),
    maxSampleRate: positive(env, 'MAX_SAMPLE_RATE', 384_000),
    maxChannels: Math.floor(positive(env, 'MAX_CHANNELS', 16)),

    // ---- operations: logs, metrics ----
    logFormat: oneOf(env, 'LOG_FORMAT', ['json', 'pretty'] as const, 'json'),
    logLevel: oneOf(env, 'LOG_LEVEL', LOG_LEVELS, 'info'),
    metricsToken: env.METRICS_TOKEN || null,
    jobs: loadJobsConfig(env, dataDir),
  };
}

function loadJobsConfig(env: NodeJS.ProcessEnv, dataDir: string): JobsConfig {
  const MB = 1024 * 1024;
  const workers = Math.max(1, int(env, 'WORKERS', os.availableParallelism ? os.availableParallelism() : os.cpus().length));
  return {
    dir: path.resolve(env.JOBS_DIR || path.join(dataDir, 'jobs')),
    maxUploadBytes: Math.floor(positive(env, 'JOBS_MAX_UPLOAD_MB', 2048) * MB),
    retentionMs: Math.round(positive(env, 'JOB_RETENTION_HOURS', 24) * 3600_000),
    allowPrivateUrls: bool(env, 'JOBS_ALLOW_PRIVATE_URLS', false),
    concurrency: Math.max(1, Math.floor(int(env, 'JOBS_CONCURRENCY', Math.max(1, Math.floor(workers / 2))))),
    runner: bool(env, 'JOBS_RUNNER', true),
    leaseMs: Math.round(positive(env, 'JOBS_LEASE_SECONDS', 30) * 1000),
    maxActivePerWorkspace: Math.max(1, Math.floor(int(env, 'JOBS_MAX_ACTIVE_PER_WORKSPACE', 20))),
    minFreeDiskBytes: Math.max(0, Math.floor(int(env, 'JOBS_MIN_FREE_DISK_MB', 1024) * MB)),
    maxAttempts: 3,
    clientUrl: (env.NSM_URL || 'http://localhost:8080').replace(/\/+$/, ''),
    clientToken: env.NSM_TOKEN || null,
  };
}

/** A connection URL (DATABASE_URL, REDIS_URL) with its password hidden, for logs and messages. */
export function redactUrl(url: string): string {
  try {
    const u = new URL(url);
    if (u.password) u.password = '***';
    return u.toString();
  } catch {
    return '(unparsable URL)';
  }
}
