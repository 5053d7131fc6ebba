// The job queue contract (src/store/jobs/types.ts JobStore), run against every engine: claiming is exclusive, leases fence
// stale runners, expired leases are reclaimed (and given up after maxAttempts), cancel/refund/retention transitions,
// keyset pagination, webhook secrets and deliveries.
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { PROJECT_ROOT } from '../../src/config';
import type { JobStore, NewJob } from '../../src/store/jobs/types';
import { openSqliteJobStore } from '../../src/store/jobs/sqlite';
import { jobStoreEngines, stopJobsPostgres } from '../helpers/jobs-helpers';
import { serverBinaries } from '../helpers/real-servers';

// Fails at once, with one line naming the Debian packages, when the PostgreSQL binaries are missing.
beforeAll(() => {
  serverBinaries();
});

afterAll(async () => {
  await stopJobsPostgres();
});

const T0 = 1_800_000_000_000;

function newJob(id: string, workspaceId: string, createdAt = T0, extra: Partial<NewJob> = {}): NewJob {
  return {
    id,
    workspaceId,
    tokenId: 'key_1',
    requestId: 'req_1',
    params: { model: 'nsm-2', attenuation_limit_db: 0, output_format: 'wav', keep_input_sample_rate: true },
    input: { source: 'upload', url: null, filename: 'a.wav', bytes: 10 },
    webhookUrl: null,
    credits: 1,
    chargedAt: createdAt,
    createdAt,
    ...extra,
  };
}

