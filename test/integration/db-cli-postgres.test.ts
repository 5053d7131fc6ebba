// `npm run -s db -- migrate | import-sqlite` as a real process: migrate (SQLite and PostgreSQL), and import-sqlite,
// which moves a single box's store into a real PostgreSQL with every id kept (keys keep working, this month's
// credits carry over). backup/restore are in db-cli.test.ts.
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { PROJECT_ROOT } from '../../src/config';
import { openStore } from '../../src/store';
import { SQLITE_MIGRATIONS } from '../../src/store/gateway/migrations/sqlite';
import { openSqliteStore } from '../../src/store/gateway/sqlite';
import { hashToken } from '../../src/store/gateway/tokens';
import { startPostgres, type PostgresServer, serverBinaries } from '../helpers/real-servers';

// Fails the suite at once, with one line naming the Debian packages, when the server binaries are missing.
beforeAll(() => {
  serverBinaries();
});

const execFileP = promisify(execFile);
const DB_CLI = path.join(PROJECT_ROOT, 'dist/src/cli/db.js');

async function db(args: string[], env: Record<string, string>): Promise<{ code: number; stdout: string; stderr: string }> {
  try {
    const r = await execFileP(process.execPath, [DB_CLI, ...args], { env: { ...process.env, DATABASE_URL: '', ...env } });
    return { code: 0, stdout: r.stdout, stderr: r.stderr };
  } catch (err) {
    const e = err as { code: number; stdout: string; stderr: string };
    return { code: e.code, stdout: e.stdout, stderr: e.stderr };
  }
}

let pg: PostgresServer;
let dir: string;

beforeAll(async () => {
  pg = await startPostgres();
});

afterAll(async () => {
  await pg?.stop();
});

beforeEach(() => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'db-cli-'));
});

afterEach(() => {
  fs.rmSync(dir, { recursive: true, force: true });
});

