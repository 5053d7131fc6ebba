// The declared-body-size policy (src/gateway/policies/declared-body-size.ts): an early 413 from the Content-Length a
// client declares, against the route's limit; no limit (0) and no or odd Content-Length let the call through.
import { declaredBodySizePolicy } from '../../src/gateway/policies/declared-body-size';
import { requestIdPolicy } from '../../src/gateway/policies/request-id';
import { ROUTES } from '../../src/gateway/routes';
import type { EndpointSpec } from '../../src/gateway/types';
import { exchange, routed } from '../helpers/gateway-policy-helpers';

const policy = declaredBodySizePolicy();
const routes: EndpointSpec[] = [
  ...ROUTES,
  { service: 'noise-suppressor', endpoint: 'tiny', method: 'POST', scope: 'noise-suppressor:tiny', credits: 0, maxBodyBytes: 1000 },
];

async function run(method: string, path: string, headers: Record<string, string>) {
  const ex = await exchange({ method, path, headers });
  await requestIdPolicy().run(ex.call);
  return { ...ex, result: await policy.run(routed(ex.call, routes)) };
}

test('up to the limit passes', async () => {
  expect((await run('POST', '/v1/noise-suppressor/tiny', { 'content-length': '1000' })).result).toBe('continue');
  expect((await run('POST', '/v1/noise-suppressor/tiny', {})).result).toBe('continue');
  expect((await run('POST', '/v1/noise-suppressor/tiny', { 'content-length': 'lots' })).result).toBe('continue');
});

test('above the limit: 413 payload_too_large naming both sizes', async () => {
  const { call, result, response } = await run('POST', '/v1/noise-suppressor/tiny', { 'content-length': '1001' });
  expect(result).toBe('handled');
  const sent = await response;
  expect(sent.status).toBe(413);
  expect(sent.json.error).toEqual({
    type: 'payload_too_large',
    message: 'Request body of 1001 bytes exceeds the 1000-byte limit of this endpoint.',
    request_id: call.ctx.requestId,
  });
});

test("the published /denoise limit is 100 MB plus the multipart allowance; a route without a limit doesn't check", async () => {
  const limit = ROUTES.find((r) => r.endpoint === 'denoise')?.maxBodyBytes ?? 0;
  expect((await run('POST', '/v1/noise-suppressor/denoise', { 'content-length': String(limit) })).result).toBe('continue');
  expect((await run('POST', '/v1/noise-suppressor/denoise', { 'content-length': String(limit + 1) })).result).toBe('handled');
  expect((await run('GET', '/v1/noise-suppressor/models', { 'content-length': String(10 * limit) })).result).toBe('continue');
});
