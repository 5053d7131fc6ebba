// The ip-allow-list policy (src/gateway/policies/ip-allow-list.ts): a key with allowed addresses works only from
// them (IPv4/IPv6, single addresses and CIDR ranges); an empty list allows any address. Keys from a real SQLite store.
import { ipAllowListPolicy } from '../../src/gateway/policies/ip-allow-list';
import { requestIdPolicy } from '../../src/gateway/policies/request-id';
import { authenticated, exchange, newKey, openTestStore, routed, type Key, type TestStore } from '../helpers/gateway-policy-helpers';

let db: TestStore;
beforeAll(() => {
  db = openTestStore();
});
afterAll(() => db.close());

const policy = ipAllowListPolicy();

async function run(key: Key, clientIp: string) {
  const ex = await exchange({ path: '/v1/noise-suppressor/models', clientIp });
  await requestIdPolicy().run(ex.call);
  return { ...ex, result: await policy.run(authenticated(routed(ex.call), key)) };
}

test('an empty list allows any address', async () => {
  const key = await newKey(db.store, { allowedIps: [] });
  expect((await run(key, '192.0.2.1')).result).toBe('continue');
  expect((await run(key, '2001:db8::1')).result).toBe('continue');
});

test('a listed range or address is let through', async () => {
  const key = await newKey(db.store, { allowedIps: ['10.0.0.0/8', '203.0.113.7', '2001:db8::/32'] });
  expect((await run(key, '10.200.3.4')).result).toBe('continue');
  expect((await run(key, '203.0.113.7')).result).toBe('continue');
  expect((await run(key, '2001:db8:1::5')).result).toBe('continue');
  // An IPv4 client seen through an IPv6 socket is matched as IPv4.
  expect((await run(key, '::ffff:10.1.1.1')).result).toBe('continue');
});

test('any other address: 403 ip_not_allowed naming it', async () => {
  const key = await newKey(db.store, { allowedIps: ['10.0.0.0/8'] });
  const { call, result, response } = await run(key, '192.0.2.44');
  expect(result).toBe('handled');
  const sent = await response;
  expect(sent.status).toBe(403);
  expect(sent.json.error).toEqual({
    type: 'ip_not_allowed',
    message: 'This access token may not be used from 192.0.2.44.',
    request_id: call.ctx.requestId,
  });
  expect(call.ctx.errorType).toBe('ip_not_allowed');
});
