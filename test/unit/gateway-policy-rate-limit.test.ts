// The rate-limit policy (src/gateway/policies/rate-limit.ts) on the in-memory sliding window and an injected clock:
// the plan's requests per minute per token, RateLimit-* on every answer, 429 with Retry-After beyond the limit.
// Workspaces and keys from a real SQLite store.
import { rateLimitPolicy } from '../../src/gateway/policies/rate-limit';
import { requestIdPolicy } from '../../src/gateway/policies/request-id';
import { SlidingWindowRateLimiter } from '../../src/shared-state/rate-limit';
import { authenticated, exchange, newKey, openTestStore, routed, testClock, type Key, type TestStore } from '../helpers/gateway-policy-helpers';

let db: TestStore;
beforeAll(() => {
  db = openTestStore();
});
afterAll(() => db.close());

function setup() {
  const clock = testClock();
  const policy = rateLimitPolicy({ limiter: new SlidingWindowRateLimiter(), now: clock.now });
  const run = async (key: Key) => {
    const ex = await exchange({ path: '/v1/noise-suppressor/models', now: clock.now });
    await requestIdPolicy().run(ex.call);
    return { ...ex, result: await policy.run(authenticated(routed(ex.call), key)) };
  };
  return { clock, run };
}

const headers = (res: { getHeader(name: string): unknown }) => [
  res.getHeader('RateLimit-Limit'),
  res.getHeader('RateLimit-Remaining'),
  res.getHeader('RateLimit-Reset'),
];

test("the workspace's requests per minute, per token, on a sliding window", async () => {
  const { clock, run } = setup();
  const key = await newKey(db.store, { plan: 'enterprise', custom: { requestsPerMinute: 2 } });
  const first = await run(key);
  expect(first.result).toBe('continue');
  expect(headers(first.call.res)).toEqual(['2', '1', '60']);
  clock.advance(20_000);
  const second = await run(key);
  expect(second.result).toBe('continue');
  expect(headers(second.call.res)).toEqual(['2', '0', '40']);
  clock.advance(10_000);
  const third = await run(key);
  expect(third.result).toBe('handled');
  const sent = await third.response;
  expect(sent.status).toBe(429);
  expect(sent.headers['retry-after']).toBe('30');
  expect([sent.headers['ratelimit-limit'], sent.headers['ratelimit-remaining'], sent.headers['ratelimit-reset']]).toEqual(['2', '0', '30']);
  expect(sent.json.error).toEqual({
    type: 'rate_limited',
    message: 'Rate limit of 2 requests per minute reached; retry in 30 s.',
    request_id: third.call.ctx.requestId,
  });
  // Another key of another workspace has its own window.
  expect((await run(await newKey(db.store, { plan: 'enterprise', custom: { requestsPerMinute: 2 } }))).result).toBe('continue');
  // When the first call leaves the window, one more fits.
  clock.advance(30_000);
  expect((await run(key)).result).toBe('continue');
  expect((await run(key)).result).toBe('handled');
});

test('the plan sets the limit: free is 60 per minute', async () => {
  const { run } = setup();
  const key = await newKey(db.store, { plan: 'free' });
  for (let i = 0; i < 60; i++) expect((await run(key)).result).toBe('continue');
  const over = await run(key);
  expect(over.result).toBe('handled');
  expect((await over.response).status).toBe(429);
});
