// Canceling a job, for the jobs API (DELETE /jobs/{id}) and the console (POST /console/api/jobs/{id}/cancel): the
// store marks it canceled, and if it was queued or running this process stops its local work, removes its files and
// gives its credits back (once, see settleRefund).
import type { GatewayStore } from '../../store/gateway/types';
import type { JobFiles } from '../queue/files';
import type { JobMetrics } from '../metrics';
import { settleRefund } from '../queue/housekeeping';
import type { JobRecord, JobStore } from '../../store/jobs/types';
import type { JobsLog } from '../log';

export interface CancelDeps {
  store: JobStore;
  gateway: GatewayStore;
  files: JobFiles;
  runner?: { stopLocal(id: string): void } | null;
  metrics?: JobMetrics;
  log: JobsLog;
  /** How long a canceled job stays listed, ms. */
  retentionMs: number;
}

/** Cancels job `id` (of `workspaceId`, or of any workspace with null); null when there is no such job. */
export async function cancelJob(deps: CancelDeps, id: string, workspaceId: string | null): Promise<JobRecord | null> {
  const now = Date.now();
  const out = await deps.store.cancelJob(id, workspaceId, now, now + deps.retentionMs);
  if (!out) return null;
  if (!out.wasActive) return out.job;
  deps.metrics?.finished('canceled');
  deps.runner?.stopLocal(out.job.id);
  await deps.files.removeAll(out.job.id, null);
  await settleRefund(deps.store, deps.gateway, out.job, deps.log);
  return (await deps.store.getJob(out.job.id)) ?? out.job;
}
