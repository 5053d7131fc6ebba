// Chaos suite, shutdown: SIGTERM of a gateway with long calls, stalled uploads and short calls in flight, and the keys
// CLI writing into a pipe its reader closed.
import { execFile } from 'node:child_process';
import path from 'node:path';
import { settledCreditsUsed, type Ctx } from './context';
import { DENOISE } from './endpoints';
import { multipart, sleep, type Reply } from './http';
import type { Proc } from './procs';

/** 9.17: SIGTERM of a gateway (its own model service, the file-work process) with jobs and uploads in flight. */
export async function sigtermUnderLoad(ctx: Ctx, gw: Proc, dataDir: string, wav: Buffer, longWav: Buffer): Promise<void> {
  const t = await ctx.tenant(dataDir, 'enterprise', { credits: 100_000, rpm: 100_000 });
  const long = multipart([{ name: 'model', value: 'nsm-4' }, { name: 'file', filename: 'long.wav', data: longWav }]);
  const short = multipart([{ name: 'file', filename: 'a.wav', data: wav }]);
  const calls: Array<Promise<Reply>> = [];
  for (let i = 0; i < 3; i++) calls.push(ctx.api(gw, t, DENOISE, { method: 'POST', headers: { 'Content-Type': long.contentType, 'Content-Length': long.body.length }, body: long.body, label: 'sigterm long', expect5xx: true, deadlineMs: 60_000 }));
  for (let i = 0; i < 2; i++)
    calls.push(
      ctx.api(gw, t, DENOISE, { method: 'POST', headers: { 'Content-Type': short.contentType, 'Content-Length': short.body.length }, body: short.body, stallAfter: 2000, label: 'sigterm stalled', expect5xx: true, deadlineMs: 60_000 }),
    );
  for (let i = 0; i < 3; i++) calls.push(ctx.api(gw, t, DENOISE, { method: 'POST', headers: { 'Content-Type': short.contentType, 'Content-Length': short.body.length }, body: short.body, label: 'sigterm short', expect5xx: true }));
  await sleep(1500);
  gw.expectExit();
  const signalled = Date.now();
  gw.child.kill('SIGTERM');
  const replies = await Promise.all(calls);
  const { code } = await gw.exited;
  const exitMs = Date.now() - signalled;
  const used = await settledCreditsUsed(t.store, t.workspaceId);
  const ok = replies.filter((r) => r.status === 200 && r.complete).length;
  // 408 is also an honest answer for the two stalled uploads (their own idle clock may run out first).
  const clean = replies.every((r, i) => r.status === 200 || (r.status === 503 && Number(r.headers['retry-after']) >= 1) || (i >= 3 && i < 5 && r.status === 408));
  ctx.add({
    item: '9.17',
    title: 'SIGTERM with 3 long jobs, 2 stalled uploads, 3 short calls in flight',
    pass: clean && code === 0 && used === ok,
    detail: `replies ${replies.map((r) => r.status || r.error).join('/')} (target: 200, or 503 with Retry-After — 408 allowed for the stalled uploads; never an empty reply); exit ${code} after ${(exitMs / 1000).toFixed(1)} s; credits ${used} = 2xx ${ok}`,
  });
}

export async function keysEpipe(ctx: Ctx, dataDir: string): Promise<void> {
  const cli = path.join(__dirname, '../../src/cli/keys.js');
  const result = await new Promise<{ code: string; stderr: string }>((resolve) => {
    execFile(
      'bash',
      ['-c', `node "${cli}" usage | head -n 1 >/dev/null; echo "\${PIPESTATUS[0]}"`],
      { env: { ...process.env, DATA_DIR: dataDir } },
      (_err, stdout, stderr) => resolve({ code: stdout.trim(), stderr }),
    );
  });
  ctx.add({
    item: '9.20',
    title: '`keys usage | head -n 1`',
    pass: result.code === '0' && !/EPIPE|at /.test(result.stderr),
    detail: `exit ${result.code}, stderr ${result.stderr.trim() ? JSON.stringify(result.stderr.trim().slice(0, 120)) : 'empty'}`,
  });
}
