// Asynchronous jobs for long recordings (docs/jobs.md): submit a file or a URL, poll or get a signed webhook, download
// the result. This folder holds the whole capability; this file composes it. Imports point down this list:
//   api/            the jobs endpoints and the console's Jobs API (api/index.ts lists its files)
//   queue/          the runner, leases, housekeeping, the job files (queue/index.ts); the job store itself (JobStore,
//                   SQLite or PostgreSQL) is src/store/jobs/
//   outbound/       URL guard, safe HTTP, webhooks (outbound/index.ts)
//   views.ts        the job as API, webhooks and CLI show it; log.ts (JobsLog); metrics.ts; failed-write.ts;
//                   disk-budget.ts: the free-disk floor every write takes from
//   queue/model-client.ts runner → model service over HTTP (POST /internal/jobs/denoise, served by
//                   src/model-service/job-stream.ts), through upstream's replicas (balancer, breakers, health)
import crypto from 'node:crypto';
import type express from 'express';
import type { Config } from '../config';
import type { Forwarder } from '../gateway/types';
import type { Logger } from '../logging';
import type { Registry } from '../metrics';
import { createJobMetrics } from './metrics';
import type { GatewayStore } from '../store/gateway/types';
import { createJobsConsoleRouter, createJobsHandler } from './api';
import { JobFiles, JobRunner } from './queue';
import { openJobStore } from '../store/jobs';
import type { ModelServiceReplicas } from '../upstream/replicas';
import type { JobStore } from '../store/jobs/types';
import type { JobsLog } from './log';
import { WebhookDispatcher } from './outbound';
import { DiskBudget } from '../storage/disk-budget';

export { createJobStreamRouter } from '../model-service/job-stream';
export { configureJobRoutes } from './api';
export { openJobStore } from '../store/jobs';
export type { JobStore } from '../store/jobs/types';

/**
 * Job URLs: connect 10 s; silent at most 30 s; at least 32 KiB/s over each 30 s window; the whole download within
 * 15 min (2 GB at 2.3 MB/s). A peer trickling bytes fails the job with url_fetch_failed instead of holding a slot.
 */
export const URL_FETCH_LIMITS = { connectTimeoutMs: 10_000, idleTimeoutMs: 30_000, minBytesPerSecond: 32 * 1024, deadlineMs: 15 * 60_000 };
/** Webhook attempts: connect 10 s; silent at most 10 s; the whole attempt, answer included, within 15 s. */
export const WEBHOOK_LIMITS = { connectTimeoutMs: 10_000, idleTimeoutMs: 10_000, deadlineMs: 15_000 };

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
  // Partial uploads, downloads and outputs of a predecessor killed with -9 go now, not after the hour-long sweep.
  const abandoned = await files.sweepAbandonedIncoming();
  if (abandoned) log(`[jobs] removed ${abandoned} partial file(s) left in ${files.incoming} by a process that is gone`);
  const space = new DiskBudget(() => files.freeBytes(), config.jobs.minFreeDiskBytes);
  const outbound = { allowPrivate: config.jobs.allowPrivateUrls };
  let webhooks: WebhookDispatcher | null = null;
  let runner: JobRunner | null = null;
  const metrics = deps.registry ? createJobMetrics(deps.registry, { running: () => runner?.activeIds().length ?? 0 }) : undefined;
  if (config.jobs.runner) {
    webhooks = new WebhookDispatcher({
      store,
      http: { ...outbound, ...WEBHOOK_LIMITS },
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
      fetch: { ...outbound, ...URL_FETCH_LIMITS },
      space,
    });
    webhooks.start();
    runner.start();
  }
  const handler = createJobsHandler({ config, store, gateway, files, space, runner, log, metrics });
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
