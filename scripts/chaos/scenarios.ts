// Chaos suite: the scenarios. Each one drives real processes over loopback HTTP and reports whether the target of
// its issue item was met, with the figures that show it.
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import type { CorpusItem } from './corpus';
import { craftWav } from './corpus';
import { settledCreditsUsed, type Ctx, type Tenant } from './context';
import { call, errorType, jsonOf, multipart, percentile, pool, sleep, type Reply } from './http';
import { childrenOf, kill9, startModelService, type Proc } from './procs';

export const DENOISE = '/v1/noise-suppressor/denoise';
export const BATCH = '/v1/noise-suppressor/denoise/batch';
export const MODELS = '/v1/noise-suppressor/models';

/** Statuses a hostile input may get: accepted, or refused with a clear 4xx. */
const INPUT_OK = new Set([200, 400, 413, 415, 422]);

function fileBody(item: CorpusItem, fields: Array<{ name: string; value: string }> = []) {
  return multipart([...fields.map((f) => ({ name: f.name, value: f.value })), { name: 'file', filename: item.filename, data: fs.readFileSync(item.path), contentType: item.contentType }]);
}

/** Share of samples at full scale in a 16-bit WAV answer (full-scale garbage from NaN/Inf input shows here). */
export function fullScaleShare(wav: Buffer): number | null {
  if (wav.length < 44 || wav.toString('ascii', 0, 4) !== 'RIFF') return null;
  let p = 12;
  while (p + 8 <= wav.length) {
    const id = wav.toString('ascii', p, p + 4);
    const size = wav.readUInt32LE(p + 4);
    if (id === 'data') {
      const end = Math.min(wav.length, p + 8 + size);
      let full = 0;
      let n = 0;
      for (let i = p + 8; i + 1 < end; i += 2, n++) {
        const s = wav.readInt16LE(i);
        if (s >= 32767 || s <= -32768) full++;
      }
      return n ? full / n : 0;
    }
    p += 8 + size + (size % 2);
  }
  return null;
}

export interface CorpusOutcome {
  item: CorpusItem;
  status: number;
  ms: number;
  note?: string;
}

/** Every corpus file through /denoise; returns per-input outcomes (the tally counts the statuses). */
export async function corpusSingles(ctx: Ctx, gw: Proc, tenant: Tenant, corpus: CorpusItem[]): Promise<CorpusOutcome[]> {
  return pool(corpus, 2, async (item) => {
    const { body, contentType } = fileBody(item);
    const r = await ctx.api(gw, tenant, DENOISE, {
      method: 'POST',
      headers: { 'Content-Type': contentType, 'Content-Length': body.length },
      body,
      deadlineMs: 60_000,
      label: `denoise ${item.name}`,
    });
    let note: string | undefined;
    if (r.status === 0) note = r.error;
    else if (!INPUT_OK.has(r.status)) note = `unexpected status ${r.status}`;
    else if (item.valid && r.status !== 200) note = `valid recording refused: ${r.status} ${r.body.toString().slice(0, 120)}`;
    else if (r.status === 200) {
      const share = fullScaleShare(r.body);
      if (share === null) note = 'answer is not a WAV';
      // Full-scale output is garbage when the input had no full-scale content: valid recordings, and non-finite
      // samples (item 9: NaN/Inf must become silence or a 422). Corrupt files with huge finite floats clip honestly.
      else if (share > 0.01 && (item.valid || item.nonFinite)) note = `${(share * 100).toFixed(1)} % of output samples at full scale`;
    }
    return { item, status: r.status, ms: r.ms, note };
  });
}

/** The corpus again through /denoise/batch, 25 files per call. */
export async function corpusBatches(ctx: Ctx, gw: Proc, tenant: Tenant, corpus: CorpusItem[]): Promise<{ calls: number; items: number; failedItems: number; notes: string[] }> {
  const groups: CorpusItem[][] = [];
  for (let i = 0; i < corpus.length; i += 25) groups.push(corpus.slice(i, i + 25));
  const notes: string[] = [];
  let items = 0;
  let failedItems = 0;
  await pool(groups, 1, async (group, gi) => {
    const { body, contentType } = multipart([
      { name: 'response', value: 'json' },
      ...group.map((item) => ({ name: 'files', filename: item.filename, data: fs.readFileSync(item.path), contentType: item.contentType })),
    ]);
    const r = await ctx.api(gw, tenant, BATCH, {
      method: 'POST',
      headers: { 'Content-Type': contentType, 'Content-Length': body.length },
      body,
      deadlineMs: 120_000,
      label: `batch #${gi}`,
    });
    if (r.status === 200) {
      const manifest = jsonOf(r) as { items?: Array<{ status: string }> } | null;
      items += manifest?.items?.length ?? 0;
      failedItems += manifest?.items?.filter((it) => it.status !== 'ok').length ?? 0;
      if (!manifest?.items || manifest.items.length !== group.length) notes.push(`batch #${gi}: manifest lists ${manifest?.items?.length} of ${group.length}`);
    } else if (!INPUT_OK.has(r.status)) {
      notes.push(`batch #${gi}: ${r.status} ${r.error ?? r.body.toString().slice(0, 160)}`);
    }
  });
  return { calls: groups.length, items, failedItems, notes };
}

