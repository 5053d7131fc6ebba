// Chaos suite, jobs tenancy: one workspace's slow URL, slow webhook receiver or stalled upload against another
// workspace's job (27.1–27.3), concurrent uploads against the disk floor (27.4), and 30 submissions at once against the
// per-workspace cap (27.9).
import fs from 'node:fs';
import path from 'node:path';
import { settledCreditsUsed, type Ctx } from './context';
import { JOBS } from './endpoints';
import { errorType, multipart, sleep, type Reply } from './http';
import { jobUntil, loopback, MB, submitJob, trickler, waitFor } from './job-calls';
import type { Proc } from './procs';

/** 27.1 (gateway with JOBS_CONCURRENCY 1, private URLs allowed): a URL sending 1 byte every 2 s. */
export async function slowUrlSender(ctx: Ctx, gw: Proc, dataDir: string, wav: Buffer): Promise<void> {
  const a = await ctx.tenant(dataDir);
  const b = await ctx.tenant(dataDir);
  const sender = await trickler(100_000, 1, 2000);
  try {
    const slow = await submitJob(ctx, gw, a, [{ name: 'url', value: `${sender.url}/slow.wav` }], 'job: slow url');
    await waitFor(() => sender.state.requests > 0, 15_000);
    const t0 = Date.now();
    const quick = await submitJob(ctx, gw, b, [{ name: 'model', value: 'nsm-1' }, { name: 'file', filename: 'a.wav', data: wav }], 'job: other workspace');
    const done = quick.job ? await jobUntil(ctx, gw, b, quick.job.id, ['succeeded', 'failed'], 60_000) : null;
    const waited = Date.now() - t0;
    const stillSending = sender.state.open === 1;
    // The slow one then fails at the minimum rate (< 32 KiB/s over a 30 s window), not after the sender gives up.
    const end = slow.job ? await jobUntil(ctx, gw, a, slow.job.id, ['succeeded', 'failed', 'canceled'], 60_000) : null;
    const slowMs = Date.now() - t0;
    ctx.add({
      item: '27.1',
      title: 'slow URL sender (1 byte / 2 s) vs another workspace\'s 1 s job, JOBS_CONCURRENCY 1',
      pass: done?.status === 'succeeded' && waited < 15_000 && stillSending && end?.status === 'failed' && end.error?.type === 'url_fetch_failed',
      detail:
        `other workspace's job ${done?.status ?? 'not found'} ${(waited / 1000).toFixed(1)} s after it was submitted, while the slow download was ${stillSending ? 'still open' : 'over'} (target < 15 s); ` +
        `the slow job then ${end?.status ?? '?'} (${end?.error?.type ?? ''}: ${end?.error?.message?.slice(0, 90) ?? ''}) after ${(slowMs / 1000).toFixed(0)} s`,
    });
  } finally {
    await sender.close();
  }
}

