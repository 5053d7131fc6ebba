// `npm run -s db -- backup|restore` as a real child process against the DATA_DIR a live store is writing to:
// gateway.db, and jobs.db (jobs, webhook secrets, deliveries) beside it.
import { execFile, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import Database from 'better-sqlite3';
import { openJobStore } from '../../src/store/jobs';
import type { JobStore } from '../../src/store/jobs/types';
import { openSqliteStore } from '../../src/store/gateway/sqlite';
import { gatewayDbPath } from '../../src/db/paths';
import type { GatewayStore, RequestLogEntry } from '../../src/store/gateway/types';

const CLI = path.join(__dirname, '../../src/cli/db.js');

function db(dataDir: string, ...args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(process.execPath, [CLI, ...args], { env: { ...process.env, DATA_DIR: dataDir } }, (err, stdout, stderr) => {
      resolve({ code: err ? ((err as { code?: number }).code ?? 1) : 0, stdout, stderr });
    });
  });
}

function logEntry(i: number): RequestLogEntry {
  return {
    requestId: `req_backup_${i}`,
    time: new Date().toISOString(),
    tokenId: null,
    workspaceId: null,
    method: 'GET',
    service: 'noise-suppressor',
    endpoint: 'models',
    status: 200,
    errorType: null,
    creditsCharged: 0,
    bytesIn: 0,
    bytesOut: 100,
    upstreamMs: 1,
    totalMs: 2,
    clientIp: '127.0.0.1',
  };
}

const count = (file: string, table: string): number => {
  const d = new Database(file, { readonly: true });
  try {
    return (d.prepare(`SELECT COUNT(*) AS n FROM ${table}`).get() as { n: number }).n;
  } finally {
    d.close();
  }
};

