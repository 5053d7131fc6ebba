// The jobs endpoints through the whole app (createApp: gateway policies, in-process model service behind HTTP, real
// engine, ffmpeg, SQLite): submit, poll, download with ranges, list with cursors, cancel (the work stops), delete,
// credits and refunds, scopes, workspace isolation, URL inputs, form errors, limits, webhooks.
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import request from 'supertest';
import { createApp, type AppHandle } from '../../src/app';
import type { Config } from '../../src/config';
import type { JobView } from '../../src/jobs/views';
import { closeQuietly, eventually, fixture, listen, multipartBody, rawRequest, testConfig, tmpEntries, wavInfo } from '../helpers/service-helpers';
import { makeLongWav, signatureValid, startReceiver, until } from '../helpers/jobs-helpers';

const API = '/v1/noise-suppressor';
const STEREO = fixture('speech-noisy-44k1-stereo.wav');
const MONO = fixture('speech-noisy-16k-mono.wav');

const binary = ((res: http.IncomingMessage, cb: (err: Error | null, body: Buffer) => void): void => {
  const chunks: Buffer[] = [];
  res.on('data', (c: Buffer) => chunks.push(c));
  res.on('end', () => cb(null, Buffer.concat(chunks)));
}) as unknown as Parameters<request.Test['parse']>[0];

