// Wires the whole service: store, inference engine, model service (in-process on loopback, or MODEL_SERVICE_URL),
// the forwarder between them, the probes (/healthz, /readyz), /metrics, the console, /openapi.json and the gateway.
import crypto from 'node:crypto';
import fs from 'node:fs';
import type http from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import express from 'express';
import { PROJECT_ROOT, type Config } from './config';
import { createConsoleRouter } from './console';
import { assignRequestId, createGateway, createGatewayErrorHandler, gatewayNotFoundHandler, ROUTES, sendGatewayError } from './gateway';
import type { CallObserver } from './gateway/types';
import { createInferenceEngine } from './inference/engine';
import type { InferenceEngine } from './inference/types';
import { closeEveryConnection } from './http/upgrades';
import { loggerFromConfig, loggerToCallback, type Logger } from './logging';
import { requestLineObserver } from './gateway/observers/request-line';
import { createGatewayMetrics } from './gateway/observers/metrics';
import { createModelServiceMetrics, type ModelServiceMetrics } from './model-service/metrics';
import { createRegistry, metricsHandler, type Registry } from './metrics';
import { createModelServiceApp, type ModelServiceApp } from './model-service/app';
import { createModelServiceServer } from './model-service/guard';
import { httpReady, probeHandlers, type ReadinessCheck } from './probes';
import { requestScopesSettled, shutdownActiveScopes } from './model-service/request-scope';
import { openSharedState, type SharedState } from './shared-state';
import { assertWritableDir } from './startup/data-dir';
import { openStore } from './store';
import { startStoreMaintenance } from './store/maintenance';
import type { GatewayStore } from './store/types';
import { createModelServiceForwarder, type ModelServiceForwarder } from './upstream/forwarder';
import { ModelServiceReplicas } from './upstream/replicas';
import { configureJobRoutes, createJobs, type JobStore, type Jobs } from './jobs';
import { createStreaming, type Streaming } from './streaming';
import type { FileProcess } from './file-process';

export interface AppOptions {
  /** Use this store instead of opening config.dataDir/gateway.db (it is not closed by close()). */
  store?: GatewayStore;
  /** Use this engine instead of creating one (it is not closed by close()). */
  engine?: InferenceEngine;
  /** Use this job queue instead of opening the configured one (it is not closed by close()). */
  jobStore?: JobStore;
  /** Use these rate-limit/session engines instead of opening the configured ones (not closed by close()). */
  sharedState?: SharedState;
  /** Where log lines go; default: a pino logger from the config (LOG_FORMAT, LOG_LEVEL) on stdout. */
  logger?: Logger;
  /** Each JSON log line is handed to this callback instead of a logger (tests collect lines this way); `logger` wins. */
  log?: (line: string) => void;
  /** Add prom-client's process metrics (CPU, memory, event loop, GC) to /metrics; npm start turns them on. */
  processMetrics?: boolean;
  /**
   * File work runs in this child process (src/file-process, FILE_WORK_PROCESS; npm start on a single box), reached
   * like a remote model service; live streams stay here on an engine without file workers. close() stops it.
   */
  fileProcess?: FileProcess;
}

export interface AppHandle {
  app: express.Express;
  store: GatewayStore;
  /** Rate limits, console sessions and sign-in limits: memory, or Redis when REDIS_URL is set. */
  sharedState: SharedState;
  /** The in-process engine (live streams only with a file-work process); null when the model service is remote. */
  engine: InferenceEngine | null;
  /** Where the gateway forwards to. */
  modelServiceUrl: string;
  forwarder: ModelServiceForwarder;
  /** Asynchronous jobs: queue, runner, webhooks (src/jobs). */
  jobs: Jobs;
  /** Live streams over WebSocket (src/streaming); attachServer() routes the server's upgrades to them. */
  streaming: Streaming;
  /** Sends `server`'s WebSocket upgrade requests through the gateway (GET /v1/noise-suppressor/stream). */
  attachServer(server: http.Server): void;
  logger: Logger;
  /** The Prometheus registry behind GET /metrics. */
  registry: Registry;
  /** From now on GET /readyz answers 503 (shutdown began; in-flight calls still finish). */
  beginDrain(): void;
  /**
   * Shutdown, step 1: /readyz fails (beginDrain) and new requests get 503 upstream_unavailable + Retry-After;
   * in-flight ones continue.
   */
  beginShutdown(): void;
  /** Calls in flight through the gateway. */
  inFlight(): number;
  /**
   * Shutdown, step 2 (the grace is over): every call still waiting for its answer gets 503 + Retry-After and is
   * refunded; answers already streaming are cut. Returns how many calls were affected.
   */
  abortInFlight(retryAfterS: number): number;
  /**
   * Closes what createApp opened, newest first: the job runner and queue, the forwarder, the in-process model
   * service, the engine, store upkeep, shared state, the store (those passed in AppOptions stay open).
   */
  close(): Promise<void>;
}

