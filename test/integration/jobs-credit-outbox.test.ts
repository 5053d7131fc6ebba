// Issue 35, item 12: a job's credit lives in gateway.db, the job in jobs.db, so no transaction spans both. A real
// server is killed (JOBS_CRASH_AT: SIGKILL from within) between the two writes, then started again on the same
// DATA_DIR, and the credits are exact: a failed job's refund is given once (not lost, not twice), a credit settled
// for a job that was never created is given back. A /denoise call's credit beside them shows nothing is over-refunded.
import fs from 'node:fs';
import path from 'node:path';
import Database from 'better-sqlite3';
import { openSqliteStore } from '../../src/store/gateway/sqlite';
import { denoise, startServer, stop, type Server } from '../helpers/file-process-helpers';
import { eventually, fixture, multipartBody, noiseWav, rawRequest } from '../helpers/service-helpers';

const JOBS = '/v1/noise-suppressor/jobs';

async function submit(s: Server, file: Buffer): Promise<{ status: number; id?: string; error?: string }> {
  const { body, contentType } = multipartBody([
    { name: 'model', value: 'nsm-1' },
    { name: 'file', filename: 'in.wav', data: file },
  ]);
  try {
    const r = await rawRequest(`${s.url}${JOBS}`, {
      method: 'POST',
      headers: { Authorization: `Bearer ${s.token}`, 'Content-Type': contentType, 'Content-Length': body.length },
      body,
    });
    return { status: r.status, id: r.status === 202 ? (JSON.parse(r.body.toString()) as { id: string }).id : undefined };
  } catch (err) {
    return { status: 0, error: (err as Error).message }; // the server died under the call
  }
}

/** Credits used this month by the workspace of the server's token (read from gateway.db, as the CLI does). */
async function creditsUsed(dataDir: string): Promise<number> {
  const store = openSqliteStore({ dataDir });
  try {
    const [ws] = await store.listWorkspaces();
    return store.creditsUsed(ws.id, new Date());
  } finally {
    await store.close();
  }
}

function jobsRows(dataDir: string): Array<{ id: string; status: string; refund: string; credits: number }> {
  const db = new Database(path.join(dataDir, 'jobs.db'), { readonly: true });
  try {
    return db.prepare('SELECT id, status, refund, credits FROM jobs').all() as Array<{ id: string; status: string; refund: string; credits: number }>;
  } finally {
    db.close();
  }
}

function pendingCharges(dataDir: string): number {
  const db = new Database(path.join(dataDir, 'gateway.db'), { readonly: true });
  try {
    return (db.prepare('SELECT COUNT(*) AS n FROM credit_pending').get() as { n: number }).n;
  } finally {
    db.close();
  }
}

/** The same DATA_DIR and token, without the crash point. */
async function restart(dead: Server): Promise<Server> {
  const s = await startServer({}, dead.dataDir);
  return { ...s, token: dead.token };
}

(process.platform === 'linux' ? describe : describe.skip)('job credits across two databases, kill -9 between the writes (issue 35, item 12)', () => {
  test("killed after a failed job's refund was given, before the job queue marked it: given once, marked at the restart", async () => {
    const crashing = await startServer({ JOBS_CRASH_AT: 'after-refund' });
    let again: Server | null = null;
    try {
      expect((await denoise(crashing, fixture('speech-noisy-16k-mono.wav'))).status).toBe(200); // 1 credit, for good
      const job = await submit(crashing, fs.readFileSync(fixture('not-audio.wav'))); // fails: refunded
      expect(job.status).toBe(202);
      expect(await crashing.exited).toBe('SIGKILL');
      expect(await creditsUsed(crashing.dataDir)).toBe(1); // given back in gateway.db ...
      expect(jobsRows(crashing.dataDir)).toMatchObject([{ id: job.id, status: 'failed', refund: 'pending', credits: 1 }]); // ... not yet marked

      again = await restart(crashing);
      await eventually(() => jobsRows(crashing.dataDir)[0].refund === 'done', 20_000);
      expect(await creditsUsed(crashing.dataDir)).toBe(1); // not twice
      expect(again.output()).not.toMatch(/refund of \d+ credit\(s\) for .* failed/);
    } finally {
      if (again) await stop(again, true);
      await stop(crashing);
    }
  }, 120_000);

  test('killed after a job was charged, before it was created: the credit comes back at the restart, once', async () => {
    const crashing = await startServer({ JOBS_CRASH_AT: 'after-charge' });
    let again: Server | null = null;
    try {
      expect((await denoise(crashing, fixture('speech-noisy-16k-mono.wav'))).status).toBe(200);
      const job = await submit(crashing, noiseWav(1));
      expect(job.status).toBe(0); // the process died with the upload taken and the credit settled
      expect(await crashing.exited).toBe('SIGKILL');
      expect(await creditsUsed(crashing.dataDir)).toBe(2);
      expect(jobsRows(crashing.dataDir)).toEqual([]);
      expect(pendingCharges(crashing.dataDir)).toBe(1);

      again = await restart(crashing);
      await eventually(async () => (await creditsUsed(crashing.dataDir)) === 1, 20_000);
      expect(pendingCharges(crashing.dataDir)).toBe(0);
      expect(again.output()).toMatch(/gave back 1 credit\(s\) charged for job job_\w+, which was never created/);

      // A job submitted now is charged and kept (its pending charge confirmed), and a further restart changes nothing.
      const ok = await submit(again, noiseWav(1));
      expect(ok.status).toBe(202);
      await eventually(() => jobsRows(crashing.dataDir).some((j) => j.id === ok.id && j.status === 'succeeded'), 60_000);
      expect(pendingCharges(crashing.dataDir)).toBe(0);
      await stop(again, true);
      again = await restart(crashing);
      await new Promise((r) => setTimeout(r, 1_500)); // a housekeeping pass or more
      expect(await creditsUsed(crashing.dataDir)).toBe(2);
    } finally {
      if (again) await stop(again, true);
      await stop(crashing);
    }
  }, 150_000);
});
