// The console's jobs API (/console/api/jobs*, /console/api/webhooks/*) in the full app: session and CSRF required,
// jobs of every workspace with names, cancel with refund, result download, secret show/rotate, delivery log.
import fs from 'node:fs';
import request from 'supertest';
import { createApp, type AppHandle } from '../../src/app';
import type { Config } from '../../src/config';
import { fixture, testConfig } from '../helpers/service-helpers';
import { until } from '../helpers/jobs-helpers';

describe('console jobs API', () => {
  let config: Config;
  let handle: AppHandle;
  let cookie: string;
  let csrf: string;
  let wsId: string;
  let token: string;

  beforeAll(async () => {
    config = { ...testConfig(), adminSecret: 'console-jobs-secret' };
    config.jobs = { ...config.jobs, runner: false };
    handle = await createApp(config, { log: () => undefined });
    const ws = await handle.store.createWorkspace('console-ws', 'scale');
    wsId = ws.id;
    token = (await handle.store.createToken({ workspaceId: ws.id, name: 'c', scopes: ['*'], allowedIps: [], expiresAt: null })).token;
    const login = await request(handle.app).post('/console/api/login').send({ secret: 'console-jobs-secret' }).expect(200);
    cookie = ([] as string[]).concat(login.headers['set-cookie'] ?? []).find((c) => c.startsWith('ns_console_session='))!.split(';')[0];
    csrf = login.body.csrf_token;
  });

  afterAll(async () => {
    await handle.close();
    fs.rmSync(config.dataDir, { recursive: true, force: true });
  });

  test('needs a session; state changes need the CSRF header', async () => {
    expect((await request(handle.app).get('/console/api/jobs')).status).toBe(401);
    expect((await request(handle.app).get(`/console/api/webhooks/secret?workspace=${wsId}`)).status).toBe(401);
    const noCsrf = await request(handle.app).post('/console/api/webhooks/secret/rotate').set('Cookie', cookie).send({ workspace_id: wsId });
    expect(noCsrf.status).toBe(403);
  });

  test('lists jobs with workspace names; cancel refunds; secret shown and rotated', async () => {
    const sub = await request(handle.app).post('/v1/noise-suppressor/jobs').set('Authorization', `Bearer ${token}`).attach('file', fixture('speech-noisy-16k-mono.wav'));
    expect(sub.status).toBe(202);
    expect(await handle.store.creditsUsed(wsId, new Date())).toBe(1);
    const list = await request(handle.app).get('/console/api/jobs').set('Cookie', cookie);
    expect(list.status).toBe(200);
    expect(list.body.jobs[0]).toMatchObject({ id: sub.body.id, status: 'queued', workspace_name: 'console-ws' });
    const one = await request(handle.app).get(`/console/api/jobs/${sub.body.id}`).set('Cookie', cookie);
    expect(one.body).toMatchObject({ job: { id: sub.body.id }, deliveries: [] });
    const cancel = await request(handle.app).post(`/console/api/jobs/${sub.body.id}/cancel`).set('Cookie', cookie).set('X-CSRF-Token', csrf);
    expect(cancel.body.job.status).toBe('canceled');
    await until(async () => ((await handle.store.creditsUsed(wsId, new Date())) === 0 ? true : undefined));
    expect((await request(handle.app).get(`/console/api/jobs/${sub.body.id}/result`).set('Cookie', cookie)).status).toBe(404);

    const shown = await request(handle.app).get(`/console/api/webhooks/secret?workspace=${wsId}`).set('Cookie', cookie);
    expect(shown.body.secret).toMatch(/^whsec_/);
    const rotated = await request(handle.app).post('/console/api/webhooks/secret/rotate').set('Cookie', cookie).set('X-CSRF-Token', csrf).send({ workspace_id: wsId });
    expect(rotated.body.secret).not.toBe(shown.body.secret);
    expect(await handle.jobs.store.webhookSecret(wsId)).toBe(rotated.body.secret);
    expect((await request(handle.app).get('/console/api/webhooks/secret?workspace=ws_nope').set('Cookie', cookie)).status).toBe(404);
    expect((await request(handle.app).get('/console/api/webhooks/deliveries').set('Cookie', cookie)).body).toEqual({ deliveries: [] });
    expect((await request(handle.app).get('/console/api/jobs?status=bogus').set('Cookie', cookie)).status).toBe(400);
  });
});
