// `npm run model-service`: the model service alone on MODEL_SERVICE_HOST:MODEL_SERVICE_PORT (127.0.0.1:8081); the
// gateway reaches it via MODEL_SERVICE_URL. It refuses to start without MODEL_SERVICE_TOKEN: every model-service
// request must carry `Authorization: Bearer <MODEL_SERVICE_TOKEN>`, so nobody calls it around the gateway.
// It listens at once and answers 503 {"detail":"starting",...} until the inference engine is ready. Besides the
// model-service endpoints it serves, without a token: GET /healthz, GET /readyz (200 once the engine is ready) and
// GET /metrics (audio seconds, RTF and engine state of this process; METRICS_TOKEN guards it when set).
import type http from 'node:http';
import type { AddressInfo } from 'node:net';
import type express from 'express';
import { runShutdown, waitForIdle } from './app/shutdown';
import { ConfigError, loadConfig } from './config';
import { createInferenceEngine } from './inference/runtime/engine';
import type { InferenceEngine } from './inference/types';
import { loggerFromConfig, type Logger } from './logging';
import { createModelServiceMetrics } from './model-service/metrics';
import { createRegistry, metricsHandler } from './metrics';
import { createModelServiceApp, type ModelServiceApp } from './model-service/app';
import { createModelServiceServer } from './model-service/guard';
import type { FromFileProcess, ToFileProcess } from './file-process/protocol';
import { errorBody, requestIdOf } from './model-service/http-error';
import { activeRequestCount, requestScopesSettled, shutdownActiveScopes } from './model-service/request-scope';
import { probeHandlers } from './probes';
import { assertWritableDir, StartupError } from './startup/data-dir';
import { tightenTree, usePrivateUmask } from './startup/private-files';

/** Shortest MODEL_SERVICE_TOKEN accepted (a guessable secret would reopen the service). */
export const MIN_TOKEN_LENGTH = 16;

async function main(logger: Logger): Promise<void> {
  usePrivateUmask(); // request folders and uploads: this user's only (0700 / 0600)
  const config = loadConfig();
  const token = config.modelServiceToken;
  if (!token || token.length < MIN_TOKEN_LENGTH) {
    throw new StartupError(
      `MODEL_SERVICE_TOKEN must be set (at least ${MIN_TOKEN_LENGTH} characters); the gateway sends the same value. ` +
        `For example: export MODEL_SERVICE_TOKEN=$(node -e "console.log(require('crypto').randomBytes(32).toString('base64url'))")`,
    );
  }
  assertWritableDir(config.tmpDir, 'TMP_DIR');
  tightenTree(config.tmpDir, false);
  let app: ModelServiceApp | null = null;
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

  const server = createModelServiceServer((req, res) => {
    const pathname = (req.url ?? '/').split('?')[0];
    const op = ops[pathname];
    if (op && (req.method === 'GET' || req.method === 'HEAD')) {
      op(req, res);
      return;
    }
    if (app) {
      (app as express.Express)(req, res);
      return;
    }
    const body = JSON.stringify(errorBody(503, 'starting', requestIdOf(req as express.Request), 'unavailable'));
    res.writeHead(503, {
      'Content-Type': 'application/json; charset=utf-8',
      'Content-Length': Buffer.byteLength(body),
      'Retry-After': '2',
      ...(req.headers['content-length'] || req.headers['transfer-encoding'] ? { Connection: 'close' } : {}),
    });
    res.end(body);
  });
  // Signals are handled from before the server listens: whoever sees "listening on" can stop it cleanly at once.
  let stopping = false;
  const shutdown = (signal: string): void => {
    if (stopping) process.exit(1);
    stopping = true;
    runShutdown(signal, {
      server,
      logger,
      graceMs: config.shutdownGraceMs,
      finishing: 'finishing in-flight requests',
      stopAccepting: () => {
        draining = true;
        app?.startDraining();
      },
      inFlight: activeRequestCount,
      cut: shutdownActiveScopes,
      flush: () => requestScopesSettled(10_000),
      // The gateway is the only client: once every request is answered its connections can go at once. Live streams
      // finish their 1012 close handshake; their sockets are dropped 10 s after the grace at the latest.
      sockets: { deadlineMs: config.shutdownGraceMs + 10_000 },
      release: async () => {
        if (!engine) return;
        await waitForIdle(engine, 10_000);
        await engine.close();
      },
    });
  };
  process.on('SIGTERM', () => shutdown('SIGTERM'));
  // Under `npm start` (an IPC parent) a terminal's Ctrl-C is the parent's to handle: it stops this process last.
  process.on('SIGINT', () => {
    if (!process.send) shutdown('SIGINT');
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(config.modelServicePort, config.modelServiceHost, () => resolve());
  });
  // MODEL_SERVICE_PORT=0 picks a free port: the URL names the one bound.
  const { port } = server.address() as AddressInfo;
  const url = `http://${config.modelServiceHost}:${port}`;
  // Started by `npm start` as its file-work process (src/file-process): the parent learns the URL and readiness over
  // the IPC channel, gets this process's metrics for its own /metrics, and its exit (even a SIGKILL) stops this one.
  // Its log then has one "listening on" line, the server's own (scripts wait for it).
  const parent = process.send ? (msg: FromFileProcess) => process.send?.(msg) : null;
  logger[parent ? 'debug' : 'info']({ event: 'listening', url }, `Model service listening on ${url} (starting the inference engine...)`);
  if (parent) {
    parent({ type: 'listening', url });
    process.on('disconnect', () => {
      if (!stopping) shutdown('parent gone');
    });
    process.on('message', (msg: ToFileProcess) => {
      if (msg?.type !== 'metrics') return;
      registry.getMetricsAsJSON().then(
        (metrics) => parent({ type: 'metrics', id: msg.id, metrics }),
        (err: unknown) => parent({ type: 'metrics', id: msg.id, error: err instanceof Error ? err.message : String(err) }),
      );
    });
  }


  const started = Date.now();
  const ready: InferenceEngine = await createInferenceEngine(config);
  engine = ready;
  const created = createModelServiceApp({ config, engine: ready, log: (line) => logger.error(line), metrics, token });
  // Request directories a killed process left are removed before this one serves: a stop right after "ready" must
  // not exit with the sweep half done.
  const swept = await created.swept;
  app = created;
  if (stopping) app.startDraining();
  const facts = { workers: ready.state().size, slots: app.admission.capacity, startup_ms: Date.now() - started, swept_dirs: swept };
  // Under a parent, the server's own "started" line carries these.
  logger[parent ? 'debug' : 'info'](
    { event: 'started', ...facts },
    `Model service ready (${facts.workers} workers, ${facts.slots} request slots${swept ? `; removed ${swept} request dir(s) of dead processes` : ''})`,
  );
  parent?.({ type: 'ready', ...facts });
}

if (require.main === module) {
  let logger: Logger;
  try {
    logger = loggerFromConfig(loadConfig(), 'model-service');
  } catch (err) {
    // A bad variable: no logger yet, so one plain line naming it ("config: WORKERS must be ...").
    process.stderr.write(err instanceof ConfigError ? `config: ${err.message}\n` : `model service failed to start: ${err instanceof Error ? err.message : String(err)}\n`);
    process.exit(1);
  }
  main(logger).catch((err: unknown) => {
    if (err instanceof StartupError) logger.fatal({ event: 'failed_to_start' }, err.message);
    else logger.fatal({ event: 'failed_to_start', err }, `model service failed to start: ${err instanceof Error ? err.message : String(err)}`);
    process.exit(1);
  });
}
