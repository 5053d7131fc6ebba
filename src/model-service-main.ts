// `npm run model-service`: the model service alone on MODEL_SERVICE_PORT (the gateway reaches it via MODEL_SERVICE_URL).
// It listens at once and answers 503 {"detail":"starting",...} until the inference engine is ready. Besides the
// model-service endpoints it serves, without a token: GET /healthz, GET /readyz (200 once the engine is ready) and
// GET /metrics (audio seconds, RTF and engine state of this process; METRICS_TOKEN guards it when set).
import http from 'node:http';
import type express from 'express';
import { closeServer, waitForIdle } from './app';
import { loadConfig } from './config';
import { createInferenceEngine } from './inference/engine';
import type { InferenceEngine } from './inference/types';
import { loggerFromConfig, type Logger } from './logging';
import { createModelServiceMetrics, createRegistry, metricsHandler } from './metrics';
import { createModelServiceApp } from './model-service/app';
import { errorBody, requestIdOf } from './model-service/http-error';
import { requestScopesSettled } from './model-service/uploads';
import { probeHandlers } from './probes';
import { assertWritableDir, StartupError } from './startup/data-dir';

async function main(logger: Logger): Promise<void> {
  const config = loadConfig();
  assertWritableDir(config.tmpDir, 'TMP_DIR');
  let app: express.Express | null = null;
  let engine: InferenceEngine | null = null;
  let draining = false;
  const registry = createRegistry({ service: 'model-service', processMetrics: true });
  const metrics = createModelServiceMetrics(registry, { engine: () => engine?.state() ?? null });
  const serveMetrics = metricsHandler(registry, config.metricsToken);
  const probes = probeHandlers({
    checks: [
      {
        name: 'engine',
        check: async () => {
          if (!app || !engine) throw new Error('starting');
        },
      },
    ],
    draining: () => draining,
  });
  const ops: Record<string, (req: http.IncomingMessage, res: http.ServerResponse) => void> = {
    '/healthz': probes.healthz,
    '/readyz': probes.readyz,
    '/metrics': serveMetrics,
  };

  const server = http.createServer((req, res) => {
    const pathname = (req.url ?? '/').split('?')[0];
    const op = ops[pathname];
    if (op && (req.method === 'GET' || req.method === 'HEAD')) {
      op(req, res);
      return;
    }
    if (app) {
      app(req, res);
      return;
    }
    const body = JSON.stringify(errorBody(503, 'starting', requestIdOf(req as express.Request), 'unavailable'));
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
  const url = `http://${config.host}:${config.modelServicePort}`;
  logger.info({ event: 'listening', url }, `Model service listening on ${url} (starting the inference engine...)`);

  let stopping = false;
  const shutdown = (signal: string): void => {
    if (stopping) process.exit(1);
    stopping = true;
    draining = true;
    const began = Date.now();
    logger.info({ event: 'shutdown', signal }, `${signal}: finishing in-flight requests`);
    closeServer(server, 60_000)
      .then(async () => {
        await requestScopesSettled(10_000);
        if (!engine) return;
        await waitForIdle(engine, 10_000);
        await engine.close();
      })
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

  const started = Date.now();
  const ready: InferenceEngine = await createInferenceEngine(config);
  engine = ready;
  app = createModelServiceApp({ config, engine: ready, log: (line) => logger.error(line), metrics });
  logger.info(
    { event: 'started', workers: ready.state().size, startup_ms: Date.now() - started },
    `Model service ready (${ready.state().size} workers)`,
  );
}

if (require.main === module) {
  let logger: Logger;
  try {
    logger = loggerFromConfig(loadConfig(), 'model-service');
  } catch (err) {
    process.stderr.write(`model service failed to start: ${err instanceof Error ? err.message : String(err)}\n`);
    process.exit(1);
  }
  main(logger).catch((err: unknown) => {
    if (err instanceof StartupError) logger.fatal({ event: 'failed_to_start' }, err.message);
    else logger.fatal({ event: 'failed_to_start', err }, `model service failed to start: ${err instanceof Error ? err.message : String(err)}`);
    process.exit(1);
  });
}
