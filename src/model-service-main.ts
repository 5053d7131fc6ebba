// `npm run model-service`: the model service alone on MODEL_SERVICE_PORT (the gateway reaches it via MODEL_SERVICE_URL).
// It listens at once and answers 503 {"detail":"starting"} until the inference engine is ready.
import http from 'node:http';
import type express from 'express';
import { closeServer, waitForIdle } from './app';
import { loadConfig } from './config';
import { createInferenceEngine } from './inference/engine';
import type { InferenceEngine } from './inference/types';
import { createModelServiceApp } from './model-service/app';
import { requestScopesSettled } from './model-service/uploads';

const log = (line: string): void => {
  process.stdout.write(line + '\n');
};

async function main(): Promise<void> {
  const config = loadConfig();
  let app: express.Express | null = null;
  let engine: InferenceEngine | null = null;

  const server = http.createServer((req, res) => {
    if (app) {
      app(req, res);
      return;
    }
    const body = JSON.stringify({ detail: 'starting' });
    res.writeHead(503, {
      'Content-Type': 'application/json; charset=utf-8',
      'Content-Length': Buffer.byteLength(body),
      'Retry-After': '2',
    });
    res.end(body);
  });
  // Uploads and processing are bounded by the gateway's UPSTREAM_TIMEOUT_MS.
  server.requestTimeout = 0;
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(config.modelServicePort, config.host, () => resolve());
  });
  log(`Model service listening on http://${config.host}:${config.modelServicePort} (starting the inference engine...)`);

  let stopping = false;
  const shutdown = (signal: string): void => {
    if (stopping) process.exit(1);
    stopping = true;
    log(`${signal}: finishing in-flight requests...`);
    closeServer(server, 60_000)
      .then(async () => {
        await requestScopesSettled(10_000);
        if (!engine) return;
        await waitForIdle(engine, 10_000);
        await engine.close();
      })
      .then(
        () => process.exit(0),
        () => process.exit(1),
      );
  };
  process.on('SIGTERM', () => shutdown('SIGTERM'));
  process.on('SIGINT', () => shutdown('SIGINT'));

  const ready: InferenceEngine = await createInferenceEngine(config);
  engine = ready;
  app = createModelServiceApp({ config, engine: ready, log });
  log(`Model service ready (${ready.state().size} workers)`);
}

main().catch((err: unknown) => {
  process.stderr.write(`model service failed to start: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
  process.exit(1);
});