describe.each(jobStoreEngines())('JobStore contract: $name', (engine) => {
  let store: JobStore;

  beforeEach(async () => {
    store = await engine.open();
  });
  afterEach(async () => {
    await store.close();
    await engine.cleanup();
  });

  test('create, get, active cap per workspace', async () => {
    for (let i = 0; i < 3; i++) expect((await store.createJob(newJob(`job_a${i}`, 'ws_a', T0 + i), 3)).ok).toBe(true);
    const refused = await store.createJob(newJob('job_a3', 'ws_a', T0 + 3), 3);
    expect(refused).toEqual({ ok: false, active: 3 });
    expect((await store.createJob(newJob('job_b0', 'ws_b'), 3)).ok).toBe(true);
    const job = await store.getJob('job_a1');
    expect(job).toMatchObject({ id: 'job_a1', workspaceId: 'ws_a', status: 'queued', progress: 0, attempts: 0, credits: 1, refund: 'none' });
    expect(job!.params.model).toBe('nsm-2');
    expect(await store.getJob('job_nope')).toBeNull();
    expect(await store.countActive('ws_a')).toBe(3);
    // Parallel submissions cannot overshoot the cap (a real race on PostgreSQL).
    const racing = await Promise.all(Array.from({ length: 10 }, (_, i) => store.createJob(newJob(`job_r${i}`, 'ws_race', T0 + i), 4)));
    expect(racing.filter((r) => r.ok).length).toBe(4);
    expect(await store.countActive('ws_race')).toBe(4);
  });

  test('claims are exclusive; a workspace with fewer running jobs goes first; runAfter is respected', async () => {
    await store.createJob(newJob('job_a1', 'ws_a', T0), 10);
    await store.createJob(newJob('job_a2', 'ws_a', T0 + 1), 10);
    await store.createJob(newJob('job_b1', 'ws_b', T0 + 2), 10);
    const first = await store.claimJob('r1', 30_000, T0 + 10);
    expect(first).toMatchObject({ id: 'job_a1', status: 'running', leaseOwner: 'r1', attempts: 1, leaseExpiresAt: T0 + 10 + 30_000 });
    // ws_a has one running; ws_b none: b1 beats the older a2.
    const second = await store.claimJob('r2', 30_000, T0 + 11);
    expect(second!.id).toBe('job_b1');
    const third = await store.claimJob('r2', 30_000, T0 + 12);
    expect(third!.id).toBe('job_a2');
    expect(await store.claimJob('r3', 30_000, T0 + 13)).toBeNull();

    // Many claimers at once never get the same job.
    for (let i = 0; i < 20; i++) await store.createJob(newJob(`job_c${i}`, `ws_c${i % 4}`, T0 + 100 + i), 100);
    const claims = await Promise.all(Array.from({ length: 30 }, (_, i) => store.claimJob(`c${i}`, 30_000, T0 + 200)));
    const ids = claims.filter(Boolean).map((j) => j!.id);
    expect(ids.length).toBe(20);
    expect(new Set(ids).size).toBe(20);

    // A retry waits for runAfter and can undo the claim's attempt count.
    expect(await store.retryJob('job_a1', 'r1', T0 + 5000, null, false, T0 + 300)).toBe(true);
    expect(await store.getJob('job_a1')).toMatchObject({ status: 'queued', attempts: 0, leaseOwner: null });
    expect(await store.claimJob('r1', 30_000, T0 + 4999)).toBeNull();
    expect((await store.claimJob('r1', 30_000, T0 + 5000))!.id).toBe('job_a1');
  });

  test('claim kinds: a URL not fetched yet takes a fetch claim, everything else a ready claim; who is waiting', async () => {
    const url = { source: 'url' as const, url: 'https://x.test/a.wav', filename: 'a.wav', bytes: null };
    await store.createJob(newJob('job_url', 'ws_u', T0, { input: url }), 10);
    await store.createJob(newJob('job_up', 'ws_p', T0 + 1), 10);
    expect(await store.waitingWorkspaces(T0 + 5, 'fetch')).toEqual(['ws_u']);
    expect(await store.waitingWorkspaces(T0 + 5, 'ready')).toEqual(['ws_p']);
    expect((await store.waitingWorkspaces(T0 + 5, 'any')).sort()).toEqual(['ws_p', 'ws_u']);
    expect((await store.claimJob('r', 30_000, T0 + 10, 'ready'))!.id).toBe('job_up');
    expect(await store.claimJob('r', 30_000, T0 + 10, 'ready')).toBeNull();
    const fetching = await store.claimJob('r', 30_000, T0 + 11, 'fetch');
    expect(fetching!.id).toBe('job_url');
    // Fetched: back in the queue with its size, now a ready job.
    expect(await store.setInputBytes('job_url', 'r', 1234)).toBe(true);
    expect(await store.retryJob('job_url', 'r', T0 + 12, null, false, T0 + 12)).toBe(true);
    expect(await store.claimJob('r', 30_000, T0 + 13, 'fetch')).toBeNull();
    expect(await store.claimJob('r', 30_000, T0 + 13, 'ready')).toMatchObject({ id: 'job_url', attempts: 1, input: { bytes: 1234 } });
  });

  test('delivery claims skip receivers at their bound', async () => {
    const base = { workspaceId: 'ws', jobId: 'job_1', event: 'job.succeeded' as const, payload: '{}', giveUpAt: T0 + 1000 };
    await store.enqueueDelivery({ ...base, id: 'whd_slow1', url: 'https://slow.test:8443/h', createdAt: T0 });
    await store.enqueueDelivery({ ...base, id: 'whd_slow2', url: 'https://slow.test:8443/other', createdAt: T0 + 1 });
    await store.enqueueDelivery({ ...base, id: 'whd_fast', url: 'https://fast.test/h', createdAt: T0 + 2 });
    const [first] = await store.claimDeliveries('d', 5000, T0 + 10, 1, ['https://slow.test:8443/']);
    expect(first.id).toBe('whd_fast');
    expect((await store.claimDeliveries('d', 5000, T0 + 10, 10, [])).map((d) => d.id)).toEqual(['whd_slow1', 'whd_slow2']);
  });

  test('leases fence stale runners: renew, finish and retry only for the owner of a running job', async () => {
    await store.createJob(newJob('job_1', 'ws'), 10);
    await store.claimJob('r1', 1000, T0);
    expect(await store.renewLease('job_1', 'r2', 1000, T0 + 10, 0.5)).toBe(false);
    expect(await store.renewLease('job_1', 'r1', 1000, T0 + 10, 0.5)).toBe(true);
    expect(await store.getJob('job_1')).toMatchObject({ progress: 0.5, leaseExpiresAt: T0 + 1010 });
    expect(await store.setInputBytes('job_1', 'r1', 1234)).toBe(true);
    expect((await store.getJob('job_1'))!.input.bytes).toBe(1234);
    const outcome = {
      status: 'succeeded' as const,
      result: { file: 'job_1.wav', bytes: 99, contentType: 'audio/wav', filename: 'a_denoised.wav' },
      stats: { duration_s: 3 },
      expiresAt: T0 + 86_400_000,
    };
    expect(await store.finishJob('job_1', 'r2', outcome, T0 + 20)).toBeNull();
    const done = await store.finishJob('job_1', 'r1', outcome, T0 + 20);
    expect(done).toMatchObject({ status: 'succeeded', progress: 1, finishedAt: T0 + 20, leaseOwner: null, refund: 'none' });
    expect(done!.result!.file).toBe('job_1.wav');
    // Finished: nothing more for any runner.
    expect(await store.renewLease('job_1', 'r1', 1000, T0 + 30)).toBe(false);
    expect(await store.retryJob('job_1', 'r1', T0, null, true, T0 + 30)).toBe(false);
  });

  test('expired leases are re-queued, then failed after maxAttempts with a pending refund and its webhook', async () => {
    await store.createJob(newJob('job_1', 'ws', T0, { webhookUrl: 'https://example.com/hook' }), 10);
    const expiresAt = T0 + 999_999;
    const delivery = (job: { id: string; workspaceId: string; status: string }) => ({
      id: `whd_${job.id}_${job.status}`,
      workspaceId: job.workspaceId,
      jobId: job.id,
      event: 'job.failed' as const,
      url: 'https://example.com/hook',
      payload: JSON.stringify({ status: job.status }),
      createdAt: T0,
      giveUpAt: T0 + 86_400_000,
    });
    for (let attempt = 1; attempt <= 2; attempt++) {
      const claimed = await store.claimJob(`r${attempt}`, 1000, T0 + attempt * 10_000);
      expect(claimed!.attempts).toBe(attempt);
      // Not yet expired: nothing happens.
      expect(await store.reclaimExpired(T0 + attempt * 10_000 + 500, 3, expiresAt, delivery)).toEqual({ requeued: [], failed: [] });
      expect(await store.reclaimExpired(T0 + attempt * 10_000 + 1001, 3, expiresAt, delivery)).toEqual({ requeued: ['job_1'], failed: [] });
      // The dead runner's late writes are refused.
      expect(await store.renewLease('job_1', `r${attempt}`, 1000, T0 + attempt * 10_000 + 1002)).toBe(false);
    }
    await store.claimJob('r3', 1000, T0 + 30_000);
    expect(await store.reclaimExpired(T0 + 31_001, 3, expiresAt, delivery)).toEqual({ requeued: [], failed: ['job_1'] });
    const failed = await store.getJob('job_1');
    expect(failed).toMatchObject({ status: 'failed', refund: 'pending', expiresAt, attempts: 3 });
    expect(failed!.error!.type).toBe('processing_failed');
    const deliveries = await store.listDeliveries({ jobId: 'job_1', limit: 10 });
    expect(deliveries.map((d) => d.id)).toEqual(['whd_job_1_failed']);
  });

  test('a failure marks the refund pending; setRefund claims it once', async () => {
    await store.createJob(newJob('job_1', 'ws'), 10);
    await store.claimJob('r1', 1000, T0);
    const failed = await store.finishJob('job_1', 'r1', { status: 'failed', error: { type: 'invalid_audio', message: 'x' }, expiresAt: T0 + 5 }, T0 + 1);
    expect(failed).toMatchObject({ status: 'failed', refund: 'pending', error: { type: 'invalid_audio', message: 'x' } });
    expect((await store.pendingRefunds(10)).map((j) => j.id)).toEqual(['job_1']);
    const results = await Promise.all([store.setRefund('job_1', 'pending', 'done'), store.setRefund('job_1', 'pending', 'done')]);
    expect(results.filter(Boolean).length).toBe(1);
    expect(await store.pendingRefunds(10)).toEqual([]);
    // A job without credits never has a refund to settle.
    await store.createJob(newJob('job_free', 'ws', T0, { credits: 0 }), 10);
    await store.claimJob('r1', 1000, T0 + 2);
    expect(await store.finishJob('job_free', 'r1', { status: 'failed', error: { type: 'x', message: 'y' }, expiresAt: T0 }, T0 + 3)).toMatchObject({
      refund: 'none',
    });
  });

  test('cancel: only the owning workspace, only active jobs; deleteResult; expiry and deletion', async () => {
    await store.createJob(newJob('job_q', 'ws_a'), 10);
    await store.createJob(newJob('job_r', 'ws_a', T0 + 1), 10);
    await store.claimJob('r1', 1000, T0 + 2); // job_q running
    expect(await store.cancelJob('job_q', 'ws_other', T0 + 3, T0 + 100)).toBeNull();
    const canceled = await store.cancelJob('job_q', 'ws_a', T0 + 3, T0 + 100);
    expect(canceled!.wasActive).toBe(true);
    expect(canceled!.job).toMatchObject({ status: 'canceled', refund: 'pending', finishedAt: T0 + 3, leaseOwner: null, expiresAt: T0 + 100 });
    // The runner that held it is fenced off.
    expect(await store.renewLease('job_q', 'r1', 1000, T0 + 4)).toBe(false);
    const again = await store.cancelJob('job_q', 'ws_a', T0 + 5, T0 + 200);
    expect(again!.wasActive).toBe(false);
    expect(again!.job.expiresAt).toBe(T0 + 100);
    // The console (workspace null) may cancel any job.
    expect((await store.cancelJob('job_r', null, T0 + 6, T0 + 100))!.wasActive).toBe(true);

    await store.createJob(newJob('job_s', 'ws_a', T0 + 7), 10);
    await store.claimJob('r1', 1000, T0 + 8);
    await store.finishJob(
      'job_s',
      'r1',
      { status: 'succeeded', result: { file: 'job_s.wav', bytes: 5, contentType: 'audio/wav', filename: 's.wav' }, stats: {}, expiresAt: T0 + 300 },
      T0 + 9,
    );
    expect(await store.deleteResult('job_s', 'ws_b', T0 + 10)).toBeNull();
    const deleted = await store.deleteResult('job_s', 'ws_a', T0 + 10);
    expect(deleted).toMatchObject({ status: 'succeeded', result: null, resultDeletedAt: T0 + 10 });

    expect((await store.expiredJobs(T0 + 99, 10)).map((j) => j.id)).toEqual([]);
    expect((await store.expiredJobs(T0 + 100, 10)).map((j) => j.id).sort()).toEqual(['job_q', 'job_r']);
    expect((await store.expiredJobs(T0 + 300, 10)).length).toBe(3);
    await store.deleteJob('job_q');
    expect(await store.getJob('job_q')).toBeNull();
    expect([...(await store.knownJobIds())].sort()).toEqual(['job_r', 'job_s']);
  });

  test('listJobs: newest first, by workspace and status, keyset pages without gaps or repeats', async () => {
    for (let i = 0; i < 25; i++) await store.createJob(newJob(`job_${String(i).padStart(2, '0')}`, i % 5 === 0 ? 'ws_b' : 'ws_a', T0 + Math.floor(i / 2)), 100);
    const seen: string[] = [];
    let before: { createdAt: number; id: string } | undefined;
    for (;;) {
      const page = await store.listJobs({ workspaceId: 'ws_a', limit: 7, before });
      if (page.length === 0) break;
      seen.push(...page.map((j) => j.id));
      const last = page[page.length - 1];
      before = { createdAt: last.createdAt, id: last.id };
    }
    expect(seen.length).toBe(20);
    expect(new Set(seen).size).toBe(20);
    const all = await store.listJobs({ workspaceId: 'ws_a', limit: 100 });
    expect(all.map((j) => j.id)).toEqual(seen);
    for (let i = 1; i < all.length; i++) {
      const a = all[i - 1];
      const b = all[i];
      expect(a.createdAt > b.createdAt || (a.createdAt === b.createdAt && a.id > b.id)).toBe(true);
    }
    await store.claimJob('r', 1000, T0 + 100);
    expect((await store.listJobs({ status: 'running', limit: 10 })).length).toBe(1);
    expect((await store.listJobs({ workspaceId: 'ws_b', status: 'queued', limit: 10 })).length).toBe(
      5 - (await store.listJobs({ workspaceId: 'ws_b', status: 'running', limit: 10 })).length,
    );
  });

  test('webhook secrets and deliveries: lease, retry, deliver, give up, purge', async () => {
    expect(await store.webhookSecret('ws')).toBeNull();
    const s1 = await store.ensureWebhookSecret('ws', () => 'whsec_one');
    expect(s1).toBe('whsec_one');
    expect(await store.ensureWebhookSecret('ws', () => 'whsec_two')).toBe('whsec_one');
    await store.setWebhookSecret('ws', 'whsec_three');
    expect(await store.webhookSecret('ws')).toBe('whsec_three');

    const base = { workspaceId: 'ws', jobId: 'job_1', event: 'job.succeeded' as const, url: 'https://x.test/h', payload: '{}', giveUpAt: T0 + 1000 };
    await store.enqueueDelivery({ ...base, id: 'whd_1', createdAt: T0 });
    await store.enqueueDelivery({ ...base, id: 'whd_2', createdAt: T0 + 1 });
    const [a, b] = await Promise.all([store.claimDeliveries('d1', 5000, T0 + 10, 10), store.claimDeliveries('d2', 5000, T0 + 10, 10)]);
    expect([...a, ...b].map((d) => d.id).sort()).toEqual(['whd_1', 'whd_2']);
    // Leased: nobody else gets them until the lease expires.
    expect(await store.claimDeliveries('d3', 5000, T0 + 11, 10)).toEqual([]);
    const ownerOf = (id: string): string => (a.some((d) => d.id === id) ? 'd1' : 'd2');
    const owner1 = ownerOf('whd_1');
    const owner2 = ownerOf('whd_2');
    await store.recordDeliveryAttempt('whd_1', owner1, { at: T0 + 12, ok: false, status: 500, error: 'HTTP 500', nextAttemptAt: T0 + 100 });
    await store.recordDeliveryAttempt('whd_2', owner2, { at: T0 + 12, ok: true, status: 204, error: null, nextAttemptAt: null });
    expect(await store.claimDeliveries('d3', 5000, T0 + 99, 10)).toEqual([]);
    const retry = await store.claimDeliveries('d3', 5000, T0 + 100, 10);
    expect(retry.map((d) => [d.id, d.attempts, d.lastStatus])).toEqual([['whd_1', 1, 500]]);
    // A stale owner's record is ignored.
    await store.recordDeliveryAttempt('whd_1', 'd1-stale', { at: T0 + 101, ok: true, status: 200, error: null, nextAttemptAt: null });
    await store.recordDeliveryAttempt('whd_1', 'd3', { at: T0 + 101, ok: false, status: null, error: 'timeout', nextAttemptAt: null });
    const list = await store.listDeliveries({ workspaceId: 'ws', limit: 10 });
    expect(list.map((d) => [d.id, d.status, d.attempts])).toEqual([
      ['whd_2', 'delivered', 1],
      ['whd_1', 'failed', 2],
    ]);
    expect(list[0].deliveredAt).toBe(T0 + 12);
    expect(await store.purgeDeliveries(T0 + 1)).toBe(1);
    expect((await store.listDeliveries({ limit: 10 })).map((d) => d.id)).toEqual(['whd_2']);
  });

  test('finishJob enqueues the delivery in the same transaction', async () => {
    await store.createJob(newJob('job_1', 'ws', T0, { webhookUrl: 'https://x.test/h' }), 10);
    await store.claimJob('r1', 1000, T0);
    const finished = await store.finishJob(
      'job_1',
      'r1',
      { status: 'succeeded', result: { file: 'f', bytes: 1, contentType: 'audio/wav', filename: 'f.wav' }, stats: {}, expiresAt: T0 + 5 },
      T0 + 1,
      (job) => ({
        id: 'whd_x',
        workspaceId: job.workspaceId,
        jobId: job.id,
        event: 'job.succeeded',
        url: job.webhookUrl!,
        payload: JSON.stringify({ status: job.status }),
        createdAt: T0 + 1,
        giveUpAt: T0 + 2,
      }),
    );
    expect(finished!.status).toBe('succeeded');
    const [d] = await store.listDeliveries({ jobId: 'job_1', limit: 5 });
    expect(JSON.parse(d.payload)).toEqual({ status: 'succeeded' });
  });
});

