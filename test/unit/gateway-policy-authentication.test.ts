// The authentication policy (src/gateway/policies/authentication.ts) against a real SQLite store and an injected
// clock: the four 401s, the narrowed call, the RateLimit-* headers from here on, and the throttled last-use write.
import { authenticationPolicy, TOUCH_INTERVAL_MS } from '../../src/gateway/policies/authentication';
import { requestIdPolicy } from '../../src/gateway/policies/request-id';
import { SlidingWindowRateLimiter } from '../../src/shared-state/rate-limit';
import { unauthenticatedRefusal } from '../../src/gateway/unauthenticated';
import { exchange, newKey, openTestStore, routed, testClock, testLogger, type TestStore } from '../helpers/gateway-policy-helpers';

let db: TestStore;
beforeEach(() => {
  db = openTestStore();
});
afterEach(() => db.close());

function setup() {
  const clock = testClock();
  const limiter = new SlidingWindowRateLimiter();
  const refuse = unauthenticatedRefusal({ limiter, perMinute: 60, now: clock.now });
  const { logger } = testLogger();
  const policy = authenticationPolicy({ store: db.store, limiter, refuse, now: clock.now, logger });
  const run = async (headers: Record<string, string>) => {
    const ex = await exchange({ method: 'POST', path: '/v1/noise-suppressor/denoise', headers, now: clock.now });
    await requestIdPolicy().run(ex.call);
    const call = routed(ex.call);
    return { ...ex, call, result: await policy.run(call) };
  };
  return { clock, limiter, run };
}

test('no token: 401 missing_token', async () => {
  const { run } = setup();
  const { result, response } = await run({});
  expect(result).toBe('handled');
  const sent = await response;
  expect(sent.status).toBe(401);
  expect(sent.json.error).toMatchObject({
    type: 'missing_token',
    message: 'Send the access token as "Authorization: Bearer <token>" or "X-API-Key: <token>".',
  });
});

test.each([
  ['an unknown token', { authorization: 'Bearer mw_live_' + 'A'.repeat(32) }],
  ['a token of the wrong shape', { authorization: 'Bearer hello' }],
  ['another Authorization scheme', { authorization: 'Basic dXNlcjpwYXNz' }],
  ['an empty X-API-Key', { 'x-api-key': '  ' }],
])('%s: 401 invalid_token, nothing recorded of a key', async (_what, headers) => {
  const { run } = setup();
  const { call, response } = await run(headers);
  const sent = await response;
  expect(sent.status).toBe(401);
  expect(sent.json.error).toMatchObject({ type: 'invalid_token', message: 'The access token is not recognised.' });
  expect(call.ctx.tokenId).toBeUndefined();
  expect(sent.headers['ratelimit-limit']).toBeUndefined();
});

test('a revoked key: 401 key_revoked, the key still named for the log', async () => {
  const { run } = setup();
  const key = await newKey(db.store);
  await db.store.revokeToken(key.record.id);
  const { call, response } = await run({ authorization: `Bearer ${key.token}` });
  const sent = await response;
  expect(sent.status).toBe(401);
  expect(sent.json.error).toMatchObject({ type: 'key_revoked', message: 'This access token has been revoked.' });
  expect(call.ctx).toMatchObject({ tokenId: key.record.id, workspaceId: key.workspace.id, keyPrefix: key.record.prefix });
});

test('a key expires at its expiry time on the injected clock: 401 key_expired', async () => {
  const { clock, run } = setup();
  const expiresAt = new Date(clock.now() + 1_000).toISOString();
  const key = await newKey(db.store, { expiresAt });
  expect(typeof (await run({ authorization: `Bearer ${key.token}` })).result).toBe('object');
  clock.advance(1_000);
  const { result, response } = await run({ authorization: `Bearer ${key.token}` });
  expect(result).toBe('handled');
  const sent = await response;
  expect(sent.status).toBe(401);
  expect(sent.json.error).toMatchObject({ type: 'key_expired', message: `This access token expired at ${expiresAt}.` });
});

