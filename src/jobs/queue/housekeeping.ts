// The runner's housekeeping, every few seconds: re-queue jobs whose runner died (expired lease), settle pending
// refunds and replay charges whose job was never created, and once a minute delete expired jobs with their files,
// old webhook deliveries, and stray files.
import type { Config, JobsConfig } from '../../config';
import { creditPeriod, type GatewayStore } from '../../store/gateway/types';
import { crashPoint } from '../crash-point';
import type { JobMetrics } from '../metrics';
import { deliveryFor, DELIVERY_HISTORY_MS, type WebhookDispatcher } from '../outbound/webhooks';
import type { JobRecord, JobStore } from '../../store/jobs/types';
import type { JobsLog } from '../log';
import { writerGone, type JobFiles } from './files';

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
    for (const job of await store.pendingRefunds(50)) await settleRefund(store, deps.gateway, job, log, config.jobs);
    await replayPendingCharges(store, deps.gateway, log, now);
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
 * Gives a failed or canceled job's credits back, once. Two databases, so two writes: the refund in the gateway store
 * first (refundOnce: applied once per job id, whoever calls it and however often), then the job queue's mark. A
 * process killed between them leaves the mark pending; the next housekeeping pass (at start, then every few seconds)
 * calls again and only the mark is written. The refund goes to the month the credits were charged in.
 */
export async function settleRefund(
  store: JobStore,
  gateway: GatewayStore,
  job: JobRecord,
  log: JobsLog,
  faults: Pick<JobsConfig, 'crashAt'> = { crashAt: null },
): Promise<void> {
  if (job.refund !== 'pending' || job.credits <= 0) return;
  try {
    await gateway.refundOnce(job.id, job.workspaceId, job.credits, creditPeriod(new Date(job.chargedAt ?? job.createdAt)));
  } catch (err) {
    // Still pending: the next housekeeping pass retries.
    log(`[jobs] refund of ${job.credits} credit(s) for ${job.id} failed: ${err instanceof Error ? err.message : String(err)}`, 'error');
    return;
  }
  crashPoint(faults, 'after-refund');
  await store.setRefund(job.id, 'pending', 'done');
}

/** A pending charge of another host is left this long to its gateway (which creates the job within milliseconds). */
const FOREIGN_CHARGE_MS = 10 * 60_000;

/**
 * Charges of POST /jobs whose gateway died between settling the credit and creating the job: once that process is
 * gone (another host's: after FOREIGN_CHARGE_MS), a charge whose job exists is confirmed, one whose job never came is
 * refunded (once). Charges of live processes are theirs to finish.
 */
export async function replayPendingCharges(store: JobStore, gateway: GatewayStore, log: JobsLog, now: number): Promise<void> {
  for (const charge of await gateway.pendingCharges(50)) {
    const gone = writerGone(charge.owner);
    if (gone === false || (gone === null && now - charge.createdAt < FOREIGN_CHARGE_MS)) continue;
    if (await store.getJob(charge.key)) {
      await gateway.confirmCharge(charge.key);
    } else if (await gateway.refundOnce(charge.key, charge.workspaceId, charge.amount, charge.period)) {
      log(`[jobs] gave back ${charge.amount} credit(s) charged for job ${charge.key}, which was never created (its gateway stopped in between)`, 'warn');
    }
  }
}
