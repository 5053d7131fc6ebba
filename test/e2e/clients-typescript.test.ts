// The TypeScript client (clients/typescript, package nsm-client) against the real server (dist/src/server.js as a
// process, temp DATA_DIR, loopback): built with its own tsconfig, imported by driver scripts (test/clients/ts-*.mjs)
// from a folder laid out as an installed package. Every operation, the retry rule (a real 429 rate_limited, a real
// 429 too_many_jobs on a charged call, a proxy's bare 502 and a gateway-shaped 503), a job download cut mid-body and
// resumed with Range, and live streams (paced, Duplex, TransformStream, WHATWG WebSocket with a ticket, errors).
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { createClient } from '@redis/client';
import { PROJECT_ROOT } from '../../src/config';
import { rateWindowKey } from '../../src/shared-state/redis/rate-limiter';
import { buildTsClient, installDir, run, startProxy, startServer, startStallingServer, startWsStandIn, type Run, type ServerProcess } from '../helpers/clients-helpers';
import { startRedis, type RedisServer } from '../helpers/real-servers';
import { fixture, multipartBody, rawRequest, readZip } from '../helpers/service-helpers';
import { wavData } from '../helpers/streaming-helpers';

const FIXTURE = fixture('speech-noisy-16k-mono.wav');
const sha = (b: Buffer): string => createHash('sha256').update(b).digest('hex');

let server: ServerProcess;
let redis: RedisServer;
let dir: string;
let token: string;
let stall: Awaited<ReturnType<typeof startStallingServer>>;
let rateRun: Promise<Run>;

function driver(name: string, env: Record<string, string>, nodeArgs: string[] = []): Promise<Run> {
  return run(process.execPath, [...nodeArgs, path.join(dir, name)], { cwd: dir, env: { URL: server.url, TOKEN: token, FIXTURE, ...env }, timeoutMs: 110_000 });
}

/** The server's REDIS_KEY_PREFIX, set here rather than taken from the environment. */
const REDIS_PREFIX = 'nsg-clients-ts:';

/** One admission at `at` (ms) in the key's rate-limit window, as src/shared-state/redis/rate-limiter.ts keeps it. */
async function seedRateWindow(url: string, keyId: string, at: number): Promise<void> {
  const client = createClient({ url });
  await client.connect();
  try {
    const key = rateWindowKey(REDIS_PREFIX, keyId);
    await client.zAdd(key, { score: at, value: `${at}:seeded:1` });
    await client.pExpire(key, 60_000);
  } finally {
    await client.quit();
  }
}

function expectOk(r: Run): void {
  if (r.code !== 0 || !r.report) throw new Error(`driver failed (${r.code}):\n${r.stdout}\n${r.stderr}`);
}

beforeAll(async () => {
  // Shared state on a real Redis (as gateway replicas share it), so that the rate-limit test can start from a window
  // that already holds a call made 50 s ago.
  [server] = await Promise.all([
    startRedis().then((r) => {
      redis = r;
      return startServer({
        JOBS_ALLOW_PRIVATE_URLS: 'true',
        JOBS_MAX_ACTIVE_PER_WORKSPACE: '1',
        // The 429 too_many_jobs says retry after 1 s, not 5; refunds settle every second, not every 5 s (waits spared).
        JOBS_BUSY_RETRY_AFTER_SECONDS: '1',
        JOBS_HOUSEKEEPING_SECONDS: '1',
        REDIS_URL: r.url,
        REDIS_KEY_PREFIX: REDIS_PREFIX,
      });
    }),
    buildTsClient(),
  ]);
  dir = installDir('nsm-ts-client-');
  for (const f of fs.readdirSync(path.join(PROJECT_ROOT, 'test/clients'))) {
    if (f.startsWith('ts-')) fs.copyFileSync(path.join(PROJECT_ROOT, 'test/clients', f), path.join(dir, f));
  }
  token = await server.token();
  stall = await startStallingServer();
  // A key allowed one request a minute, whose window already holds a call made 50 s ago: what another gateway replica
  // sharing this Redis records when it admits one (a sorted set per key, scored by the admission time in ms). Its next
  // call gets a real 429 rate_limited with a Retry-After of about 10 s, not a minute (the wait the suite saved: ~35 s).
  const rateToken = await server.token({ rpm: 1 });
  await seedRateWindow(redis.url, server.keyId(rateToken), Date.now() - 50_000);
  rateRun = driver('ts-retry.mjs', { MODE: 'rate', TOKEN: rateToken });
}, 180_000);

