// `npm start`: the public server (gateway + console) with the model service in-process or at MODEL_SERVICE_URL.
// Logs are pino JSON lines on stdout (LOG_FORMAT=pretty for humans): start-up, one line per API call, shutdown.
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { createApp, closeServer, type AppHandle } from './app';
import { loadConfig } from './config';
import { ensureAdminSecret } from './console';
import { loggerFromConfig, type Logger } from './logging';
import { StartupError } from './startup/data-dir';
import { describeStore } from './store';

/** How long in-flight requests (a denoise can take a while) get to finish after SIGTERM/SIGINT. */
export const SHUTDOWN_GRACE_MS = 60_000;
/** Generous whole-request limit: a 200 MB batch upload over a slow link must still get through. */
const REQUEST_TIMEOUT_MS = 30 * 60 * 1000;

async function main(logger: Logger): Promise<void> {
  const config = loadConfig();
  const started = Date.now();
  const handle: AppHandle = await createApp(config, { logger, processMetrics: true });
  // The generated console secret is shown once: at "warn" so it survives LOG_LEVEL=warn.
  await ensureAdminSecret(config, handle.store, (line) => logger.warn(line));

  const server = http.createServer(handle.app);
  server.requestTimeout = REQUEST_TIMEOUT_MS;
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
      model_service: config.modelServiceUrl ? handle.modelServiceUrl : `in-process at ${handle.modelServiceUrl}`,
      store: describeStore(config),
      shared_state: handle.sharedState.description,
      workers: handle.engine ? handle.engine.state().size : null,
      data_dir: config.dataDir,
      startup_ms: Date.now() - started,
    },
    `Noise suppression gateway listening on ${base}`,
  );

  let stopping = false;
  const shutdown = (signal: string): void => {
    if (stopping) {
      logger.warn({ event: 'shutdown', signal }, `${signal} again: exiting now`);
      process.exit(1);
    }
    stopping = true;
    const began = Date.now();
    // /readyz fails from now on so balancers stop sending; in-flight calls get SHUTDOWN_GRACE_MS to finish.
    handle.beginDrain();
    logger.info(
      { event: 'shutdown', signal, grace_ms: SHUTDOWN_GRACE_MS },
      `${signal}: no longer accepting connections, finishing in-flight requests`,
    );
    // Stop accepting, let in-flight requests finish, then close the model service, the worker pool and the store.
    closeServer(server, SHUTDOWN_GRACE_MS)
      .then(() => handle.close())
      .then(
        () => {
          logger.info({ event: 'stopped', signal, shutdown_ms: Date.now() - began }, 'shut down cleanly');
          process.exit(0);
        },
        (err: unknown) => {
          logger.error({ event: 'stopped', signal, err }, 'error during shutdown');
          process.exit(1);
        },
      );
  };
  process.on('SIGTERM', () => shutdown('SIGTERM'));
  process.on('SIGINT', () => shutdown('SIGINT'));
}

if (require.main === module) {
  let logger: Logger;
  try {
    logger = loggerFromConfig(loadConfig(), 'gateway');
  } catch (err) {
    // A bad LOG_FORMAT/LOG_LEVEL (or any other variable): no logger yet, say it plainly.
    process.stderr.write(`failed to start: ${err instanceof Error ? err.message : String(err)}\n`);
    process.exit(1);
  }
  main(logger).catch((err: unknown) => {
    if (err instanceof StartupError) logger.fatal({ event: 'failed_to_start' }, err.message);
    else logger.fatal({ event: 'failed_to_start', err }, `failed to start: ${err instanceof Error ? err.message : String(err)}`);
    process.exit(1);
  });
}