/** 27.2: a webhook receiver that answers the headers, then 1 byte per second. */
export async function slowWebhookReceiver(ctx: Ctx, gw: Proc, dataDir: string, wav: Buffer): Promise<void> {
  const a = await ctx.tenant(dataDir);
  const b = await ctx.tenant(dataDir);
  const slow = await trickler(0, 1, 1000);
  const fastArrivals: number[] = [];
  const fast = await loopback((req, res) => {
    req.resume();
    req.on('end', () => {
      fastArrivals.push(Date.now());
      res.statusCode = 204;
      res.end();
    });
  });
  try {
    const file = { name: 'file', filename: 'a.wav', data: wav };
    await submitJob(ctx, gw, a, [{ name: 'model', value: 'nsm-1' }, { name: 'webhook_url', value: `${slow.url}/hook` }, file], 'job: slow webhook');
    const slowGotIt = await waitFor(() => slow.state.requests > 0, 30_000);
    const other = await submitJob(ctx, gw, b, [{ name: 'model', value: 'nsm-1' }, { name: 'webhook_url', value: `${fast.url}/hook` }, file], 'job: fast webhook');
    const done = other.job ? await jobUntil(ctx, gw, b, other.job.id, ['succeeded', 'failed'], 60_000) : null;
    await waitFor(() => fastArrivals.length > 0, 30_000);
    const finished = done?.finished_at ? Date.parse(done.finished_at) : NaN;
    const latency = fastArrivals.length ? fastArrivals[0] - finished : NaN;
    // The slow receiver's attempt is cut at its 15 s deadline, though a byte keeps coming every second.
    await waitFor(() => slow.state.closedAfterMs.length > 0, 25_000);
    const cutAfter = slow.state.closedAfterMs[0];
    ctx.add({
      item: '27.2',
      title: 'slow webhook receiver (headers, then 1 byte/s) vs another workspace\'s webhook',
      pass: slowGotIt && latency < 5000 && cutAfter !== undefined && cutAfter <= 18_000,
      detail: `other workspace's job.succeeded delivered ${Number.isFinite(latency) ? (latency / 1000).toFixed(1) + ' s' : 'never'} after its job finished (target < 5 s) while the slow receiver held its attempt; that attempt cut after ${cutAfter !== undefined ? (cutAfter / 1000).toFixed(1) + ' s' : '—'} (target ≤ 15 s deadline + slack)`,
    });
  } finally {
    await slow.close();
    await fast.close();
  }
}

/** 27.3: POST /jobs declaring 100,000 bytes, sending 80, then silence. */
export async function stalledJobUpload(ctx: Ctx, gw: Proc, dataDir: string, clientIdleMs: number): Promise<void> {
  const t = await ctx.tenant(dataDir, 'enterprise', { credits: 2, rpm: 1000 });
  const boundary = '----stalled';
  const head = Buffer.from(`--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="a.wav"\r\n\r\n`);
  const r = await ctx.api(gw, t, JOBS, {
    method: 'POST',
    headers: { 'Content-Type': `multipart/form-data; boundary=${boundary}`, 'Content-Length': 100_000 },
    body: Buffer.concat([head, Buffer.alloc(1000, 1)]),
    stallAfter: 80,
    deadlineMs: 30_000,
    label: 'stalled job upload',
    costs: false,
  });
  await sleep(300);
  const held = await t.store.creditsHeld(t.workspaceId, new Date());
  const used = await t.store.creditsUsed(t.workspaceId, new Date());
  ctx.add({
    item: '27.3',
    title: 'stalled job upload (Content-Length 100000, 80 bytes, silence)',
    pass: r.status === 408 && errorType(r) === 'request_timeout' && r.ms <= clientIdleMs + 2000 && held === 0 && used === 0,
    detail: `${r.status || r.error} ${errorType(r) ?? ''} after ${(r.ms / 1000).toFixed(1)} s (target 408 request_timeout at CLIENT_IDLE_TIMEOUT_MS = ${clientIdleMs / 1000} s); credits held ${held}, used ${used} (target 0/0)`,
  });
}

/** Bytes free on the file system of `dir` (statfs). */
export function freeBytes(dir: string): number {
  const s = fs.statfsSync(dir);
  return Number(s.bavail) * Number(s.bsize);
}

/**
 * 27.4 (a gateway without runner whose JOBS_MIN_FREE_DISK_MB is 150 MB under the free space at its start): three
 * 100 MB uploads and one chunked 200 MB upload at once.
 */