/** Absurd requests: headers, forms and framing a client should never send. */
export async function hostileRequests(ctx: Ctx, gw: Proc, tenant: Tenant, wav: Buffer): Promise<Array<{ name: string; status: number; ok: boolean }>> {
  const file = (filename = 'a.wav') => ({ name: 'file', filename, data: wav, contentType: 'audio/wav' });
  const form = (parts: Parameters<typeof multipart>[0]) => multipart(parts);
  const cases: Array<{ name: string; expect: number[]; run: () => Promise<Reply> }> = [];
  const post = (name: string, expect: number[], parts: Parameters<typeof multipart>[0], extra: Record<string, string> = {}, target = DENOISE) =>
    cases.push({
      name,
      expect,
      run: () => {
        const { body, contentType } = form(parts);
        return ctx.api(gw, tenant, target, {
          method: 'POST',
          headers: { 'Content-Type': contentType, 'Content-Length': body.length, ...extra },
          body,
          label: `hostile: ${name}`,
        });
      },
    });
  post('10 KB file name', [200], [file('x'.repeat(10_000) + '.wav')]);
  post('path traversal name', [200], [file('../../../../etc/passwd')]);
  post('bidi override name', [200], [file('invoice\u202Evaw.exe')]);
  post('CR/LF in name', [200, 400], [{ name: 'file', rawDisposition: 'name="file"; filename="a\r\nX-Injected: 1.wav"', data: wav }]);
  post('no filename', [200, 400], [{ name: 'file', rawDisposition: 'name="file"', data: wav }]);
  post('field "files" on /denoise', [400], [{ name: 'files', filename: 'a.wav', data: wav }]);
  post('two files on /denoise', [400], [file(), file('b.wav')]);
  post('unknown model', [400], [{ name: 'model', value: 'nsm-999' }, file()]);
  post('model with NUL', [400], [{ name: 'model', value: 'nsm-2\u0000' }, file()]);
  for (const v of ['NaN', '-1', '1e309', 'abc', '100.0000001']) post(`attenuation_limit_db=${v}`, [400], [{ name: 'attenuation_limit_db', value: v }, file()]);
  post('output_format=exe', [400], [{ name: 'output_format', value: 'exe' }, file()]);
  post('response=xml', [400], [{ name: 'response', value: 'xml' }, file()]);
  post('keep_input_sample_rate=maybe', [400], [{ name: 'keep_input_sample_rate', value: 'maybe' }, file()]);
  post('1000 junk fields', [400, 413], [...Array.from({ length: 1000 }, (_, i) => ({ name: `f${i}`, value: 'x' })), file()]);
  post('1 MB field value', [400, 413], [{ name: 'model', value: 'x'.repeat(1024 * 1024) }, file()]);
  post('26 files in a batch', [413], Array.from({ length: 26 }, (_, i) => ({ name: 'files', filename: `${i}.wav`, data: wav })), {}, BATCH);
  post('batch without files', [400], [{ name: 'model', value: 'nsm-1' }], {}, BATCH);
  post('batch with field "file"', [400], [file()], {}, BATCH);
  post('X-Request-Id of 10 KB', [200], [file()], { 'X-Request-Id': 'a'.repeat(10_000) });
  post('X-Request-Id with markup', [200], [file()], { 'X-Request-Id': '<script>alert(1)</script>"; DROP TABLE requests;--' });
  const raw = (name: string, expect: number[], opts: Parameters<typeof call>[1] & { auth?: boolean }) =>
    cases.push({
      name,
      expect,
      run: () =>
        ctx.api(gw, opts.auth === false ? null : tenant, DENOISE, { method: 'POST', ...opts, label: `hostile: ${name}`, expectNoReply: expect.includes(0) }),
    });
  const good = form([file()]);
  raw('text/plain body', [400, 415], { headers: { 'Content-Type': 'text/plain', 'Content-Length': wav.length }, body: wav });
  raw('multipart without boundary', [400], { headers: { 'Content-Type': 'multipart/form-data', 'Content-Length': good.body.length }, body: good.body });
  raw('boundary mismatch', [400], { headers: { 'Content-Type': 'multipart/form-data; boundary=nope', 'Content-Length': good.body.length }, body: good.body });
  raw('final boundary missing', [400], {
    headers: { 'Content-Type': good.contentType, 'Content-Length': good.body.length - 10 },
    body: good.body.subarray(0, good.body.length - 10),
  });
  raw('Content-Length smaller than the body', [400], { headers: { 'Content-Type': good.contentType, 'Content-Length': 500 }, body: good.body.subarray(0, 500) });
  raw('Content-Length larger than the body (client stalls)', [408], {
    headers: { 'Content-Type': good.contentType, 'Content-Length': good.body.length + 100_000 },
    body: good.body,
    stallAfter: good.body.length,
    deadlineMs: 20_000,
  });
  raw('chunked upload', [200], { headers: { 'Content-Type': good.contentType, 'Transfer-Encoding': 'chunked' }, body: [good.body.subarray(0, 1000), good.body.subarray(1000)], chunkDelayMs: 20 });
  raw('Expect: 100-continue from the client', [200], { headers: { 'Content-Type': good.contentType, 'Content-Length': good.body.length, Expect: '100-continue' }, body: good.body });
  raw('Content-Encoding: gzip (not gzipped)', [200, 400, 415], { headers: { 'Content-Type': good.contentType, 'Content-Length': good.body.length, 'Content-Encoding': 'gzip' }, body: good.body });
  raw('8 KB junk token', [401], { auth: false, headers: { Authorization: `Bearer ${'A'.repeat(8192)}`, 'Content-Type': good.contentType, 'Content-Length': good.body.length }, body: good.body });
  raw('200 junk headers', [200, 431], {
    headers: { 'Content-Type': good.contentType, 'Content-Length': good.body.length, ...Object.fromEntries(Array.from({ length: 200 }, (_, i) => [`X-Junk-${i}`, 'y'.repeat(50)])) },
    body: good.body,
  });
  cases.push({
    name: '16 KB URL',
    expect: [404, 414, 431],
    run: () => ctx.api(gw, tenant, `${DENOISE}/${'x'.repeat(16_000)}`, { method: 'GET', label: 'hostile: long URL' }),
  });
  cases.push({
    name: 'query junk',
    expect: [200],
    run: () => {
      const { body, contentType } = form([file()]);
      return ctx.api(gw, tenant, `${DENOISE}?model=../../x&%00=%ff`, { method: 'POST', headers: { 'Content-Type': contentType, 'Content-Length': body.length }, body, label: 'hostile: query junk' });
    },
  });
  return pool(cases, 2, async (c) => {
    const r = await c.run();
    return { name: c.name, status: r.status, ok: c.expect.includes(r.status) };
  });
}

