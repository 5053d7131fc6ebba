// Chaos suite: the scenarios of issue 27 (reliability round 3), one row per item: a slow URL sender, a slow webhook
// receiver, a stalled job upload, concurrent uploads against the disk floor, header-less long FLAC/OGG/MP3, IPv6
// spellings, a redirect to the metadata address, request ids outside /v1, 429 headers, an all-failed batch, and what
// kill -9 leaves (job uploads, `db backup`). Jobs calls are not counted by the tally's credit check (a failed or
// canceled job is refunded later); each row checks its own workspace's credits.
import { execFile, spawn } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import path from 'node:path';
import Database from 'better-sqlite3';
import { settledCreditsUsed, type Ctx, type Tenant } from './context';
import { call, errorType, jsonOf, multipart, sleep, type Part, type Reply } from './http';
import { kill9, type Proc } from './procs';
import { BATCH, DENOISE } from './scenarios';

export const JOBS = '/v1/noise-suppressor/jobs';
const MB = 1024 * 1024;

interface JobView {
  id: string;
  status: string;
  attempts: number;
  finished_at: string | null;
  error: { type: string; message: string } | null;
}

/** Polls a condition every 50 ms until it holds or `ms` pass; resolves with whether it held. */
async function waitFor(check: () => boolean | Promise<boolean>, ms: number): Promise<boolean> {
  const end = Date.now() + ms;
  while (Date.now() < end) {
    if (await check()) return true;
    await sleep(50);
  }
  return check();
}

async function submitJob(ctx: Ctx, gw: Proc, t: Tenant, parts: Part[], label: string): Promise<{ reply: Reply; job: JobView | null }> {
  const { body, contentType } = multipart(parts);
  const reply = await ctx.api(gw, t, JOBS, { method: 'POST', headers: { 'Content-Type': contentType, 'Content-Length': body.length }, body, label, costs: false });
  return { reply, job: reply.status === 202 ? (jsonOf(reply) as unknown as JobView) : null };
}

async function getJob(ctx: Ctx, gw: Proc, t: Tenant, id: string): Promise<JobView | null> {
  const r = await ctx.api(gw, t, `${JOBS}/${id}`, { label: 'poll job' });
  return r.status === 200 ? (jsonOf(r) as unknown as JobView) : null;
}

async function jobUntil(ctx: Ctx, gw: Proc, t: Tenant, id: string, statuses: string[], ms: number): Promise<JobView | null> {
  let last: JobView | null = null;
  await waitFor(async () => {
    last = await getJob(ctx, gw, t, id);
    return last !== null && statuses.includes(last.status);
  }, ms);
  return last;
}

