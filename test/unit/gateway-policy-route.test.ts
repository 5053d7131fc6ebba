// The route policy (src/gateway/policies/route.ts) with the refusal of unauthenticated requests it shares with
// authentication (src/gateway/unauthenticated.ts): 404/405 envelopes, Allow, paths outside /v1 passed on, the call
// narrowed to its route, and the per-address budget of refusals on an injected clock.
import { requestIdPolicy } from '../../src/gateway/policies/request-id';
import { routePolicy } from '../../src/gateway/policies/route';
import { ROUTES } from '../../src/gateway/routes';
import { SlidingWindowRateLimiter } from '../../src/shared-state/rate-limit';
import { unauthenticatedRefusal } from '../../src/gateway/unauthenticated';
import { exchange, testClock, type ExchangeOptions } from '../helpers/gateway-policy-helpers';

function setup(perMinute = 60) {
  const clock = testClock();
  const refuse = unauthenticatedRefusal({ limiter: new SlidingWindowRateLimiter(), perMinute, now: clock.now });
  const policy = routePolicy({ routes: ROUTES, refuse });
  const run = async (opts: ExchangeOptions) => {
    const ex = await exchange({ ...opts, now: clock.now });
    await requestIdPolicy().run(ex.call);
    return { ...ex, result: await policy.run(ex.call) };
  };
  return { clock, run };
}

test('a path outside /v1 passes on, untouched', async () => {
  const { run } = setup();
  const { call, result } = await run({ path: '/console/login' });
  expect(result).toBe('pass');
  expect(call.res.headersSent).toBe(false);
  expect(call.ctx.errorType).toBeUndefined();
});

test('a published endpoint narrows the call to its route and its {name} values', async () => {
  const { run } = setup();
  const { call, result } = await run({ path: '/v1/noise-suppressor/jobs/job_abc123' });
  expect(result).toBe(call);
  if (typeof result === 'string') throw new Error('not routed');
  expect(result.route).toMatchObject({ service: 'noise-suppressor', endpoint: 'jobs/{id}', method: 'GET' });
  expect(result.match.kind).toBe('ok');
  expect(call.ctx.route).toBe(result.route);
  expect(call.ctx.params).toEqual({ id: 'job_abc123' });
  expect(call.res.headersSent).toBe(false);
});

test('HEAD is answered like GET', async () => {
  const { run } = setup();
  const { result } = await run({ method: 'HEAD', path: '/v1/noise-suppressor/models' });
  if (typeof result === 'string') throw new Error('not routed');
  expect(result.route.method).toBe('GET');
});

test('unknown service: 404 service_not_found in the envelope', async () => {
  const { run } = setup();
  const { call, result, response } = await run({ method: 'POST', path: '/v1/voice-clone/denoise' });
  expect(result).toBe('handled');
  const sent = await response;
  expect(sent.status).toBe(404);
  expect(sent.json.error).toEqual({
    type: 'service_not_found',
    message: 'Unknown service "voice-clone". Paths are /v1/{service}/{endpoint}.',
    request_id: call.ctx.requestId,
  });
  expect(call.ctx.errorType).toBe('service_not_found');
  expect(call.match).toEqual({ kind: 'service_not_found', service: 'voice-clone' });
});

test('unknown endpoint: 404 endpoint_not_found, the echoed segment clipped to 100 characters', async () => {
  const { run } = setup();
  const long = 'x'.repeat(150);
  const { response } = await run({ path: `/v1/noise-suppressor/${long}` });
  const sent = await response;
  expect(sent.status).toBe(404);
  expect(sent.json.error.type).toBe('endpoint_not_found');
  expect(sent.json.error.message).toBe(`Service "noise-suppressor" has no endpoint "${'x'.repeat(100)}".`);
});

test('another method: 405 method_not_allowed with Allow', async () => {
  const { run } = setup();
  const { response } = await run({ method: 'DELETE', path: '/v1/noise-suppressor/models' });
  const sent = await response;
  expect(sent.status).toBe(405);
  expect(sent.headers.allow).toBe('GET, HEAD');
  expect(sent.json.error).toMatchObject({
    type: 'method_not_allowed',
    message: 'DELETE is not allowed on /v1/noise-suppressor/models; use GET or HEAD.',
  });
});

test('each address gets `perMinute` refusals; beyond it 429 with Retry-After, unlogged, until the window moves on', async () => {
  const { clock, run } = setup(2);
  const path = '/v1/nope';
  expect((await (await run({ path })).response).status).toBe(404);
  clock.advance(10_000);
  expect((await (await run({ path })).response).status).toBe(404);
  clock.advance(10_000);
  const over = await run({ path });
  const sent = await over.response;
  expect(sent.status).toBe(429);
  // The first refusal leaves the 60 s window 40 s from now.
  expect(sent.headers['retry-after']).toBe('40');
  expect(sent.json.error).toMatchObject({
    type: 'rate_limited',
    message: 'Too many unauthenticated requests from this address (2 per minute); retry in 40 s.',
  });
  expect(over.call.unlogged).toBe(true);
  // Another address has its own budget.
  expect((await (await run({ path, clientIp: '198.51.100.7' })).response).status).toBe(404);
  clock.advance(40_000);
  const later = await run({ path });
  expect((await later.response).status).toBe(404);
  expect(later.call.unlogged).toBeUndefined();
});

test('a budget of 0 turns the per-address limit off', async () => {
  const { run } = setup(0);
  for (let i = 0; i < 5; i++) expect((await (await run({ path: '/v1/nope' })).response).status).toBe(404);
});