// -- security and limits ------------------------------------------------------------------------------------------

export async function ipAllowList(ctx: Ctx, gw: Proc, dataDir: string): Promise<void> {
  const t = await ctx.tenant(dataDir, 'scale', { allowedIps: ['10.9.9.9'] });
  const forged = await ctx.api(gw, t, MODELS, { headers: { 'X-Forwarded-For': '10.9.9.9, 198.51.100.7' }, label: 'ip forged' });
  const proxied = await ctx.api(gw, t, MODELS, { headers: { 'X-Forwarded-For': '198.51.100.7, 10.9.9.9' }, label: 'ip proxied' });
  ctx.add({
    item: '9.2',
    title: 'IP allow-list behind TRUST_PROXY=1',
    pass: forged.status === 403 && proxied.status === 200,
    detail: `forged left-most X-Forwarded-For → ${forged.status} (target 403); proxy-appended → ${proxied.status} (target 200)`,
  });
}

export async function openModelService(ctx: Ctx, ms: Proc, wav: Buffer): Promise<void> {
  const { body, contentType } = multipart([{ name: 'file', filename: 'a.wav', data: wav }]);
  const r = await call(`${ms.url}/denoise`, { method: 'POST', headers: { 'Content-Type': contentType, 'Content-Length': body.length }, body });
  const h = await call(`${ms.url}/health`, {});
  ctx.add({
    item: '9.4',
    title: 'model service without its token',
    pass: r.status === 401 && h.status === 401,
    detail: `POST /denoise → ${r.status}, GET /health → ${h.status} (target 401, no work done)`,
  });
}

export async function bidiNames(ctx: Ctx, gw: Proc, t: Tenant, wav: Buffer): Promise<void> {
  const single = multipart([{ name: 'file', filename: 'report\u202Evaw.exe', data: wav }]);
  const r = await ctx.api(gw, t, DENOISE, { method: 'POST', headers: { 'Content-Type': single.contentType, 'Content-Length': single.body.length }, body: single.body, label: 'bidi single' });
  const batch = multipart([
    { name: 'files', filename: 'a\u2067b\u2069.wav', data: wav },
    { name: 'files', filename: '\u200Fc\u202Ed.wav', data: wav },
  ]);
  const b = await ctx.api(gw, t, BATCH, { method: 'POST', headers: { 'Content-Type': batch.contentType, 'Content-Length': batch.body.length }, body: batch.body, label: 'bidi batch' });
  const cd = String(r.headers['content-disposition'] ?? '');
  const zipText = b.body.toString('utf8');
  const bad = /%E2%80%A[A-E]|%E2%81%A[6-9]|%E2%80%8[EF]/i.test(cd) || /[\u202A-\u202E\u2066-\u2069\u200E\u200F]/.test(zipText);
  ctx.add({
    item: '9.18',
    title: 'bidi/control characters in file names',
    pass: r.status === 200 && b.status === 200 && !bad,
    detail: `Content-Disposition ${JSON.stringify(cd)}; zip names ${bad ? 'CONTAIN' : 'free of'} bidi controls`,
  });
}

async function consoleLogin(gw: Proc, secret: string, xff?: string): Promise<{ status: number; cookie?: string }> {
  const body = Buffer.from(JSON.stringify({ secret }));
  const headers: Record<string, string | number> = { 'Content-Type': 'application/json', 'Content-Length': body.length };
  if (xff) headers['X-Forwarded-For'] = xff;
  const r = await call(`${gw.url}/console/api/login`, { method: 'POST', headers, body, deadlineMs: 30_000 });
  const set = ([] as string[]).concat(r.headers['set-cookie'] ?? []);
  return { status: r.status, cookie: set.find((c) => c.startsWith('ns_console_session='))?.split(';')[0] };
}

export async function consoleChecks(ctx: Ctx, gw: Proc, secret: string, t: Tenant): Promise<void> {
  const { cookie } = await consoleLogin(gw, secret, '192.0.2.200');
  const statuses: string[] = [];
  let allBad = true;
  for (const v of ['1e308', 'Infinity', '-1', 'abc']) {
    const r = await call(`${gw.url}/console/api/requests?offset=${v}`, { headers: { Cookie: cookie ?? '' } });
    statuses.push(`${v}→${r.status}`);
    if (r.status !== 400) allBad = false;
  }
  ctx.add({ item: '9.14', title: 'request-log offset validation', pass: cookie !== undefined && allBad, detail: statuses.join(', ') + ' (target 400)' });

  // Item 16: a client-chosen X-Request-Id is never the log's id.
  const a = await ctx.api(gw, t, MODELS, { headers: { 'X-Request-Id': 'chaos-dup-id' }, label: 'request id 1' });
  const b = await ctx.api(gw, t, MODELS, { headers: { 'X-Request-Id': 'chaos-dup-id' }, label: 'request id 2' });
  const ida = String(a.headers['x-request-id']);
  const idb = String(b.headers['x-request-id']);
  ctx.add({
    item: '9.16',
    title: 'client X-Request-Id reused as the log id',
    pass: ida !== idb && ida !== 'chaos-dup-id',
    detail: `two calls sending "chaos-dup-id" got ${ida} and ${idb} (target: two fresh ids)`,
  });
}

