// Chaos suite, inputs: the hostile corpus through /denoise and /denoise/batch, absurd headers, forms and framing, file
// names with bidi controls, bad request-log offsets and client request ids, X-Request-Id and the error envelope outside
// /v1 (27.8), and a batch in which every file failed (27.10).
import fs from 'node:fs';
import net from 'node:net';
import type { CorpusItem } from './corpus';
import { settledCreditsUsed, type Ctx, type Tenant } from './context';
import { BATCH, DENOISE, MODELS } from './endpoints';
import { call, jsonOf, multipart, pool, type Reply } from './http';
import { consoleLogin } from './limits';
import type { Proc } from './procs';

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

  // 9.16: a client-chosen X-Request-Id is never the log's id.
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

/** 27.8: X-Request-Id and the error envelope on every response outside /v1, Node's own rejections included. */
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

/** 27.10: a batch in which every file failed. */
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
