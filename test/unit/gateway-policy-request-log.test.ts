// The request-log end hook (src/gateway/policies/request-log.ts) against a real SQLite store and an injected clock:
// the row of a finished call (route, key, status, error, credits, bytes, timings), 499 for a client that went away,
// no row for unlogged refusals, and the observers told after the row is written.
import { requestIdPolicy } from '../../src/gateway/policies/request-id';
import { requestLogPolicy } from '../../src/gateway/policies/request-log';
import { reject, type Call } from '../../src/gateway/call';
import { matchRoute } from '../../src/gateway/routes';
import type { CallSummary } from '../../src/gateway/types';
import { authenticated, exchange, newKey, openTestStore, routed, testClock, testLogger, type ExchangeOptions, type TestStore } from '../helpers/gateway-policy-helpers';

let db: TestStore;
beforeEach(() => {
  db = openTestStore();
});
afterEach(() => db.close());

function setup(observers: Array<(s: CallSummary) => void> = []) {
  const clock = testClock();
  const { logger, lines } = testLogger();
  const hook = requestLogPolicy({ store: db.store, observers, now: clock.now, logger });
  const start = async (opts: ExchangeOptions) => {
    const ex = await exchange({ ...opts, now: clock.now });
    await requestIdPolicy().run(ex.call);
    return ex;
  };
  return { clock, hook, lines, start };
}

async function rowOf(call: Call) {
  const rows = await db.store.queryRequests({});
  return rows.find((r) => r.requestId === call.ctx.requestId);
}

test('the row of an answered call: route, key, status, credits, bytes, timings on the injected clock', async () => {
  const summaries: CallSummary[] = [];
  const { clock, hook, start } = setup([(s) => summaries.push(s)]);
  const key = await newKey(db.store);
  const { call: raw, response } = await start({
    method: 'POST',
    path: '/v1/noise-suppressor/denoise',
    headers: { 'x-request-id': 'client-7' },
    clientIp: '198.51.100.4',
  });
  const call = authenticated(routed(raw), key);
  call.credits = { amount: 1, end: async () => false };
  call.ctx.creditsCharged = 1;
  call.ctx.bytesIn = 1234;
  call.ctx.upstreamMs = 40;
  clock.advance(250);
  call.res.setHeader('X-NS-Stats', JSON.stringify({ model: 'nsm-2', duration_s: 3.5 }));
  call.res.status(200).type('application/octet-stream').send(Buffer.alloc(77));
  await response;
  call.endedAt = clock.now();
  clock.advance(1_000); // the hook runs later; the row's total is up to endedAt
  await hook.onEnd(call, true);
  expect(await rowOf(call)).toMatchObject({
    clientRequestId: 'client-7',
    time: new Date(call.ctx.startedAt).toISOString(),
    tokenId: key.record.id,
    workspaceId: key.workspace.id,
    method: 'POST',
    service: 'noise-suppressor',
    endpoint: 'denoise',
    status: 200,
    errorType: null,
    creditsCharged: 1,
    bytesIn: 1234,
    bytesOut: 77,
    upstreamMs: 40,
    totalMs: 250,
    clientIp: '198.51.100.4',
  });
  expect(summaries).toHaveLength(1);
  expect(summaries[0]).toMatchObject({
    route: call.route,
    creditsReserved: 1,
    keyPrefix: key.record.prefix,
    model: 'nsm-2',
    audioSeconds: 3.5,
  });
  expect(summaries[0].entry.requestId).toBe(call.ctx.requestId);
});

test('a refusal: its status, error type and message; a 404 path logs its (clipped) service and endpoint', async () => {
  const { hook, start } = setup();
  const { call, response } = await start({ path: `/v1/noise-suppressor/${'e'.repeat(150)}` });
  call.match = matchRoute('GET', call.req.path);
  reject(call, 'endpoint_not_found', 'no such endpoint');
  await response;
  await hook.onEnd(call, true);
  expect(await rowOf(call)).toMatchObject({
    service: 'noise-suppressor',
    endpoint: 'e'.repeat(100),
    status: 404,
    errorType: 'endpoint_not_found',
    errorMessage: 'no such endpoint',
    tokenId: null,
    creditsCharged: 0,
  });
});

