// The runner's housekeeping, every few seconds: re-queue jobs whose runner died (expired lease), settle pending
// refunds, and once a minute delete expired jobs with their files, old webhook deliveries, and stray files.
import type { Config } from '../../config';
import type { GatewayStore } from '../../store/types';
import type { JobMetrics } from '../metrics';
import { deliveryFor, DELIVERY_HISTORY_MS, type WebhookDispatcher } from '../outbound/webhooks';
import type { JobRecord, JobStore, JobsLog } from '../types';
import type { JobFiles } from './files';

export const HOUSEKEEPING_MS = 5_000;
export const RETENTION_SWEEP_MS = 60_000;
/** Files no job refers to are removed once untouched this long (uploads in progress keep theirs fresh). */
const ORPHAN_AGE_MS = 60 * 60_000;

export interface HousekeepingDeps {
  config: Config;
  store: JobStore;
  gateway: GatewayStore;
  files: JobFiles;
  webhooks: WebhookDispatcher | null;
  log: JobsLog;
  metrics?: JobMetrics;
}

/** One pass; `retention`: also the once-a-minute deletions. Resolves with how many jobs went back to the queue. */
export async function housekeepPass(deps: HousekeepingDeps, now: number, retention: boolean): Promise<{ requeued: number }> {
  const { config, store, files, log } = deps;
  try {
    const { requeued, failed } = await store.reclaimExpired(now, config.jobs.maxAttempts, now + config.jobs.retentionMs, deliveryFor);
    requeued.forEach(() => deps.metrics?.retried('lost'));
    failed.forEach(() => deps.metrics?.finished('failed'));
    if (requeued.length) log(`[jobs] re-queued ${requeued.length} job(s) whose runner stopped: ${requeued.join(', ')}`);
    if (failed.length) {
      log(`[jobs] failed ${failed.length} job(s) after ${config.jobs.maxAttempts} lost runs: ${failed.join(', ')}`, 'warn');
      for (const id of failed) await files.removeAll(id, null);
      deps.webhooks?.wake();
    }
    for (const job of await store.pendingRefunds(50)) await settleRefund(store, deps.gateway, job, log);
    if (retention) {
      let deleted = 0;
      for (const job of await store.expiredJobs(now, 200)) {
        await files.removeAll(job.id, job.result?.file ?? null);
        await store.deleteJob(job.id);
        deleted++;
      }
      if (deleted) log(`[jobs] deleted ${deleted} expired job(s) and their files`);
      await store.purgeDeliveries(now - DELIVERY_HISTORY_MS);
      const orphans = (await files.sweepAbandonedIncoming()) + (await files.sweepOrphans(await store.knownJobIds(), ORPHAN_AGE_MS, now));
      if (orphans) log(`[jobs] removed ${orphans} file(s) no job refers to`);
    }
    return { requeued: requeued.length };
  } catch (err) {
    log(`[jobs] housekeeping failed: ${err instanceof Error ? err.message : String(err)}`, 'error');
    return { requeued: 0 };
  }
}

/**
 * Gives a failed or canceled job's credits back, once: the pending → done transition is claimed first, so two
 * processes cannot both refund; the refund goes to the month the credits were charged in.
 */
export async function settleRefund(store: JobStore, gateway: GatewayStore, job: JobRecord, log: JobsLog): Promise<void> {
  if (job.refund !== 'pending' || job.credits <= 0) return;
  if (!(await store.setRefund(job.id, 'pending', 'done'))) return;
  try {
    await gateway.refundCredits(job.workspaceId, job.credits, new Date(job.chargedAt ?? job.createdAt));
  } catch (err) {
    // Pending again: the next housekeeping pass retries.
    await store.setRefund(job.id, 'done', 'pending').catch(() => undefined);
    log(`[jobs] refund of ${job.credits} credit(s) for ${job.id} failed: ${err instanceof Error ? err.message : String(err)}`, 'error');
  }
}