export const OPENAPI_PATH = path.join(PROJECT_ROOT, 'openapi.json');

/** Seconds a client is told to wait when the service is restarting. */
export const RESTART_RETRY_AFTER_S = 5;

/**
 * Starts a model service on 127.0.0.1:<ephemeral>; loopback only, the gateway is its sole client, and every call
 * must carry `token` (other local processes cannot use it without paying).
 */
export async function startModelServiceServer(
  config: Config,
  engine: InferenceEngine,
  token: string,
  log?: (line: string) => void,
  metrics?: ModelServiceMetrics,
): Promise<{ server: http.Server; url: string; app: ModelServiceApp }> {
  const app = createModelServiceApp({ config, engine, log, metrics, token });
  // What a killed process left in TMP_DIR is gone before this one serves (and before a quick stop could exit first).
  await app.swept;
  const server = createModelServiceServer(app);
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve());
  });
  const { port } = server.address() as AddressInfo;
  return { server, url: `http://127.0.0.1:${port}`, app };
}

export function closeServer(server: http.Server, graceMs = 10_000): Promise<void> {
  return new Promise<void>((resolve) => {
    const force = setTimeout(() => closeEveryConnection(server), graceMs);
    force.unref();
    server.close(() => {
      clearTimeout(force);
      resolve();
    });
    server.closeIdleConnections();
  });
}

/**
 * Waits until no engine job is running or queued: a stream aborted by a client may still have one chunk in a
 * worker, and terminating a worker in the middle of an ONNX Runtime call can abort the whole process.
 */
export async function waitForIdle(engine: InferenceEngine, maxMs: number): Promise<void> {
  await until(() => {
    const s = engine.state();
    return s.busy === 0 && s.queued === 0;
  }, maxMs, 20);
}

/** Polls `check` every `stepMs` until it holds or `maxMs` have passed (shutdown waits). */
export async function until(check: () => boolean, maxMs: number, stepMs = 50): Promise<void> {
  const end = Date.now() + maxMs;
  while (!check() && Date.now() < end) await new Promise((r) => setTimeout(r, stepMs));
}

/**
 * What createApp opened, as one stack: `defer` each close as its part opens; `closeAll` runs them newest first (as
 * Fastify runs onClose hooks), every one even when an earlier one throws, then rethrows the first error.
 */
export class Closer {
  private readonly steps: Array<() => unknown> = [];

  defer(close: () => unknown): void {
    this.steps.push(close);
  }

  /** Runs one opening step; when it throws, what was opened before it is closed and its error rethrown. */
  async open<T>(step: () => Promise<T>): Promise<T> {
    try {
      return await step();
    } catch (err) {
      await this.closeAll().catch(() => undefined);
      throw err;
    }
  }

  async closeAll(): Promise<void> {
    const errors: unknown[] = [];
    for (let step = this.steps.pop(); step; step = this.steps.pop()) {
      try {
        await step();
      } catch (err) {
        errors.push(err);
      }
    }
    if (errors.length > 0) throw errors[0];
  }
}

/**
 * Unwritable folders stop the start with one clear sentence (not a SQLite error on the first call). npm start checks
 * them before it starts the file-work process, whose own check would otherwise speak first.
 */
export function assertDataDirs(config: Config, ownStore = true): void {
  if (ownStore) assertWritableDir(config.dataDir, 'DATA_DIR', ['gateway.db', 'gateway.db-wal', 'gateway.db-shm']);
  if (!config.modelServiceUrl) assertWritableDir(config.tmpDir, 'TMP_DIR');
}