describe('SQLite job store file', () => {
  test('four processes claiming from one jobs.db at once never get the same job', async () => {
    const JOBS = 400;
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'jobs-sqlite-procs-'));
    try {
      const store = openSqliteJobStore(dir);
      for (let i = 0; i < JOBS; i++) await store.createJob(newJob(`job_p${String(i).padStart(4, '0')}`, `ws_${i % 7}`, T0 + i), 1000);
      await store.close();
      const script = `
        const { openSqliteJobStore } = require(${JSON.stringify(path.join(PROJECT_ROOT, 'dist/src/store/jobs/sqlite.js'))});
        (async () => {
          const s = openSqliteJobStore(process.argv[1]);
          // Start barrier: every process has its connection open before any claims.
          process.stdout.write('ready\\n');
          await new Promise((resolve) => process.stdin.once('data', resolve));
          const got = [];
          // A pause after each claim, as a runner has between claims: in a tight loop on a loaded 2-core machine the
          // first process to run once took all 400 (about 40 ms of claims) before the others were scheduled.
          for (;;) {
            const j = await s.claimJob('proc' + process.pid, 60000, ${T0 + 10_000});
            if (!j) break;
            got.push(j.id);
            await new Promise((resolve) => setTimeout(resolve, 1));
          }
          await s.close();
          process.stdout.write(JSON.stringify(got));
        })();`;
      const children = Array.from({ length: 4 }, () => spawn(process.execPath, ['-e', script, dir], { stdio: ['pipe', 'pipe', 'pipe'] }));
      const outputs = children.map((child) => {
        let out = '';
        let err = '';
        const ready = new Promise<void>((resolve) =>
          child.stdout.on('data', (d: Buffer) => {
            out += d.toString();
            if (out.includes('ready\n')) resolve();
          }),
        );
        child.stderr.on('data', (d: Buffer) => (err += d.toString()));
        // 'close', not 'exit': 'exit' may come before the last of the child's stdout has been read (a fresh-clone run
        // parsed an empty answer: "Unexpected end of JSON input").
        const done = new Promise<string[]>((resolve, reject) =>
          child.on('close', (code) => {
            if (code !== 0) return reject(new Error(err));
            try {
              resolve(JSON.parse(out.slice(out.indexOf('ready\n') + 6)) as string[]);
            } catch (e) {
              reject(new Error(`${String(e)}; stdout ${JSON.stringify(out.slice(0, 200))}; stderr ${err.slice(0, 500)}`)); // fail now, not at the timeout
            }
          }),
        );
        return { ready, done };
      });
      await Promise.all(outputs.map((o) => o.ready));
      for (const child of children) child.stdin.end('go');
      const runs = await Promise.all(outputs.map((o) => o.done));
      const all = runs.flat();
      expect(all.length).toBe(JOBS);
      expect(new Set(all).size).toBe(JOBS);
      // Each process got a share (they really ran concurrently).
      expect(runs.filter((r) => r.length > 0).length).toBeGreaterThan(1);
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });

  test('jobs.db is its own file with its own numbered migrations; reopening keeps the data', async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'jobs-sqlite-'));
    try {
      const a = openSqliteJobStore(dir);
      await a.createJob(newJob('job_keep', 'ws'), 10);
      await a.close();
      const b = openSqliteJobStore(dir);
      expect((await b.getJob('job_keep'))!.status).toBe('queued');
      await b.close();
      expect(fs.existsSync(path.join(dir, 'jobs.db'))).toBe(true);
      expect(fs.existsSync(path.join(dir, 'gateway.db'))).toBe(false);
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
});
