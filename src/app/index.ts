// Wires the whole service, and nothing else: store, shared state, the model service where it is placed
// (placement.ts), the forwarder and replicas, jobs, live streams, probes, /metrics, the console and the gateway.
import type http from 'node:http';
import express from 'express';
import type { Config } from '../config';
import { createConsoleRouter } from '../console';
import { createGateway, createGatewayErrorHandler, gatewayNotFoundHandler, ROUTES } from '../gateway';
import type { CallObserver } from '../gateway/types';
import type { InferenceEngine } from '../inference/types';
import { loggerFromConfig, loggerToCallback, type Logger } from '../logging';
import { requestLineObserver } from '../gateway/observers/request-line';
import { createGatewayMetrics } from '../gateway/observers/metrics';
import { createRegistry, metricsHandler, type Registry } from '../metrics';
import { probeHandlers } from '../probes';
import { openSharedState, type SharedState } from '../shared-state';
import { assertWritableDir } from '../startup/data-dir';
import { openStore } from '../store';
import { startStoreMaintenance } from '../store/gateway/maintenance';
import type { GatewayStore } from '../store/gateway/types';
import { createModelServiceForwarder, type ModelServiceForwarder } from '../upstream/forwarder';
import { ModelServiceReplicas } from '../upstream/replicas';
import { configureJobRoutes, createJobs, type JobStore, type Jobs } from '../jobs';
import { createStreaming, type Streaming } from '../streaming';
import type { FileProcess } from '../file-process';
import { Closer } from './closer';
import { refuseWhenShuttingDown, requestIdOnEveryAnswer, serveOpenApi, smallBodyDeadline } from './middleware';
import { placeModelService } from './placement';
import { readinessChecks } from './readiness';

// The rest of this folder's surface that tests use, so their imports of src/app stay as they were.
export { Closer } from './closer';
export { OPENAPI_PATH } from './middleware';
export { startModelServiceServer } from './placement';
export { closeServer } from './shutdown';

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
  // engine here), or an engine and its model service in this process. A file-work process passed in is ours to stop.
  if (opts.fileProcess) closer.defer(() => opts.fileProcess!.close());
  const placement = await closer.open(() => placeModelService(config, { engine: opts.engine, fileProcess: opts.fileProcess, registry, log }));
  closer.defer(() => placement.close());
  const { url: modelServiceUrl, token: modelServiceToken, engine } = placement;
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
  const checks = readinessChecks(store, sharedState, placement, forwarder);
  const probes = probeHandlers({ checks, draining: () => draining });

  const app = express();
  app.disable('x-powered-by');
  // No automatic weak ETags on JSON answers (errors, job objects): they change on every call and are not documented.
  app.set('etag', false);

  app.use(requestIdOnEveryAnswer);
  app.use(refuseWhenShuttingDown(() => shuttingDown));
  app.use(smallBodyDeadline(config));

  // Probes and metrics: outside /v1, no API token (METRICS_TOKEN guards /metrics when set).
  app.get('/healthz', (req, res) => probes.healthz(req, res));
  app.get('/readyz', (req, res) => probes.readyz(req, res));
  // The file-work process's metrics (audio seconds, RTF, its engine and process) join this /metrics.
  const serveMetrics = metricsHandler(registry, config.metricsToken, placement.metrics);
  app.get('/metrics', (req, res) => serveMetrics(req, res));

  app.get('/openapi.json', serveOpenApi);
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
      placement.startDraining();
    },
    inFlight: () => forwarder.activeCalls(),
    abortInFlight(retryAfterS: number): number {
      const n = forwarder.abortAll(retryAfterS);
      placement.abortInFlight(retryAfterS);
      return n;
    },
    async close() {
      if (closed) return;
      closed = true;
      await closer.closeAll();
    },
  };
}