test('a client that went away before an answer is logged as 499', async () => {
  const { hook, start } = setup();
  const { call, abort } = await start({ method: 'POST', path: '/v1/noise-suppressor/denoise' });
  routed(call);
  const closed = new Promise((r) => call.res.once('close', r));
  abort();
  await closed;
  await hook.onEnd(call, call.res.writableFinished);
  expect(await rowOf(call)).toMatchObject({ status: 499, endpoint: 'denoise' });
});

test('a status recorded for the log wins over the status line (a body that failed after the headers)', async () => {
  const { hook, start } = setup();
  const { call, response } = await start({ path: '/v1/noise-suppressor/models' });
  routed(call);
  call.res.status(200).json({ models: [] });
  await response;
  call.ctx.logStatus = 502;
  call.ctx.errorType = 'upstream_unavailable';
  await hook.onEnd(call, true);
  expect(await rowOf(call)).toMatchObject({ status: 502, errorType: 'upstream_unavailable' });
});

test('an unlogged refusal writes no row but still reaches the observers', async () => {
  const seen: number[] = [];
  const { hook, start } = setup([(s) => seen.push(s.entry.status)]);
  const { call, response } = await start({ path: '/v1/nope' });
  call.match = matchRoute('GET', call.req.path);
  call.unlogged = true;
  reject(call, 'rate_limited', 'too many');
  await response;
  await hook.onEnd(call, true);
  expect(await rowOf(call)).toBeUndefined();
  expect(seen).toEqual([429]);
});

test('an observer that throws is logged and the others are still told', async () => {
  const seen: string[] = [];
  const { hook, lines, start } = setup([
    () => {
      throw new Error('observer broke');
    },
    (s) => seen.push(s.entry.requestId),
  ]);
  const { call, response } = await start({ path: '/v1/noise-suppressor/models' });
  routed(call);
  call.res.status(200).json({});
  await response;
  await hook.onEnd(call, true);
  expect(seen).toEqual([call.ctx.requestId]);
  expect(lines.some((l) => l.includes('a request observer failed') && l.includes(call.ctx.requestId))).toBe(true);
  expect(await rowOf(call)).toBeDefined();
});

test("a key's refusals share one row per status, error type, endpoint and minute, which counts them (issue 35, item 7)", async () => {
  const { clock, hook, start } = setup();
  const [a, b] = [await newKey(db.store), await newKey(db.store)];
  const refuse = async (key: typeof a | null, type: 'rate_limited' | 'scope_denied' | 'missing_token', path = '/v1/noise-suppressor/models', clientIp = '198.51.100.4') => {
    const { call, response } = await start({ path, clientIp });
    const r = routed(call);
    if (key) authenticated(r, key);
    r.ctx.bytesIn = 10;
    reject(r, type, 'refused');
    await response;
    await hook.onEnd(r, true);
    return r.ctx.requestId;
  };
  const first = await refuse(a, 'rate_limited');
  clock.advance(10_000);
  await refuse(a, 'rate_limited');
  clock.advance(49_000); // 12:00:59
  await refuse(a, 'rate_limited');
  await refuse(a, 'rate_limited', '/v1/noise-suppressor/health'); // another endpoint
  await refuse(a, 'scope_denied'); // another status
  await refuse(b, 'rate_limited'); // another key
  await refuse(a, 'rate_limited', undefined, '203.0.113.9'); // another client address
  await refuse(null, 'missing_token');
  await refuse(null, 'missing_token'); // no key: a row each (the unauthenticated limit bounds those)
  clock.advance(1_000); // 12:01:00, the next minute
  await refuse(a, 'rate_limited');
  const rows = (await db.store.queryRequests({ tokenId: a.record.id, status: 429, endpoint: 'models' })).filter((r) => r.clientIp === '198.51.100.4');
  expect(rows.map((r) => [r.time, r.calls])).toEqual([
    ['2026-03-10T12:01:00.000Z', 1],
    ['2026-03-10T12:00:00.000Z', 3],
  ]);
  expect(rows[1]).toMatchObject({ requestId: first, bytesIn: 30, errorType: 'rate_limited', creditsCharged: 0 });
  expect((await db.store.queryRequests({})).length).toBe(8);
  expect(await db.store.countRequests({})).toBe(10);
  expect(await db.store.countRequests({ tokenId: a.record.id })).toBe(7);
  expect(await db.store.countRequests({ status: 401 })).toBe(2);
});
