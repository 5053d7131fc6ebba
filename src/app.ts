// Wires the whole service: store, inference engine, model service (in-process on loopback, or MODEL_SERVICE_URL),
// the forwarder between them, the console, /openapi.json and the gateway.
import crypto from 'node:crypto';
import fs from 'node:fs';
import type http from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import express from 'express';
import { PROJECT_ROOT, type Config } from './config';
import { createConsoleRouter } from './console';
import { assignRequestId, createGateway, gatewayErrorHandler, gatewayNotFoundHandler, sendGatewayError } from './gateway';
import { createInferenceEngine } from './inference/engine';
import type { InferenceEngine } from './inference/types';
import { createModelServiceApp, type ModelServiceApp } from './model-service/app';
import { createModelServiceServer } from './model-service/guard';
import { requestScopesSettled, shutdownActiveScopes } from './model-service/uploads';
import { openStore } from './store';
import type { GatewayStore } from './store/types';
import { createModelServiceForwarder, type ModelServiceForwarder } from './upstream/forwarder';

export interface AppOptions {
  /** Use this store instead of opening config.dataDir/gateway.db (it is not closed by close()). */
  store?: GatewayStore;
  /** Use this engine instead of creating one (it is not closed by close()). */
  engine?: InferenceEngine;
  log?: (line: string) => void;
}

export interface AppHandle {
  app: express.Express;
  store: GatewayStore;
  /** The in-process engine; null when the model service is remote (config.modelServiceUrl). */
  engine: InferenceEngine | null;
  /** Where the gateway forwards to. */
  modelServiceUrl: string;
  forwarder: ModelServiceForwarder;
  /** Shutdown, step 1: new requests get 503 upstream_unavailable + Retry-After; in-flight ones continue. */
  beginShutdown(): void;
  /** Calls in flight through the gateway. */
  inFlight(): number;
  /**
   * Shutdown, step 2 (the grace is over): every call still waiting for its answer gets 503 + Retry-After and is
   * refunded; answers already streaming are cut. Returns how many calls were affected.
   */
  abortInFlight(retryAfterS: number): number;
  /** Stops the in-process model service, then closes what createApp opened (engine, store). */
  close(): Promise<void>;
}

/** Seconds a client is told to wait when the service is restarting. */
export const RESTART_RETRY_AFTER_S = 5;

export const OPENAPI_PATH = path.join(PROJECT_ROOT, 'openapi.json');

/**
 * Starts a model service on 127.0.0.1:<ephemeral>; loopback only, the gateway is its sole client, and every call
 * must carry `token` (other local processes cannot use it without paying).
 */
export async function startModelServiceServer(
  config: Config,
  engine: InferenceEngine,
  token: string,
  log?: (line: string) => void,
): Promise<{ server: http.Server; url: string; app: ModelServiceApp }> {
  const app = createModelServiceApp({ config, engine, log, token });
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
    const force = setTimeout(() => server.closeAllConnections(), graceMs);
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
  const end = Date.now() + maxMs;
  while (Date.now() < end) {
    const s = engine.state();
    if (s.busy === 0 && s.queued === 0) return;
    await new Promise((r) => setTimeout(r, 20));
  }
}

export async function createApp(config: Config, opts: AppOptions = {}): Promise<AppHandle> {
  const log = opts.log ?? ((line: string) => process.stdout.write(line + '\n'));
  const store = opts.store ?? (await openStore(config));
  let engine: InferenceEngine | null = null;
  let modelServer: http.Server | null = null;
  let modelApp: ModelServiceApp | null = null;
  let modelServiceUrl: string;
  let modelServiceToken: string;
  try {
    if (config.modelServiceUrl) {
      if (!config.modelServiceToken) {
        throw new Error('MODEL_SERVICE_URL is set but MODEL_SERVICE_TOKEN is not: set it to the secret the model service(s) were started with');
      }
      modelServiceUrl = config.modelServiceUrl;
      modelServiceToken = config.modelServiceToken;
    } else {
      const localEngine: InferenceEngine = opts.engine ?? (await createInferenceEngine(config));
      engine = localEngine;
      // A fresh secret per start: only this process can call its in-process model service.
      modelServiceToken = crypto.randomBytes(32).toString('base64url');
      const started = await startModelServiceServer(config, localEngine, modelServiceToken, log);
      modelServer = started.server;
      modelApp = started.app;
      modelServiceUrl = started.url;
    }
  } catch (err) {
    if (!opts.engine) await engine?.close().catch(() => undefined);
    if (!opts.store) await store.close();
    throw err;
  }

  const forwarder = createModelServiceForwarder({ config, baseUrl: modelServiceUrl, token: modelServiceToken });
  const app = express();
  app.disable('x-powered-by');

  let draining = false;
  app.use((req, res, next) => {
    if (!draining) return next();
    assignRequestId(req, res);
    res.setHeader('Retry-After', String(RESTART_RETRY_AFTER_S));
    res.setHeader('Connection', 'close');
    sendGatewayError(res, 'upstream_unavailable', 'The service is restarting; retry after the Retry-After delay.', 503);
  });

  app.get('/openapi.json', (_req, res) => {
    // Read per request: small, and a redeployed file needs no restart.
    fs.readFile(OPENAPI_PATH, (err, data) => {
      if (err) {
        res.status(404).json({ error: { type: 'endpoint_not_found', message: 'openapi.json is missing', request_id: '' } });
        return;
      }
      res.setHeader('Content-Type', 'application/json; charset=utf-8');
      res.setHeader('Cache-Control', 'no-cache');
      res.send(data);
    });
  });
  app.use('/console', createConsoleRouter({ config, store }));
  app.use('/', createGateway({ config, store, forward: forwarder }));
  app.get('/', (_req, res) => res.redirect(302, '/console/'));
  app.use(gatewayNotFoundHandler);
  app.use(gatewayErrorHandler);

  let closed = false;
  return {
    app,
    store,
    engine,
    modelServiceUrl,
    forwarder,
    beginShutdown() {
      draining = true;
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
      forwarder.close();
      if (modelServer) await closeServer(modelServer);
      // Responses may have closed a moment before their temp directories are removed.
      await requestScopesSettled(10_000);
      if (engine && !opts.engine) {
        await waitForIdle(engine, 10_000);
        await engine.close();
      }
      if (!opts.store) await store.close();
    },
  };
}
