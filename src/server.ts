// `npm start`: the public server (gateway + console, live streams) with the model service as its child process
// (FILE_WORK_PROCESS, src/file-process), in-process, or at MODEL_SERVICE_URL.
// Logs are pino JSON lines on stdout (LOG_FORMAT=pretty for humans): start-up, one line per API call, shutdown.
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { assertDataDirs, createApp, type AppHandle } from './app';
import { runShutdown, until } from './app/shutdown';
import { ConfigError, loadConfig } from './config';
import { answerClientErrors } from './http/client-errors';
import { lingerBeforeClose } from './http/lingering-close';
import { adminSecretFile, ensureAdminSecret } from './console';
import { loggerFromConfig, type Logger } from './logging';
import { StartupError } from './startup/data-dir';
import { tightenDataDirs, usePrivateUmask } from './startup/private-files';
import { startFileProcess } from './file-process';
import { describeStore } from './store';

/** After the shutdown grace: how long the 503 answers get to reach their clients before connections are closed. */
const FLUSH_MS = 5_000;

async function main(logger: Logger): Promise<void> {
  // Databases, uploads, job files and the file-work process's temp files: this user's only (0600 / 0700).
  usePrivateUmask();
  const config = loadConfig();
  const started = Date.now();
  // Single box: file work in a child process of its own (FILE_WORK_PROCESS), started first; createApp owns it after.
  assertDataDirs(config);
  // What an older version left group- or world-readable in DATA_DIR (and JOBS_DIR, TMP_DIR) is this user's only from now.
  tightenDataDirs({ dataDir: config.dataDir, tmpDir: config.tmpDir, jobsDir: config.jobs.dir });
  const fileProcess = config.fileWorkProcess && !config.modelServiceUrl ? await startFileProcess({ config, env: process.env, logger }) : undefined;
  let handle: AppHandle;
  try {
    handle = await createApp(config, { logger, processMetrics: true, fileProcess });
  } catch (err) {
    await fileProcess?.close();
    throw err;
  }
  // A generated console secret goes to a file in DATA_DIR; the log says where, at "warn" so it survives
  // LOG_LEVEL=warn. Someone watching an interactive terminal also sees it once on a plain line of its own.
  const secretFile = adminSecretFile(config);
  const generated = await ensureAdminSecret(config, handle.store, (line) => logger.warn({ event: 'admin_secret_generated', file: secretFile }, line));
  if (generated && process.stdout.isTTY) process.stdout.write(`\nConsole admin secret (shown once, also in ${secretFile}):\n\n  ${generated}\n\n`);

  const server = http.createServer(handle.app);
  handle.attachServer(server);
  // No whole-request clock: an upload may take as long as it needs while bytes keep coming. Stalled uploads are
  // cut by the forwarder (CLIENT_IDLE_TIMEOUT_MS / CLIENT_MIN_BYTES_PER_S → 408); headers still have 60 s.
  server.requestTimeout = 0;
  // Node's own refusals (malformed requests, oversized headers, header timeout) get the error envelope too.
  answerClientErrors(server, logger);
  // A refusal sent before an upload was read reaches the client still sending it (lingering-close.ts).
  lingerBeforeClose(server);
  // Signals are handled from before the server listens: whoever sees "listening on" can stop it cleanly at once.
  let stopping = false;
  const shutdown = (signal: string): void => {
    if (stopping) {
      logger.warn({ event: 'shutdown', signal }, `${signal} again: exiting now`);
      process.exit(1);
    }
    stopping = true;
    // /readyz fails from now on so balancers stop sending; requests still arriving on open connections get 503 +
    // Retry-After (stream upgrades too); in-flight calls and open live streams get SHUTDOWN_GRACE_MS to finish; what
    // cannot finish gets 503 + Retry-After, and streams still open get an error message and close 1012.
    runShutdown(signal, {
      server,
      logger,
      graceMs: config.shutdownGraceMs,
      finishing: 'no longer accepting connections, finishing in-flight requests and streams',
      stopAccepting: () => handle.beginShutdown(),
      inFlight: () => handle.inFlight(),
      streams: handle.streaming,
      cut: (retryAfterS) => handle.abortInFlight(retryAfterS),
      flush: () => until(() => handle.inFlight() === 0, FLUSH_MS),
      sockets: { lingerMs: FLUSH_MS },
      release: () => handle.close(),
    });
  };
  process.on('SIGTERM', () => shutdown('SIGTERM'));
  process.on('SIGINT', () => shutdown('SIGINT'));
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(config.port, config.host, () => resolve());
  });
  const shownHost = config.host === '0.0.0.0' || config.host === '::' ? 'localhost' : config.host;
  const port = (server.address() as AddressInfo).port; // PORT=0 picks a free one
  const base = `http://${shownHost}:${port}`;
  logger.info(
    {
      event: 'started',
      url: base,
      bound_to: `${config.host}:${port}`,
      api: `${base}/v1/noise-suppressor/{denoise,denoise/batch,models,sample,health,jobs}`,
      console: `${base}/console/`,
      probes: `${base}/healthz, ${base}/readyz`,
      metrics: `${base}/metrics${config.metricsToken ? ' (METRICS_TOKEN required)' : ''}`,
      model_service: config.modelServiceUrl
        ? handle.modelServiceUrl
        : fileProcess
          ? `file-work process (pid ${fileProcess.pid()}) at ${handle.modelServiceUrl}`
          : `in-process at ${handle.modelServiceUrl}`,
      store: describeStore(config),
      shared_state: handle.sharedState.description,
      workers: fileProcess ? fileProcess.facts().workers : handle.engine ? handle.engine.state().size : null,
      ...(fileProcess ? { file_process: { pid: fileProcess.pid(), ...fileProcess.facts() } } : {}),
      data_dir: config.dataDir,
      startup_ms: Date.now() - started,
    },
    `Noise suppression gateway listening on ${base}`,
  );

}

if (require.main === module) {
  let logger: Logger;
  try {
    logger = loggerFromConfig(loadConfig(), 'gateway');
  } catch (err) {
    // A bad variable: no logger yet, so one plain line naming it ("config: WORKERS must be ...").
    process.stderr.write(err instanceof ConfigError ? `config: ${err.message}\n` : `failed to start: ${err instanceof Error ? err.message : String(err)}\n`);
    process.exit(1);
  }
  main(logger).catch((err: unknown) => {
    if (err instanceof StartupError) logger.fatal({ event: 'failed_to_start' }, err.message);
    else logger.fatal({ event: 'failed_to_start', err }, `failed to start: ${err instanceof Error ? err.message : String(err)}`);
    process.exit(1);
  });
}
