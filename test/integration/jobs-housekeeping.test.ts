// The runner's housekeeping in the full app: a job whose runner died (lease expired) is re-queued and finished by
// this runner; pending refunds are settled; expired jobs are deleted with their files; stray files are removed.
import fs from 'node:fs';
import path from 'node:path';
import request from 'supertest';
import { createApp, type AppHandle } from '../../src/app';
import type { Config } from '../../src/config';
import type { NewJob } from '../../src/store/jobs/types';
import { fixture, testConfig } from '../helpers/service-helpers';
import { sleep, until } from '../helpers/jobs-helpers';

const MONO = fixture('speech-noisy-16k-mono.wav');

describe('job housekeeping', () => {
  let config: Config;
  let handle: AppHandle;
  let wsId: string;
  let token: string;

  beforeAll(async () => {
    config = testConfig();
    config.jobs = { ...config.jobs, retentionMs: 300 };
    handle = await createApp(config, { log: () => undefined });
    const ws = await handle.store.createWorkspace('housekeeping', 'scale');
    wsId = ws.id;
    token = (await handle.store.createToken({ workspaceId: ws.id, name: 'h', scopes: ['*'], allowedIps: [], expiresAt: null })).token;
  });

  afterAll(async () => {
    await handle.close();
    fs.rmSync(config.dataDir, { recursive: true, force: true });
  });

  const newJob = (id: string): NewJob => ({
    id,
    workspaceId: wsId,
    tokenId: null,
    requestId: null,
    params: { model: 'nsm-1', attenuation_limit_db: 0, output_format: 'wav', keep_input_sample_rate: true },
    input: { source: 'upload', url: null, filename: 'mono.wav', bytes: fs.statSync(MONO).size },
    webhookUrl: null,
    credits: 1,
    chargedAt: Date.now(),
    createdAt: Date.now(),
  });

  test('a job claimed by a runner that died is re-queued when its lease expires, and finished by a live runner', async () => {
    const jobs = handle.jobs;
    // Created "in the future" so the live runner cannot claim it before the dead one does.
    const future = Date.now() + 10 * 60_000;
    await jobs.store.createJob({ ...newJob('job_orphanedbyadeadrunner'), createdAt: future }, 20);
    fs.copyFileSync(MONO, jobs.files.input('job_orphanedbyadeadrunner'));
    // A runner in another process claimed it and died: its lease ran out a minute ago.
    const claimed = await jobs.store.claimJob('runner_dead', -11 * 60_000, future);
    expect(claimed).toMatchObject({ id: 'job_orphanedbyadeadrunner', status: 'running', leaseOwner: 'runner_dead', attempts: 1 });
    await jobs.runner!.housekeepNow();
    const done = await until(async () => {
      const j = await jobs.store.getJob('job_orphanedbyadeadrunner');
      return j && (j.status === 'succeeded' || j.status === 'failed') ? j : undefined;
    }, 30_000);
    expect(done).toMatchObject({ status: 'succeeded', attempts: 2, leaseOwner: null });
    // The dead runner's late writes are refused.
    expect(await jobs.store.renewLease('job_orphanedbyadeadrunner', 'runner_dead', 1000, Date.now(), 0.5)).toBe(false);
  });

  test('a pending refund (canceled, refund not settled yet) is given back exactly once', async () => {
    const jobs = handle.jobs;
    await handle.store.chargeCredits(wsId, 1, 1000, new Date());
    const before = await handle.store.creditsUsed(wsId, new Date());
    await jobs.store.createJob({ ...newJob('job_refundpending'), createdAt: Date.now() + 10 * 60_000 }, 20);
    const canceled = await jobs.store.cancelJob('job_refundpending', null, Date.now(), Date.now() + 60_000);
    expect(canceled!.job.refund).toBe('pending');
    await Promise.all([jobs.runner!.housekeepNow(), jobs.runner!.housekeepNow()]);
    await jobs.runner!.housekeepNow();
    expect((await jobs.store.getJob('job_refundpending'))!.refund).toBe('done');
    expect(await handle.store.creditsUsed(wsId, new Date())).toBe(before - 1);
  });

  test('expired jobs are deleted with their files; stray old files are removed, fresh ones kept', async () => {
    const res = await request(handle.app).post('/v1/noise-suppressor/jobs').set('Authorization', `Bearer ${token}`).attach('file', MONO);
    const id = res.body.id as string;
    const job = await until(async () => {
      const j = await handle.jobs.store.getJob(id);
      return j?.status === 'succeeded' ? j : undefined;
    });
    const resultFile = path.join(handle.jobs.files.results, job.result!.file);
    expect(fs.existsSync(resultFile)).toBe(true);
    const stray = path.join(handle.jobs.files.inputs, 'job_straystraystraystray01');
    const fresh = path.join(handle.jobs.files.incoming, 'job_freshfreshfreshfresh1.upload');
    fs.writeFileSync(stray, 'x');
    fs.writeFileSync(fresh, 'x');
    const twoHoursAgo = new Date(Date.now() - 2 * 3600_000);
    fs.utimesSync(stray, twoHoursAgo, twoHoursAgo);
    await sleep(400); // past the 300 ms retention
    await handle.jobs.runner!.housekeepNow({ retention: true });
    expect(await handle.jobs.store.getJob(id)).toBeNull();
    expect(fs.existsSync(resultFile)).toBe(false);
    const gone = await request(handle.app).get(`/v1/noise-suppressor/jobs/${id}`).set('Authorization', `Bearer ${token}`);
    expect(gone.status).toBe(404);
    expect(fs.existsSync(stray)).toBe(false);
    expect(fs.existsSync(fresh)).toBe(true);
  });
});
