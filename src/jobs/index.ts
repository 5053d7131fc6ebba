// Asynchronous jobs for long recordings (docs/jobs.md): submit a file or a URL, poll or get a signed webhook, download
// the result. This folder holds the whole capability:
//   types.ts + store/       the job queue contract and its engines (SQLite jobs.db; PostgreSQL with DATABASE_URL)
//   api.ts, routes.ts       the /v1/noise-suppressor/jobs endpoints behind the gateway's policies
//   runner.ts               claims jobs, leases/heartbeats, retries, retention, refunds
//   model-client.ts         runner → model service over HTTP (POST /internal/jobs/denoise), via upstream's replicas
//   stream-endpoint.ts      that endpoint, mounted in the model service
//   url-guard.ts, safe-http.ts   outbound requests to user URLs (inputs, webhooks) without reaching private networks
//   webhooks.ts             signed deliveries with retries
//   console-api.ts          the console's Jobs page API
import crypto from 'node:crypto';
import type express from 'express';
import type { Config } from '../config';
import type { Forwarder } from '../gateway/types';
import type { Logger } from '../logging';
import type { Registry } from '../metrics';
import { createJobMetrics } from './metrics';
import type { GatewayStore } from '../store/types';
import type { ModelServiceReplicas } from '../upstream/replicas';
import { createJobsHandler } from './api';
import { createJobsConsoleRouter } from './console-api';
import { JobFiles } from './files';
import { JobRunner } from './runner';
import { openJobStore } from './store';
import type { JobStore, JobsLog } from './types';
import { WebhookDispatcher } from './webhooks';

export { createJobStreamRouter } from '../model-service/job-stream';
export { configureJobRoutes } from './routes';
export { openJobStore } from './store';
export type { JobStore } from './types';

export interface JobsDeps {
  config: Config;
  gateway: GatewayStore;
  /** The model-service replicas the runner sends work to (the forwarder's: same balancer, breakers, health). */
  modelServices: ModelServiceReplicas;
  /** Use this queue instead of opening the configured one (not closed by close()). */
  store?: JobStore;
  logger: Logger;
  /** Where the job metrics go (the process's /metrics registry); none when omitted. */
  registry?: Registry;
}

export interface Jobs {
  store: JobStore;
  files: JobFiles;
  /** The gateway's handler for routes with target 'jobs'. */
  handler: Forwarder;
  /** Mounted under /console/api behind the console's session checks. */
  consoleRouter: express.Router;
  /** Null when JOBS_RUNNER=false (an API-only process). */
  runner: JobRunner | null;
  webhooks: WebhookDispatcher | null;
  /** Stops the runner (its jobs go back to the queue) and the webhook dispatcher, then closes the queue. */
  close(): Promise<void>;
}

export async function createJobs(deps: JobsDeps): Promise<Jobs> {
  const { config, gateway } = deps;
  const logger = deps.logger.child({ component: 'jobs' });
  const log: JobsLog = (line, level = 'info') => logger[level](line);
  const store = deps.store ?? (await openJobStore(config));
  const files = new JobFiles(config.jobs.dir);
  await files.ensure();
  const outbound = { allowPrivate: config.jobs.allowPrivateUrls };
  let webhooks: WebhookDispatcher | null = null;
  let runner: JobRunner | null = null;
  const metrics = deps.registry ? createJobMetrics(deps.registry, { running: () => runner?.activeIds().length ?? 0 }) : undefined;
  if (config.jobs.runner) {
    webhooks = new WebhookDispatcher({
      store,
      http: { ...outbound, connectTimeoutMs: 10_000, idleTimeoutMs: 10_000 },
      owner: `webhooks_${crypto.randomBytes(6).toString('hex')}`,
      log,
      metrics,
    });
    runner = new JobRunner({
      config,
      store,
      gateway,
      files,
      modelServices: deps.modelServices,
      webhooks,
      log,
      metrics,
      fetch: { ...outbound, connectTimeoutMs: 10_000, idleTimeoutMs: 30_000 },
    });
    webhooks.start();
    runner.start();
  }
  const handler = createJobsHandler({ config, store, gateway, files, runner, log, metrics });
  const consoleRouter = createJobsConsoleRouter({ config, store, gateway, files, runner, log, metrics });
  let closed = false;
  return {
    store,
    files,
    handler,
    consoleRouter,
    runner,
    webhooks,
    async close() {
      if (closed) return;
      closed = true;
      await runner?.stop();
      await webhooks?.stop();
      if (!deps.store) await store.close();
    },
  };
}