test('help lists migrate and import-sqlite; bad arguments and configuration are refused', async () => {
  const help = await db(['--help'], { DATA_DIR: dir });
  expect(help.code).toBe(0);
  expect(help.stdout).toMatch(/^ {2}migrate$/m);
  expect(help.stdout).toMatch(/^ {2}import-sqlite \[--data-dir DIR\]$/m);
  expect(help.stdout).toMatch(/DATABASE_URL/);
  expect((await db(['migrate', 'extra'], { DATA_DIR: dir })).code).toBe(2);
  const bad = await db(['migrate'], { DATA_DIR: dir, DATABASE_URL: 'mysql://x' });
  expect(bad.code).toBe(1);
  expect(bad.stderr).toMatch(/DATABASE_URL must start with postgres:\/\/ or postgresql:\/\//);
});

test('migrate: SQLite in DATA_DIR, then up to date', async () => {
  const first = await db(['migrate'], { DATA_DIR: dir });
  expect(first).toMatchObject({ code: 0 });
  const versions = SQLITE_MIGRATIONS.map((m) => m.version);
  expect(first.stdout).toBe(`SQLite ${path.join(dir, 'gateway.db')}: applied migrations ${versions.join(', ')}; schema version ${versions.at(-1)}\n`);
  expect((await db(['migrate'], { DATA_DIR: dir })).stdout).toMatch(new RegExp(`up to date, schema version ${versions.at(-1)}`));
});

test('migrate: an unreachable PostgreSQL fails with exit 1 and one line naming it without its password', async () => {
  const r = await db(['migrate'], { DATA_DIR: dir, DATABASE_URL: 'postgres://app:secret@127.0.0.1:1/x' });
  expect(r.code).toBe(1);
  expect(r.stderr).toMatch(/^could not migrate PostgreSQL postgres:\/\/app:\*\*\*@127\.0\.0\.1:1\/x: .*ECONNREFUSED/);
  expect(r.stderr).not.toContain('secret');
});

test('import-sqlite: a single box moves to PostgreSQL with ids, keys, credits, settings and the log', async () => {
  const sqlite = openSqliteStore({ dataDir: dir });
  const ws = await sqlite.createWorkspace('acme', 'enterprise', { requestsPerMinute: 500, creditsPerMonth: 900 });
  await sqlite.setExcludedServices(ws.id, ['voice-lab']);
  const other = await sqlite.createWorkspace('other', 'free');
  const key = await sqlite.createToken({ workspaceId: ws.id, name: 'ci', scopes: ['noise-suppressor:*'], allowedIps: ['10.0.0.0/8'], expiresAt: '2031-01-01T00:00:00.000Z' });
  const gone = await sqlite.createToken({ workspaceId: other.id, name: 'old', scopes: ['*'], allowedIps: [], expiresAt: null });
  await sqlite.revokeToken(gone.record.id);
  await sqlite.chargeCredits(ws.id, 42, 900, new Date());
  await sqlite.chargeCredits(ws.id, 7, 900, new Date('2030-01-15T00:00:00Z'));
  await sqlite.setSetting('console.admin_secret_hash', 'scrypt$abc$def');
  // A job's charge settled whose job was never written (the outbox's row), and a refund already given for another job.
  const hold = await sqlite.reserveCredits(ws.id, 3, 900, new Date(), 60_000);
  await sqlite.settleReservation(hold.reservation!, { key: 'job_pending', owner: 'old-host-1-1' });
  expect(await sqlite.refundOnce('job_refunded', ws.id, 2, new Date().toISOString().slice(0, 7))).toBe(true);
  for (let i = 0; i < 2_345; i++) {
    await sqlite.logRequest({
      requestId: `req_${i}`, clientRequestId: i % 2 ? `c${i}` : null, time: new Date(Date.now() - i * 1000).toISOString(),
      tokenId: key.record.id, workspaceId: ws.id, method: 'POST', service: 'noise-suppressor', endpoint: 'denoise',
      status: 200, errorType: null, creditsCharged: 1, bytesIn: 10, bytesOut: 20, upstreamMs: 1.5, totalMs: 2, clientIp: '10.1.2.3',
    });
  }
  await sqlite.close();

  const url = await pg.createDatabase(`import_${process.pid}`);
  const r = await db(['import-sqlite', '--data-dir', dir], { DATA_DIR: '/nonexistent', DATABASE_URL: url });
  expect(r.stderr).toBe('');
  expect(r.code).toBe(0);
  expect(r.stdout).toMatch(/copied 2 workspaces, 2 keys, 2 credit periods, 1 pending charges, 1 refunds, 1 settings, 2345 request-log rows/);

  const store = await openStore({ dataDir: dir, databaseUrl: url });
  try {
    expect(await store.getWorkspace(ws.id)).toEqual({ ...ws, excludedServices: ['voice-lab'] });
    expect(await store.findTokenByHash(hashToken(key.token))).toEqual(key.record); // the clear token still works
    expect((await store.getToken(gone.record.id))!.revokedAt).not.toBeNull();
    expect(await store.creditsUsed(ws.id, new Date())).toBe(42 + 3 - 2);
    // The pending charge is still there to be confirmed or replayed; the refund is not given twice.
    expect((await store.pendingCharges(10)).map((p) => [p.key, p.workspaceId, p.owner])).toEqual([['job_pending', ws.id, 'old-host-1-1']]);
    expect(await store.refundOnce('job_refunded', ws.id, 2, new Date().toISOString().slice(0, 7))).toBe(false);
    expect(await store.creditsUsed(ws.id, new Date('2030-01-20T00:00:00Z'))).toBe(7);
    expect(await store.getSetting('console.admin_secret_hash')).toBe('scrypt$abc$def');
    expect(await store.countRequests({ workspaceId: ws.id })).toBe(2_345);
    expect((await store.queryRequests({ limit: 1 }))[0]).toMatchObject({ requestId: 'req_0', clientRequestId: null, upstreamMs: 1.5 });
    // The new rows continue after the imported ones.
    const next = await store.createWorkspace('third', 'free');
    expect((await store.listWorkspaces()).map((w) => w.id)).toEqual([ws.id, other.id, next.id]);
  } finally {
    await store.close();
  }
  // A second import into the same (now non-empty) database is refused and changes nothing.
  const again = await db(['import-sqlite', '--data-dir', dir], { DATABASE_URL: url });
  expect(again.code).toBe(1);
  expect(again.stderr).toMatch(/^import failed, nothing was copied: .*already has workspaces/);
  const noUrl = await db(['import-sqlite'], { DATA_DIR: dir });
  expect(noUrl.code).toBe(2);
  expect(noUrl.stderr).toMatch(/set DATABASE_URL/);
});
