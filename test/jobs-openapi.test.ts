// openapi.json stays true to the jobs code: paths and methods of the route table, form fields, error types, and the
// job object's fields.
import fs from 'node:fs';
import path from 'node:path';
import { PROJECT_ROOT } from '../src/config';
import { ROUTES } from '../src/gateway/routes';
import { JOB_ERRORS } from '../src/jobs/api/errors';
import { JOB_FIELDS } from '../src/jobs/api/params';
import { jobView } from '../src/jobs/views';
import type { JobRecord } from '../src/jobs/types';

const spec = JSON.parse(fs.readFileSync(path.join(PROJECT_ROOT, 'openapi.json'), 'utf8'));

test('every jobs route is described, with its methods', () => {
  for (const r of ROUTES.filter((x) => x.target === 'jobs')) {
    const p = spec.paths[`/v1/${r.service}/${r.endpoint}`];
    expect([r.endpoint, r.method, p?.[r.method.toLowerCase()] !== undefined]).toEqual([r.endpoint, r.method, true]);
    expect(p[r.method.toLowerCase()].description).toContain(r.scope);
  }
});

test('form fields, error types and job fields match the code', () => {
  const post = spec.paths['/v1/noise-suppressor/jobs'].post;
  expect(Object.keys(post.requestBody.content['multipart/form-data'].schema.properties).sort()).toEqual(['file', 'echo_reference', ...JOB_FIELDS].sort()); // the two file parts and the text fields
  expect([...spec.components.schemas.JobErrorEnvelope.properties.error.properties.type.enum].sort()).toEqual(Object.keys(JOB_ERRORS).sort());
  const job: JobRecord = {
    id: 'job_x', workspaceId: 'w', tokenId: null, requestId: null, status: 'queued', progress: 0,
    params: { model: 'nsm-2', attenuation_limit_db: 0, output_format: 'wav', keep_input_sample_rate: true },
    input: { source: 'upload', url: null, filename: 'a', bytes: 1 }, webhookUrl: null, createdAt: 0, startedAt: null,
    finishedAt: null, updatedAt: 0, attempts: 0, runAfter: 0, leaseOwner: null, leaseExpiresAt: null, stats: null,
    error: null, result: null, resultDeletedAt: null, expiresAt: null, credits: 1, chargedAt: 0, refund: 'none',
  };
  const schema = spec.components.schemas.Job;
  expect(Object.keys(jobView(job)).sort()).toEqual(Object.keys(schema.properties).sort());
  expect([...schema.required].sort()).toEqual(Object.keys(jobView(job)).sort());
  expect(spec.webhooks.jobFinished.post.requestBody.content['application/json'].schema.$ref).toBe('#/components/schemas/JobEvent');
});