test('a live key narrows the call to its token, workspace and plan limits, and sets RateLimit-* from the limiter', async () => {
  const { clock, limiter, run } = setup();
  const key = await newKey(db.store, { plan: 'starter' });
  await limiter.hit(key.record.id, 300, clock.now());
  clock.advance(15_000);
  const { call, result } = await run({ 'x-api-key': key.token });
  expect(result).toBe(call);
  if (typeof result === 'string') throw new Error('not authenticated');
  expect(result.token.id).toBe(key.record.id);
  expect(result.workspace.id).toBe(key.workspace.id);
  expect(result.limits).toEqual({ requestsPerMinute: 300, creditsPerMonth: 25_000, concurrentStreams: 10, services: ['noise-suppressor'] });
  expect(call.ctx).toMatchObject({ tokenId: key.record.id, workspaceId: key.workspace.id, keyPrefix: key.record.prefix });
  // peek: the state without counting this call (the one counted hit leaves the window in 45 s).
  expect(call.res.getHeader('RateLimit-Limit')).toBe('300');
  expect(call.res.getHeader('RateLimit-Remaining')).toBe('299');
  expect(call.res.getHeader('RateLimit-Reset')).toBe('45');
  expect(call.res.headersSent).toBe(false);
});

test('the last use is written at most every 5 s per token, at the injected time', async () => {
  const { clock, run } = setup();
  const key = await newKey(db.store);
  const bearer = { authorization: `bearer   ${key.token}` };
  const first = clock.now();
  await run(bearer);
  expect((await db.store.getToken(key.record.id))?.lastUsedAt).toBe(new Date(first).toISOString());
  clock.advance(TOUCH_INTERVAL_MS - 1);
  await run(bearer);
  expect((await db.store.getToken(key.record.id))?.lastUsedAt).toBe(new Date(first).toISOString());
  clock.advance(1);
  await run(bearer);
  expect((await db.store.getToken(key.record.id))?.lastUsedAt).toBe(new Date(first + TOUCH_INTERVAL_MS).toISOString());
});

describe('tickets (routes with ticketAuth: the WebSocket stream)', () => {
  function ticketSetup() {
    const clock = testClock();
    const limiter = new SlidingWindowRateLimiter();
    const refuse = unauthenticatedRefusal({ limiter, perMinute: 60, now: clock.now });
    const { logger } = testLogger();
    const issued = new Map<string, string>();
    const tickets = {
      redeem(ticket: string): string | null {
        const id = issued.get(ticket) ?? null;
        issued.delete(ticket);
        return id;
      },
    };
    const policy = authenticationPolicy({ store: db.store, limiter, refuse, now: clock.now, logger, tickets });
    const run = async (path: string) => {
      const ex = await exchange({ method: 'GET', path, headers: {}, now: clock.now });
      await requestIdPolicy().run(ex.call);
      const call = routed(ex.call);
      return { ...ex, call, result: await policy.run(call) };
    };
    return { issued, run };
  }

  test('a ticket stands for its key once; a second use, an unknown ticket → 401 invalid_token', async () => {
    const { issued, run } = ticketSetup();
    const key = await newKey(db.store);
    issued.set('tk_one', key.record.id);
    const first = await run('/v1/noise-suppressor/stream?ticket=tk_one');
    expect(first.result).not.toBe('handled');
    expect(first.call.ctx.tokenId).toBe(key.record.id);
    const again = await run('/v1/noise-suppressor/stream?ticket=tk_one');
    expect(again.result).toBe('handled');
    expect((await again.response).json.error).toMatchObject({ type: 'invalid_token' });
  });

  test('a ticket on a route without ticketAuth is not a credential: 401 missing_token', async () => {
    const { issued, run } = ticketSetup();
    const key = await newKey(db.store);
    issued.set('tk_two', key.record.id);
    const r = await run('/v1/noise-suppressor/models?ticket=tk_two');
    expect(r.result).toBe('handled');
    expect((await r.response).json.error).toMatchObject({ type: 'missing_token' });
    expect(issued.has('tk_two')).toBe(true);
  });

  test('a ticket for a revoked key: 401 key_revoked', async () => {
    const { issued, run } = ticketSetup();
    const key = await newKey(db.store);
    await db.store.revokeToken(key.record.id);
    issued.set('tk_three', key.record.id);
    const r = await run('/v1/noise-suppressor/stream?ticket=tk_three');
    expect((await r.response).json.error).toMatchObject({ type: 'key_revoked' });
  });
});
