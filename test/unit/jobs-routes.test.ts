// The route table's `{name}` segments and methods for the jobs endpoints; the v1 routes match as before.
import { loadConfig } from '../../src/config';
import { knownScopes, matchRoute, ROUTES } from '../../src/gateway/routes';
import { configureJobRoutes } from '../../src/jobs/api/routes';

const P = '/v1/noise-suppressor';

test('jobs paths match with their parameters and methods', () => {
  expect(matchRoute('POST', `${P}/jobs`)).toMatchObject({ kind: 'ok', route: { endpoint: 'jobs', method: 'POST', credits: 1, target: 'jobs' }, params: {} });
  expect(matchRoute('GET', `${P}/jobs/`)).toMatchObject({ kind: 'ok', route: { endpoint: 'jobs', method: 'GET', credits: 0 } });
  expect(matchRoute('GET', `${P}/jobs/job_AbC-1_x`)).toMatchObject({ kind: 'ok', route: { endpoint: 'jobs/{id}' }, params: { id: 'job_AbC-1_x' } });
  expect(matchRoute('HEAD', `${P}/jobs/job_1/result`)).toMatchObject({ kind: 'ok', route: { endpoint: 'jobs/{id}/result', method: 'GET' }, params: { id: 'job_1' } });
  expect(matchRoute('DELETE', `${P}/jobs/job_1`)).toMatchObject({ kind: 'ok', route: { method: 'DELETE', scope: 'noise-suppressor:jobs' } });
  expect(matchRoute('PATCH', `${P}/jobs/job_1`)).toEqual({ kind: 'method_not_allowed', service: 'noise-suppressor', endpoint: 'jobs/{id}', allow: ['GET', 'HEAD', 'DELETE'] });
  expect(matchRoute('DELETE', `${P}/jobs`)).toMatchObject({ kind: 'method_not_allowed', allow: ['POST', 'GET', 'HEAD'] });
  for (const bad of [`${P}/jobs/a.b`, `${P}/jobs/${'x'.repeat(65)}`, `${P}/jobs/a/b`, `${P}/jobs/a/result/b`, `${P}/jobs//result`]) {
    expect(matchRoute('GET', bad).kind).toBe('endpoint_not_found');
  }
  // The fixed v1 routes are unchanged.
  expect(matchRoute('POST', `${P}/denoise`)).toMatchObject({ kind: 'ok', route: { endpoint: 'denoise' }, params: {} });
  expect(matchRoute('POST', `${P}/denoise/batch`)).toMatchObject({ kind: 'ok', route: { endpoint: 'denoise/batch' } });
  expect(matchRoute('GET', `${P}/denoise`)).toMatchObject({ kind: 'method_not_allowed', allow: ['POST'] });
  expect(matchRoute('GET', `${P}/nothing`).kind).toBe('endpoint_not_found');
});

test('scope noise-suppressor:jobs is known; the upload limit follows JOBS_MAX_UPLOAD_MB', () => {
  expect(knownScopes()).toContain('noise-suppressor:jobs');
  const routes = configureJobRoutes(ROUTES, loadConfig({ JOBS_MAX_UPLOAD_MB: '3' } as NodeJS.ProcessEnv));
  const post = routes.find((r) => r.endpoint === 'jobs' && r.method === 'POST')!;
  expect(post.maxBodyBytes).toBe(3 * 1024 * 1024 + 1024 * 1024);
  expect(routes.find((r) => r.endpoint === 'denoise')!.maxBodyBytes).toBe(ROUTES.find((r) => r.endpoint === 'denoise')!.maxBodyBytes);
  expect(loadConfig({} as NodeJS.ProcessEnv).jobs).toMatchObject({
    maxUploadBytes: 2048 * 1024 * 1024,
    retentionMs: 24 * 3600_000,
    allowPrivateUrls: false,
    runner: true,
    leaseMs: 30_000,
  });
  expect(() => loadConfig({ JOB_RETENTION_HOURS: '0' } as NodeJS.ProcessEnv)).toThrow(/JOB_RETENTION_HOURS/);
});