describe('jobs API through the full app', () => {
  let config: Config;
  let handle: AppHandle;
  let tokenA: string;
  let tokenB: string;
  let wsA: string;
  let wsB: string;
  let longWav: string;

  beforeAll(async () => {
    config = testConfig();
    config.jobs = { ...config.jobs, allowPrivateUrls: true, leaseMs: 3000, concurrency: 2 };
    handle = await createApp(config, { log: () => undefined });
    const a = await handle.store.createWorkspace('jobs-a', 'scale');
    const b = await handle.store.createWorkspace('jobs-b', 'scale');
    wsA = a.id;
    wsB = b.id;
    tokenA = (await handle.store.createToken({ workspaceId: a.id, name: 't', scopes: ['noise-suppressor:*'], allowedIps: [], expiresAt: null })).token;
    tokenB = (await handle.store.createToken({ workspaceId: b.id, name: 't', scopes: ['*'], allowedIps: [], expiresAt: null })).token;
    longWav = path.join(config.dataDir, 'long.wav');
    makeLongWav(config.ffmpegPath, longWav, 600);
  });

  afterAll(async () => {
    await handle.close();
    fs.rmSync(config.dataDir, { recursive: true, force: true });
  });

  const as = (token: string) => ({ Authorization: `Bearer ${token}` });
  const getJob = async (id: string, token = tokenA): Promise<JobView> => {
    const res = await request(handle.app).get(`${API}/jobs/${id}`).set(as(token));
    expect(res.status).toBe(200);
    return res.body as JobView;
  };
  const waitFor = (id: string, statuses: string[], timeoutMs = 60_000): Promise<JobView> =>
    until(async () => {
      const job = await getJob(id);
      return statuses.includes(job.status) ? job : undefined;
    }, timeoutMs);
  const submit = (token = tokenA) => request(handle.app).post(`${API}/jobs`).set(as(token));
  const credits = (ws: string) => handle.store.creditsUsed(ws, new Date());

  test('submit a file → 202 + Location; poll to succeeded; the result equals /denoise of the same file', async () => {
    const before = await credits(wsA);
    const res = await submit().field('model', 'nsm-2').field('output_format', 'wav').attach('file', STEREO);
    expect(res.status).toBe(202);
    const job = res.body as JobView;
    expect(job.id).toMatch(/^job_[A-Za-z0-9]{24}$/);
    expect(res.headers.location).toBe(`${API}/jobs/${job.id}`);
    expect(res.headers['x-request-id']).toBeDefined();
    expect(res.headers['ratelimit-limit']).toBeDefined();
    expect(job).toMatchObject({
      status: 'queued',
      progress: 0,
      params: { model: 'nsm-2', attenuation_limit_db: 0, output_format: 'wav', keep_input_sample_rate: true },
      input: { source: 'upload', filename: 'speech-noisy-44k1-stereo.wav', bytes: fs.statSync(STEREO).size },
      result: null,
      error: null,
    });
    expect(await credits(wsA)).toBe(before + 1);

    const done = await waitFor(job.id, ['succeeded', 'failed']);
    expect(done.status).toBe('succeeded');
    expect(done.progress).toBe(1);
    expect(done.attempts).toBe(1);
    expect(done.started_at && done.finished_at).toBeTruthy();
    expect(done.stats).toMatchObject({ model: 'nsm-2', channels: 2, input_sample_rate: 44100, output_sample_rate: 44100, duration_s: 3 });
    expect(done.result!.url).toBe(`${API}/jobs/${job.id}/result`);
    expect(Date.parse(done.result!.expires_at!) - Date.parse(done.finished_at!)).toBe(config.jobs.retentionMs);

    const audio = await request(handle.app).get(done.result!.url).set(as(tokenA)).buffer(true).parse(binary);
    expect(audio.status).toBe(200);
    expect(audio.headers['content-type']).toBe('audio/wav');
    expect(audio.headers['content-disposition']).toBe('attachment; filename="speech-noisy-44k1-stereo_denoised.wav"');
    expect(audio.headers['accept-ranges']).toBe('bytes');
    expect(audio.body.length).toBe(done.result!.bytes);
    expect(wavInfo(audio.body)).toEqual({ sampleRate: 44100, channels: 2, bitsPerSample: 16 });

    const sync = await request(handle.app)
      .post(`${API}/denoise`)
      .set(as(tokenA))
      .field('model', 'nsm-2')
      .attach('file', STEREO)
      .buffer(true)
      .parse(binary);
    expect(sync.status).toBe(200);
    expect(audio.body.equals(sync.body)).toBe(true);
    // Only the success's credit (and /denoise's) is kept.
    expect(await credits(wsA)).toBe(before + 2);
    // The input is gone once the job finished; only the result is kept.
    expect(fs.readdirSync(handle.jobs.files.inputs)).not.toContain(job.id);
    expect(fs.existsSync(path.join(handle.jobs.files.results, `${job.id}.wav`))).toBe(true);
  });

  test('result: Range (206), unsatisfiable (416), ETag/If-None-Match (304), HEAD', async () => {
    const res = await submit().field('output_format', 'flac').attach('file', MONO);
    const job = await waitFor(res.body.id, ['succeeded']);
    const url = job.result!.url;
    const full = await request(handle.app).get(url).set(as(tokenA)).buffer(true).parse(binary);
    expect(full.headers['content-type']).toBe('audio/flac');
    expect(full.body.subarray(0, 4).toString('ascii')).toBe('fLaC');
    const etag = full.headers.etag;
    expect(etag).toBeTruthy();
    expect(full.headers['last-modified']).toBeTruthy();

    const part = await request(handle.app).get(url).set(as(tokenA)).set('Range', 'bytes=100-199').buffer(true).parse(binary);
    expect(part.status).toBe(206);
    expect(part.headers['content-range']).toBe(`bytes 100-199/${full.body.length}`);
    expect(part.body.equals(full.body.subarray(100, 200))).toBe(true);
    const tail = await request(handle.app).get(url).set(as(tokenA)).set('Range', 'bytes=-10').buffer(true).parse(binary);
    expect(tail.status).toBe(206);
    expect(tail.body.equals(full.body.subarray(full.body.length - 10))).toBe(true);
    // A suffix longer than the file is the whole file (RFC 9110 §14.1.2), not 416; a suffix of 0 bytes stays 416.
    const longer = await request(handle.app).get(url).set(as(tokenA)).set('Range', 'bytes=-999999999').buffer(true).parse(binary);
    expect([longer.status, longer.headers['content-range']]).toEqual([206, `bytes 0-${full.body.length - 1}/${full.body.length}`]);
    expect(longer.body.equals(full.body)).toBe(true);
    const zero = await request(handle.app).get(url).set(as(tokenA)).set('Range', 'bytes=-0');
    expect(zero.status).toBe(416);

    const bad = await request(handle.app).get(url).set(as(tokenA)).set('Range', `bytes=${full.body.length + 5}-`);
    expect(bad.status).toBe(416);
    expect(bad.headers['content-range']).toBe(`bytes */${full.body.length}`);
    expect(bad.body.error.type).toBe('range_not_satisfiable');

    const cached = await request(handle.app).get(url).set(as(tokenA)).set('If-None-Match', etag);
    expect(cached.status).toBe(304);
    // If-Range: the range only while the validator still matches (a strong ETag), else the whole file.
    expect(etag).toMatch(/^"job_[A-Za-z0-9]+-\d+"$/);
    const resumed = await request(handle.app).get(url).set(as(tokenA)).set('Range', 'bytes=10-').set('If-Range', etag).buffer(true).parse(binary);
    expect(resumed.status).toBe(206);
    expect(resumed.body.equals(full.body.subarray(10))).toBe(true);
    const stale = await request(handle.app).get(url).set(as(tokenA)).set('Range', 'bytes=10-').set('If-Range', '"other"').buffer(true).parse(binary);
    expect(stale.status).toBe(200);
    expect(stale.body.length).toBe(full.body.length);
    const head = await request(handle.app).head(url).set(as(tokenA));
    expect(head.status).toBe(200);
    expect(Number(head.headers['content-length'])).toBe(full.body.length);
  });

  test('another workspace gets 404 for the job, its result and DELETE; lists show only its own jobs', async () => {
    const res = await submit().attach('file', MONO);
    const id = res.body.id as string;
    await waitFor(id, ['succeeded']);
    for (const [method, p] of [
      ['get', `${API}/jobs/${id}`],
      ['get', `${API}/jobs/${id}/result`],
      ['delete', `${API}/jobs/${id}`],
    ] as const) {
      const r = await request(handle.app)[method](p).set(as(tokenB));
      expect(r.status).toBe(404);
      expect(r.body.error).toMatchObject({ type: 'job_not_found' });
      expect(r.body.error.request_id).toBe(r.headers['x-request-id']);
    }
    expect((await getJob(id)).result).not.toBeNull();
    const byId = await until(async () => {
      const rows = await handle.store.queryRequests({ workspaceId: wsB, endpoint: 'jobs/{id}', limit: 10 });
      return rows.length >= 2 ? rows : undefined;
    });
    expect(byId.every((r) => r.status === 404 && r.errorType === 'job_not_found')).toBe(true);
    const listB = await request(handle.app).get(`${API}/jobs`).set(as(tokenB));
    expect(listB.status).toBe(200);
    expect(listB.body.jobs.map((j: JobView) => j.id)).not.toContain(id);
    const listA = await request(handle.app).get(`${API}/jobs`).set(as(tokenA));
    expect(listA.body.jobs.map((j: JobView) => j.id)).toContain(id);
    // An id that does not exist anywhere looks the same.
    const none = await request(handle.app).get(`${API}/jobs/job_doesnotexist`).set(as(tokenA));
    expect(none.status).toBe(404);
  });

  test('routes: 405 with Allow per endpoint, malformed ids 404, scope noise-suppressor:jobs (in noise-suppressor:*)', async () => {
    const put = await request(handle.app).put(`${API}/jobs`).set(as(tokenA));
    expect(put.status).toBe(405);
    expect(put.headers.allow).toBe('POST, GET, HEAD');
    const post = await request(handle.app).post(`${API}/jobs/job_x`).set(as(tokenA));
    expect(post.status).toBe(405);
    expect(post.headers.allow).toBe('GET, HEAD, DELETE');
    const delResult = await request(handle.app).delete(`${API}/jobs/job_x/result`).set(as(tokenA));
    expect(delResult.status).toBe(405);
    expect(delResult.headers.allow).toBe('GET, HEAD');
    const weird = await request(handle.app).get(`${API}/jobs/a.b`).set(as(tokenA));
    expect(weird.status).toBe(404);
    expect(weird.body.error.type).toBe('endpoint_not_found');
    expect((await request(handle.app).get(`${API}/jobs/x/result/y`).set(as(tokenA))).status).toBe(404);

    const ws = await handle.store.createWorkspace('jobs-scopes', 'free');
    const mk = async (scopes: string[]) =>
      (await handle.store.createToken({ workspaceId: ws.id, name: 's', scopes, allowedIps: [], expiresAt: null })).token;
    const denoiseOnly = await mk(['noise-suppressor:denoise']);
    const jobsOnly = await mk(['noise-suppressor:jobs']);
    const denied = await request(handle.app).get(`${API}/jobs`).set(as(denoiseOnly));
    expect(denied.status).toBe(403);
    expect(denied.body.error.type).toBe('scope_denied');
    expect((await request(handle.app).get(`${API}/jobs`).set(as(jobsOnly))).status).toBe(200);
    expect((await request(handle.app).post(`${API}/denoise`).set(as(jobsOnly)).attach('file', MONO)).status).toBe(403);
    // No token at all: the gateway's 401 envelope, logged like every /v1 call.
    const anon = await request(handle.app).get(`${API}/jobs`);
    expect(anon.status).toBe(401);
    // Logged like every /v1 call, under the route's pattern.
    const logged = await until(async () => {
      const rows = await handle.store.queryRequests({ workspaceId: ws.id, endpoint: 'jobs', limit: 10 });
      return rows.length === 2 ? rows : undefined;
    });
    expect(logged.map((e) => e.status).sort()).toEqual([200, 403]);
  });

  test('form errors are 400 invalid_request in the envelope and cost nothing', async () => {
    const before = await credits(wsA);
    const cases: Array<[request.Test, RegExp]> = [
      [submit().field('model', 'nsm-2'), /missing input/],
      [submit().field('model', 'nsm-9').attach('file', MONO), /unknown model/],
      [submit().field('attenuation_limit_db', '101').attach('file', MONO), /attenuation_limit_db/],
      [submit().field('response', 'json').attach('file', MONO), /does not apply to jobs/],
      [submit().field('colour', 'blue').attach('file', MONO), /unknown field "colour"/],
      [submit().field('url', 'http://127.0.0.1:9/a.wav').attach('file', MONO), /either a file or a url/],
      [submit().attach('audio', MONO), /unexpected file field "audio"/],
      [submit().field('url', 'ftp://example.com/a.wav'), /http or https/],
      [submit().field('webhook_url', 'file:///etc/passwd').attach('file', MONO), /http or https/],
      [submit().send({ url: 'https://example.com/a.wav' }), /multipart\/form-data/],
      [submit().attach('file', fixture('empty.wav')), /empty/],
    ];
    for (const [req, message] of cases) {
      const res = await req;
      expect(res.status).toBe(400);
      expect(['invalid_request', 'url_not_allowed']).toContain(res.body.error.type);
      expect(res.body.error.message).toMatch(message);
    }
    expect(await credits(wsA)).toBe(before);
    const logged = await handle.store.queryRequests({ workspaceId: wsA, endpoint: 'jobs', status: 400, limit: 50 });
    expect(logged.every((e) => e.creditsCharged === 0)).toBe(true);
  });

  test('a job that fails (not audio) is failed with invalid_audio and its credit is refunded', async () => {
    const receiver = await startReceiver();
    try {
      const before = await credits(wsA);
      const res = await submit().field('webhook_url', receiver.url).attach('file', fixture('not-audio.wav'));
      expect(res.status).toBe(202);
      expect(await credits(wsA)).toBe(before + 1);
      const job = await waitFor(res.body.id, ['failed', 'succeeded']);
      expect(job.status).toBe('failed');
      expect(job.error!.type).toBe('invalid_audio');
      expect(job.attempts).toBe(1);
      expect(job.result).toBeNull();
      await until(async () => ((await credits(wsA)) === before ? true : undefined));
      const result = await request(handle.app).get(`${API}/jobs/${job.id}/result`).set(as(tokenA));
      expect(result.status).toBe(409);
      expect(result.body.error.type).toBe('job_not_finished');
      // The failure is announced too.
      const hook = await until(async () => receiver.received[0]);
      const body = JSON.parse(hook.body);
      expect(body.type).toBe('job.failed');
      expect(body.data).toMatchObject({ id: job.id, status: 'failed', error: { type: 'invalid_audio' } });
      const secret = (await handle.jobs.store.webhookSecret(wsA))!;
      expect(signatureValid(secret, hook.headers['x-ns-signature'] as string, hook.body)).toBe(true);
    } finally {
      await receiver.close();
    }
  });

  test('webhook on success: signed with the workspace secret, verified by a receiver on loopback', async () => {
    const receiver = await startReceiver();
    try {
      const res = await submit().field('webhook_url', receiver.url).attach('file', MONO);
      const job = await waitFor(res.body.id, ['succeeded']);
      const hook = await until(async () => receiver.received[0]);
      expect(hook.headers['content-type']).toBe('application/json');
      expect(hook.headers['x-ns-event']).toBe('job.succeeded');
      expect(hook.headers['x-ns-delivery']).toMatch(/^whd_/);
      const secret = (await handle.jobs.store.webhookSecret(wsA))!;
      expect(secret).toMatch(/^whsec_[A-Za-z0-9]{32}$/);
      expect(signatureValid(secret, hook.headers['x-ns-signature'] as string, hook.body)).toBe(true);
      expect(signatureValid('whsec_wrong', hook.headers['x-ns-signature'] as string, hook.body)).toBe(false);
      expect(signatureValid(secret, hook.headers['x-ns-signature'] as string, hook.body.replace('succeeded', 'failed'))).toBe(false);
      const body = JSON.parse(hook.body);
      expect(Object.keys(body).sort()).toEqual(['created_at', 'data', 'id', 'type']);
      expect(body.type).toBe('job.succeeded');
      expect(body.data).toMatchObject({ id: job.id, status: 'succeeded', result: { url: job.result!.url, bytes: job.result!.bytes } });
      const deliveries = await until(async () => {
        const d = await handle.jobs.store.listDeliveries({ jobId: job.id, limit: 5 });
        return d[0]?.status === 'delivered' ? d : undefined;
      });
      expect(deliveries[0]).toMatchObject({ attempts: 1, lastStatus: 204 });
    } finally {
      await receiver.close();
    }
  });

  test('a url input is fetched by the runner (JOBS_ALLOW_PRIVATE_URLS=true here) and processed', async () => {
    const { server, url } = await listen((req, res) => {
      if (req.url === '/media/interview.wav') {
        res.setHeader('Content-Type', 'audio/wav');
        fs.createReadStream(MONO).pipe(res);
      } else {
        res.statusCode = 404;
        res.end();
      }
    });
    try {
      const res = await submit().field('url', `${url}/media/interview.wav`).field('model', 'nsm-1');
      expect(res.status).toBe(202);
      expect(res.body.input).toEqual({ source: 'url', url: `${url}/media/interview.wav`, filename: 'interview.wav', bytes: null });
      const job = await waitFor(res.body.id, ['succeeded', 'failed']);
      expect(job.status).toBe('succeeded');
      expect(job.input.bytes).toBe(fs.statSync(MONO).size);
      const audio = await request(handle.app).get(job.result!.url).set(as(tokenA));
      expect(audio.headers['content-disposition']).toBe('attachment; filename="interview_denoised.wav"');

      const before = await credits(wsA);
      const missing = await submit().field('url', `${url}/media/nothing.wav`);
      const failed = await waitFor(missing.body.id, ['failed', 'succeeded']);
      expect(failed.error).toMatchObject({ type: 'url_fetch_failed' });
      expect(failed.error!.message).toMatch(/HTTP 404/);
      await until(async () => ((await credits(wsA)) === before ? true : undefined));
    } finally {
      await closeQuietly(server);
    }
  });

  test('DELETE a running job: it is canceled, the work stops, the credit comes back', async () => {
    const before = await credits(wsA);
    const res = await submit().field('model', 'nsm-4').attach('file', longWav);
    expect(res.status).toBe(202);
    const running = await until(async () => {
      const j = await getJob(res.body.id);
      return j.status === 'running' && j.progress > 0.01 ? j : undefined;
    }, 60_000, 50);
    expect(running.progress).toBeLessThan(1);
    expect(handle.engine!.state().streams).toBeGreaterThan(0);
    const del = await request(handle.app).delete(`${API}/jobs/${running.id}`).set(as(tokenA));
    expect(del.status).toBe(200);
    expect(del.body).toMatchObject({ id: running.id, status: 'canceled', result: null });
    expect(del.body.finished_at).toBeTruthy();
    // The model service stops: no engine stream left, its temp directory emptied, no result written.
    await eventually(() => handle.engine!.state().streams === 0, 10_000);
    await eventually(() => tmpEntries(config).length === 0, 10_000);
    await eventually(() => handle.jobs.runner!.activeIds().length === 0, 10_000);
    expect(fs.readdirSync(handle.jobs.files.results).filter((f) => f.startsWith(running.id))).toEqual([]);
    expect(fs.readdirSync(handle.jobs.files.incoming).filter((f) => f.startsWith(running.id))).toEqual([]);
    expect(fs.existsSync(handle.jobs.files.input(running.id))).toBe(false);
    expect(await credits(wsA)).toBe(before);
    const after = await getJob(running.id);
    expect(after.status).toBe('canceled');
    // DELETE again is harmless.
    expect((await request(handle.app).delete(`${API}/jobs/${running.id}`).set(as(tokenA))).body.status).toBe('canceled');
    expect((await request(handle.app).get(`${API}/jobs/${running.id}/result`).set(as(tokenA))).status).toBe(409);
  });

  test('DELETE a finished job deletes its result (410 afterwards); the job stays visible', async () => {
    const res = await submit().attach('file', MONO);
    const job = await waitFor(res.body.id, ['succeeded']);
    const file = path.join(handle.jobs.files.results, `${job.id}.wav`);
    expect(fs.existsSync(file)).toBe(true);
    const del = await request(handle.app).delete(`${API}/jobs/${job.id}`).set(as(tokenA));
    expect(del.status).toBe(200);
    expect(del.body).toMatchObject({ status: 'succeeded', result: null });
    expect(del.body.result_deleted_at).toBeTruthy();
    expect(fs.existsSync(file)).toBe(false);
    const gone = await request(handle.app).get(`${API}/jobs/${job.id}/result`).set(as(tokenA));
    expect(gone.status).toBe(410);
    expect(gone.body.error.type).toBe('result_gone');
  });

  test('list: newest first, status filter, opaque cursor pages, bad parameters', async () => {
    const ws = await handle.store.createWorkspace('jobs-list', 'scale');
    const token = (await handle.store.createToken({ workspaceId: ws.id, name: 'l', scopes: ['*'], allowedIps: [], expiresAt: null })).token;
    const ids: string[] = [];
    for (let i = 0; i < 5; i++) ids.push((await submit(token).field('url', 'http://127.0.0.1:9/nothing.wav')).body.id);
    const seen: string[] = [];
    let cursor: string | null = null;
    do {
      const res: request.Response = await request(handle.app)
        .get(`${API}/jobs`)
        .query(cursor ? { limit: 2, cursor } : { limit: 2 })
        .set(as(token));
      expect(res.status).toBe(200);
      expect(res.body.jobs.length).toBeLessThanOrEqual(2);
      seen.push(...res.body.jobs.map((j: JobView) => j.id));
      cursor = res.body.next_cursor;
      expect(res.body.has_more).toBe(cursor !== null);
    } while (cursor);
    expect(seen).toEqual([...ids].reverse());
    await until(async () => {
      const r = await request(handle.app).get(`${API}/jobs?status=failed`).set(as(token));
      return r.body.jobs.length === 5 ? true : undefined;
    });
    expect((await request(handle.app).get(`${API}/jobs?status=succeeded`).set(as(token))).body.jobs).toEqual([]);
    for (const q of ['status=done', 'limit=0', 'limit=101', 'limit=abc', 'cursor=xyz', 'status=failed&status=queued']) {
      const r = await request(handle.app).get(`${API}/jobs?${q}`).set(as(token));
      expect(r.status).toBe(400);
      expect(r.body.error.type).toBe('invalid_request');
    }
  });

  test('GET /metrics counts the jobs of this file by outcome, and webhook attempts', async () => {
    const text = (await request(handle.app).get('/metrics')).text;
    const value = (series: string): number => Number(new RegExp(`^${series.replace(/[{}"]/g, (c) => `\\${c}`)}(?:\\{[^}]*\\})? (\\S+)$`, 'm').exec(text)?.[1] ?? NaN);
    expect(value('ns_jobs_created_total')).toBeGreaterThanOrEqual(8);
    for (const status of ['succeeded', 'failed', 'canceled']) {
      expect(text).toMatch(new RegExp(`^ns_jobs_finished_total\\{[^}]*status="${status}"[^}]*\\} [1-9]`, 'm'));
    }
    expect(text).toMatch(/^ns_webhook_attempts_total\{[^}]*result="delivered"[^}]*\} [1-9]/m);
    expect(text).toMatch(/^ns_jobs_running\{[^}]*\} \d+/m);
    // The jobs endpoints are counted by route pattern, not by job id.
    expect(text).toMatch(/ns_http_requests_total\{[^}]*endpoint="jobs\/\{id\}"/);
    expect(text).not.toMatch(/endpoint="jobs\/job_/);
  });

  test('the upload is streamed to disk under DATA_DIR/jobs (raw multipart, chunked, field order free)', async () => {
    const { body, contentType } = multipartBody([
      { name: 'file', filename: 'naïve talk.wav', data: fs.readFileSync(MONO) },
      { name: 'model', value: 'nsm-1' },
      { name: 'keep_input_sample_rate', value: 'false' },
    ]);
    const addr = await listen(handle.app);
    try {
      const chunks = [body.subarray(0, 1000), body.subarray(1000, 50_000), body.subarray(50_000)];
      const res = await rawRequest(`${addr.url}${API}/jobs`, {
        method: 'POST',
        headers: { Authorization: `Bearer ${tokenA}`, 'Content-Type': contentType, 'Transfer-Encoding': 'chunked' },
        body: chunks,
      });
      expect(res.status).toBe(202);
      const job = JSON.parse(res.body.toString()) as JobView;
      expect(job.params).toMatchObject({ model: 'nsm-1', keep_input_sample_rate: false });
      expect(job.input.filename).toBe('naïve talk.wav');
      const done = await waitFor(job.id, ['succeeded']);
      expect(done.stats).toMatchObject({ output_sample_rate: 16000 });
      const audio = await rawRequest(`${addr.url}${done.result!.url}`, { headers: { Authorization: `Bearer ${tokenA}` } });
      expect(audio.headers['content-disposition']).toBe(`attachment; filename="na_ve talk_denoised.wav"; filename*=UTF-8''na%C3%AFve%20talk_denoised.wav`);
      // Nothing left in the incoming folder.
      expect(fs.readdirSync(handle.jobs.files.incoming)).toEqual([]);
    } finally {
      await closeQuietly(addr.server);
    }
  });
});