export async function loginUnderLoad(ctx: Ctx, gw: Proc, t: Tenant): Promise<void> {
  const probe = async (n: number): Promise<number[]> => {
    const ms: number[] = [];
    for (let i = 0; i < n; i++) ms.push((await ctx.api(gw, t, MODELS, { label: 'latency probe' })).ms);
    return ms;
  };
  const before = percentile(await probe(30), 50);
  let done = false;
  const logins = pool(
    Array.from({ length: 500 }, (_, i) => i),
    50,
    async (i) => {
      const r = await consoleLogin(gw, 'wrong-secret', `198.18.${Math.floor(i % 100)}.${1 + (i % 200)}`);
      return r.status;
    },
  ).finally(() => {
    done = true;
  });
  // Probes start with the sign-ins and at least one round runs (on a fast machine all 500 are refused in < 300 ms).
  await sleep(10);
  const during: number[] = [];
  do during.push(...(await probe(5)));
  while (!done && during.length < 200);
  const statuses = await logins;
  const p50 = percentile(during, 50);
  const refused = statuses.filter((s) => s === 401 || s === 429).length;
  ctx.add({
    item: '9.6',
    title: '500 wrong sign-ins from 100 addresses vs GET /models',
    pass: refused === 500 && p50 <= Math.max(100, 10 * before),
    detail: `GET /models p50 ${before} ms idle → ${p50} ms during the sign-ins (${during.length} probes; target ≤ max(100 ms, 10× idle)); sign-ins answered 401/429: ${refused}/500`,
  });
}

export async function unauthenticatedFlood(ctx: Ctx, gw: Proc, dataDir: string): Promise<void> {
  const store = await ctx.storeOf(dataDir);
  const before = await store.countRequests({ status: 401 }).catch(() => NaN);
  const since = Date.now();
  const statuses = await pool(
    Array.from({ length: 3000 }, (_, i) => i),
    50,
    async (i) => (await call(`${gw.url}${MODELS}`, { headers: i % 2 ? { Authorization: 'Bearer mw_live_junk' } : {}, deadlineMs: 20_000 })).status,
  );
  const ms = Date.now() - since;
  await sleep(500);
  const after = await store.countRequests({ status: 401 }).catch(() => NaN);
  const limited = statuses.filter((s) => s === 429).length;
  const logged = after - before;
  ctx.add({
    item: '9.7',
    title: '3,000 unauthenticated requests from one address',
    pass: limited > 0 && logged < 1500,
    detail: `${limited} answered 429, ${statuses.filter((s) => s === 401).length} 401, in ${ms} ms; ${logged} new 401 log rows (target: 429s with Retry-After, far fewer rows than requests)`,
  });
}

export async function rateLimitBurst(ctx: Ctx, gw: Proc, dataDir: string): Promise<void> {
  const t = await ctx.tenant(dataDir, 'free');
  const replies = await pool(Array.from({ length: 80 }, (_, i) => i), 20, () => ctx.api(gw, t, MODELS, { label: 'rate burst' }));
  const ok = replies.filter((r) => r.status === 200).length;
  const limited = replies.filter((r) => r.status === 429);
  const withRetry = limited.filter((r) => Number(r.headers['retry-after']) >= 1).length;
  ctx.add({
    item: 'rl',
    title: 'rate-limit burst (free plan, 80 at once)',
    pass: ok === 60 && limited.length === 20 && withRetry === 20,
    detail: `${ok} × 200, ${limited.length} × 429 (${withRetry} with Retry-After); target 60 / 20`,
  });
}

/** Calls until each one gets a final answer, honouring Retry-After on 429/503 as a client should. */
async function untilFinal(ctx: Ctx, gw: Proc, t: Tenant, body: { body: Buffer; contentType: string }, label: string): Promise<Reply> {
  for (let attempt = 0; ; attempt++) {
    const r = await ctx.api(gw, t, DENOISE, {
      method: 'POST',
      headers: { 'Content-Type': body.contentType, 'Content-Length': body.body.length },
      body: body.body,
      label,
      expect5xx: true,
    });
    if ((r.status !== 429 && r.status !== 503) || attempt >= 20) return r;
    await sleep(Math.min(2000, 1000 * Math.max(0.2, Number(r.headers['retry-after']) || 1)) * (0.5 + Math.random()));
  }
}

export async function creditRace(ctx: Ctx, gw: Proc, dataDir: string, wav: Buffer): Promise<void> {
  const t = await ctx.tenant(dataDir, 'enterprise', { credits: 10, rpm: 100_000 });
  const body = multipart([{ name: 'file', filename: 'a.wav', data: wav }]);
  const replies = await Promise.all(Array.from({ length: 40 }, () => untilFinal(ctx, gw, t, body, 'credit race')));
  const ok = replies.filter((r) => r.status === 200).length;
  const quota = replies.filter((r) => r.status === 402).length;
  const used = await settledCreditsUsed(t.store, t.workspaceId);
  ctx.add({
    item: 'cr',
    title: 'credit race: 40 parallel calls, 10 credits',
    pass: ok === 10 && quota === 30 && used === 10,
    detail: `${ok} × 200, ${quota} × 402, other ${40 - ok - quota}; credits used ${used} (target 10 / 30 / 10)`,
  });
}

