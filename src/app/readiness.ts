// What GET /readyz checks for the gateway: the store, shared state, and the model service where it runs (the engine
// in this process, else at least one usable replica).
import { httpReady, type ReadinessCheck } from '../probes';
import type { SharedState } from '../shared-state';
import type { GatewayStore } from '../store/gateway/types';
import type { ModelServiceForwarder } from '../upstream/forwarder';
import type { Placement } from './placement';

export function readinessChecks(store: GatewayStore, sharedState: SharedState, placement: Placement, forwarder: ModelServiceForwarder): ReadinessCheck[] {
  const localEngine = placement.kind === 'in-process' ? placement.engine : null;
  return [
    // A read through the store contract: answers only when the database does.
    { name: 'store', check: async () => void (await store.getSetting('probe.readyz')) },
    // Rate limits and console sessions (Redis with REDIS_URL; memory always answers).
    { name: 'shared_state', check: () => sharedState.ready() },
    localEngine
      ? {
          name: 'engine',
          check: async () => {
            if (localEngine.state().size < 1) throw new Error('no inference workers');
          },
        }
      : { name: 'model_service', check: () => modelServiceReady(forwarder) },
  ];
}

/**
 * Ready when at least one upstream whose breaker is not open answers its /readyz. An answer is also a health probe: it
 * closes a breaker whose cool-down is over (with one replica no health checker runs, and without this a /readyz of 200
 * could be followed by a call refused while another call, such as a job's, held the breaker's one trial).
 */
export async function modelServiceReady(forwarder: ModelServiceForwarder): Promise<void> {
  const usable = forwarder.replicas.filter((u) => u.breaker.snapshot().state !== 'open');
  if (usable.length === 0) throw new Error('every model-service circuit breaker is open');
  const ready = async (u: (typeof usable)[number]): Promise<void> => {
    await httpReady(u.label);
    u.breaker.probeSucceeded();
  };
  await Promise.any(usable.map(ready)).catch((err: AggregateError) => {
    throw new Error(err.errors.map((e: Error) => e.message).join('; '));
  });
}
