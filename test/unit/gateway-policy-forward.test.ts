// The forward policy (src/gateway/policies/forward.ts) with credits held by the real credits policy in a real
// SQLite store, on an injected clock: the route's handler answers, and the held credits are charged only when it
// reports the work done. The handlers here stand in for the model service and the jobs handler at the gateway's
// boundary (as in gateway.test.ts); nothing shipped is replaced.
import { creditsPolicy } from '../../src/gateway/policies/credits';
import { forwardPolicy } from '../../src/gateway/policies/forward';
import { requestIdPolicy } from '../../src/gateway/policies/request-id';
import type { Forwarder } from '../../src/gateway/types';
import { authenticated, exchange, newKey, openTestStore, routed, testClock, testLogger, type TestStore } from '../helpers/gateway-policy-helpers';

let db: TestStore;
beforeEach(() => {
  db = openTestStore();
});
afterEach(() => db.close());

/** Reads the body and answers like the model service; `ok` says whether it delivered. */
function modelService(status: number): Forwarder {
  return async (req, res, ctx) => {
    let bytes = 0;
    for await (const chunk of req) bytes += (chunk as Buffer).length;
    ctx.bytesIn = bytes;
    res.status(status).json({ bytes });
    return { status, ok: status < 300, upstreamMs: 7 };
  };
}

async function setup(forward: Forwarder, targets: Record<string, Forwarder> = {}) {
  const clock = testClock();
  const key = await newKey(db.store, { custom: { creditsPerMonth: 10 } });
  const credits = creditsPolicy({ store: db.store, ttlMs: 120_000, now: clock.now, logger: testLogger().logger });
  const policy = forwardPolicy({ forward, targets });
  const run = async (path = '/v1/noise-suppressor/denoise', method = 'POST') => {
    const ex = await exchange({ method, path, body: 'hello', now: clock.now });
    await requestIdPolicy().run(ex.call);
    const call = authenticated(routed(ex.call), key);
    expect(await credits.run(call)).toBe('continue');
    return { ...ex, call, result: policy.run(call) };
  };
  const used = () => db.store.creditsUsed(key.workspace.id, new Date(clock.now()));
  const held = () => db.store.creditsHeld(key.workspace.id, new Date(clock.now()));
  return { run, used, held };
}

test('delivered: the handler answers, the credit is charged, upstream time recorded', async () => {
  const { run, used, held } = await setup(modelService(200));
  const { call, result, response } = await run();
  expect(await result).toBe('handled');
  const sent = await response;
  expect(sent.status).toBe(200);
  expect(sent.json).toEqual({ bytes: 5 });
  expect(call.ctx).toMatchObject({ creditsCharged: 1, bytesIn: 5, upstreamMs: 7 });
  expect(await used()).toBe(1);
  expect(await held()).toBe(0);
});

test('not delivered (the model service refused or failed): the credit is given back', async () => {
  for (const status of [422, 502]) {
    const { run, used, held } = await setup(modelService(status));
    const { call, result, response } = await run();
    expect(await result).toBe('handled');
    expect((await response).status).toBe(status);
    expect(call.ctx.creditsCharged).toBe(0);
    expect(await used()).toBe(0);
    expect(await held()).toBe(0);
  }
});

test('a handler that throws: the credit is given back and the error goes on to the error handler', async () => {
  const { run, used, held } = await setup(async () => {
    throw new Error('forwarder exploded');
  });
  const { result } = await run();
  await expect(result).rejects.toThrow('forwarder exploded');
  expect(await used()).toBe(0);
  expect(await held()).toBe(0);
});

test("a route with a target goes to that target's handler, not to the model service", async () => {
  let forwarded = 0;
  const jobs: Forwarder = async (_req, res) => {
    res.status(202).json({ id: 'job_1' });
    return { status: 202, ok: true };
  };
  const { run, used } = await setup(async (_req, res) => {
    forwarded++;
    res.status(200).end();
    return { status: 200, ok: true };
  }, { jobs });
  const { call, result, response } = await run('/v1/noise-suppressor/jobs');
  expect(await result).toBe('handled');
  expect((await response).status).toBe(202);
  expect(forwarded).toBe(0);
  expect(call.ctx.upstreamMs).toBeUndefined();
  expect(await used()).toBe(1);
});

test('a target not enabled on this server: 404 endpoint_not_found, the credit given back', async () => {
  const { run, used, held } = await setup(modelService(200));
  const { call, result, response } = await run('/v1/noise-suppressor/jobs');
  expect(await result).toBe('handled');
  const sent = await response;
  expect(sent.status).toBe(404);
  expect(sent.json.error).toEqual({
    type: 'endpoint_not_found',
    message: '/v1/noise-suppressor/jobs is not enabled on this server.',
    request_id: call.ctx.requestId,
  });
  expect(await used()).toBe(0);
  expect(await held()).toBe(0);
});