afterAll(async () => {
  await stall?.close();
  await server?.stop();
  await redis?.stop();
  if (dir) fs.rmSync(dir, { recursive: true, force: true });
});

test('the package builds to ESM with type declarations, and has no runtime dependency', () => {
  const pkg = JSON.parse(fs.readFileSync(path.join(PROJECT_ROOT, 'clients/typescript/package.json'), 'utf8'));
  expect(pkg).toMatchObject({ name: 'nsm-client', type: 'module', version: expect.stringMatching(/^1\./) });
  expect(pkg.dependencies).toBeUndefined();
  expect(pkg.peerDependenciesMeta.ws.optional).toBe(true);
  for (const f of ['index.js', 'index.d.ts', 'client.d.ts', 'openapi.d.ts']) expect(fs.existsSync(path.join(PROJECT_ROOT, 'clients/typescript/dist', f))).toBe(true);
  expect(fs.readFileSync(path.join(PROJECT_ROOT, 'clients/typescript/dist/index.d.ts'), 'utf8')).toContain('NsmClient');
});

test('every HTTP operation: models, sample, health, denoise, batch (zip and json), jobs, tickets, typed errors', async () => {
  const r = await driver('ts-operations.mjs', { OUT: dir, STALL_URL: stall.url });
  expectOk(r);
  const rep = r.report;
  expect(rep.models.ids).toEqual(['nsm-1', 'nsm-2', 'nsm-3', 'nsm-4', 'nsm-2-hd']);
  expect(rep.models.default).toBe('nsm-2');
  expect(rep.sample.bytes).toBeGreaterThan(44);
  expect(rep.health.status).toBe('ok');

  expect(rep.denoise).toMatchObject({ magic: 'fLaC', filename: 'speech-noisy-16k-mono_denoised.flac', contentType: 'audio/flac', requestId: expect.stringMatching(/^req_/) });
  expect(rep.denoise.stats).toMatchObject({ model: 'nsm-1', output_format: 'flac', duration_s: 3, output_sample_rate: 16000 });
  expect(rep.denoise.rateLimit.limit).toBe(1200);
  // The same bytes as curl gets for the same upload.
  const direct = await denoiseDirect();
  expect(direct.status).toBe(200);
  expect(rep.denoiseBytes).toMatchObject({ filename: 'from-bytes_denoised.wav', sha: sha(direct.body), model: 'nsm-1' });

  const entries = readZip(fs.readFileSync(path.join(dir, 'ts-batch.zip')));
  expect(entries.map((e) => e.name).sort()).toEqual(['manifest.json', 'second_denoised.wav', 'speech-noisy-16k-mono_denoised.wav']);
  expect(rep.batchZip.summary).toMatchObject({ files: 2, succeeded: 2, failed: 0 });
  expect(rep.batchJson).toMatchObject({ succeeded: 1, failed: 1, statuses: ['ok', 'error'], audioSha: sha(direct.body), summary: { files: 2, succeeded: 1 } });

  expect(rep.errors.badModel).toMatchObject({ class: 'InvalidRequestError', isNsmError: true, type: 'invalid_request', status: 400, request_id: expect.stringMatching(/^req_/) });
  expect(rep.errors.badModel.message).toMatch(/nsm-9/);
  expect(rep.errors.badToken).toMatchObject({ class: 'AuthenticationError', type: 'invalid_token', status: 401 });
  expect(rep.errors.noJob).toMatchObject({ class: 'NotFoundError', type: 'job_not_found', status: 404 });

  const jobs = rep.jobs;
  expect(jobs.submitted.status).toBe('queued');
  expect(jobs.finished.status).toBe('succeeded');
  expect(jobs.progress.at(-1)).toBe('succeeded');
  expect(jobs.download).toMatchObject({ bytes: jobs.finished.bytes, resumes: 0, filename: 'speech-noisy-16k-mono_denoised.wav' });
  expect(jobs.download.fileSha).toBe(sha(direct.body)); // a job gives the bytes /denoise gives
  expect(jobs.download.memorySha).toBe(sha(direct.body));
  expect(jobs.list).toMatchObject({ count: 1, has_more: false, first: jobs.submitted.id });
  expect(jobs.listAll).toContain(jobs.submitted.id);
  expect(jobs.deleted).toEqual({ status: 'succeeded', result_deleted_at: true });
  expect(jobs.afterDelete).toMatchObject({ class: 'GoneError', type: 'result_gone', status: 410 });
  expect(jobs.cancel).toEqual({ status: 'canceled', source: 'url' });
  expect(jobs.notFinished).toMatchObject({ class: 'ConflictError', type: 'job_not_finished', status: 409 });
  expect(rep.ticket).toEqual({ prefix: 'tk_', ttl_s: 60 });
  const fixtureBytes = fs.statSync(fixture('speech-noisy-16k-mono.wav')).size;
  expect(rep.echo).toEqual({
    denoise: { reference: true, active: true, bytes: direct.body.length },
    job: { reference: { source: 'upload', url: null, filename: 'speech-noisy-16k-mono.wav', bytes: fixtureBytes }, status: 'succeeded', active: true },
  });
});