describe('db CLI: backup and restore', () => {
  let dataDir: string;
  let store: GatewayStore | null;

  beforeEach(() => {
    dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'ns-db-cli-'));
    store = openSqliteStore({ dataDir });
  });
  afterEach(async () => {
    await store?.close();
    fs.rmSync(dataDir, { recursive: true, force: true });
  });

  test('backup while the store is being written: a consistent, integrity-checked copy; no overwrite without --force', async () => {
    const ws = await store!.createWorkspace('acme', 'starter');
    const { token } = await store!.createToken({ workspaceId: ws.id, name: 'k', scopes: ['*'], allowedIps: [], expiresAt: null });
    // Writes keep landing while the backup runs, as they would under traffic.
    let writing = true;
    let written = 0;
    const writer = (async () => {
      while (writing) {
        await store!.logRequest(logEntry(written++));
        if (written % 50 === 0) await new Promise((r) => setImmediate(r));
      }
    })();
    const file = path.join(dataDir, 'backups', 'gateway-1.db');
    fs.mkdirSync(path.dirname(file));
    const res = await db(dataDir, 'backup', file);
    writing = false;
    await writer;
    expect(res.stderr).toBe('');
    expect(res.code).toBe(0);
    // KB or MB: how many rows the writer got in before the copy's moment depends on how fast the CLI started.
    expect(res.stdout).toMatch(/^backed up .*gateway\.db to .*gateway-1\.db \(\d+(\.\d)? [KM]B, \d+ ms\): integrity ok, schema v\d+, 1 workspaces, 1 keys, \d+ logged requests\n$/);
    expect(written).toBeGreaterThan(0);
    expect(fs.readdirSync(path.dirname(file))).toEqual(['gateway-1.db']); // no .partial, no -wal/-shm beside it
    const copy = new Database(file, { readonly: true });
    expect(copy.pragma('integrity_check', { simple: true })).toBe('ok');
    const hash = (copy.prepare('SELECT token_hash FROM tokens').get() as { token_hash: string }).token_hash;
    expect(hash).toHaveLength(64);
    expect(hash).not.toContain(token);
    copy.close();
    expect(count(file, 'request_log')).toBeLessThanOrEqual(written);

    const again = await db(dataDir, 'backup', file);
    expect(again.code).toBe(1);
    expect(again.stderr).toBe(`${file} exists; pass --force to replace it\n`);
    expect((await db(dataDir, 'backup', file, '--force')).code).toBe(0);
  });

  test('backup into a folder that does not exist yet makes it (DATA_DIR/backups/… on a fresh volume), and says so', async () => {
    await store!.createWorkspace('acme', 'starter');
    const file = path.join(dataDir, 'backups', 'nightly', 'nsm-2026-11-28.db');
    const res = await db(dataDir, 'backup', file);
    expect(res.stderr).toBe('');
    expect(res.code).toBe(0);
    expect(res.stdout.split('\n')[0]).toBe(`created the folder ${path.dirname(file)}`);
    expect(res.stdout.split('\n')[1]).toMatch(/^backed up .*gateway\.db to .*nsm-2026-11-28\.db .*1 workspaces/);
    expect(count(file, 'workspaces')).toBe(1);
    // A folder that cannot be made: one line, exit 1, nothing written.
    const blocker = path.join(dataDir, 'a-file');
    fs.writeFileSync(blocker, '');
    const refused = await db(dataDir, 'backup', path.join(blocker, 'sub', 'nsm.db'));
    expect(refused.code).toBe(1);
    expect(refused.stderr).toMatch(new RegExp(`^cannot create the folder ${path.join(blocker, 'sub').replace(/[.]/g, '\\.')}: ENOTDIR`));
  });

  test('restore refuses while the database is open, then replaces it with the backup and keeps the old one', async () => {
    const ws = await store!.createWorkspace('acme', 'free');
    await store!.createToken({ workspaceId: ws.id, name: 'before', scopes: ['*'], allowedIps: [], expiresAt: null });
    const file = path.join(dataDir, 'b.db');
    expect((await db(dataDir, 'backup', file)).code).toBe(0);
    await store!.createToken({ workspaceId: ws.id, name: 'after', scopes: ['*'], allowedIps: [], expiresAt: null });

    const busy = await db(dataDir, 'restore', file);
    expect(busy.code).toBe(1);
    expect(busy.stderr).toMatch(/gateway\.db is in use by another process .*stop the server first/);
    expect((await store!.listTokens()).map((t) => t.name).sort()).toEqual(['after', 'before']); // untouched

    await store!.close();
    store = null;
    const done = await db(dataDir, 'restore', file);
    expect(done.stderr).toBe('');
    expect(done.code).toBe(0);
    expect(done.stdout).toMatch(/restored .*gateway\.db from .*b\.db: integrity ok, .*1 keys.*; the previous database is kept as .*gateway\.db\.before-restore-/);
    store = openSqliteStore({ dataDir });
    expect((await store.listTokens()).map((t) => t.name)).toEqual(['before']);
    const kept = fs.readdirSync(dataDir).find((n) => n.startsWith('gateway.db.before-restore-'))!;
    expect(count(path.join(dataDir, kept), 'tokens')).toBe(2);
  });

  test('restore refuses a file that is not a gateway database and changes nothing', async () => {
    await store!.createWorkspace('acme', 'free');
    await store!.close();
    store = null;
    const before = fs.readFileSync(gatewayDbPath({ dataDir }));
    const junk = path.join(dataDir, 'junk.db');
    fs.writeFileSync(junk, 'not a database at all, just some text that is long enough'.repeat(20));
    const res = await db(dataDir, 'restore', junk);
    expect(res.code).toBe(1);
    expect(res.stderr).toMatch(/junk\.db is not a usable SQLite database/);
    const other = path.join(dataDir, 'other.db');
    const d = new Database(other);
    d.exec('CREATE TABLE t (a)');
    d.close();
    const wrong = await db(dataDir, 'restore', other);
    expect(wrong.code).toBe(1);
    expect(wrong.stderr).toMatch(/not a gateway database/);
    expect(fs.readFileSync(gatewayDbPath({ dataDir }))).toEqual(before);
  });

  test('usage: help lists the commands; unknown commands and missing FILE exit 2', async () => {
    const help = await db(dataDir, '--help');
    expect(help.code).toBe(0);
    expect(help.stdout).toMatch(/backup FILE \[--force\]/);
    expect(help.stdout).toMatch(/restore FILE/);
    expect((await db(dataDir, 'vacuum')).code).toBe(2);
    const missing = await db(dataDir, 'backup');
    expect(missing.code).toBe(2);
    expect(missing.stderr).toMatch(/backup needs a FILE/);
  });
});

