// A running job's lease, kept alive while this runner works on it. Renewal doubles as the progress write (at most
// once a second) and as the cancel check: a job canceled or reclaimed meanwhile no longer matches this owner, and
// its work is stopped through its AbortController with the reason.
import type { Config } from '../../config';
import type { JobRecord, JobStore } from '../../store/jobs/types';
import type { JobsLog } from '../log';

/** Why a running job's work was stopped. */
export type StopReason = 'shutdown' | 'canceled' | 'lease_lost' | 'yield';

export class StopSignal extends Error {
  constructor(readonly reason: StopReason) {
    super(`job stopped: ${reason}`);
    this.name = 'AbortError';
  }
}

export interface LeaseKeeper {
  /** Records progress (0–1); written with the next renewal, at most once a second. */
  progress(value: number): void;
  stop(): void;
}

export function keepLease(
  deps: { config: Config; store: JobStore; log: JobsLog },
  owner: string,
  job: JobRecord,
  abort: AbortController,
  now: () => number,
): LeaseKeeper {
  const { store, log } = deps;
  const leaseMs = deps.config.jobs.leaseMs;
  let progress = 0;
  let lastWrite = 0;
  let writing = false;
  const renew = async (): Promise<void> => {
    if (writing || abort.signal.aborted) return;
    writing = true;
    lastWrite = now();
    try {
      const held = await store.renewLease(job.id, owner, leaseMs, now(), progress);
      if (!held && !abort.signal.aborted) {
        const current = await store.getJob(job.id);
        abort.abort(new StopSignal(current?.status === 'canceled' ? 'canceled' : 'lease_lost'));
      }
    } catch (err) {
      log(`[jobs] lease renewal of ${job.id} failed: ${err instanceof Error ? err.message : String(err)}`, 'warn');
    } finally {
      writing = false;
    }
  };
  const heartbeat = setInterval(() => void renew(), Math.max(200, Math.floor(leaseMs / 3)));
  heartbeat.unref();
  return {
    progress: (value) => {
      progress = value;
      if (now() - lastWrite >= 1000) void renew();
    },
    stop: () => clearInterval(heartbeat),
  };
}
