// Where the model service runs for this gateway: in this process, in npm start's file-work process (src/file-process),
// or at MODEL_SERVICE_URL (remote replicas). One small function per placement, each returning the same Placement.
import crypto from 'node:crypto';
import type http from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Config } from '../config';
import type { FileProcess } from '../file-process';
import { createInferenceEngine } from '../inference/runtime/engine';
import type { InferenceEngine } from '../inference/types';
import type { MetricsJson, Registry } from '../metrics';
import { createModelServiceApp, type ModelServiceApp } from '../model-service/app';
import { createModelServiceServer } from '../model-service/guard';
import { createModelServiceMetrics, type ModelServiceMetrics } from '../model-service/metrics';
import { requestScopesSettled, shutdownActiveScopes } from '../model-service/request-scope';
import { Closer } from './closer';
import { closeServer, waitForIdle } from './shutdown';

export interface Placement {
  kind: 'in-process' | 'file-process' | 'remote';
  /** Where the gateway forwards file work (the replicas' base URL). */
  url: string;
  /** The bearer secret every model-service call carries. */
  token: string;
  /** The engine in this process (live streams only beside a file-work process); null when remote. */
  engine: InferenceEngine | null;
  /** Shutdown step 1 for a model service in this process: it stops admitting. */
  startDraining(): void;
  /** Grace over: that model service's calls still running get 503 + Retry-After. */
  abortInFlight(retryAfterS: number): void;
  /** Metrics of another process that join this one's /metrics (the file-work process's). */
  metrics?: () => Promise<MetricsJson>;
  /** Closes what this placement opened, newest first (an engine passed in stays open). */
  close(): Promise<void>;
}

export interface PlacementDeps {
  /** Use this engine instead of creating one (not closed by close()). */
  engine?: InferenceEngine;
  fileProcess?: FileProcess;
  registry: Registry;
  log: (line: string) => void;
}

const nothing = (): void => undefined;

/** Remote (MODEL_SERVICE_URL) wins, then a file-work process when one was started, else in-process. */
export function placeModelService(config: Config, deps: PlacementDeps): Promise<Placement> {
  if (config.modelServiceUrl) return remote(config);
  if (deps.fileProcess) return inFileProcess(config, deps.fileProcess, deps.engine);
  return inProcess(config, deps);
}

/** Replicas at MODEL_SERVICE_URL (comma-separated), started elsewhere with the same token. */
async function remote(config: Config): Promise<Placement> {
  if (!config.modelServiceToken) {
    throw new Error('MODEL_SERVICE_URL is set but MODEL_SERVICE_TOKEN is not: set it to the secret the model service(s) were started with');
  }
  const url = config.modelServiceUrl!;
  return { kind: 'remote', url, token: config.modelServiceToken, engine: null, startDraining: nothing, abortInFlight: nothing, close: async () => undefined };
}

/**
 * File work in the child process (reached like a remote model service); live streams stay here on an engine with
 * live workers only. The child itself is closed by whoever passed it in (createApp), after this engine.
 */
async function inFileProcess(config: Config, fileProcess: FileProcess, given?: InferenceEngine): Promise<Placement> {
  const engine: InferenceEngine = given ?? (await createInferenceEngine(config, { liveOnly: true }));
  return {
    kind: 'file-process',
    url: fileProcess.url,
    token: fileProcess.token,
    engine,
    startDraining: nothing,
    abortInFlight: nothing,
    metrics: () => fileProcess.metrics(),
    close: async () => {
      if (!given) await engine.close();
    },
  };
}

/** An engine and its model service in this process, on loopback, with a fresh secret per start. */
async function inProcess(config: Config, deps: PlacementDeps): Promise<Placement> {
  const opened = new Closer();
  const engine: InferenceEngine = deps.engine ?? (await createInferenceEngine(config));
  if (!deps.engine) {
    opened.defer(async () => {
      await waitForIdle(engine, 10_000);
      await engine.close();
    });
  }
  // In-process, the model service's metrics (audio seconds, RTF, engine state) share the gateway's /metrics.
  const metrics = createModelServiceMetrics(deps.registry, { engine: () => engine.state() });
  // A fresh secret per start: only this process can call its in-process model service.
  const token = crypto.randomBytes(32).toString('base64url');
  const started = await opened.open(() => startModelServiceServer(config, engine, token, deps.log, metrics));
  opened.defer(async () => {
    await closeServer(started.server);
    // Responses may have closed a moment before their temp directories are removed.
    await requestScopesSettled(10_000);
  });
  return {
    kind: 'in-process',
    url: started.url,
    token,
    engine,
    startDraining: () => started.app.startDraining(),
    // Its own calls stop with their cancelled gateway calls; this catches any left.
    abortInFlight: (retryAfterS) => void shutdownActiveScopes(retryAfterS),
    close: () => opened.closeAll(),
  };
}

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