export async function quotaVsReservations(ctx: Ctx, gw: Proc, dataDir: string, longWav: Buffer, wav: Buffer): Promise<void> {
  const t = await ctx.tenant(dataDir, 'enterprise', { credits: 3, rpm: 100_000 });
  const long = multipart([{ name: 'model', value: 'nsm-4' }, { name: 'file', filename: 'long.wav', data: longWav }]);
  const short = multipart([{ name: 'file', filename: 'a.wav', data: wav }]);
  const holders = Array.from({ length: 3 }, () =>
    ctx.api(gw, t, DENOISE, { method: 'POST', headers: { 'Content-Type': long.contentType, 'Content-Length': long.body.length }, body: long.body, label: 'holder', deadlineMs: 120_000 }),
  );
  await sleep(400);
  const during = await ctx.api(gw, t, DENOISE, { method: 'POST', headers: { 'Content-Type': short.contentType, 'Content-Length': short.body.length }, body: short.body, label: 'while held' });
  const held = await Promise.all(holders);
  const after = await ctx.api(gw, t, DENOISE, { method: 'POST', headers: { 'Content-Type': short.contentType, 'Content-Length': short.body.length }, body: short.body, label: 'after' });
  const heldOk = held.filter((r) => r.status === 200).length;
  ctx.add({
    item: '9.10',
    title: '402 only when settled usage reached the limit',
    pass: during.status === 429 && Number(during.headers['retry-after']) >= 1 && (heldOk < 3 || after.status === 402),
    detail: `3 calls holding the last 3 credits; a 4th meanwhile → ${during.status} ${errorType(during) ?? ''} (target 429 + Retry-After); holders ${held.map((r) => r.status).join('/')}; afterwards → ${after.status} (target 402 when all 3 were charged)`,
  });
}

/** Item 15: the same 60 requests just before and just after a minute boundary. */
export async function slidingWindow(ctx: Ctx, gw: Proc, dataDir: string): Promise<void> {
  const t = await ctx.tenant(dataDir, 'free');
  const now = new Date();
  const wait = (58_000 - (now.getSeconds() * 1000 + now.getMilliseconds()) + 60_000) % 60_000;
  if (wait > ctx.timeLeft() - 30_000) {
    ctx.add({ item: '9.15', title: 'rate limit across a minute boundary', pass: null, detail: 'not enough time left to wait for a minute boundary' });
    return;
  }
  await sleep(wait);
  const burst = () => pool(Array.from({ length: 60 }, (_, i) => i), 20, () => ctx.api(gw, t, MODELS, { label: 'window burst' }));
  const first = (await burst()).filter((r) => r.status === 200).length;
  const n = new Date();
  await sleep(Math.max(0, 60_500 - (n.getSeconds() * 1000 + n.getMilliseconds())) % 60_000);
  const second = (await burst()).filter((r) => r.status === 200).length;
  ctx.add({
    item: '9.15',
    title: 'rate limit across a minute boundary (free: 60/min)',
    pass: first === 60 && second <= 5,
    detail: `60 at :58 → ${first} passed; 60 more at :00.5 → ${second} passed (target ≤ 5; a fixed window lets all 60 through)`,
  });
}

/** Item 1: tiny files that declare hours of audio. */
export async function durationCaps(ctx: Ctx, gw: Proc, t: Tenant): Promise<void> {
  const pcm = (n: number) => {
    const b = Buffer.alloc(n * 2);
    for (let i = 0; i < n; i++) b.writeInt16LE(Math.round(3000 * Math.sin(i)), i * 2);
    return b;
  };
  const cases: Array<[string, Buffer]> = [
    ['3,600 samples at 1 Hz (1 h)', craftWav({ rate: 1, data: pcm(3600) })],
    ['36,000 samples at 1 Hz (10 h)', craftWav({ rate: 1, data: pcm(36_000) })],
    ['1 s at 8 Hz, 64 channels', craftWav({ rate: 8, channels: 64, data: pcm(512) })],
  ];
  const details: string[] = [];
  let pass = true;
  for (const [label, data] of cases) {
    const before = await settledCreditsUsed(t.store, t.workspaceId);
    const { body, contentType } = multipart([{ name: 'keep_input_sample_rate', value: 'false' }, { name: 'file', filename: 'tiny.wav', data }]);
    const r = await ctx.api(gw, t, DENOISE, { method: 'POST', headers: { 'Content-Type': contentType, 'Content-Length': body.length }, body, deadlineMs: 20_000, label, keepBytes: 1024, expectNoReply: true });
    await sleep(500); // a call the client gave up on is refunded when the gateway notices
    const charged = (await settledCreditsUsed(t.store, t.workspaceId)) - before;
    const ok = (r.status === 413 || r.status === 422) && r.ms < 2000 && charged === 0;
    pass &&= ok;
    details.push(`${label}: ${r.status || r.error} in ${r.ms} ms, ${charged} credit`);
  }
  ctx.add({ item: '9.1', title: 'duration / rate / channel caps', pass, detail: details.join('; ') + ' (target 413/422 in < 2 s, no credit)' });
}