/** A loopback server; `handler` gets each request. */
async function loopback(handler: http.RequestListener): Promise<{ url: string; close(): Promise<void> }> {
  const server = http.createServer(handler);
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  return {
    url: `http://127.0.0.1:${(server.address() as net.AddressInfo).port}`,
    close: () =>
      new Promise<void>((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  };
}

/** Answers the headers (declaring `declared` bytes), then `chunk` bytes every `everyMs`, never finishing. */
async function trickler(declared: number, chunk: number, everyMs: number) {
  const drips = new Set<NodeJS.Timeout>();
  const state = { requests: 0, open: 0, closedAfterMs: [] as number[] };
  const server = await loopback((req, res) => {
    const started = Date.now();
    state.requests++;
    state.open++;
    req.resume();
    res.writeHead(200, declared > 0 ? { 'Content-Type': 'audio/wav', 'Content-Length': String(declared) } : { 'Content-Type': 'text/plain' });
    const drip = setInterval(() => res.write(Buffer.alloc(chunk, 0x2e)), everyMs);
    drips.add(drip);
    res.on('close', () => {
      state.open--;
      state.closedAfterMs.push(Date.now() - started);
      clearInterval(drip);
      drips.delete(drip);
    });
  });
  return {
    ...server,
    state,
    async close() {
      for (const d of drips) clearInterval(d);
      await server.close();
    },
  };
}

// -- item 1 -------------------------------------------------------------------------------------------------------

/** Item 1 (gateway with JOBS_CONCURRENCY 1, private URLs allowed): a URL sending 1 byte every 2 s. */
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

// -- item 2 -------------------------------------------------------------------------------------------------------

/** Item 2: a webhook receiver that answers the headers, then 1 byte per second. */
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

// -- item 3 -------------------------------------------------------------------------------------------------------

/** Item 3: POST /jobs declaring 100,000 bytes, sending 80, then silence. */
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

// -- item 4 -------------------------------------------------------------------------------------------------------

/** Bytes free on the file system of `dir` (statfs). */
export function freeBytes(dir: string): number {
  const s = fs.statfsSync(dir);
  return Number(s.bavail) * Number(s.bsize);
}

/**
 * Item 4 (a gateway without runner whose JOBS_MIN_FREE_DISK_MB is 150 MB under the free space at its start): three
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

// -- item 5 -------------------------------------------------------------------------------------------------------

/** Writes `seconds` of 8 kHz mono silence encoded by ffmpeg into a pipe (so no duration can be written back). */
function headerless(ffmpegPath: string, file: string, seconds: number, codec: string[]): Promise<void> {
  return new Promise((resolve, reject) => {
    const out = fs.createWriteStream(file);
    const child = spawn(ffmpegPath, ['-hide_banner', '-loglevel', 'error', '-f', 'lavfi', '-i', 'anullsrc=r=8000:cl=mono', '-t', String(seconds), ...codec, 'pipe:1'], {
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let err = '';
    child.stderr.on('data', (d: Buffer) => (err += d.toString()));
    child.stdout.pipe(out);
    child.on('exit', (code) => out.end(() => (code === 0 ? resolve() : reject(new Error(`ffmpeg ${codec.join(' ')}: ${err}`)))));
  });
}

/** Item 5 (MAX_AUDIO_SECONDS of the gateway below `seconds`): header-less long FLAC, OGG and MP3 to /denoise. */
export async function headerlessLongAudio(ctx: Ctx, gw: Proc, dataDir: string, dir: string, ffmpegPath: string, seconds: number): Promise<void> {
  const t = await ctx.tenant(dataDir, 'enterprise', { credits: 1000, rpm: 1000 });
  fs.mkdirSync(dir, { recursive: true });
  const kinds: Array<[string, string[]]> = [
    ['flac', ['-c:a', 'flac', '-f', 'flac']],
    ['ogg', ['-c:a', 'libvorbis', '-f', 'ogg']],
    ['mp3', ['-c:a', 'libmp3lame', '-b:a', '8k', '-f', 'mp3']],
  ];
  const details: string[] = [];
  let pass = true;
  for (const [ext, codec] of kinds) {
    const file = path.join(dir, `silence.${ext}`);
    try {
      await headerless(ffmpegPath, file, seconds, codec);
    } catch (err) {
      details.push(`${ext}: not made (${(err as Error).message.slice(0, 80)})`);
      continue;
    }
    const data = fs.readFileSync(file);
    const { body, contentType } = multipart([{ name: 'model', value: 'nsm-1' }, { name: 'file', filename: `long.${ext}`, data }]);
    const before = await settledCreditsUsed(t.store, t.workspaceId);
    const r = await ctx.api(gw, t, DENOISE, {
      method: 'POST',
      headers: { 'Content-Type': contentType, 'Content-Length': body.length },
      body,
      deadlineMs: 15_000,
      keepBytes: 2048,
      label: `header-less ${ext}`,
      expectNoReply: true,
    });
    await sleep(300);
    const charged = (await settledCreditsUsed(t.store, t.workspaceId)) - before;
    const ok = (r.status === 413 || r.status === 422) && r.ms < 1000 && charged === 0;
    pass &&= ok;
    details.push(`${ext} (${(data.length / MB).toFixed(1)} MB): ${r.status || r.error} in ${r.ms} ms, ${charged} credit`);
  }
  ctx.add({
    item: '27.5',
    title: `header-less ${(seconds / 3600).toFixed(1)} h FLAC/OGG/MP3 (no duration in the header) to /denoise`,
    pass,
    detail: details.join('; ') + ' (target 413/422 in < 1 s, no credit)',
  });
}

// -- items 6, 7 ---------------------------------------------------------------------------------------------------

/**
 * Item 6 (default URL policy, no runner: a job accepted by mistake is never fetched, its webhook never sent):
 * IPv4-compatible IPv6 spellings of loopback and link-local addresses.
 */
export async function ipv6Spellings(ctx: Ctx, gw: Proc, dataDir: string, wav: Buffer): Promise<void> {
  const t = await ctx.tenant(dataDir);
  const hosts = ['[::7f00:1]', '[::127.0.0.1]', '[::a9fe:a9fe]', '[0:0:0:0:0:0:7f00:1]', '[::0.0.0.1]'];
  const results: string[] = [];
  let pass = true;
  for (const host of hosts) {
    for (const field of ['url', 'webhook_url']) {
      const parts: Part[] = [{ name: field, value: `http://${host}/a.wav` }];
      if (field === 'webhook_url') parts.push({ name: 'file', filename: 'a.wav', data: wav });
      const { reply } = await submitJob(ctx, gw, t, parts, `ipv6 ${field} ${host}`);
      const ok = reply.status === 400 && errorType(reply) === 'url_not_allowed';
      pass &&= ok;
      if (!ok) results.push(`${field}=${host} → ${reply.status} ${errorType(reply) ?? ''}`);
    }
  }
  const used = await settledCreditsUsed(t.store, t.workspaceId);
  ctx.add({
    item: '27.6',
    title: `IPv4-compatible IPv6 spellings in url / webhook_url (${hosts.length * 2} submissions)`,
    pass: pass && used === 0,
    detail: (results.length ? results.join('; ') : 'every one 400 url_not_allowed') + `; credits ${used} (target 400 url_not_allowed, 0 credits)`,
  });
}

/**
 * Item 7 (JOBS_ALLOW_PRIVATE_URLS=true): a job URL that redirects to a cloud metadata address. The row uses EC2's
 * IPv6 one (fd00:ec2::254, in the same always-refused list as 169.254.169.254): a server that wrongly follows the
 * redirect must not reach a real metadata service from the machine the suite runs on (on the development machine
 * something answers on 169.254.169.254, on any port).
 */
export async function metadataRedirect(ctx: Ctx, gw: Proc, dataDir: string): Promise<void> {
  const t = await ctx.tenant(dataDir);
  const server = await loopback((_req, res) => {
    res.writeHead(302, { Location: 'http://[fd00:ec2::254]/latest/meta-data/' });
    res.end();
  });
  try {
    const { reply, job } = await submitJob(ctx, gw, t, [{ name: 'url', value: `${server.url}/a.wav` }], 'metadata redirect');
    const end = job ? await jobUntil(ctx, gw, t, job.id, ['failed', 'succeeded'], 40_000) : null;
    ctx.add({
      item: '27.7',
      title: 'job URL redirecting to a metadata address (fd00:ec2::254) with JOBS_ALLOW_PRIVATE_URLS=true',
      pass: (reply.status === 400 && errorType(reply) === 'url_not_allowed') || (end?.status === 'failed' && end.error?.type === 'url_not_allowed'),
      detail: `submit → ${reply.status}; job ${end?.status ?? '—'} ${end?.error ? `${end.error.type}: ${end.error.message.slice(0, 100)}` : ''} (target url_not_allowed: metadata addresses are refused always)`,
    });
  } finally {
    await server.close();
  }
}

// -- item 8 -------------------------------------------------------------------------------------------------------

/** Sends raw bytes and returns what came back (the connection's whole answer, bounded by 3 s). */
function rawExchange(port: number, text: string): Promise<string> {
  return new Promise((resolve) => {
    const socket = net.connect(port, '127.0.0.1');
    let out = '';
    const done = (): void => {
      socket.destroy();
      resolve(out);
    };
    const timer = setTimeout(done, 3000);
    socket.on('data', (d: Buffer) => (out += d.toString('latin1')));
    socket.on('close', () => {
      clearTimeout(timer);
      done();
    });
    socket.on('error', () => undefined);
    socket.write(text);
  });
}

/** Item 8: X-Request-Id and the error envelope on every response outside /v1, Node's own rejections included. */
export async function requestIdsOutsideV1(ctx: Ctx, gw: Proc): Promise<void> {
  const misses: string[] = [];
  for (const p of ['/healthz', '/readyz', '/metrics', '/openapi.json', '/console/', '/console/api/keys', '/nowhere']) {
    const r = await call(`${gw.url}${p}`, { deadlineMs: 10_000, keepBytes: 4096 });
    const id = r.headers['x-request-id'];
    const body = r.status >= 400 ? (jsonOf(r) as { error?: { request_id?: string } } | null) : null;
    if (!id) misses.push(`${p} ${r.status}: no X-Request-Id`);
    else if (r.status >= 400 && body?.error?.request_id !== id) misses.push(`${p} ${r.status}: body request_id ${JSON.stringify(body?.error?.request_id)}`);
  }
  const framing = await rawExchange(gw.port, 'POST /v1/noise-suppressor/denoise HTTP/1.1\r\nHost: x\r\nContent-Length: abc\r\n\r\n');
  if (!/x-request-id:/i.test(framing)) misses.push(`bad Content-Length: ${framing.split('\r\n')[0] || 'closed with no answer'}`);
  const big = await rawExchange(gw.port, `GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: ${'a'.repeat(20_000)}\r\n\r\n`);
  if (!/x-request-id:/i.test(big)) misses.push(`20 KB header: ${big.split('\r\n')[0] || 'closed with no answer'}`);
  ctx.add({
    item: '27.8',
    title: 'X-Request-Id and the error envelope outside /v1 (probes, metrics, openapi, console, 404, bad framing, 431)',
    pass: misses.length === 0,
    detail: misses.length ? misses.join('; ') : 'every response carried X-Request-Id; every error body the envelope with that id',
  });
}

// -- items 9, 10 --------------------------------------------------------------------------------------------------

/** Item 9: 30 simultaneous job submissions against JOBS_MAX_ACTIVE_PER_WORKSPACE (20). */
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

/** Item 10: a batch in which every file failed. */
export async function allFailedBatch(ctx: Ctx, gw: Proc, dataDir: string): Promise<void> {
  const t = await ctx.tenant(dataDir);
  const { body, contentType } = multipart([
    { name: 'response', value: 'json' },
    { name: 'files', filename: 'junk.wav', data: Buffer.from('not audio at all') },
    { name: 'files', filename: 'empty.wav', data: Buffer.alloc(0) },
  ]);
  const r = await ctx.api(gw, t, BATCH, { method: 'POST', headers: { 'Content-Type': contentType, 'Content-Length': body.length }, body, label: 'all-failed batch' });
  const used = await settledCreditsUsed(t.store, t.workspaceId);
  ctx.add({
    item: '27.10',
    title: 'batch in which every file failed (junk, an empty file)',
    pass: r.status === 200 && used === 0,
    detail: `${r.status}, X-NS-Batch ${r.headers['x-ns-batch'] ?? '—'}; credits ${used} (target 200 with the manifest, refunded: 0)`,
  });
}

// -- item 11 ------------------------------------------------------------------------------------------------------

/**
 * Item 11: kill -9 of a gateway with a job upload half in, then of `db backup` mid-copy. The restarted gateway must
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

/** Items 1–11 of issue 27 that need a gateway with private URLs allowed and one job slot (phase 4). */
export async function runPhase4(
  ctx: Ctx,
  gw: Proc,
  dataDir: string,
  opts: { wav: Buffer; clientIdleMs: number; ffmpegPath: string; scratch: string; longSeconds: number; restart: () => Promise<Proc> },
): Promise<Proc> {
  await stalledJobUpload(ctx, gw, dataDir, opts.clientIdleMs);
  await headerlessLongAudio(ctx, gw, dataDir, opts.scratch, opts.ffmpegPath, opts.longSeconds);
  await metadataRedirect(ctx, gw, dataDir);
  await slowWebhookReceiver(ctx, gw, dataDir, opts.wav);
  await slowUrlSender(ctx, gw, dataDir, opts.wav);
  return killLeftovers(ctx, gw, dataDir, opts.restart);
}

