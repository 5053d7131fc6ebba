// `npm start`: the public server (gateway + console) with the model service in-process or at MODEL_SERVICE_URL.
import http from 'node:http';
import { createApp, RESTART_RETRY_AFTER_S } from './app';
import { loadConfig } from './config';
import { ensureAdminSecret } from './console';

const log = (line: string): void => {
  process.stdout.write(line + '\n');
};

/** After the grace: how long the 503 answers get to reach their clients before connections are closed. */
const FLUSH_MS = 5_000;

async function until(check: () => boolean, maxMs: number): Promise<void> {
  const end = Date.now() + maxMs;
  while (!check() && Date.now() < end) await new Promise((r) => setTimeout(r, 50));
}

async function main(): Promise<void> {
  const config = loadConfig();
  const handle = await createApp(config, { log });
  await ensureAdminSecret(config, handle.store, log);

  const server = http.createServer(handle.app);
  // No whole-request clock: an upload may take as long as it needs while bytes keep coming. Stalled uploads are
  // cut by the forwarder (CLIENT_IDLE_TIMEOUT_MS / CLIENT_MIN_BYTES_PER_S → 408); headers still have 60 s.
  server.requestTimeout = 0;
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(config.port, config.host, () => resolve());
  });
  const shownHost = config.host === '0.0.0.0' || config.host === '::' ? 'localhost' : config.host;
  log(`Noise suppression gateway listening on http://${shownHost}:${config.port} (bound to ${config.host})`);
  log(`  API:     http://${shownHost}:${config.port}/v1/noise-suppressor/{denoise,denoise/batch,models,sample,health}`);
  log(`  Console: http://${shownHost}:${config.port}/console/`);
  log(`  Model service: ${config.modelServiceUrl ? handle.modelServiceUrl : `in-process at ${handle.modelServiceUrl}`}`);

  let stopping = false;
  const shutdown = (signal: string): void => {
    if (stopping) {
      log(`${signal} again: exiting now`);
      process.exit(1);
    }
    stopping = true;
    log(`${signal}: no longer accepting connections, finishing in-flight requests (up to ${config.shutdownGraceMs} ms)...`);
    const closed = new Promise<void>((resolve) => server.close(() => resolve()));
    // New requests on open keep-alive connections get 503 + Retry-After; idle connections close now.
    handle.beginShutdown();
    server.closeIdleConnections();
    (async () => {
      await until(() => handle.inFlight() === 0, config.shutdownGraceMs);
      const cut = handle.abortInFlight(RESTART_RETRY_AFTER_S);
      if (cut > 0) log(`grace over: ${cut} request(s) answered 503 with Retry-After: ${RESTART_RETRY_AFTER_S}`);
      await until(() => handle.inFlight() === 0, FLUSH_MS);
      const forced = setTimeout(() => server.closeAllConnections(), FLUSH_MS);
      server.closeIdleConnections();
      await closed;
      clearTimeout(forced);
      await handle.close();
    })().then(
      () => {
        log('shut down cleanly');
        process.exit(0);
      },
      (err: unknown) => {
        log(`error during shutdown: ${String(err)}`);
        process.exit(1);
      },
    );
  };
  process.on('SIGTERM', () => shutdown('SIGTERM'));
  process.on('SIGINT', () => shutdown('SIGINT'));
}

main().catch((err: unknown) => {
  process.stderr.write(`failed to start: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
  process.exit(1);
});