/** Item 3: uploads at 1 byte/s must not open the breaker for anybody. */
export async function slowClients(ctx: Ctx, gw: Proc, dataDir: string, wav: Buffer): Promise<void> {
  const slow = await ctx.tenant(dataDir);
  const other = await ctx.tenant(dataDir);
  const good = multipart([{ name: 'file', filename: 'a.wav', data: wav }]);
  const chunks = Array.from({ length: 12 }, (_, i) => good.body.subarray(i, i + 1));
  const slowReplies = await Promise.all(
    Array.from({ length: 5 }, () =>
      ctx.api(gw, slow, DENOISE, {
        method: 'POST',
        headers: { 'Content-Type': good.contentType, 'Content-Length': good.body.length },
        body: chunks,
        chunkDelayMs: 1000,
        deadlineMs: 20_000,
        label: 'slow client',
      }),
    ),
  );
  const after = await pool(Array.from({ length: 10 }, (_, i) => i), 2, () =>
    ctx.api(gw, other, DENOISE, { method: 'POST', headers: { 'Content-Type': good.contentType, 'Content-Length': good.body.length }, body: good.body, label: 'after slow clients' }),
  );
  // A steady slow upload (about 64 KB/s) must not be cut.
  const big = multipart([{ name: 'file', filename: 'long.wav', data: Buffer.concat([wav, Buffer.alloc(0)]) }]);
  const pieces: Buffer[] = [];
  for (let i = 0; i < big.body.length; i += 16 * 1024) pieces.push(big.body.subarray(i, i + 16 * 1024));
  const steady = await ctx.api(gw, other, DENOISE, {
    method: 'POST',
    headers: { 'Content-Type': big.contentType, 'Content-Length': big.body.length },
    body: pieces,
    chunkDelayMs: 250,
    deadlineMs: 60_000,
    label: 'steady slow upload',
  });
  const slowStatuses = slowReplies.map((r) => r.status || r.error).join('/');
  const usedSlow = await settledCreditsUsed(slow.store, slow.workspaceId);
  const okAfter = after.filter((r) => r.status === 200).length;
  ctx.add({
    item: '9.3',
    title: '5 uploads at 1 byte/s, then another workspace',
    pass: slowReplies.every((r) => r.status === 408 || (r.status === 0 && r.error !== 'deadline')) && usedSlow === 0 && okAfter === 10 && steady.status === 200,
    detail: `slow: ${slowStatuses} (target 408 or closed, 0 credits: ${usedSlow}); other workspace afterwards ${okAfter}/10 × 200 (breaker closed); steady ${Math.round(big.body.length / 1024)} KB upload over ${(steady.ms / 1000).toFixed(1)} s → ${steady.status}`,
  });
}

/** Item 8: 60 concurrent uploads of a 90 s clip. */
export async function admission(ctx: Ctx, gw: Proc, services: Proc[], dataDir: string, clip90: Buffer): Promise<void> {
  const t = await ctx.tenant(dataDir, 'enterprise', { credits: 100_000, rpm: 100_000 });
  const { body, contentType } = multipart([{ name: 'file', filename: 'clip90.wav', data: clip90 }]);
  let maxFfmpeg = 0;
  let sampling = true;
  const sampler = (async () => {
    while (sampling) {
      const n = services.filter((s) => s.alive()).reduce((acc, s) => acc + childrenOf(s.child.pid!).filter((c) => /ffmpeg/.test(c.comm)).length, 0);
      maxFfmpeg = Math.max(maxFfmpeg, n);
      await sleep(100);
    }
  })();
  const replies = await Promise.all(
    Array.from({ length: 60 }, () =>
      ctx.api(gw, t, DENOISE, { method: 'POST', headers: { 'Content-Type': contentType, 'Content-Length': body.length }, body, deadlineMs: 180_000, label: 'admission burst', expect5xx: true, keepBytes: 1024 }),
    ),
  );
  sampling = false;
  await sampler;
  const ok = replies.filter((r) => r.status === 200);
  const busy = replies.filter((r) => r.status === 503 && errorType(r) === 'upstream_unavailable');
  const busyFast = busy.filter((r) => r.headersMs < 2000 && Number(r.headers['retry-after']) >= 1).length;
  const busyMs = busy.map((r) => r.headersMs).sort((a, b) => a - b);
  const slowest = Math.max(...ok.map((r) => r.ms));
  const used = await settledCreditsUsed(t.store, t.workspaceId);
  // The breaker must still be closed: an ordinary call goes through.
  const probe = await ctx.api(gw, t, MODELS, { label: 'after admission burst' });
  ctx.add({
    item: '9.8',
    title: '60 concurrent uploads of a 90 s clip',
    pass: busy.length > 0 && busyFast === busy.length && used === ok.length && ok.length + busy.length === 60 && probe.status === 200,
    detail: `${ok.length} × 200 (slowest ${(slowest / 1000).toFixed(1)} s), ${busy.length} × 503 upstream_unavailable (${busyFast} answered within 2 s with Retry-After; median ${busyMs[busyMs.length >> 1] ?? '-'} ms, while each upload takes ${(Math.max(...ok.map((r) => r.headersMs)) / 1000).toFixed(1)} s to be served), other ${60 - ok.length - busy.length}; credits ${used}; peak ffmpeg processes ${maxFfmpeg}; breaker closed after: ${probe.status === 200}`,
  });
}

/** Load of `clients` callers, each calling back to back until `stop()`; returns the replies with timestamps. */
export function steadyLoad(ctx: Ctx, gw: Proc, t: Tenant, body: { body: Buffer; contentType: string }, clients: number, label: string) {
  let stopped = false;
  const replies: Array<{ reply: Reply; startedAt: number; endedAt: number }> = [];
  const run = Promise.all(
    Array.from({ length: clients }, async () => {
      while (!stopped) {
        const startedAt = Date.now();
        const reply = await ctx.api(gw, t, DENOISE, {
          method: 'POST',
          headers: { 'Content-Type': body.contentType, 'Content-Length': body.body.length },
          body: body.body,
          deadlineMs: 60_000,
          label,
          expect5xx: true,
          expectNoReply: true,
        });
        replies.push({ reply, startedAt, endedAt: Date.now() });
        if (reply.status === 503 || reply.status === 502) await sleep(200);
      }
    }),
  );
  return {
    replies,
    async stop() {
      stopped = true;
      await run;
    },
  };
}

