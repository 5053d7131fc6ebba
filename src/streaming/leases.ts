// The concurrent-stream slots this gateway holds for its open streams (src/shared-state/streams.ts): taken before
// the upgrade, given back when the stream ends, and renewed meanwhile so that only a dead gateway's leases lapse.
import type { Logger } from '../logging';
import { STREAM_LEASE_RENEW_MS, type SlotGrant, type SlotLease, type StreamSlots } from '../shared-state/streams';

export interface LeaseKeeper {
  acquire(workspaceId: string, max: number): Promise<SlotGrant>;
  /** Never throws: a lease that cannot be given back now lapses on its own. */
  release(lease: SlotLease): Promise<void>;
  /** Stops renewing (the app closes). */
  stop(): void;
}

/**
 * The slot leases of this gateway's streams, renewed every STREAM_LEASE_RENEW_MS while any is held (an unref'd timer,
 * so it never keeps the process alive), so that only the leases of a gateway that died lapse.
 */
export function createLeaseKeeper(slots: StreamSlots, logger: Pick<Logger, 'warn'>, renewMs = STREAM_LEASE_RENEW_MS): LeaseKeeper {
  const held = new Map<string, SlotLease>();
  let timer: NodeJS.Timeout | null = null;
  const stop = (): void => {
    if (timer) clearInterval(timer);
    timer = null;
  };
  const renew = (): void => {
    if (held.size === 0) return stop();
    slots.renew([...held.values()]).catch((err: unknown) => logger.warn({ err, leases: held.size }, 'could not renew the slot leases of open streams'));
  };
  return {
    async acquire(workspaceId, max) {
      const grant = await slots.acquire(workspaceId, max);
      if (grant.lease) {
        held.set(grant.lease.id, grant.lease);
        if (!timer) {
          timer = setInterval(renew, renewMs);
          timer.unref();
        }
      }
      return grant;
    },
    async release(lease) {
      held.delete(lease.id);
      if (held.size === 0) stop();
      await slots.release(lease).catch((err: unknown) => logger.warn({ err, workspace_id: lease.workspaceId }, 'could not release the slot of a stream; it lapses by itself'));
    },
    stop,
  };
}
