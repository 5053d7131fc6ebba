// Background upkeep of the store, run by every gateway process (each step is safe to run from several at once):
// request-log rows older than REQUEST_LOG_RETENTION_DAYS are deleted in bounded batches, credit holds whose
// gateway died mid-call (expired reservations) are given back, and the record of job refunds is kept 30 days.
import type { Config } from '../../config';
import type { GatewayStore } from './types';

/** How long a job's refund is remembered (refundOnce): far longer than a refund can wait for its replay. */
const REFUND_MEMORY_MS = 30 * 86_400_000;

export interface MaintenanceOptions {
  /** How often the tasks run; the first run is right after start. */
  intervalMs?: number;
  /** Rows deleted per statement (keeps each delete short). */
  batchRows?: number;
  now?: () => number;
  log?: (line: string) => void;
}

export interface Maintenance {
  /** Runs both tasks once now (also what the timer does); resolves when done. */
  runOnce(): Promise<{ pruned: number; reclaimed: number }>;
  stop(): Promise<void>;
}

export function startStoreMaintenance(
  store: GatewayStore,
  config: Pick<Config, 'requestLogRetentionDays'>,
  options: MaintenanceOptions = {},
): Maintenance {
  const intervalMs = options.intervalMs ?? 60_000;
  const batchRows = options.batchRows ?? 5_000;
  const now = options.now ?? Date.now;
  const log = options.log ?? ((line: string) => console.error(line));
  let running: Promise<{ pruned: number; reclaimed: number }> | null = null;
  let stopped = false;

  const work = async (): Promise<{ pruned: number; reclaimed: number }> => {
    let pruned = 0;
    let reclaimed = 0;
    try {
      reclaimed = await store.reclaimExpiredReservations(new Date(now()));
      await store.pruneRefunds(new Date(now() - REFUND_MEMORY_MS));
      if (config.requestLogRetentionDays > 0) {
        const before = new Date(now() - config.requestLogRetentionDays * 86_400_000).toISOString();
        // Batches, yielding between them, so a first run over a large backlog never holds the database for long.
        for (;;) {
          const n = await store.pruneRequests(before, batchRows);
          pruned += n;
          if (n < batchRows || stopped) break;
          await new Promise((r) => setImmediate(r));
        }
      }
    } catch (err) {
      log(`[store] maintenance failed (will retry): ${(err as Error).message}`);
    }
    return { pruned, reclaimed };
  };

  const runOnce = (): Promise<{ pruned: number; reclaimed: number }> => {
    running ??= work().finally(() => (running = null));
    return running;
  };

  const first = setTimeout(() => void runOnce(), 0);
  const timer = setInterval(() => void runOnce(), intervalMs);
  first.unref();
  timer.unref();
  return {
    runOnce,
    async stop() {
      stopped = true;
      clearTimeout(first);
      clearInterval(timer);
      await running;
    },
  };
}
