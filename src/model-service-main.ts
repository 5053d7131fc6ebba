// `npm run model-service`: the model service alone on MODEL_SERVICE_HOST:MODEL_SERVICE_PORT (127.0.0.1:8081); the
// gateway reaches it via MODEL_SERVICE_URL. It refuses to start without MODEL_SERVICE_TOKEN: every request must carry
// `Authorization: Bearer <MODEL_SERVICE_TOKEN>`, so nobody calls it around the gateway (no token, no credits).
// It listens at once and answers 503 {"detail":"starting"} until the inference engine is ready.
import type express from 'express';
import { closeServer, waitForIdle } from './app';
import { loadConfig } from './config';
import { createInferenceEngine } from './inference/engine';
import type { InferenceEngine } from './inference/types';
import { createModelServiceApp, type ModelServiceApp } from './model-service/app';
import { createModelServiceServer } from './model-service/guard';
import { activeRequestCount, requestScopesSettled, shutdownActiveScopes } from './model-service/uploads';

/** Shortest MODEL_SERVICE_TOKEN accepted (a guessable secret would reopen the service). */
export const MIN_TOKEN_LENGTH = 16;
const RETRY_AFTER_S = 5;

const log = (line: string): void => {
  process.stdout.write(line + '\n');
};

async function until(check: () => boolean, maxMs: number): Promise<void> {
  const end = Date.now() + maxMs;
  while (!check() && Date.now() < end) await new Promise((r) => setTimeout(r, 50));
}

async function main(): Promise<void> {
  const config = loadConfig();
  const token = config.modelServiceToken;
  if (!token || token.length < MIN_TOKEN_LENGTH) {
    process.stderr.write(
      `model service: MODEL_SERVICE_TOKEN must be set (at least ${MIN_TOKEN_LENGTH} characters); the gateway sends the same value.\n` +
        `  e.g. export MODEL_SERVICE_TOKEN=$(node -e "console.log(require('crypto').randomBytes(32).toString('base64url'))")\n`,
    );
    process.exit(2);
  }
  let app: ModelServiceApp | null = null;
  let engine: InferenceEngine | null = null;

  const server = createModelServiceServer((req, res) => {
    if (app) {
      (app as express.Express)(req, res);
      return;
    }
    const body = JSON.stringify({ detail: 'starting' });
    res.writeHead(503, {
      'Content-Type': 'application/json; charset=utf-8',
      'Content-Length': Buffer.byteLength(body),
      'Retry-After': '2',
      ...(req.headers['content-length'] || req.headers['transfer-encoding'] ? { Connection: 'close' } : {}),
    });
    res.end(body);
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(config.modelServicePort, config.modelServiceHost, () => resolve());
  });
  log(`Model service listening on http://${config.modelServiceHost}:${config.modelServicePort} (starting the inference engine...)`);

  let stopping = false;
  const shutdown = (signal: string): void => {
    if (stopping) process.exit(1);
    stopping = true;
    log(`${signal}: finishing in-flight requests (up to ${config.shutdownGraceMs} ms)...`);
    app?.startDraining();
    const closed = closeServer(server, config.shutdownGraceMs + 10_000);
    (async () => {
      await until(() => activeRequestCount() === 0, config.shutdownGraceMs);
      // What could not finish within the grace gets 503 + Retry-After instead of a cut connection.
      const cut = shutdownActiveScopes(RETRY_AFTER_S);
      if (cut > 0) log(`grace over: ${cut} request(s) answered 503 with Retry-After: ${RETRY_AFTER_S}`);
      await requestScopesSettled(10_000);
      server.closeAllConnections();
      await closed;
      if (!engine) return;
      await waitForIdle(engine, 10_000);
      await engine.close();
    })().then(
      () => process.exit(0),
      () => process.exit(1),
    );
  };
  process.on('SIGTERM', () => shutdown('SIGTERM'));
  process.on('SIGINT', () => shutdown('SIGINT'));

  const ready: InferenceEngine = await createInferenceEngine(config);
  engine = ready;
  app = createModelServiceApp({ config, engine: ready, log, token });
  if (stopping) app.startDraining();
  log(`Model service ready (${ready.state().size} workers, ${app.admission.capacity} request slots)`);
}

main().catch((err: unknown) => {
  process.stderr.write(`model service failed to start: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
  process.exit(1);
});
