// The scope policy (src/gateway/policies/scope.ts): a key's scopes must grant the route's scope: '*', the service's
// '{service}:*' or the exact scope. Keys from a real SQLite store.
import { requestIdPolicy } from '../../src/gateway/policies/request-id';
import { scopePolicy } from '../../src/gateway/policies/scope';
import { authenticated, exchange, newKey, openTestStore, routed, type TestStore } from '../helpers/gateway-policy-helpers';

let db: TestStore;
beforeAll(() => {
  db = openTestStore();
});
afterAll(() => db.close());

const policy = scopePolicy();

async function run(scopes: string[], method: string, path: string) {
  const key = await newKey(db.store, { scopes });
  const ex = await exchange({ method, path });
  await requestIdPolicy().run(ex.call);
  return { ...ex, result: await policy.run(authenticated(routed(ex.call), key)) };
}

test.each([
  [['*']],
  [['noise-suppressor:*']],
  [['noise-suppressor:models', 'noise-suppressor:denoise']],
])('scopes %j grant POST /denoise', async (scopes) => {
  expect((await run(scopes, 'POST', '/v1/noise-suppressor/denoise')).result).toBe('continue');
});

test('a key without the route scope: 403 scope_denied naming the scope', async () => {
  const { call, result, response } = await run(['noise-suppressor:models', 'other:*'], 'POST', '/v1/noise-suppressor/denoise/batch');
  expect(result).toBe('handled');
  const sent = await response;
  expect(sent.status).toBe(403);
  expect(sent.json.error).toEqual({
    type: 'scope_denied',
    message: 'This access token lacks the scope "noise-suppressor:denoise-batch".',
    request_id: call.ctx.requestId,
  });
});

test('a scope of the same name prefix is not a wildcard', async () => {
  const { result } = await run(['noise-suppressor:denoise'], 'POST', '/v1/noise-suppressor/denoise/batch');
  expect(result).toBe('handled');
});