test('a real 429 too_many_jobs on POST /jobs (charged) is retried after Retry-After, and charged once', async () => {
  const jobsToken = await server.token();
  const r = await driver('ts-retry.mjs', { MODE: 'jobs', TOKEN: jobsToken, STALL_URL: stall.url });
  expectOk(r);
  if (r.report.retries.length === 0) throw new Error(`no retry:\n${r.stdout}\n${r.stderr}`);
  expect(r.report.retries.length).toBeGreaterThanOrEqual(1);
  expect(r.report.retries[0]).toMatchObject({ method: 'POST', status: 429, type: 'too_many_jobs', retryAfter: 1 });
  expect(r.report.retries[0].delayMs).toBeGreaterThanOrEqual(1000);
  expect(r.report.second.status).toBe('queued');
  expect(r.report.first).toBe('canceled');
  expect(r.report.secondFinal).toBe('succeeded');
  // Two jobs created (the canceled one refunded): one credit, although the second job's POST was sent twice.
  // The refund of a cancel settles in a housekeeping pass (every 1 s here): wait for it (a slow machine may need
  // several passes).
  let used = await server.creditsUsed(jobsToken);
  for (const until = Date.now() + 15_000; used !== 1 && Date.now() < until; used = await server.creditsUsed(jobsToken)) {
    await new Promise((res) => setTimeout(res, 200));
  }
  expect(used).toBe(1);
});

test('through a proxy: a bare 502 on POST /denoise is not retried, on GET it is; a gateway 503 on POST is', async () => {
  const bare = '<html>502 Bad Gateway</html>';
  const envelope = JSON.stringify({ error: { type: 'upstream_unavailable', message: 'restarting', request_id: 'req_proxy' } });
  const proxy = await startProxy(server.url, {
    // In order: the first POST /denoise gets a proxy's bare 502, the second a gateway-shaped 503 with Retry-After.
    refuse: [
      { match: /^POST \/v1\/noise-suppressor\/denoise$/, times: 1, status: 502, body: bare },
      { match: /^POST \/v1\/noise-suppressor\/denoise$/, times: 1, status: 503, body: envelope, headers: { 'Content-Type': 'application/json', 'Retry-After': '1' } },
      { match: /^GET \/v1\/noise-suppressor\/models$/, times: 2, status: 502, body: bare },
      { match: /^GET \/v1\/noise-suppressor\/health$/, times: 1, status: 502, body: bare },
    ],
  });
  try {
    const r = await driver('ts-retry.mjs', { MODE: 'proxy', URL: proxy.url });
    expectOk(r);
    const rep = r.report;
    // A bare 502 may hide a processed (charged) call: thrown, not retried.
    expect(rep.bare502Post.error).toMatchObject({ class: 'ServerError', status: 502, type: 'http_502' });
    // GET: retried past two 502s.
    expect(rep.bare502Get).toEqual({ default: 'nsm-2' });
    // The gateway's own 503 says the call was not processed (refunded): retried after Retry-After, then served.
    expect(rep.envelope503Post.bytes).toBeGreaterThan(44);
    // retry: false → a 502 on GET is thrown at once.
    expect(rep.retryOff.error).toMatchObject({ class: 'ServerError', status: 502 });
    const posts = proxy.requests.filter((q) => q.method === 'POST').map((q) => [q.action, q.status]);
    expect(posts).toEqual([['refused', 502], ['refused', 503], ['passed', 200]]);
    expect(rep.retries.map((x: any) => [x.method, x.status])).toEqual([['GET', 502], ['GET', 502], ['POST', 503]]);
    expect(rep.retries[2].delayMs).toBeGreaterThanOrEqual(1000);
  } finally {
    await proxy.close();
  }
});

