// Issue 35, item 11: what the service writes is its user's only. A real `npm start` started with a loose umask (022)
// over a DATA_DIR an older version left 0755/0644 (a database, a job result, a backup folder): at start everything
// in DATA_DIR is 0700 (folders) / 0600 (files); gateway.db and jobs.db (webhook secrets in clear) and their -wal/-shm,
// the job folders, the result of a job run now and the temp folder are too; `db backup` writes 0600 files.
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { PROJECT_ROOT } from '../../src/config';
import { startServer, stop } from '../helpers/file-process-helpers';
import { startReceiver } from '../helpers/jobs-helpers';
import { eventually, multipartBody, noiseWav, rawRequest } from '../helpers/service-helpers';

const run = promisify(execFile);
const JOBS = '/v1/noise-suppressor/jobs';

/** Every entry under `root` (itself included) with its permission bits. */
function modes(root: string): Array<{ rel: string; dir: boolean; mode: number }> {
  const out: Array<{ rel: string; dir: boolean; mode: number }> = [];
  const visit = (p: string): void => {
    const st = fs.lstatSync(p);
    out.push({ rel: path.relative(root, p) || '.', dir: st.isDirectory(), mode: st.mode & 0o777 });
    if (st.isDirectory()) for (const n of fs.readdirSync(p)) visit(path.join(p, n));
  };
  visit(root);
  return out;
}

const loose = (entries: Array<{ rel: string; dir: boolean; mode: number }>) =>
  entries.filter((e) => e.mode !== (e.dir ? 0o700 : 0o600)).map((e) => `${e.rel} ${e.mode.toString(8)}`);

(process.platform === 'linux' ? describe : describe.skip)('file modes (issue 35, item 11)', () => {
  test('0700 folders and 0600 files in DATA_DIR, older loose ones tightened at start; backups 0600', async () => {
    const oldMask = process.umask(0o022);
    const root = fs.mkdtempSync(path.join(os.tmpdir(), 'file-modes-'));
    const dataDir = path.join(root, 'data');
    const backups = path.join(root, 'backups');
    // What an older version left: loose folders and files.
    for (const d of [dataDir, path.join(dataDir, 'jobs', 'results'), path.join(dataDir, 'backups'), backups]) fs.mkdirSync(d, { recursive: true, mode: 0o755 });
    fs.writeFileSync(path.join(dataDir, 'jobs', 'results', 'job_old.wav'), 'RIFF', { mode: 0o644 });
    fs.writeFileSync(path.join(dataDir, 'backups', 'nsm-old.db'), '', { mode: 0o644 });
    fs.writeFileSync(path.join(dataDir, 'gateway.db'), '', { mode: 0o644 }); // an empty file is an empty database
    expect(loose(modes(dataDir)).length).toBeGreaterThan(5);

    const receiver = await startReceiver();
    const s = await startServer({ JOBS_ALLOW_PRIVATE_URLS: 'true' }, dataDir);
    try {
      // A job with a webhook: jobs.db then holds the workspace's webhook secret, results/ its output.
      const { body, contentType } = multipartBody([
        { name: 'model', value: 'nsm-1' },
        { name: 'webhook_url', value: receiver.url },
        { name: 'file', filename: 'a.wav', data: noiseWav(1) },
      ]);
      const submitted = await rawRequest(`${s.url}${JOBS}`, {
        method: 'POST',
        headers: { Authorization: `Bearer ${s.token}`, 'Content-Type': contentType, 'Content-Length': body.length },
        body,
      });
      expect(submitted.status).toBe(202);
      await eventually(() => receiver.received.some((h) => h.body.includes('job.succeeded')), 60_000);
      const denoised = await rawRequest(`${s.url}/v1/noise-suppressor/denoise`, {
        method: 'POST',
        ...(() => {
          const m = multipartBody([{ name: 'file', filename: 'b.wav', data: noiseWav(1) }]);
          return { headers: { Authorization: `Bearer ${s.token}`, 'Content-Type': m.contentType, 'Content-Length': m.body.length }, body: m.body };
        })(),
      });
      expect(denoised.status).toBe(200);

      // `db backup` (its own process, the test's loose umask) while the server runs.
      const env = { ...process.env, DATA_DIR: dataDir };
      await run(process.execPath, [path.join(PROJECT_ROOT, 'dist/src/cli/db.js'), 'backup', path.join(backups, 'b.db')], { env });
      expect(modes(backups).filter((e) => !e.dir).map((e) => [e.rel, e.mode.toString(8)])).toEqual([
        ['b.db', '600'],
        ['b.jobs.db', '600'],
      ]);

      const entries = modes(dataDir);
      const names = entries.map((e) => e.rel);
      for (const n of ['gateway.db', 'gateway.db-wal', 'gateway.db-shm', 'jobs.db', 'jobs.db-wal', 'jobs.db-shm', 'jobs/inputs', 'jobs/results', 'jobs/incoming', 'tmp']) {
        expect(names).toContain(n);
      }
      expect(names.filter((n) => n.startsWith('jobs/results/job_') && n !== 'jobs/results/job_old.wav')).toHaveLength(1);
      expect(loose(entries)).toEqual([]);
    } finally {
      process.umask(oldMask);
      await receiver.close();
      await stop(s, true);
      fs.rmSync(root, { recursive: true, force: true });
    }
  }, 120_000);
});
