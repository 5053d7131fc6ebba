// `db backup` killed with -9 mid-copy (issue 27, item 11) leaves its partial copy (in its temporary folder beside
// FILE); the next backup into that folder, to whatever name (backups are usually named by date), removes it and
// leaves only its own file. Real CLI processes against a real gateway.db, made large enough (60 MB) for the copy to
// be caught under way.
import { execFile, spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import Database from 'better-sqlite3';
import { openSqliteStore } from '../../src/store/gateway/sqlite';
import { gatewayDbPath } from '../../src/db/paths';
import { until } from '../helpers/jobs-helpers';

const CLI = path.join(__dirname, '../../src/cli/db.js');

test('a backup killed mid-copy leaves a partial copy and its journal; the next backup into the folder clears them', async () => {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'ns-db-killed-'));
  try {
    const store = openSqliteStore({ dataDir });
    await store.createWorkspace('acme', 'starter');
    await store.close();
    const raw = new Database(gatewayDbPath({ dataDir }));
    raw.exec('CREATE TABLE filler (b)');
    raw.exec('INSERT INTO filler SELECT randomblob(4000) FROM (WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 15000) SELECT x FROM c)');
    raw.close();

    const dir = path.join(dataDir, 'backups');
    fs.mkdirSync(dir);
    const file = path.join(dir, 'gateway-monday.db');
    const leftovers = () => fs.readdirSync(dir).filter((n) => n !== 'gateway-monday.db');
    /** Whether the copy is under way: a file of the temporary folder (or SQLite's journal of it) has grown. */
    const copying = () =>
      leftovers().some((n) => {
        const p = path.join(dir, n);
        const st = fs.statSync(p, { throwIfNoEntry: false });
        if (!st) return false;
        if (!st.isDirectory()) return st.size > 0;
        return fs.readdirSync(p).some((f) => (fs.statSync(path.join(p, f), { throwIfNoEntry: false })?.size ?? 0) > 0);
      });
    const child = spawn(process.execPath, [CLI, 'backup', file], { env: { ...process.env, DATA_DIR: dataDir }, stdio: 'ignore' });
    const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
    // Killed the moment the copy has begun.
    await until(async () => (copying() ? true : child.exitCode !== null ? Promise.reject(new Error('the backup finished before it could be killed')) : undefined), 30_000, 1);
    child.kill('SIGKILL');
    await exited;
    expect(leftovers().length).toBeGreaterThan(0);
    expect(fs.readdirSync(dir)).not.toContain('gateway-monday.db');

    const next = path.join(dir, 'gateway-tuesday.db');
    const again = await new Promise<{ code: number; stderr: string }>((resolve) =>
      execFile(process.execPath, [CLI, 'backup', next], { env: { ...process.env, DATA_DIR: dataDir } }, (err, _out, stderr) =>
        resolve({ code: err ? ((err as { code?: number }).code ?? 1) : 0, stderr }),
      ),
    );
    expect(again.stderr).toBe('');
    expect(again.code).toBe(0);
    expect(fs.readdirSync(dir)).toEqual(['gateway-tuesday.db']);
    const copy = new Database(next, { readonly: true });
    expect(copy.pragma('integrity_check', { simple: true })).toBe('ok');
    expect((copy.prepare('SELECT COUNT(*) AS n FROM filler').get() as { n: number }).n).toBe(15000);
    copy.close();
  } finally {
    fs.rmSync(dataDir, { recursive: true, force: true });
  }
});
