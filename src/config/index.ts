// The one place that reads the environment. Everything else receives a Config.
import path from 'node:path';
import { defaultWorkers } from './cpu-quota';
import { parseEnvironment, type Environment, type LogLevel } from './env';
import type { TrustProxySetting } from './trust-proxy';

export { ConfigError, LOG_LEVELS, type LogLevel } from './env';
export { redactUrl } from './redact';
export { cgroupCpuLimit, defaultWorkers, type CgroupPaths } from './cpu-quota';

export interface Config {
  /** HTTP port of the public server (gateway + console). */
  port: number;
  /** Interface to bind. */
  host: string;
  /** Where gateway.db and other state live. */
  dataDir: string;
  /** Inference worker threads in the pool (file work). */
  workers: number;
  /** Worker threads for live streams (LIVE_WORKERS; default 2, 1 on a single CPU), started with the first stream. */
  liveWorkers: number;
  /** Least time between a live worker's tick starts (LIVE_TICK_MS). */
  liveTickMs: number;
  /** npm start runs file work in a child process (FILE_WORK_PROCESS, src/file-process); live streams stay in its own. */
  fileWorkProcess: boolean;
  /** Niceness of the file workers and their ffmpeg processes (FILE_WORK_NICE; 0: as the server). */
  fileWorkNice: number;
  /** File workers under Linux's SCHED_IDLE policy too (FILE_WORK_IDLE): CPU time only when nothing else wants it. */
  fileWorkIdle: boolean;
  /** First wait before a dead file-work process is started again, ms (FILE_WORK_RESTART_SECONDS, 0.5 s); it doubles per death in a row. */
  fileWorkRestartMs: number;
  /** ffmpeg binary: FFMPEG_PATH, else the one shipped in @ffmpeg-installer/ffmpeg. */
  ffmpegPath: string;
  /** ffprobe binary: FFPROBE_PATH, else the one shipped in @ffprobe-installer/ffprobe. */
  ffprobePath: string;
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
  // -- clients behind proxies, the gateway → model-service link (token, timeouts), admission, shutdown, temp files --
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
  /** Most samples one file may decode to over all channels (MAX_DECODED_SAMPLES, 4 h of 48 kHz stereo). */
  maxDecodedSamples: number;
  /** Free space to keep on TMP_DIR for synchronous calls' files (TMP_MIN_FREE_DISK_MB, 1024 MB). */
  tmpMinFreeDiskBytes: number;

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
  /** Time between the runner's housekeeping passes (JOBS_HOUSEKEEPING_SECONDS, 5 s). */
  housekeepingMs: number;
  /** Queued + running jobs one workspace may have at once (JOBS_MAX_ACTIVE_PER_WORKSPACE, 20). */
  maxActivePerWorkspace: number;
  /** Retry-After of `429 too_many_jobs`, seconds (JOBS_BUSY_RETRY_AFTER_SECONDS, 5). */
  busyRetryAfterS: number;
  /** New jobs are refused while DATA_DIR would have less than this free (JOBS_MIN_FREE_DISK_MB, 1024 MB). */
  minFreeDiskBytes: number;
  /** Runs of one job before it is failed for good (crashes, unreachable model service). */
  maxAttempts: number;
  /** Wait before the second attempt after a transient failure, ×4 for each later one (JOBS_RETRY_SECONDS, 10 s). */
  retryBaseMs: number;
  /** `nsm jobs`: the server to talk to (NSM_URL, default http://localhost:8080) and the token (NSM_TOKEN). */
  clientUrl: string;
  clientToken: string | null;
  /** Fault injection for the recovery tests (JOBS_CRASH_AT): where the process kills itself; null in service. */
  crashAt: JobsCrashPoint | null;
}

/** Points between two writes in different databases where JOBS_CRASH_AT can end the process (kill -9 from within). */
export type JobsCrashPoint = 'after-charge' | 'after-refund';

function defaultFfmpeg(): string {
  try {
    // eslint-disable-next-line @typescript-eslint/no-var-requires
    return (require('@ffmpeg-installer/ffmpeg') as { path: string }).path;
  } catch {
    return 'ffmpeg';
  }
}