describe('jobs API limits and default URL policy', () => {
  let config: Config;
  let handle: AppHandle;
  let token: string;
  let wsId: string;

  beforeAll(async () => {
    config = testConfig();
    // Defaults (private URLs refused), no runner (jobs stay queued), tight limits.
    config.jobs = { ...config.jobs, runner: false, maxActivePerWorkspace: 2, maxUploadBytes: 200 * 1024 };
    handle = await createApp(config, { log: () => undefined });
    const ws = await handle.store.createWorkspace('limits', 'scale');
    wsId = ws.id;
    token = (await handle.store.createToken({ workspaceId: ws.id, name: 't', scopes: ['*'], allowedIps: [], expiresAt: null })).token;
  });

  afterAll(async () => {
    await handle.close();
    fs.rmSync(config.dataDir, { recursive: true, force: true });
  });

  const submit = () => request(handle.app).post(`${API}/jobs`).set({ Authorization: `Bearer ${token}` });

  test('a URL pointing at 127.0.0.1 (or resolving to loopback) is refused with 400 url_not_allowed, no credit', async () => {
    for (const [field, value] of [
      ['url', 'http://127.0.0.1:8080/a.wav'],
      ['url', 'http://localhost/a.wav'],
      ['url', 'http://[::ffff:127.0.0.1]/a.wav'],
      ['url', 'http://169.254.169.254/latest/meta-data/'],
      ['url', 'http://10.0.0.8/a.wav'],
      ['webhook_url', 'http://127.0.0.1:9000/hook'],
    ]) {
      const req = submit().field(field, value);
      const res = field === 'url' ? await req : await req.attach('file', MONO);
      expect(res.status).toBe(400);
      expect(res.body.error.type).toBe('url_not_allowed');
    }
    expect(await handle.store.creditsUsed(wsId, new Date())).toBe(0);
  });

  test('uploads over JOBS_MAX_UPLOAD_MB: 413 (declared size, and counted while streaming)', async () => {
    const big = Buffer.alloc(300 * 1024, 1);
    const declared = await submit().attach('file', big, 'big.wav');
    expect(declared.status).toBe(413);
    expect(declared.body.error.type).toBe('payload_too_large');
    const { body, contentType } = multipartBody([{ name: 'file', filename: 'big.wav', data: big }]);
    const addr = await listen(handle.app);
    try {
      const res = await rawRequest(`${addr.url}${API}/jobs`, {
        method: 'POST',
        headers: { Authorization: `Bearer ${token}`, 'Content-Type': contentType, 'Transfer-Encoding': 'chunked' },
        body: [body.subarray(0, 100_000), body.subarray(100_000)],
      });
      expect(res.status).toBe(413);
      expect(JSON.parse(res.body.toString()).error.type).toBe('payload_too_large');
    } finally {
      await closeQuietly(addr.server);
    }
    expect(fs.readdirSync(handle.jobs.files.incoming)).toEqual([]);
    expect(fs.readdirSync(handle.jobs.files.inputs)).toEqual([]);
    expect(await handle.store.creditsUsed(wsId, new Date())).toBe(0);
  });

  test('too many active jobs per workspace: 429 too_many_jobs, refunded; the queued jobs wait without a runner', async () => {
    expect((await submit().attach('file', MONO)).status).toBe(202);
    expect((await submit().attach('file', MONO)).status).toBe(202);
    const third = await submit().attach('file', MONO);
    expect(third.status).toBe(429);
    expect(third.body.error.type).toBe('too_many_jobs');
    expect(await handle.store.creditsUsed(wsId, new Date())).toBe(2);
    const list = await request(handle.app).get(`${API}/jobs?status=queued`).set({ Authorization: `Bearer ${token}` });
    expect(list.body.jobs.length).toBe(2);
    // Canceling a queued job frees a slot and refunds it.
    const del = await request(handle.app).delete(`${API}/jobs/${list.body.jobs[0].id}`).set({ Authorization: `Bearer ${token}` });
    expect(del.body.status).toBe('canceled');
    expect(await handle.store.creditsUsed(wsId, new Date())).toBe(1);
    expect((await submit().attach('file', MONO)).status).toBe(202);
  });
});
