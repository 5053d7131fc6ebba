// The credits policy (src/gateway/policies/credits.ts) against a real SQLite store and an injected clock: the hold
// taken before forwarding, 402 only when settled usage leaves no room, 429 while holds in flight fill the rest, the
// hold ended once (settled or released), renewed while the call runs, and released by the settle phase.
import { creditsPolicy, CREDITS_IN_FLIGHT_RETRY_AFTER_S } from '../../src/gateway/policies/credits';
import { requestIdPolicy } from '../../src/gateway/policies/request-id';
import { authenticated, exchange, newKey, openTestStore, routed, testClock, testLogger, type Key, type TestStore } from '../helpers/gateway-policy-helpers';

let db: TestStore;
beforeEach(() => {
  db = openTestStore();
});
afterEach(async () => {
  jest.useRealTimers();
  await db.close();
});

function setup(ttlMs = 120_000) {
  const clock = testClock();
  const policy = creditsPolicy({ store: db.store, ttlMs, now: clock.now, logger: testLogger().logger });
  const run = async (key: Key, path = '/v1/noise-suppressor/denoise', method = 'POST') => {
    const ex = await exchange({ method, path, now: clock.now });
    await requestIdPolicy().run(ex.call);
    const call = authenticated(routed(ex.call), key);
    return { ...ex, call, result: await policy.run(call) };
  };
  return { clock, policy, run };
}

const monthOf = (now: () => number) => new Date(now());

test("a paid call holds the route's credits; ending the hold delivered charges them, once", async () => {
  const { clock, run } = setup();
  const key = await newKey(db.store, { custom: { creditsPerMonth: 5 } });
  const { call, result } = await run(key);
  expect(result).toBe('continue');
  expect(call.credits?.amount).toBe(1);
  expect(call.ctx.creditsHeld).toBe(1);
  expect(call.ctx.chargedAt?.getTime()).toBe(clock.now());
  expect(await db.store.creditsHeld(key.workspace.id, monthOf(clock.now))).toBe(1);
  expect(call.ctx.creditsCharged).toBe(0);

  expect(await call.ctx.settleCredits?.()).toBe(true);
  expect(call.ctx.creditsCharged).toBe(1);
  expect(await db.store.creditsHeld(key.workspace.id, monthOf(clock.now))).toBe(0);
  expect(await db.store.creditsUsed(key.workspace.id, monthOf(clock.now))).toBe(1);
  // A second end (the forwarder after a handler settled early) changes nothing.
  expect(await call.credits?.end(false)).toBe(false);
  expect(await db.store.creditsUsed(key.workspace.id, monthOf(clock.now))).toBe(1);
});

test('the settle phase gives back a hold the call still has (it failed before it was forwarded)', async () => {
  const { clock, policy, run } = setup();
  const key = await newKey(db.store, { custom: { creditsPerMonth: 5 } });
  const { call } = await run(key);
  await policy.settle?.(call);
  expect(call.ctx.creditsCharged).toBe(0);
  expect(await db.store.creditsHeld(key.workspace.id, monthOf(clock.now))).toBe(0);
  expect(await db.store.creditsUsed(key.workspace.id, monthOf(clock.now))).toBe(0);
  // The amount stays known (metrics count it as reserved, then refunded).
  expect(call.credits?.amount).toBe(1);
});

test('a free route holds nothing', async () => {
  const { clock, run } = setup();
  const key = await newKey(db.store, { custom: { creditsPerMonth: 5 } });
  const { call, result } = await run(key, '/v1/noise-suppressor/models', 'GET');
  expect(result).toBe('continue');
  expect(call.credits).toBeUndefined();
  expect(call.ctx.settleCredits).toBeUndefined();
  expect(await db.store.creditsHeld(key.workspace.id, monthOf(clock.now))).toBe(0);
});

test('402 quota_exhausted only when settled usage leaves no room', async () => {
  const { clock, run } = setup();
  const key = await newKey(db.store, { custom: { creditsPerMonth: 1 } });
  const first = await run(key);
  await first.call.credits?.end(true);
  const { call, result, response } = await run(key);
  expect(result).toBe('handled');
  const sent = await response;
  expect(sent.status).toBe(402);
  expect(sent.headers['retry-after']).toBeUndefined();
  expect(sent.json.error).toEqual({
    type: 'quota_exhausted',
    message: 'The workspace has used 1 of its 1 credits this month; credits renew on the 1st (UTC) or with a plan upgrade.',
    request_id: call.ctx.requestId,
  });
  expect(call.credits).toBeUndefined();
  // The month is the injected clock's: the next month has room again.
  clock.advance(31 * 24 * 3600_000);
  expect((await run(key)).result).toBe('continue');
});

test('429 with a short Retry-After while holds of calls in flight fill the rest; free again once they end', async () => {
  const { run } = setup();
  const key = await newKey(db.store, { custom: { creditsPerMonth: 2 } });
  const a = await run(key);
  const b = await run(key);
  const c = await run(key);
  expect(c.result).toBe('handled');
  const sent = await c.response;
  expect(sent.status).toBe(429);
  expect(sent.headers['retry-after']).toBe(String(CREDITS_IN_FLIGHT_RETRY_AFTER_S));
  expect(sent.json.error).toMatchObject({
    type: 'rate_limited',
    message: "The workspace's remaining 2 credits are held by calls in flight; retry in 2 s.",
  });
  // One settled, one still held: settled usage alone leaves room, so still 429, not 402.
  await b.call.credits?.end(true);
  const d = await run(key);
  expect((await d.response).status).toBe(429);
  await a.call.credits?.end(false);
  expect((await run(key)).result).toBe('continue');
});

test('a hold is renewed while the call runs, so it does not expire under a long call', async () => {
  jest.useFakeTimers({ doNotFake: ['nextTick', 'setImmediate', 'queueMicrotask', 'Date'] });
  const ttlMs = 3_000;
  const { clock, run } = setup(ttlMs);
  const key = await newKey(db.store, { custom: { creditsPerMonth: 5 } });
  const start = clock.now();
  const { call } = await run(key);
  // Renewed every ttl / 3 to now + ttl: after 10 s of a running call it expires no sooner than 12 s.
  for (let i = 0; i < 10; i++) {
    clock.advance(1_000);
    await jest.advanceTimersByTimeAsync(1_000);
  }
  expect(await db.store.reclaimExpiredReservations(new Date(start + 11_000))).toBe(0);
  expect(await db.store.creditsHeld(key.workspace.id, new Date(start))).toBe(1);
  // Once ended, it is no longer renewed.
  await call.credits?.end(true);
  expect(jest.getTimerCount()).toBe(0);
});