describe('db CLI: the job queue (jobs.db) is backed up and restored with the gateway database', () => {
  let dataDir: string;
  let backups: string;
  let store: GatewayStore | null;
  let jobs: JobStore | null;
  const T0 = Date.UTC(2026, 10, 22, 12);

  beforeEach(async () => {
    dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'ns-db-cli-jobs-'));
    backups = path.join(dataDir, 'backups');
    fs.mkdirSync(backups);
    store = openSqliteStore({ dataDir });
    jobs = await openJobStore({ dataDir });
  });
  afterEach(async () => {
    await store?.close();
    await jobs?.close();
    fs.rmSync(dataDir, { recursive: true, force: true });
  });

  async function closeBoth(): Promise<void> {
    await store?.close();
    await jobs?.close();
    store = null;
    jobs = null;
  }

  test('round trip: a job, its webhook secret and delivery come back with the keys, while the stores stay open for the backup', async () => {
    const ws = await store!.createWorkspace('acme', 'starter');
    await store!.createToken({ workspaceId: ws.id, name: 'before', scopes: ['*'], allowedIps: [], expiresAt: null });
    const job = await jobs!.createJob({
      id: 'job_backup1',
      workspaceId: ws.id,
      tokenId: null,
      requestId: 'req_1',
      params: { model: 'nsm-2', attenuation_limit_db: 0, output_format: 'wav', keep_input_sample_rate: true },
      input: { source: 'upload', url: null, filename: 'talk.wav', bytes: 1234 },
      webhookUrl: 'https://hooks.example.com/nsm',
      credits: 1,
      chargedAt: T0,
      createdAt: T0,
    }, 20);
    expect(job.ok).toBe(true);
    const secret = await jobs!.ensureWebhookSecret(ws.id, () => 'whsec_before');
    await jobs!.enqueueDelivery({
      id: 'whd_backup1', workspaceId: ws.id, jobId: 'job_backup1', event: 'job.succeeded', url: 'https://hooks.example.com/nsm',
      payload: '{"type":"job.succeeded"}', createdAt: T0, giveUpAt: T0 + 86_400_000,
    });

    const file = path.join(backups, 'nsm-2026-11-22.db');
    const res = await db(dataDir, 'backup', file);
    expect(res.stderr).toBe('');
    expect(res.code).toBe(0);
    const lines = res.stdout.trimEnd().split('\n');
    expect(lines).toHaveLength(2);
    expect(lines[0]).toMatch(/^backed up .*gateway\.db to .*nsm-2026-11-22\.db \(\d+ KB, \d+ ms\): integrity ok, schema v\d+, 1 workspaces, 1 keys, 0 logged requests$/);
    expect(lines[1]).toBe(`backed up ${path.join(dataDir, 'jobs.db')} to ${path.join(backups, 'nsm-2026-11-22.jobs.db')} (${Math.ceil(fs.statSync(path.join(backups, 'nsm-2026-11-22.jobs.db')).size / 1024)} KB): integrity ok, schema v2, 1 jobs, 1 webhook secrets, 1 webhook deliveries`);
    expect(fs.readdirSync(backups).sort()).toEqual(['nsm-2026-11-22.db', 'nsm-2026-11-22.jobs.db']); // no temporary folder, no -wal/-shm

    // After the backup: the webhook delivered, the job deleted, the secret rotated, a key added.
    const [delivery] = await jobs!.claimDeliveries('dispatcher', 5000, T0 + 10, 10);
    await jobs!.recordDeliveryAttempt(delivery.id, 'dispatcher', { at: T0 + 11, ok: true, status: 204, error: null, nextAttemptAt: null });
    await jobs!.deleteJob('job_backup1');
    await jobs!.setWebhookSecret(ws.id, 'whsec_after');
    await store!.createToken({ workspaceId: ws.id, name: 'after', scopes: ['*'], allowedIps: [], expiresAt: null });

    // The job queue open (a server) is enough to refuse the restore.
    await store!.close();
    store = null;
    const busy = await db(dataDir, 'restore', file);
    expect(busy.code).toBe(1);
    expect(busy.stderr).toMatch(/jobs\.db is in use by another process/);
    await closeBoth();

    const done = await db(dataDir, 'restore', file);
    expect(done.stderr).toBe('');
    expect(done.code).toBe(0);
    const restored = done.stdout.trimEnd().split('\n');
    expect(restored[0]).toMatch(/^restored .*gateway\.db from .*nsm-2026-11-22\.db: integrity ok, .*1 keys.*; the previous database is kept as .*gateway\.db\.before-restore-/);
    expect(restored[1]).toMatch(/^restored .*jobs\.db from .*nsm-2026-11-22\.jobs\.db: integrity ok, schema v2, 1 jobs, 1 webhook secrets, 1 webhook deliveries; the previous database is kept as .*jobs\.db\.before-restore-/);

    store = openSqliteStore({ dataDir });
    jobs = await openJobStore({ dataDir });
    expect((await store.listTokens()).map((t) => t.name)).toEqual(['before']);
    expect(await jobs.getJob('job_backup1')).toMatchObject({ id: 'job_backup1', status: 'queued', webhookUrl: 'https://hooks.example.com/nsm', credits: 1 });
    expect(await jobs.webhookSecret(ws.id)).toBe(secret);
    expect((await jobs.listDeliveries({ jobId: 'job_backup1', limit: 10 })).map((d) => [d.id, d.status, d.payload])).toEqual([['whd_backup1', 'pending', '{"type":"job.succeeded"}']]);
    const kept = fs.readdirSync(dataDir).filter((n) => n.includes('.before-restore-')).sort();
    expect(kept.map((n) => n.replace(/-restore-.*/, '-restore-'))).toEqual(['gateway.db.before-restore-', 'jobs.db.before-restore-']);
  });

  test('what killed backups left is removed by the next one; --force without a jobs.db removes the stale jobs part', async () => {
    const file = path.join(backups, 'nsm.db');
    // A backup killed on this host (its pid is gone), the single-file leftovers of the previous version, and two
    // folders of another host: one untouched for two hours (removed), one fresh (maybe still running: kept).
    const dead = spawnSync(process.execPath, ['-e', '']).pid;
    const mine = path.join(backups, `.nsm-backup-${os.hostname()}-${dead}-AbC123`);
    const foreignOld = path.join(backups, '.nsm-backup-other-host-42-XyZ789');
    const foreignNew = path.join(backups, '.nsm-backup-other-host-43-QwE456');
    for (const dir of [mine, foreignOld, foreignNew]) {
      fs.mkdirSync(dir);
      fs.writeFileSync(path.join(dir, 'gateway.db'), 'half');
      fs.writeFileSync(path.join(dir, 'gateway.db-journal'), 'half');
    }
    const old = new Date(Date.now() - 2 * 3600_000);
    for (const p of [path.join(foreignOld, 'gateway.db'), path.join(foreignOld, 'gateway.db-journal'), foreignOld]) fs.utimesSync(p, old, old);
    fs.writeFileSync(`${file}.partial`, 'half');
    fs.writeFileSync(`${file}.partial-journal`, 'half');

    expect((await db(dataDir, 'backup', file)).code).toBe(0);
    expect(fs.readdirSync(backups).sort()).toEqual(['.nsm-backup-other-host-43-QwE456', 'nsm.db', 'nsm.jobs.db']);

    // Without jobs.db a --force backup must not leave the older jobs part to be restored with the new gateway copy.
    await jobs!.close();
    jobs = null;
    fs.rmSync(path.join(dataDir, 'jobs.db'));
    expect((await db(dataDir, 'backup', file)).stderr).toBe(`${file} exists; pass --force to replace it\n`);
    const forced = await db(dataDir, 'backup', file, '--force');
    expect(forced.code).toBe(0);
    expect(forced.stdout.trimEnd().split('\n')).toHaveLength(1);
    expect(fs.readdirSync(backups).sort()).toEqual(['.nsm-backup-other-host-43-QwE456', 'nsm.db']);
  });

  test('restore names the right file when given the jobs part, and a backup without one leaves jobs.db alone', async () => {
    const file = path.join(backups, 'nsm.db');
    expect((await db(dataDir, 'backup', file)).code).toBe(0);
    await closeBoth();
    const wrong = await db(dataDir, 'restore', path.join(backups, 'nsm.jobs.db'));
    expect(wrong.code).toBe(1);
    expect(wrong.stderr).toMatch(/nsm\.jobs\.db is a jobs database, not a gateway database \(the jobs part of a backup: restore the file beside it without \.jobs\)/);

    fs.rmSync(path.join(backups, 'nsm.jobs.db'));
    const jobsBefore = fs.readFileSync(path.join(dataDir, 'jobs.db'));
    const done = await db(dataDir, 'restore', file);
    expect(done.code).toBe(0);
    expect(done.stdout.trimEnd().split('\n')[1]).toBe(`no jobs part beside the backup (${path.join(backups, 'nsm.jobs.db')}): ${path.join(dataDir, 'jobs.db')} not touched`);
    expect(fs.readFileSync(path.join(dataDir, 'jobs.db'))).toEqual(jobsBefore);
  });
});