export async function createApp(config: Config, opts: AppOptions = {}): Promise<AppHandle> {
  const logger = opts.logger ?? (opts.log ? loggerToCallback(opts.log, 'gateway', config.logLevel) : loggerFromConfig(config, 'gateway'));
  const log = (line: string): void => logger.error(line);
  const registry = createRegistry({ service: 'gateway', processMetrics: opts.processMetrics });
  assertDataDirs(config, !opts.store);
  // Everything opened below is closed through this one stack, newest first (close(), or a later step failing).
  const closer = new Closer();
  const store = opts.store ?? (await openStore(config));
  if (!opts.store) closer.defer(() => store.close());
  const sharedState = opts.sharedState ?? (await closer.open(() => openSharedState(config, store, log)));
  if (!opts.sharedState) closer.defer(() => sharedState.close());
  // Request-log retention and the reclaiming of credit holds left by a gateway that died mid-call.
  const maintenance = startStoreMaintenance(store, config, { log });
  closer.defer(() => maintenance.stop());
  // The model service: remote (MODEL_SERVICE_URL), npm start's file-work process (live streams then on a live-only
  // engine here), or an engine and its model service in this process.
  const fileProcess = config.modelServiceUrl ? null : (opts.fileProcess ?? null);
  if (opts.fileProcess) closer.defer(() => opts.fileProcess!.close());
  const model = await closer.open(async () => {
    if (fileProcess) {
      const liveEngine: InferenceEngine = opts.engine ?? (await createInferenceEngine(config, { liveOnly: true }));
      if (!opts.engine) closer.defer(() => liveEngine.close());
      return { url: fileProcess.url, token: fileProcess.token, engine: liveEngine, app: null };
    }
    if (config.modelServiceUrl) {
      if (!config.modelServiceToken) {
        throw new Error('MODEL_SERVICE_URL is set but MODEL_SERVICE_TOKEN is not: set it to the secret the model service(s) were started with');
      }
      return { url: config.modelServiceUrl, token: config.modelServiceToken, engine: null, app: null };
    }
    const localEngine: InferenceEngine = opts.engine ?? (await createInferenceEngine(config));
    if (!opts.engine) {
      closer.defer(async () => {
        await waitForIdle(localEngine, 10_000);
        await localEngine.close();
      });
    }
    // In-process, the model service's metrics (audio seconds, RTF, engine state) share the gateway's /metrics.
    const msMetrics = createModelServiceMetrics(registry, { engine: () => localEngine.state() });
    // A fresh secret per start: only this process can call its in-process model service.
    const token = crypto.randomBytes(32).toString('base64url');
    const started = await startModelServiceServer(config, localEngine, token, log, msMetrics);
    closer.defer(async () => {
      await closeServer(started.server);
      // Responses may have closed a moment before their temp directories are removed.
      await requestScopesSettled(10_000);
    });
    return { url: started.url, token, engine: localEngine, app: started.app };
  });
  const { url: modelServiceUrl, token: modelServiceToken, engine, app: modelApp } = model;
  // One set of replicas for calls and jobs alike: a replica that is down or whose breaker is open is skipped by both.
  const replicas = new ModelServiceReplicas({ config, baseUrl: modelServiceUrl, token: modelServiceToken });
  closer.defer(() => replicas.close());
  const forwarder = createModelServiceForwarder({ config, replicas });
  closer.defer(() => forwarder.close());
  const jobs = await closer.open(() =>
    createJobs({
      config,
      gateway: store,
      modelServices: replicas,
      store: opts.jobStore,
      logger,
      registry,
    }),
  );
  // First at close: running jobs go back to the queue while the model service can still be reached cleanly.
  closer.defer(() => jobs.close());
  const gatewayMetrics = createGatewayMetrics(registry, { upstreams: () => forwarder.upstreams() });
  const observers: CallObserver[] = [gatewayMetrics.observe];
  if (config.logRequests) observers.push(requestLineObserver(logger));

  let draining = false;
  let shuttingDown = false;
  const localEngine = engine;
  const checks: ReadinessCheck[] = [
    // A read through the store contract: answers only when the database does.
    { name: 'store', check: async () => void (await store.getSetting('probe.readyz')) },
    // Rate limits and console sessions (Redis with REDIS_URL; memory always answers).
    { name: 'shared_state', check: () => sharedState.ready() },
    localEngine && !fileProcess
      ? {
          name: 'engine',
          check: async () => {
            if (localEngine.state().size < 1) throw new Error('no inference workers');
          },
        }
      : {
          name: 'model_service',
          // Ready when at least one upstream whose breaker is not open answers its /readyz.
          check: async () => {
            const usable = forwarder.upstreams().filter((u) => u.state !== 'open');
            if (usable.length === 0) throw new Error('every model-service circuit breaker is open');
            await Promise.any(usable.map((u) => httpReady(u.upstream))).catch((err: AggregateError) => {
              throw new Error(err.errors.map((e: Error) => e.message).join('; '));
            });
          },
        },
  ];
  const probes = probeHandlers({ checks, draining: () => draining });

  const app = express();
  app.disable('x-powered-by');
  // No automatic weak ETags on JSON answers (errors, job objects): they change on every call and are not documented.
  app.set('etag', false);

  // Every response carries an X-Request-Id: probes, /metrics, /openapi.json and the console as well as /v1.
  app.use((req, res, next) => {
    assignRequestId(req, res);
    next();
  });
  // Once shutdown began, requests that still arrive on open connections get 503 + Retry-After (probes excepted).
  app.use((req, res, next) => {
    if (!shuttingDown || req.path === '/healthz' || req.path === '/readyz') return next();
    assignRequestId(req, res);
    res.setHeader('Retry-After', String(RESTART_RETRY_AFTER_S));
    res.setHeader('Connection', 'close');
    sendGatewayError(res, 'upstream_unavailable', 'The service is restarting; retry after the Retry-After delay.', 503);
  });
  // Bodies outside /v1 (console JSON) are small: they must arrive within one client idle window. /v1 uploads have
  // the forwarder's progress clock instead (the public server has no whole-request timeout).
  app.use((req, res, next) => {
    if (req.complete || req.path.startsWith('/v1/')) return next();
    const timer = setTimeout(() => {
      if (req.complete) return;
      if (!res.headersSent) {
        res.setHeader('Connection', 'close');
        sendGatewayError(res, 'request_timeout', 'The request body did not arrive in time.');
      } else {
        req.socket.destroy();
      }
    }, config.clientIdleTimeoutMs);
    res.once('close', () => clearTimeout(timer));
    next();
  });

  // Probes and metrics: outside /v1, no API token (METRICS_TOKEN guards /metrics when set).
  app.get('/healthz', (req, res) => probes.healthz(req, res));
  app.get('/readyz', (req, res) => probes.readyz(req, res));
  // The file-work process's metrics (audio seconds, RTF, its engine and process) join this /metrics.
  const serveMetrics = metricsHandler(registry, config.metricsToken, fileProcess ? () => fileProcess.metrics() : undefined);
  app.get('/metrics', (req, res) => serveMetrics(req, res));

  app.get('/openapi.json', (_req, res) => {
    // Read per request: small, and a redeployed file needs no restart.
    fs.readFile(OPENAPI_PATH, (err, data) => {
      if (err) {
        sendGatewayError(res, 'endpoint_not_found', 'openapi.json is missing');
        return;
      }
      res.setHeader('Content-Type', 'application/json; charset=utf-8');
      res.setHeader('Cache-Control', 'no-cache');
      res.send(data);
    });
  });
  // Streams run on the in-process engine, else on one of the replicas; /readyz draining refuses new ones.
  const streaming = createStreaming({
    config,
    store,
    engine,
    replicas: engine ? null : replicas,
    tickets: sharedState.streamTickets,
    slots: sharedState.streamSlots,
    registry,
    draining: () => draining,
    logger,
  });
  closer.defer(() => streaming.close());
  const consoleClosed = new AbortController();
  closer.defer(() => consoleClosed.abort());
  app.use('/console', createConsoleRouter({ config, store, state: sharedState.console, apiRouters: [jobs.consoleRouter], signal: consoleClosed.signal }));
  app.use(
    '/',
    createGateway({
      config,
      store,
      forward: forwarder,
      targets: { jobs: jobs.handler, stream: streaming.handler, 'stream-tickets': streaming.tickets },
      tickets: { redeem: (ticket) => streaming.redeemTicket(ticket) },
      routes: configureJobRoutes(ROUTES, config),
      rateLimiter: sharedState.rateLimiter,
      logger,
      observers,
    }),
  );
  app.get('/', (_req, res) => res.redirect(302, '/console/'));
  app.use(gatewayNotFoundHandler);
  app.use(createGatewayErrorHandler(logger));

  let closed = false;
  return {
    app,
    store,
    sharedState,
    engine,
    modelServiceUrl,
    forwarder,
    jobs,
    streaming,
    attachServer: (server) => streaming.attach(server, app),
    logger,
    registry,
    beginDrain() {
      draining = true;
    },
    beginShutdown() {
      draining = true;
      shuttingDown = true;
      modelApp?.startDraining();
    },
    inFlight: () => forwarder.activeCalls(),
    abortInFlight(retryAfterS: number): number {
      const n = forwarder.abortAll(retryAfterS);
      // The in-process model service's own jobs stop with their cancelled requests; this catches any left.
      if (modelApp) shutdownActiveScopes(retryAfterS);
      return n;
    },
    async close() {
      if (closed) return;
      closed = true;
      await closer.closeAll();
    },
  };
}
