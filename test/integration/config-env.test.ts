// The environment schema (src/config/env.ts): bad values are refused with one line naming the variable and what it
// accepts, defaults are what they were, and every entry point (servers and CLIs, as real processes) stops on them.
import { spawnSync } from 'node:child_process';
import os from 'node:os';
import path from 'node:path';
import { ConfigError, loadConfig, PROJECT_ROOT } from '../../src/config';
import { defaultWorkers } from '../../src/config/cpu-quota';

const refusal = (env: NodeJS.ProcessEnv): string => {
  try {
    loadConfig(env);
  } catch (err) {
    expect(err).toBeInstanceOf(ConfigError);
    return (err as Error).message;
  }
  throw new Error(`accepted ${JSON.stringify(env)}`);
};

describe('bad values are refused, naming the variable and what it accepts', () => {
  test.each([
    [{ WORKERS: '1.5' }, 'WORKERS must be an integer from 1 to 256 (got "1.5")'],
    [{ WORKERS: '0' }, 'WORKERS must be an integer from 1 to 256 (got "0")'],
    [{ PORT: '1e4' }, 'PORT must be an integer from 0 to 65535 (got "1e4")'],
    [{ PORT: '0x50' }, 'PORT must be an integer from 0 to 65535 (got "0x50")'],
    [{ PORT: '65536' }, 'PORT must be an integer from 0 to 65535 (got "65536")'],
    [{ LOG_REQUESTS: 'ture' }, 'LOG_REQUESTS must be true or false (got "ture")'],
    [{ LOG_REQUESTS: '1' }, 'LOG_REQUESTS must be true or false (got "1")'],
    [{ JOBS_RUNNER: 'yes' }, 'JOBS_RUNNER must be true or false (got "yes")'],
    [{ JOBS_ALLOW_PRIVATE_URLS: 'TRUE' }, 'JOBS_ALLOW_PRIVATE_URLS must be true or false (got "TRUE")'],
    [{ MAX_CHANNELS: '2.5' }, 'MAX_CHANNELS must be an integer from 1 to 64 (got "2.5")'],
    [{ UPSTREAM_TIMEOUT_MS: '3000000000' }, 'UPSTREAM_TIMEOUT_MS must be an integer from 1 to 2147483647 (got "3000000000")'],
    [{ CLIENT_IDLE_TIMEOUT_MS: '50' }, 'CLIENT_IDLE_TIMEOUT_MS must be an integer from 100 to 2147483647 (got "50")'],
    [{ DEFAULT_ATTENUATION_LIMIT_DB: 'Infinity' }, 'DEFAULT_ATTENUATION_LIMIT_DB must be a number from 0 to 100 (got "Infinity")'],
    [{ JOB_RETENTION_HOURS: '0' }, 'JOB_RETENTION_HOURS must be a number greater than 0 (got "0")'],
    [{ LOG_FORMAT: 'xml' }, 'LOG_FORMAT must be one of json, pretty (got "xml")'],
    [{ LOG_LEVEL: 'loud' }, 'LOG_LEVEL must be one of fatal, error, warn, info, debug, trace, silent (got "loud")'],
    [{ MIN_SAMPLE_RATE: '48000', MAX_SAMPLE_RATE: '44100' }, 'MIN_SAMPLE_RATE must not exceed MAX_SAMPLE_RATE (44100) (got "48000")'],
    [{ MODEL_SERVICE_URL: 'http://a:8081,http://a:8081' }, 'MODEL_SERVICE_URL must be an http:// or https:// URL, or a comma-separated list of distinct ones (got "http://a:8081,http://a:8081")'],
    [{ NSM_URL: 'localhost:8080' }, 'NSM_URL must start with http:// or https:// (got "localhost:8080")'],
    [{ WORKERS: 'many', PORT: 'x', LOG_REQUESTS: 'ja' }, 'PORT must be an integer from 0 to 65535 (got "x"); also invalid: WORKERS, LOG_REQUESTS'],
  ])('%j', (env, message) => {
    expect(refusal(env)).toBe(message);
  });

  test('a password in a URL is never repeated; TRUST_PROXY names what it accepts', () => {
    expect(refusal({ DATABASE_URL: 'mysql://app:s3cret@db/x' })).toBe('DATABASE_URL must start with postgres:// or postgresql:// (got "mysql://app:***@db/x")');
    expect(refusal({ REDIS_URL: 'not a url with s3cret' })).toBe('REDIS_URL must start with redis:// or rediss://');
    expect(refusal({ TRUST_PROXY: 'everyone' })).toMatch(/^TRUST_PROXY must be true, false, a hop count from 0 to 32, or a comma-separated list of proxy IPs\/CIDRs .*\(got "everyone"\)$/);
  });
});

