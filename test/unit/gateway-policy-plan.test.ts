// The plan policy (src/gateway/policies/plan.ts): the workspace's plan must include the route's service and the
// workspace must not have excluded it. Workspaces from a real SQLite store.
import { requestIdPolicy } from '../../src/gateway/policies/request-id';
import { planPolicy } from '../../src/gateway/policies/plan';
import { ROUTES } from '../../src/gateway/routes';
import type { EndpointSpec } from '../../src/gateway/types';
import type { PlanId } from '../../src/store/gateway/types';
import { authenticated, exchange, newKey, openTestStore, routed, type TestStore } from '../helpers/gateway-policy-helpers';

let db: TestStore;
beforeAll(() => {
  db = openTestStore();
});
afterAll(() => db.close());

const policy = planPolicy();
/** A second service that only the enterprise plan includes ('*'). */
const routes: EndpointSpec[] = [
  ...ROUTES,
  { service: 'speech-to-text', endpoint: 'transcribe', method: 'POST', scope: 'speech-to-text:transcribe', credits: 1, maxBodyBytes: 0 },
];

async function run(plan: PlanId, path: string, excluded: string[] = []) {
  const key = await newKey(db.store, { plan });
  if (excluded.length > 0) key.workspace = await db.store.setExcludedServices(key.workspace.id, excluded);
  const ex = await exchange({ method: 'POST', path });
  await requestIdPolicy().run(ex.call);
  return { ...ex, result: await policy.run(authenticated(routed(ex.call, routes), key)) };
}

test.each([['free'], ['starter'], ['scale'], ['enterprise']] as const)('the %s plan includes noise-suppressor', async (plan) => {
  expect((await run(plan, '/v1/noise-suppressor/denoise')).result).toBe('continue');
});

test('a service the plan does not include: 403 plan_forbids_service', async () => {
  const { call, result, response } = await run('scale', '/v1/speech-to-text/transcribe');
  expect(result).toBe('handled');
  const sent = await response;
  expect(sent.status).toBe(403);
  expect(sent.json.error).toEqual({
    type: 'plan_forbids_service',
    message: 'The scale plan of this workspace does not include "speech-to-text".',
    request_id: call.ctx.requestId,
  });
  expect((await run('enterprise', '/v1/speech-to-text/transcribe')).result).toBe('continue');
});

test('a service the workspace excluded is refused even though its plan includes it', async () => {
  const { result, response } = await run('enterprise', '/v1/noise-suppressor/denoise', ['noise-suppressor']);
  expect(result).toBe('handled');
  expect((await response).json.error).toMatchObject({
    type: 'plan_forbids_service',
    message: 'The enterprise plan of this workspace does not include "noise-suppressor".',
  });
  expect((await run('enterprise', '/v1/speech-to-text/transcribe', ['noise-suppressor'])).result).toBe('continue');
});
