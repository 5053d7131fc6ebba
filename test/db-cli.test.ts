// `npm run -s db -- backup|restore` as a real child process against the DATA_DIR a live store is writing to.
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import Database from 'better-sqlite3';
import { gatewayDbPath, openSqliteStore } from '../src/store/sqlite-store';
import type { GatewayStore, RequestLogEntry } from '../src/store/types';

const CLI = path.join(__dirname, '../src/cli/db.js');

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
    expect(res.stdout).toMatch(/^backed up .*gateway\.db to .*gateway-1\.db \(\d+ KB, \d+ ms\): integrity ok, schema v\d+, 1 workspaces, 1 keys, \d+ logged requests\n$/);
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