function defaultFfprobe(): string {
  try {
    // eslint-disable-next-line @typescript-eslint/no-var-requires
    return (require('@ffprobe-installer/ffprobe') as { path: string }).path;
  } catch {
    return 'ffprobe';
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

/**
 * The configuration from the environment. Every variable is checked against its schema (env.ts): a bad value throws
 * a ConfigError naming the variable and what it accepts, instead of being rounded, guessed or ignored.
 */
export function loadConfig(env: NodeJS.ProcessEnv = process.env): Config {
  const e = parseEnvironment(env);
  const dataDir = path.resolve(e.DATA_DIR ?? path.join(PROJECT_ROOT, 'data'));
  // Unset: the container's CPU quota (cgroup), not the host's cores (cpu-quota.ts).
  const cpus = defaultWorkers();
  const workers = e.WORKERS ?? cpus;
  return {
    port: e.PORT,
    host: e.HOST,
    dataDir,
    workers,
    // Two live workers on two cores or more: an echo stream's canceller is per-stream work, not batched, and one
    // thread held 40 echo streams in 0 of 6 runs, two in 4 of 6 (docs/streaming.md, "How it is scheduled").
    liveWorkers: e.LIVE_WORKERS ?? Math.min(2, cpus),
    liveTickMs: e.LIVE_TICK_MS,
    fileWorkProcess: e.FILE_WORK_PROCESS,
    fileWorkNice: e.FILE_WORK_NICE,
    fileWorkIdle: e.FILE_WORK_IDLE,
    fileWorkRestartMs: Math.round(e.FILE_WORK_RESTART_SECONDS * 1000),
    ffmpegPath: e.FFMPEG_PATH ?? defaultFfmpeg(),
    ffprobePath: e.FFPROBE_PATH ?? defaultFfprobe(),
    modelsDir: path.resolve(e.MODELS_DIR ?? path.join(PROJECT_ROOT, 'models')),
    modelServiceUrl: e.MODEL_SERVICE_URL?.trim() || null,
    modelServicePort: e.MODEL_SERVICE_PORT,
    upstreamTimeoutMs: e.UPSTREAM_TIMEOUT_MS,
    breakerThreshold: e.BREAKER_THRESHOLD,
    breakerCooldownMs: e.BREAKER_COOLDOWN_MS,
    adminSecret: e.ADMIN_SECRET ?? null,
    defaultAttenuationLimitDb: e.DEFAULT_ATTENUATION_LIMIT_DB,
    trustProxy: e.TRUST_PROXY ?? 0,
    modelServiceToken: e.MODEL_SERVICE_TOKEN ?? null,
    modelServiceHost: e.MODEL_SERVICE_HOST,
    clientIdleTimeoutMs: e.CLIENT_IDLE_TIMEOUT_MS,
    clientMinBytesPerSecond: e.CLIENT_MIN_BYTES_PER_S,
    upstreamIdleTimeoutMs: e.UPSTREAM_IDLE_TIMEOUT_MS,
    upstreamConnectTimeoutMs: e.UPSTREAM_CONNECT_TIMEOUT_MS,
    upstreamHealthIntervalMs: e.UPSTREAM_HEALTH_INTERVAL_MS,
    modelQueuePerWorker: e.MODEL_QUEUE_PER_WORKER,
    shutdownGraceMs: e.SHUTDOWN_GRACE_MS,
    tmpDir: path.resolve(e.TMP_DIR ?? path.join(dataDir, 'tmp')),
    logRequests: e.LOG_REQUESTS ?? (env.NODE_ENV !== 'test' && !env.JEST_WORKER_ID),

    databaseUrl: e.DATABASE_URL?.trim() ?? null,
    databasePoolSize: e.DATABASE_POOL_SIZE,
    redisUrl: e.REDIS_URL?.trim() ?? null,
    redisKeyPrefix: e.REDIS_KEY_PREFIX,
    requestLogRetentionDays: e.REQUEST_LOG_RETENTION_DAYS,
    unauthenticatedRequestsPerMinute: e.UNAUTHENTICATED_REQUESTS_PER_MINUTE,
    creditReservationTtlMs: e.CREDIT_RESERVATION_TTL_MS,
    streamsEnterpriseMax: e.STREAMS_ENTERPRISE_MAX,
    maxAudioSeconds: e.MAX_AUDIO_SECONDS,
    minSampleRate: e.MIN_SAMPLE_RATE,
    maxSampleRate: e.MAX_SAMPLE_RATE,
    maxChannels: e.MAX_CHANNELS,
    maxDecodedSamples: e.MAX_DECODED_SAMPLES,
    tmpMinFreeDiskBytes: e.TMP_MIN_FREE_DISK_MB * 1024 * 1024,

    // ---- operations: logs, metrics ----
    logFormat: e.LOG_FORMAT,
    logLevel: e.LOG_LEVEL,
    metricsToken: e.METRICS_TOKEN ?? null,
    jobs: jobsConfig(e, dataDir, workers),
  };
}

function jobsConfig(e: Environment, dataDir: string, workers: number): JobsConfig {
  const MB = 1024 * 1024;
  return {
    dir: path.resolve(e.JOBS_DIR ?? path.join(dataDir, 'jobs')),
    maxUploadBytes: e.JOBS_MAX_UPLOAD_MB * MB,
    retentionMs: Math.round(e.JOB_RETENTION_HOURS * 3600_000),
    allowPrivateUrls: e.JOBS_ALLOW_PRIVATE_URLS,
    concurrency: e.JOBS_CONCURRENCY ?? Math.max(1, Math.floor(workers / 2)),
    runner: e.JOBS_RUNNER,
    leaseMs: e.JOBS_LEASE_SECONDS * 1000,
    housekeepingMs: Math.round(e.JOBS_HOUSEKEEPING_SECONDS * 1000),
    maxActivePerWorkspace: e.JOBS_MAX_ACTIVE_PER_WORKSPACE,
    busyRetryAfterS: e.JOBS_BUSY_RETRY_AFTER_SECONDS,
    minFreeDiskBytes: e.JOBS_MIN_FREE_DISK_MB * MB,
    maxAttempts: 3,
    retryBaseMs: Math.round(e.JOBS_RETRY_SECONDS * 1000),
    clientUrl: e.NSM_URL.trim().replace(/\/+$/, ''),
    clientToken: e.NSM_TOKEN ?? null,
    crashAt: e.JOBS_CRASH_AT ?? null,
  };
}