/** Issue 12 part 3 / 9: kill -9 one of two replicas under load, then restart it. */
export async function killReplica(ctx: Ctx, gw: Proc, replicas: Proc[], dataDir: string, wav: Buffer, restart: () => Promise<Proc>): Promise<Proc> {
  const t = await ctx.tenant(dataDir, 'enterprise', { credits: 100_000, rpm: 100_000 });
  const body = multipart([{ name: 'file', filename: 'a.wav', data: wav }]);
  const load = steadyLoad(ctx, gw, t, body, 4, 'replica load');
  await sleep(2000);
  const killedAt = Date.now();
  const doneBeforeKill = load.replies.length;
  await kill9(replicas[0]);
  await sleep(3000);
  const replacement = await restart();
  await sleep(3000);
  await load.stop();
  const after = load.replies.filter((r) => r.endedAt >= killedAt);
  const failed = after.filter((r) => r.reply.status !== 200);
  const straddling = after.filter((r) => r.startedAt < killedAt).length;
  const used = await settledCreditsUsed(t.store, t.workspaceId);
  const ok = load.replies.filter((r) => r.reply.status === 200 && r.reply.complete).length;
  // Traffic returns to the restarted replica.
  const h = await call(`${replacement.url}/health`, { headers: { Authorization: `Bearer ${replacement.env.MODEL_SERVICE_TOKEN}` } });
  const admitted = (jsonOf(h) as { admission?: { admitted?: number } } | null)?.admission?.admitted ?? 0;
  ctx.add({
    item: '12.3',
    title: 'kill -9 of one of two model services under load (4 clients)',
    pass: failed.length <= straddling && failed.every((r) => r.reply.status === 502) && used === ok && admitted > 0,
    detail: `${load.replies.length} calls (${doneBeforeKill} before the kill); after it ${failed.length} failed (${failed.map((r) => r.reply.status).join('/') || 'none'}) of ${straddling} in flight at that moment (target: only those, refunded); credits ${used} = 2xx ${ok}; restarted replica served ${admitted} calls within 3 s`,
  });
  return replacement;
}

/** SIGSTOP one of two replicas under load: calls move to the other one. */
export async function stopReplica(ctx: Ctx, gw: Proc, replica: Proc, dataDir: string, wav: Buffer): Promise<void> {
  const t = await ctx.tenant(dataDir, 'enterprise', { credits: 100_000, rpm: 100_000 });
  const body = multipart([{ name: 'file', filename: 'a.wav', data: wav }]);
  const load = steadyLoad(ctx, gw, t, body, 4, 'sigstop load');
  await sleep(1500);
  const stoppedAt = Date.now();
  replica.child.kill('SIGSTOP');
  await sleep(6000);
  replica.child.kill('SIGCONT');
  await sleep(1500);
  await load.stop();
  const during = load.replies.filter((r) => r.endedAt >= stoppedAt);
  const failed = during.filter((r) => r.reply.status !== 200);
  const straddling = during.filter((r) => r.startedAt < stoppedAt).length;
  const longest = Math.max(...during.map((r) => r.endedAt - r.startedAt));
  const used = await settledCreditsUsed(t.store, t.workspaceId);
  const ok = load.replies.filter((r) => r.reply.status === 200 && r.reply.complete).length;
  ctx.add({
    item: '9.5',
    title: 'SIGSTOP of one of two model services for 6 s under load',
    pass: failed.length <= straddling && used === ok && longest < 15_000,
    detail: `${during.length} calls during/after; ${failed.length} failed (${[...new Set(failed.map((r) => r.reply.status))].join('/') || 'none'}), ${straddling} were in flight on entry; longest call ${(longest / 1000).toFixed(1)} s; credits ${used} = 2xx ${ok}`,
  });
}