export async function diskFloor(ctx: Ctx, gw: Proc, dataDir: string, floorBytes: number): Promise<void> {
  const t = await ctx.tenant(dataDir, 'enterprise', { credits: 1000, rpm: 1000 });
  const jobsDir = path.join(dataDir, 'jobs');
  const piece = Buffer.alloc(MB, 7);
  const upload = (mb: number, chunked: boolean): Promise<Reply> => {
    const boundary = '----floor' + Math.random().toString(16).slice(2);
    const head = Buffer.from(`--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="big.wav"\r\n\r\n`);
    const tail = Buffer.from(`\r\n--${boundary}--\r\n`);
    const body = [head, ...Array.from({ length: mb }, () => piece), tail];
    const length = body.reduce((n, b) => n + b.length, 0);
    const headers: Record<string, string | number> = { 'Content-Type': `multipart/form-data; boundary=${boundary}` };
    if (chunked) headers['Transfer-Encoding'] = 'chunked';
    else headers['Content-Length'] = length;
    return ctx.api(gw, t, JOBS, { method: 'POST', headers, body, deadlineMs: 120_000, label: `disk floor ${mb} MB${chunked ? ' chunked' : ''}`, costs: false, expectNoReply: true, expect5xx: true });
  };
  let lowest = freeBytes(jobsDir);
  let sampling = true;
  const sampler = (async () => {
    while (sampling) {
      lowest = Math.min(lowest, freeBytes(jobsDir));
      await sleep(20);
    }
  })();
  const replies = await Promise.all([upload(100, false), upload(100, false), upload(100, false), upload(200, true)]);
  sampling = false;
  await sampler;
  await sleep(300);
  const accepted = replies.filter((r) => r.status === 202).length;
  const refused = replies.filter((r) => r.status === 507 && errorType(r) === 'insufficient_storage').length;
  const used = await settledCreditsUsed(t.store, t.workspaceId);
  const incoming = fs.existsSync(path.join(jobsDir, 'incoming')) ? fs.readdirSync(path.join(jobsDir, 'incoming')).length : -1;
  const below = Math.round((floorBytes - lowest) / MB);
  ctx.add({
    item: '27.4',
    title: '3 × 100 MB + 1 chunked 200 MB uploads at once, 150 MB above JOBS_MIN_FREE_DISK_MB',
    pass: accepted <= 1 && refused >= 3 && used === accepted && incoming === 0 && below <= 5,
    detail: `replies ${replies.map((r) => r.status || r.error).join('/')} (${refused} × 507 insufficient_storage); credits ${used} = 202s ${accepted}; lowest free space ${below > 0 ? below + ' MB below' : -below + ' MB above'} the floor (target: not below it; other processes share this disk); ${incoming} partial files left`,
  });
}

/** 27.9: 30 simultaneous job submissions against JOBS_MAX_ACTIVE_PER_WORKSPACE (20). */
export async function tooManyJobsHeaders(ctx: Ctx, gw: Proc, dataDir: string, wav: Buffer): Promise<void> {
  const t = await ctx.tenant(dataDir, 'enterprise', { credits: 1000, rpm: 1000 });
  const { body, contentType } = multipart([{ name: 'model', value: 'nsm-1' }, { name: 'file', filename: 'a.wav', data: wav }]);
  const replies = await Promise.all(
    Array.from({ length: 30 }, () =>
      ctx.api(gw, t, JOBS, { method: 'POST', headers: { 'Content-Type': contentType, 'Content-Length': body.length }, body, label: 'too many jobs', costs: false }),
    ),
  );
  const limited = replies.filter((r) => r.status === 429);
  const bare = limited.filter((r) => !(Number(r.headers['retry-after']) >= 1));
  const accepted = replies.filter((r) => r.status === 202);
  // A job that ended while the others were still uploading frees its slot, so more than 20 may be accepted: at most
  // 20 plus those that ended by the last answer.
  let ended = 0;
  for (const r of accepted) {
    const id = (JSON.parse(r.body.toString()) as { id: string }).id;
    const job = await ctx.api(gw, t, `${JOBS}/${id}`, { label: 'poll job', costs: false });
    const status = job.status === 200 ? (JSON.parse(job.body.toString()) as { status: string }).status : '';
    if (!['queued', 'running'].includes(status)) ended++;
  }
  ctx.add({
    item: '27.9',
    title: '30 simultaneous job submissions (at most 20 active per workspace)',
    pass: limited.length >= 1 && accepted.length + limited.length === 30 && accepted.length <= 20 + ended && bare.length === 0,
    detail: `${accepted.length} × 202 (${ended} of them ended by the last answer; target at most 20 + those), ${limited.length} × 429 (${[...new Set(limited.map(errorType))].join(', ')}), ${bare.length} without Retry-After (target 0)`,
  });
}