test('a job download cut mid-body resumes with Range and If-Range, to a file and in memory', async () => {
  const job = await submitAndWait(token);
  const proxy = await startProxy(server.url, { cut: { match: /\/result$/, after: 10_000, times: 2 } });
  try {
    const r = await driver('ts-resume.mjs', { URL: proxy.url, JOB_ID: job.id, OUT_FILE: path.join(dir, 'resumed.wav') });
    expectOk(r);
    const direct = await rawRequest(`${server.url}/v1/noise-suppressor/jobs/${job.id}/result`, { headers: { Authorization: `Bearer ${token}` } });
    expect(direct.body.length).toBeGreaterThan(20_000);
    expect(r.report.file).toMatchObject({ bytes: direct.body.length, resumes: 1, sha: sha(direct.body), filename: 'speech-noisy-16k-mono_denoised.wav' });
    expect(r.report.memory).toMatchObject({ bytes: direct.body.length, resumes: 1, sha: sha(direct.body) });
    expect(r.report.lastProgress).toEqual([direct.body.length, direct.body.length]);
    const results = proxy.requests.filter((q) => q.url.endsWith('/result'));
    expect(results.map((q) => [q.action, q.status, q.range])).toEqual([
      ['cut', 200, null],
      ['passed', 206, 'bytes=10000-'],
      ['cut', 200, null],
      ['passed', 206, 'bytes=10000-'],
    ]);
  } finally {
    await proxy.close();
  }
});

/** POST /denoise of the fixture with nsm-1, by hand (what curl sends). */
function denoiseDirect(): ReturnType<typeof rawRequest> {
  const m = multipartBody([{ name: 'model', value: 'nsm-1' }, { name: 'file', filename: 'x.wav', data: fs.readFileSync(FIXTURE) }]);
  return rawRequest(`${server.url}/v1/noise-suppressor/denoise`, { method: 'POST', headers: { 'Content-Type': m.contentType, Authorization: `Bearer ${token}` }, body: m.body });
}

async function submitAndWait(key: string): Promise<{ id: string }> {
  const m = multipartBody([{ name: 'model', value: 'nsm-1' }, { name: 'file', filename: 'speech-noisy-16k-mono.wav', data: fs.readFileSync(FIXTURE) }]);
  const created = await rawRequest(`${server.url}/v1/noise-suppressor/jobs`, { method: 'POST', headers: { 'Content-Type': m.contentType, Authorization: `Bearer ${key}` }, body: m.body });
  expect(created.status).toBe(202);
  const id = JSON.parse(created.body.toString()).id as string;
  for (let i = 0; i < 600; i++) {
    const job = JSON.parse((await rawRequest(`${server.url}/v1/noise-suppressor/jobs/${id}`, { headers: { Authorization: `Bearer ${key}` } })).body.toString());
    if (job.status === 'succeeded') return { id };
    if (job.status === 'failed' || job.status === 'canceled') throw new Error(`job ${job.status}`);
    await new Promise((res) => setTimeout(res, 100));
  }
  throw new Error('job did not finish');
}

/** A stand-in for the stream endpoint that speaks messages the server does not send yet (speech_start/end). */
function fakeStreamServer(): ReturnType<typeof startWsStandIn> {
  return startWsStandIn((ws, req) => {
    const query = Object.fromEntries(new URL(req.url!, 'http://x').searchParams);
    ws.send(JSON.stringify({ type: 'ready', request_id: 'req_fake', model: query.model, sample_rate: Number(query.sample_rate), encoding: query.encoding, channels: 1, latency_ms: 0, latency_samples: 0 }));
    let first = true;
    ws.on('message', (data, isBinary) => {
      if (isBinary) {
        if (first) ws.send(JSON.stringify({ type: 'speech_start', at_ms: 0 }));
        first = false;
        ws.send(data, { binary: true });
        return;
      }
      if (JSON.parse(String(data)).type === 'end') {
        ws.send(JSON.stringify({ type: 'speech_end', at_ms: 100 }));
        ws.send(JSON.stringify({ type: 'done', stats: { output_seconds: 0.1 }, query }));
        ws.close(1000);
      }
    });
  }, '/v1/noise-suppressor/stream');
}