/** Issue 9: kill -9 of the only (standalone) model service; breaker, refunds, temp sweep on restart. */
export async function killSingle(ctx: Ctx, gw: Proc, ms: Proc, dataDir: string, msEnv: NodeJS.ProcessEnv, wav: Buffer, longWav: Buffer): Promise<Proc> {
  const t = await ctx.tenant(dataDir, 'enterprise', { credits: 100_000, rpm: 100_000 });
  const long = multipart([{ name: 'model', value: 'nsm-4' }, { name: 'file', filename: 'long.wav', data: longWav }]);
  const short = multipart([{ name: 'file', filename: 'a.wav', data: wav }]);
  const inflight = Array.from({ length: 3 }, () =>
    ctx.api(gw, t, DENOISE, { method: 'POST', headers: { 'Content-Type': long.contentType, 'Content-Length': long.body.length }, body: long.body, label: 'in flight at kill', expect5xx: true, deadlineMs: 60_000 }),
  );
  // One upload still arriving: the model service holds a temp directory for it.
  const stalled = ctx.api(gw, t, DENOISE, {
    method: 'POST',
    headers: { 'Content-Type': long.contentType, 'Content-Length': long.body.length },
    body: long.body,
    stallAfter: long.body.length >> 1,
    label: 'stalled upload at kill',
    expect5xx: true,
    deadlineMs: 30_000,
  });
  await sleep(1500);
  const tmp = path.join(dataDir, 'tmp');
  const orphans = fs.existsSync(tmp) ? fs.readdirSync(tmp).filter((n) => n.startsWith('req-')) : [];
  await kill9(ms);
  const replies = [...(await Promise.all(inflight)), await stalled];
  const afterKill: Reply[] = [];
  for (let i = 0; i < 7; i++) afterKill.push(await ctx.api(gw, t, DENOISE, { method: 'POST', headers: { 'Content-Type': short.contentType, 'Content-Length': short.body.length }, body: short.body, label: 'while down', expect5xx: true }));
  const leftBefore = fs.existsSync(tmp) ? fs.readdirSync(tmp).filter((n) => orphans.includes(n)).length : 0;
  const restarted = await startModelService('ms-single', msEnv, ms.port);
  await sleep(300);
  const leftAfter = fs.existsSync(tmp) ? fs.readdirSync(tmp).filter((n) => orphans.includes(n)).length : 0;
  // After the cool-down a trial call closes the breaker.
  let recovered: Reply | null = null;
  const end = Date.now() + 10_000;
  while (Date.now() < end) {
    recovered = await ctx.api(gw, t, DENOISE, { method: 'POST', headers: { 'Content-Type': short.contentType, 'Content-Length': short.body.length }, body: short.body, label: 'recovery', expect5xx: true });
    if (recovered.status === 200) break;
    await sleep(500);
  }
  const used = await settledCreditsUsed(t.store, t.workspaceId);
  const types = afterKill.map((r) => `${r.status}${errorType(r) ? ' ' + errorType(r) : ''}`);
  ctx.add({
    item: '9.kill',
    title: 'kill -9 of the standalone model service with 3 jobs and an upload in flight',
    pass:
      replies.every((r) => r.status === 502 || r.status === 408) &&
      afterKill.some((r) => errorType(r) === 'circuit_open') &&
      recovered?.status === 200 &&
      used === 1 &&
      leftAfter === 0,
    detail: `in flight → ${replies.map((r) => r.status || r.error).join('/')}; next calls → ${[...new Set(types)].join(', ')}; req dirs of the dead process: ${orphans.length} → still ${leftBefore} before restart → ${leftAfter} after it (sweep at start); recovered → ${recovered?.status}; credits ${used} (target 1: the recovery call)`,
  });
  return restarted;
}

/** Items 5 and 11: the model service stops (SIGSTOP) or dies (kill -9) while the response body streams. */
export async function midBody(ctx: Ctx, gw: Proc, ms: Proc, dataDir: string, msEnv: NodeJS.ProcessEnv, bigWav: Buffer): Promise<Proc> {
  const t = await ctx.tenant(dataDir, 'enterprise', { credits: 100_000, rpm: 100_000 });
  const store = t.store;
  const form = multipart([{ name: 'model', value: 'nsm-1' }, { name: 'file', filename: 'big.wav', data: bigWav }]);
  const post = (label: string, onHeaders: () => void) =>
    call(`${gw.url}${DENOISE}`, {
      method: 'POST',
      headers: { Authorization: `Bearer ${t.token}`, 'Content-Type': form.contentType, 'Content-Length': form.body.length },
      body: form.body,
      readRate: 4 * 1024 * 1024, // a client on a slowish link: the model service stays mid-body for many seconds
      onResponse: onHeaders,
      deadlineMs: 60_000,
      keepBytes: 1024,
    }).then((r) => {
      ctx.tally.record(label, r, { tenant: t, expect5xx: true, expectNoReply: true });
      return r;
    });
  const rowOf = async (id: string | undefined) => {
    for (let i = 0; i < 100; i++) {
      const row = (await store.queryRequests({ workspaceId: t.workspaceId, limit: 20 })).find((e) => e.requestId === id);
      if (row) return row;
      await sleep(100);
    }
    return null;
  };
  // SIGSTOP while the answer streams to a client reading at 1 MB/s.
  const headersOf = (): { promise: Promise<void>; arrived: () => void } => {
    let arrived!: () => void;
    const promise = new Promise<void>((r) => (arrived = r));
    return { promise, arrived };
  };
  const h1 = headersOf();
  const stopped = post('sigstop mid-body', h1.arrived);
  await Promise.race([h1.promise, sleep(30_000)]);
  await sleep(500);
  ms.child.kill('SIGSTOP');
  const r1 = await stopped;
  ms.child.kill('SIGCONT');
  const row1 = await rowOf(r1.headers['x-request-id'] as string);
  // kill -9 while the answer streams.
  const h2 = headersOf();
  const killed = post('kill mid-body', h2.arrived);
  await Promise.race([h2.promise, sleep(30_000)]);
  await sleep(500);
  await kill9(ms);
  const r2 = await killed;
  const row2 = await rowOf(r2.headers['x-request-id'] as string);
  const restarted = await startModelService('ms-single', msEnv, ms.port);
  const used = await settledCreditsUsed(store, t.workspaceId);
  ctx.add({
    item: '9.5/11',
    title: 'model service stopped / killed while its answer streams',
    pass: !!row1 && !!row2 && row1.status >= 500 && row2.status >= 500 && used === 0 && !r1.complete && !r2.complete,
    detail: `SIGSTOP: client got ${r1.status} then ${r1.error ?? 'end'} after ${(r1.ms / 1000).toFixed(1)} s, logged ${row1?.status} ${row1?.errorType}; kill -9: client got ${r2.status} then ${r2.error ?? 'end'}, logged ${row2?.status} ${row2?.errorType}; credits ${used} (target: logged as failures, refunded, no hang)`,
  });
  return restarted;
}

/** Item 17: SIGTERM of a gateway (its own model service, the file-work process) with jobs and uploads in flight. */
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
