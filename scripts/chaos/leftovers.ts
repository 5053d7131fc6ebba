// Chaos suite, leftovers: what kill -9 leaves behind, a job upload half in and a `db backup` mid-copy, and that the
// restarted gateway and the next backup remove it (27.11).
import { execFile, spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import Database from 'better-sqlite3';
import type { Ctx } from './context';
import { JOBS } from './endpoints';
import { MB, waitFor } from './job-calls';
import { kill9, type Proc } from './procs';

/**
 * 27.11: kill -9 of a gateway with a job upload half in, then of `db backup` mid-copy. The restarted gateway must
 * remove the partial upload at start; the next backup the killed one's partial copy and journal.
 */
export async function killLeftovers(ctx: Ctx, gw: Proc, dataDir: string, restart: () => Promise<Proc>): Promise<Proc> {
  const t = await ctx.tenant(dataDir);
  const incoming = path.join(dataDir, 'jobs', 'incoming');
  const boundary = '----killed';
  const head = Buffer.from(`--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="a.wav"\r\n\r\n`);
  const upload = ctx.api(gw, t, JOBS, {
    method: 'POST',
    headers: { 'Content-Type': `multipart/form-data; boundary=${boundary}`, 'Content-Length': head.length + 8 * MB },
    body: [head, Buffer.alloc(4 * MB, 3), Buffer.alloc(4 * MB, 3)],
    stallAfter: head.length + 4 * MB,
    deadlineMs: 60_000,
    label: 'upload at kill -9',
    costs: false,
    expectNoReply: true,
    expect5xx: true,
  });
  const partials = (): string[] => (fs.existsSync(incoming) ? fs.readdirSync(incoming).filter((n) => /\.upload(\.|$)/.test(n)) : []);
  await waitFor(() => partials().some((n) => fs.statSync(path.join(incoming, n)).size > MB), 20_000);
  const before = partials();
  await kill9(gw);
  await upload;
  const afterKill = partials().filter((n) => before.includes(n)).length;

  // The dead gateway's database, grown to 60 MB so a backup of it can be caught mid-copy.
  const db = new Database(path.join(dataDir, 'gateway.db'));
  db.exec('CREATE TABLE IF NOT EXISTS chaos_filler (b)');
  db.exec('INSERT INTO chaos_filler SELECT randomblob(4000) FROM (WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 15000) SELECT x FROM c)');
  db.close();

  const restarted = await restart();
  const afterRestart = partials().filter((n) => before.includes(n)).length;

  const cli = path.join(__dirname, '../../src/cli/db.js');
  const backups = path.join(dataDir, 'backups');
  fs.mkdirSync(backups, { recursive: true });
  // What a killed backup leaves: its temporary folder (.nsm-backup-HOST-PID-…, with the copy and its journal inside),
  // or FILE.partial and FILE.partial-journal from versions before the folder.
  const leftovers = (): string[] => fs.readdirSync(backups).filter((n) => n.includes('partial') || n.startsWith('.nsm-backup-'));
  const inside = (n: string): string[] => {
    try {
      return fs.statSync(path.join(backups, n)).isDirectory() ? fs.readdirSync(path.join(backups, n)) : [n];
    } catch {
      return [];
    }
  };
  const midCopy = (): boolean => leftovers().some((n) => inside(n).some((f) => f.endsWith('-journal')));
  const child = spawn(process.execPath, [cli, 'backup', path.join(backups, 'gateway-1.db')], { env: { ...process.env, DATA_DIR: dataDir }, stdio: 'ignore' });
  const exited = new Promise<void>((r) => child.once('exit', () => r()));
  const end = Date.now() + 30_000;
  while (!midCopy() && child.exitCode === null && Date.now() < end) await new Promise((r) => setImmediate(r));
  child.kill('SIGKILL');
  await exited;
  const killedLeft = leftovers();
  const killedDesc = killedLeft.map((n) => (n.startsWith('.nsm-backup-') ? `.nsm-backup-HOST-PID-…/{${inside(n).join(', ')}}` : n.replace(/-[0-9a-f]{8}-\d+/, '-…')));
  const second = await new Promise<number>((resolve) =>
    execFile(process.execPath, [cli, 'backup', path.join(backups, 'gateway-2.db')], { env: { ...process.env, DATA_DIR: dataDir } }, (err) => resolve(err ? 1 : 0)),
  );
  const finalLeft = leftovers();
  ctx.add({
    item: '27.11',
    title: 'kill -9 leftovers: a job upload half in, then `db backup` mid-copy',
    pass: before.length > 0 && afterKill > 0 && afterRestart === 0 && killedLeft.length > 0 && second === 0 && finalLeft.length === 0,
    detail:
      `partial uploads: ${before.length} at the kill → ${afterKill} after it → ${afterRestart} once the gateway started again (target 0, at start); ` +
      `killed backup left ${killedLeft.length} file(s) (${killedDesc.join(', ')}) → ${finalLeft.length} after the next backup (exit ${second}; target 0)`,
  });
  return restarted;
}