test('defaults are unchanged; empty means unset; integers may carry spaces; REDIS_KEY_PREFIX= keeps an empty prefix', () => {
  const c = loadConfig({ NODE_ENV: 'test' });
  expect(c).toMatchObject({
    port: 8080,
    host: '0.0.0.0',
    dataDir: path.join(PROJECT_ROOT, 'data'),
    workers: defaultWorkers(),
    liveWorkers: Math.min(2, defaultWorkers()),
    modelsDir: path.join(PROJECT_ROOT, 'models'),
    modelServiceUrl: null,
    modelServicePort: 8081,
    upstreamTimeoutMs: 600_000,
    breakerThreshold: 5,
    breakerCooldownMs: 30_000,
    adminSecret: null,
    defaultAttenuationLimitDb: 0,
    trustProxy: 0,
    modelServiceHost: '127.0.0.1',
    clientIdleTimeoutMs: 30_000,
    clientMinBytesPerSecond: 1024,
    upstreamIdleTimeoutMs: 30_000,
    upstreamConnectTimeoutMs: 5_000,
    upstreamHealthIntervalMs: 5_000,
    modelQueuePerWorker: 4,
    shutdownGraceMs: 60_000,
    tmpDir: path.join(PROJECT_ROOT, 'data', 'tmp'),
    logRequests: false,
    databaseUrl: null,
    databasePoolSize: 10,
    redisUrl: null,
    redisKeyPrefix: 'nsg:',
    requestLogRetentionDays: 90,
    unauthenticatedRequestsPerMinute: 60,
    creditReservationTtlMs: 120_000,
    maxAudioSeconds: 14_400,
    minSampleRate: 8000,
    maxSampleRate: 384_000,
    maxChannels: 16,
    logFormat: 'json',
    logLevel: 'info',
    metricsToken: null,
  });
  expect(c.jobs).toMatchObject({
    dir: path.join(PROJECT_ROOT, 'data', 'jobs'),
    maxUploadBytes: 2048 * 1024 * 1024,
    retentionMs: 24 * 3600_000,
    allowPrivateUrls: false,
    concurrency: Math.max(1, Math.floor(defaultWorkers() / 2)),
    runner: true,
    leaseMs: 30_000,
    retryBaseMs: 10_000,
    maxActivePerWorkspace: 20,
    minFreeDiskBytes: 1024 * 1024 * 1024,
    clientUrl: 'http://localhost:8080',
    clientToken: null,
  });
  const given = loadConfig({ WORKERS: ' 3 ', PORT: '', LOG_REQUESTS: 'true', JOB_RETENTION_HOURS: '0.5', REDIS_KEY_PREFIX: '', LOG_LEVEL: 'WARN', NSM_URL: 'http://h:1/', JOBS_RETRY_SECONDS: '0.5' });
  expect([given.workers, given.port, given.logRequests, given.jobs.retentionMs, given.redisKeyPrefix, given.logLevel, given.jobs.concurrency, given.jobs.clientUrl, given.jobs.retryBaseMs])
    .toEqual([3, 8080, true, 1_800_000, '', 'warn', 1, 'http://h:1', 500]);
});

describe('every entry point stops on a bad variable with the one line and exit status 1', () => {
  const LINE = 'config: WORKERS must be an integer from 1 to 256 (got "1.5")\n';
  const dist = (p: string) => path.join(PROJECT_ROOT, 'dist', p);
  test.each([
    ['npm start (server.js)', [dist('src/server.js')]],
    ['npm run model-service', [dist('src/model-service-main.js')]],
    ['nsm denoise', [path.join(PROJECT_ROOT, 'bin/nsm.js'), 'denoise', 'in.wav']],
    ['nsm jobs', [path.join(PROJECT_ROOT, 'bin/nsm.js'), 'jobs', 'list']],
    ['keys', [dist('src/cli/keys.js'), 'list']],
    ['db', [dist('src/cli/db.js'), 'migrate']],
  ])('%s', (_name, args) => {
    const r = spawnSync(process.execPath, args, {
      env: { ...process.env, WORKERS: '1.5', DATA_DIR: path.join(os.tmpdir(), 'ns-config-never-created'), NSM_TOKEN: 't' },
      encoding: 'utf8',
      timeout: 30_000,
    });
    expect({ status: r.status, stderr: r.stderr, stdout: r.stdout }).toEqual({ status: 1, stderr: LINE, stdout: '' });
  });
});
