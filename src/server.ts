// `npm start`: the public server (gateway + console) with the model service in-process or at MODEL_SERVICE_URL.
import http from 'node:http';
import { createApp, closeServer } from './app';
import { loadConfig } from './config';
import { ensureAdminSecret } from './console';
import { describeStore } from './store';

const log = (line: string): void => {
  process.stdout.write(line + '\n');
};

/** How long in-flight requests (a denoise can take a while) get to finish after SIGTERM/SIGINT. */
const SHUTDOWN_GRACE_MS = 60_000;
/** Generous whole-request limit: a 200 MB batch upload over a slow link must still get through. */
const REQUEST_TIMEOUT_MS = 30 * 60 * 1000;

async function main(): Promise<void> {
  const config = loadConfig();
  const handle = await createApp(config, { log });
  await ensureAdminSecret(config, handle.store, log);

  const server = http.createServer(handle.app);
  server.requestTimeout = REQUEST_TIMEOUT_MS;
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(config.port, config.host, () => resolve());
  });
  const shownHost = config.host === '0.0.0.0' || config.host === '::' ? 'localhost' : config.host;
  log(`Noise suppression gateway listening on http://${shownHost}:${config.port} (bound to ${config.host})`);
  log(`  API:     http://${shownHost}:${config.port}/v1/noise-suppressor/{denoise,denoise/batch,models,sample,health}`);
  log(`  Console: http://${shownHost}:${config.port}/console/`);
  log(`  Model service: ${config.modelServiceUrl ? handle.modelServiceUrl : `in-process at ${handle.modelServiceUrl}`}`);
  log(`  Store: ${describeStore(config)}; rate limits and console sessions: ${handle.sharedState.description}`);

  let stopping = false;
  const shutdown = (signal: string): void => {
    if (stopping) {
      log(`${signal} again: exiting now`);
      process.exit(1);
    }
    stopping = true;
    log(`${signal}: no longer accepting connections, finishing in-flight requests...`);
    // Stop accepting, let in-flight requests finish, then close the model service, the worker pool and the store.
    closeServer(server, SHUTDOWN_GRACE_MS)
      .then(() => handle.close())
      .then(
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