test('live streams: paced with events, Duplex, TransformStream, WHATWG WebSocket with a ticket, errors, unknown messages', async () => {
  const pcm = wavData(fs.readFileSync(FIXTURE));
  fs.writeFileSync(path.join(dir, 'speech.pcm'), pcm);
  const fake = await fakeStreamServer();
  try {
    const r = await driver('ts-streams.mjs', { PCM_FILE: path.join(dir, 'speech.pcm'), FAKE_URL: fake.url }, ['--experimental-websocket', '--no-warnings']);
    expectOk(r);
    const rep = r.report;
    // Paced: 3 s of audio in 20 ms frames took about 3 s (not less); every message was an event.
    expect(rep.paced.audioS).toBe(3);
    expect(rep.paced.elapsedMs).toBeGreaterThanOrEqual(2900);
    expect(rep.paced.events).toEqual(['ready', 'event:ready:32', 'done', 'event:done']);
    expect(rep.paced.done).toMatchObject({ model: 'nsm-1', input_seconds: 3, output_seconds: 3, bytes_in: pcm.length, bytes_out: pcm.length });
    expect(rep.paced.closeCode).toBe(1000);
    // The stream gives what /denoise gives for the same audio (docs/streaming.md), whatever the chunking or socket.
    const file = await denoiseDirect();
    const expected = sha(wavData(file.body));
    expect(rep.paced).toMatchObject({ outBytes: pcm.length, sha: expected });
    expect(rep.duplex).toMatchObject({ outBytes: pcm.length, sha: expected, done: 3 });
    expect(rep.transform).toMatchObject({ outBytes: pcm.length, sha: expected });
    expect(rep.whatwg).toMatchObject({ outBytes: pcm.length, sha: expected, done: 3 });
    expect(rep.whatwgTicket).toEqual({ ready: 'ready' });
    // Options go to the server as they are: one it does not know (`turbo`) is refused by name.
    expect(rep.unknownOption).toMatchObject({ class: 'InvalidRequestError', type: 'invalid_request', status: 400 });
    expect(rep.unknownOption.message).toMatch(/turbo/);
    expect(rep.midStream.error).toMatchObject({ class: 'StreamError', type: 'invalid_request', closeCode: 1007, request_id: expect.stringMatching(/^req_/) });
    expect(rep.midStream.errorEvents).toEqual(['invalid_request']);
    // Messages this client does not know are events under their own type, and every option reached the server.
    expect(rep.fake.seen).toEqual([['message', 'ready'], ['message', 'speech_start'], ['speech_start', 0], ['message', 'speech_end'], ['speech_end', 100], ['message', 'done']]);
    expect(rep.fake.echoed).toBe(800);
    expect(rep.fake.query).toEqual({ model: 'nsm-2', encoding: 'mulaw', vad: 'true', echo_reference: 'last', sample_rate: '8000' });
  } finally {
    await fake.close();
  }
});

test('a real 429 rate_limited (1 request a minute, one already made) is retried after Retry-After; a shorter patience gets the typed error', async () => {
  const r = await rateRun;
  expectOk(r);
  expect(r.report.second).toEqual({ default: 'nsm-2' });
  expect(r.report.retries).toHaveLength(1);
  expect(r.report.retries[0]).toMatchObject({ method: 'GET', status: 429, type: 'rate_limited' });
  // The seeded call leaves the window 60 s after it was made: about 10 s after the driver's call.
  expect(r.report.retries[0].retryAfter).toBeGreaterThanOrEqual(2);
  expect(r.report.retries[0].retryAfter).toBeLessThanOrEqual(12);
  expect(r.report.ms).toBeGreaterThanOrEqual(r.report.retries[0].retryAfter * 1000);
  // maxRetryAfterS 5: the next minute's 429 is thrown at once, with its Retry-After.
  expect(r.report.impatient.error).toMatchObject({ class: 'RateLimitError', type: 'rate_limited', status: 429 });
  expect(r.report.impatient.error.retryAfter).toBeGreaterThan(5);
  expect(r.report.impatient.ms).toBeLessThan(3000);
}, 120_000);
