// The gateway's keeper of stream-slot leases (src/streaming/leases.ts) on the memory slots engine, with Jest's fake
// clock: a lease held by an open stream is renewed and outlives the lease time, one whose keeper stopped lapses, and
// the renewal timer runs only while leases are held.
import { createLeaseKeeper } from '../../src/streaming/leases';
import { MemoryStreamSlots, STREAM_LEASE_RENEW_MS, STREAM_LEASE_TTL_MS } from '../../src/shared-state/streams';

const warnings: unknown[] = [];
const logger = { warn: (...args: unknown[]) => void warnings.push(args) } as never;

beforeEach(() => {
  jest.useFakeTimers({ now: Date.UTC(2030, 0, 1) });
  warnings.length = 0;
});

afterEach(() => {
  jest.useRealTimers();
});

async function advance(ms: number): Promise<void> {
  await jest.advanceTimersByTimeAsync(ms);
}

test('an open stream keeps its slot past the lease time; released, the slot is free and the timer stops', async () => {
  const slots = new MemoryStreamSlots({ now: () => Date.now() });
  const keeper = createLeaseKeeper(slots, logger);
  expect(jest.getTimerCount()).toBe(0);
  const grant = await keeper.acquire('ws_1', 1);
  expect(grant.lease).not.toBeNull();
  expect(jest.getTimerCount()).toBe(1);
  // A lease taken past the keeper (as by a gateway that then died) for comparison.
  const orphan = await slots.acquire('ws_2', 1);
  expect(orphan.lease).not.toBeNull();
  await advance(STREAM_LEASE_TTL_MS + 2 * STREAM_LEASE_RENEW_MS);
  expect(await slots.acquire('ws_1', 1)).toEqual({ lease: null, open: 1 });
  expect((await slots.acquire('ws_2', 1)).lease).not.toBeNull();
  await keeper.release(grant.lease!);
  expect(jest.getTimerCount()).toBe(0);
  expect((await slots.acquire('ws_1', 1)).lease).not.toBeNull();
  expect(warnings).toEqual([]);
});

test('stop() ends the renewals (the app closed): the leases lapse like a dead gateway\'s', async () => {
  const slots = new MemoryStreamSlots({ now: () => Date.now() });
  const keeper = createLeaseKeeper(slots, logger);
  await keeper.acquire('ws_1', 2);
  await keeper.acquire('ws_1', 2);
  expect(jest.getTimerCount()).toBe(1);
  keeper.stop();
  expect(jest.getTimerCount()).toBe(0);
  await advance(STREAM_LEASE_TTL_MS - 1);
  expect((await slots.acquire('ws_1', 2)).lease).toBeNull();
  await advance(1);
  expect((await slots.acquire('ws_1', 2)).open).toBe(1);
});
