// The request-id policy (src/gateway/policies/request-id.ts): every call gets the gateway's own X-Request-Id; a
// client's id that looks like one is kept beside it for correlation, anything else is dropped. Nothing here reads a
// clock or a store: the policy needs neither.
import { requestIdPolicy } from '../../src/gateway/policies/request-id';
import { reject } from '../../src/gateway/call';
import { exchange } from '../helpers/gateway-policy-helpers';

const policy = requestIdPolicy();

test('mints req_<32 hex>, puts it on the context and on every response, refusals included', async () => {
  const { call, response } = await exchange({ path: '/v1/anything' });
  expect(await policy.run(call)).toBe('continue');
  expect(call.ctx.requestId).toMatch(/^req_[0-9a-f]{32}$/);
  expect(call.ctx.clientRequestId).toBeUndefined();
  reject(call, 'missing_token', 'no token');
  const sent = await response;
  expect(sent.status).toBe(401);
  expect(sent.headers['x-request-id']).toBe(call.ctx.requestId);
  expect(sent.json).toEqual({ error: { type: 'missing_token', message: 'no token', request_id: call.ctx.requestId } });
});

test('two calls get two ids', async () => {
  const a = (await exchange({ path: '/v1/a' })).call;
  const b = (await exchange({ path: '/v1/a' })).call;
  await policy.run(a);
  await policy.run(b);
  expect(a.ctx.requestId).not.toBe(b.ctx.requestId);
});

test("a client's id that looks like one is kept as clientRequestId, never used as the gateway's", async () => {
  const { call } = await exchange({ path: '/v1/a', headers: { 'x-request-id': 'trace-42:abc.def' } });
  await policy.run(call);
  expect(call.ctx.clientRequestId).toBe('trace-42:abc.def');
  expect(call.ctx.requestId).toMatch(/^req_[0-9a-f]{32}$/);
  expect(call.res.getHeader('X-Request-Id')).toBe(call.ctx.requestId);
});

test.each([['has space'], ['-starts-with-dash'], ['x'.repeat(129)], ['a/b']])("a client's id %j that does not look like one is dropped", async (sent) => {
  const { call } = await exchange({ path: '/v1/a', headers: { 'x-request-id': sent } });
  await policy.run(call);
  expect(call.ctx.clientRequestId).toBeUndefined();
  expect(call.ctx.requestId).toMatch(/^req_[0-9a-f]{32}$/);
});

test('an id an earlier handler assigned is kept', async () => {
  const { call } = await exchange({ path: '/v1/a' });
  call.res.locals.requestId = 'req_' + '0'.repeat(32);
  await policy.run(call);
  expect(call.ctx.requestId).toBe('req_' + '0'.repeat(32));
});
