// The Python client (clients/python, import nsm_client) against the real server (dist/src/server.js as a process,
// temp DATA_DIR, loopback), run by Debian's python3 from driver scripts (test/clients/py_*.py): every operation (also
// without the optional websockets package), the retry rule (a real 429 too_many_jobs on a charged call retried, a
// real 429 rate_limited beyond the client's patience raised typed, a proxy's bare 502 vs the gateway's 503), a job
// download cut mid-body and resumed with Range, and live streams with asyncio.
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { PROJECT_ROOT } from '../../src/config';
import { makeTmpDir } from '../helpers/audio-helpers';
import { PY_CLIENT, PYTHON, run, startProxy, startServer, startStallingServer, startWsStandIn, type Run, type ServerProcess } from '../helpers/clients-helpers';
import { fixture, multipartBody, rawRequest, readZip } from '../helpers/service-helpers';
import { wavData } from '../helpers/streaming-helpers';

const FIXTURE = fixture('speech-noisy-16k-mono.wav');
const DRIVERS = path.join(PROJECT_ROOT, 'test/clients');
const sha = (b: Buffer): string => createHash('sha256').update(b).digest('hex');

let server: ServerProcess;
let token: string;
let stall: Awaited<ReturnType<typeof startStallingServer>>;
let out: string;
let direct: Buffer;

function driver(name: string, env: Record<string, string>, pythonArgs: string[] = []): Promise<Run> {
  return run(PYTHON, [...pythonArgs, path.join(DRIVERS, name)], {
    cwd: out,
    // -S below drops site-packages, so PYTHONPATH is how the package is found either way (as after pip install).
    env: { PYTHONPATH: PY_CLIENT, PYTHONDONTWRITEBYTECODE: '1', URL: server.url, TOKEN: token, FIXTURE, OUT: out, ...env },
    timeoutMs: 110_000,
  });
}

function expectOk(r: Run): void {
  if (r.code !== 0 || !r.report) throw new Error(`driver failed (${r.code}):\n${r.stdout}\n${r.stderr}`);
}

beforeAll(async () => {
  server = await startServer({ JOBS_ALLOW_PRIVATE_URLS: 'true', JOBS_MAX_ACTIVE_PER_WORKSPACE: '1', JOBS_HOUSEKEEPING_SECONDS: '1', JOBS_BUSY_RETRY_AFTER_SECONDS: '1' });
  token = await server.token();
  stall = await startStallingServer();
  out = makeTmpDir('nsm-py-client-');
  const m = multipartBody([{ name: 'model', value: 'nsm-1' }, { name: 'file', filename: 'x.wav', data: fs.readFileSync(FIXTURE) }]);
  const res = await rawRequest(`${server.url}/v1/noise-suppressor/denoise`, { method: 'POST', headers: { 'Content-Type': m.contentType, Authorization: `Bearer ${token}` }, body: m.body });
  expect(res.status).toBe(200);
  direct = res.body; // what curl gets for the fixture with nsm-1
}, 120_000);

afterAll(async () => {
  await stall?.close();
  await server?.stop();
  if (out) fs.rmSync(out, { recursive: true, force: true });
});

test('the package: pyproject.toml, import name nsm_client, no dependency beyond the standard library', () => {
  const toml = fs.readFileSync(path.join(PY_CLIENT, 'pyproject.toml'), 'utf8');
  expect(toml).toMatch(/name = "nsm-client"/);
  expect(toml).toMatch(/version = "1\./);
  expect(toml).toMatch(/dependencies = \[\]/);
  expect(fs.existsSync(path.join(PY_CLIENT, 'nsm_client/py.typed'))).toBe(true);
});

test.each([
  ['with websockets installed', [] as string[], true],
  ['without it (python3 -S: no site-packages)', ['-S'], false],
])('every HTTP operation, %s', async (_name, args, hasWebsockets) => {
  const r = await driver('py_operations.py', { STALL_URL: stall.url }, args);
  expectOk(r);
  const rep = r.report;
  expect(rep.websockets).toBe(hasWebsockets);
  expect(rep.models).toEqual({ default: 'nsm-2', ids: ['nsm-1', 'nsm-2', 'nsm-3', 'nsm-4', 'nsm-2-hd'] });
  expect(rep.sample.bytes).toBeGreaterThan(44);
  expect(rep.health.status).toBe('ok');
  expect(rep.denoise).toMatchObject({ isBytes: true, magic: 'fLaC', filename: 'speech-noisy-16k-mono_denoised.flac', contentType: 'audio/flac', requestId: expect.stringMatching(/^req_/) });
  expect(rep.denoise.stats).toMatchObject({ model: 'nsm-1', output_format: 'flac', duration_s: 3, output_sample_rate: 16000 });
  expect(rep.denoiseBytes).toEqual({ sha: sha(direct), filename: 'audio_denoised.wav', named: 'from-bytes_denoised.wav', fileObject: 'speech-noisy-16k-mono_denoised.wav', sameAudio: true });
  const entries = readZip(fs.readFileSync(path.join(out, 'py-batch.zip')));
  expect(entries.map((e) => e.name).sort()).toEqual(['manifest.json', 'second_denoised.wav', 'speech-noisy-16k-mono_denoised.wav']);
  expect(rep.batchZip.summary).toMatchObject({ files: 2, succeeded: 2, failed: 0 });
  expect(rep.batchJson).toEqual({ succeeded: 1, failed: 1, statuses: ['ok', 'error'], audioSha: sha(direct) });
  expect(rep.errors.badModel).toMatchObject({ class: 'InvalidRequestError', type: 'invalid_request', status: 400, request_id: expect.stringMatching(/^req_/) });
  expect(rep.errors.badModel.message).toMatch(/nsm-9/);
  expect(rep.errors.badToken).toMatchObject({ class: 'AuthenticationError', type: 'invalid_token', status: 401 });
  expect(rep.errors.noJob).toMatchObject({ class: 'NotFoundError', type: 'job_not_found', status: 404 });
  expect(rep.hierarchy).toEqual([true, true, true, true, true]);
  const jobs = rep.jobs;
  expect(jobs.submitted.status).toBe('queued');
  expect(jobs.finished.status).toBe('succeeded');
  expect(jobs.progress.at(-1)).toBe('succeeded');
  expect(jobs.download).toEqual({ bytes: jobs.finished.bytes, resumes: 0, filename: 'speech-noisy-16k-mono_denoised.wav', fileSha: sha(direct), memorySha: sha(direct) });
  expect(jobs.list).toEqual({ count: 1, first: jobs.submitted.id });
  expect(jobs.listAll).toContain(jobs.submitted.id);
  expect(jobs.deleted).toEqual({ status: 'succeeded', resultDeleted: true });
  expect(jobs.afterDelete).toMatchObject({ class: 'GoneError', type: 'result_gone', status: 410 });
  expect(jobs.cancel).toEqual({ status: 'canceled', source: 'url' });
  expect(jobs.notFinished).toMatchObject({ class: 'ConflictError', type: 'job_not_finished', status: 409 });
  expect(rep.ticket).toEqual({ prefix: 'tk_', ttl_s: 60 });
  const fixtureBytes = fs.statSync(fixture('speech-noisy-16k-mono.wav')).size;
  expect(rep.echo).toEqual({
    denoise: { reference: true, active: true, bytes: direct.length },
    job: { reference: { source: 'upload', url: null, filename: 'speech-noisy-16k-mono.wav', bytes: fixtureBytes }, status: 'succeeded', active: true },
  });
});

test('a real 429 too_many_jobs on POST /jobs (charged) is retried after Retry-After, and charged once', async () => {
  const jobsToken = await server.token();
  const r = await driver('py_retry.py', { MODE: 'jobs', TOKEN: jobsToken, STALL_URL: stall.url });
  expectOk(r);
  if (r.report.retries.length === 0) throw new Error(`no retry:\n${r.stdout}\n${r.stderr}`);
  expect(r.report.retries[0]).toMatchObject({ method: 'POST', status: 429, type: 'too_many_jobs', retryAfter: 1 });
  expect(r.report.retries[0].delay).toBeGreaterThanOrEqual(1);
  expect(r.report.second).toEqual({ status: 'queued' });
  expect(r.report.first).toBe('canceled');
  expect(r.report.secondFinal).toBe('succeeded');
  // The cancel's refund settles in a housekeeping pass (every 1 s here): wait for it (a slow machine may need several),
  // then one pass more, which must not refund it again.
  for (const end = Date.now() + 15_000; (await server.creditsUsed(jobsToken)) > 1 && Date.now() < end; ) await new Promise((res) => setTimeout(res, 200));
  await new Promise((res) => setTimeout(res, 1500));
  expect(await server.creditsUsed(jobsToken)).toBe(1);
});

test('a real 429 rate_limited whose Retry-After is beyond the client\'s patience is raised at once, typed', async () => {
  const r = await driver('py_retry.py', { MODE: 'rate', TOKEN: await server.token({ rpm: 1 }) });
  expectOk(r);
  expect(r.report.second.error).toMatchObject({ class: 'RateLimitError', type: 'rate_limited', status: 429 });
  expect(r.report.second.error.retryAfter).toBeGreaterThan(5);
  expect(r.report.retries).toEqual([]);
  expect(r.report.secondS).toBeLessThan(3);
});

test('through a proxy: a bare 502 on POST /denoise is not retried, on GET it is; a gateway 503 on POST is', async () => {
  const bare = '<html>502 Bad Gateway</html>';
  const envelope = JSON.stringify({ error: { type: 'upstream_unavailable', message: 'restarting', request_id: 'req_proxy' } });
  const proxy = await startProxy(server.url, {
    refuse: [
      { match: /^POST \/v1\/noise-suppressor\/denoise$/, times: 1, status: 502, body: bare },
      { match: /^POST \/v1\/noise-suppressor\/denoise$/, times: 1, status: 503, body: envelope, headers: { 'Content-Type': 'application/json', 'Retry-After': '1' } },
      { match: /^GET \/v1\/noise-suppressor\/models$/, times: 2, status: 502, body: bare },
      { match: /^GET \/v1\/noise-suppressor\/health$/, times: 1, status: 502, body: bare },
    ],
  });
  try {
    const r = await driver('py_retry.py', { MODE: 'proxy', URL: proxy.url });
    expectOk(r);
    const rep = r.report;
    expect(rep.bare502Post.error).toMatchObject({ class: 'ServerError', status: 502, type: 'http_502' });
    expect(rep.bare502Get).toEqual({ default: 'nsm-2' });
    expect(rep.envelope503Post.ok).toBe(direct.length);
    expect(rep.retryOff.error).toMatchObject({ class: 'ServerError', status: 502 });
    expect(proxy.requests.filter((q) => q.method === 'POST').map((q) => [q.action, q.status])).toEqual([['refused', 502], ['refused', 503], ['passed', 200]]);
    expect(rep.retries.map((x: any) => [x.method, x.status])).toEqual([['GET', 502], ['GET', 502], ['POST', 503]]);
    expect(rep.retries[2].delay).toBeGreaterThanOrEqual(1);
  } finally {
    await proxy.close();
  }
});

test('a job download cut mid-body resumes with Range and If-Range, to a file and in memory', async () => {
  const m = multipartBody([{ name: 'model', value: 'nsm-1' }, { name: 'file', filename: 'speech-noisy-16k-mono.wav', data: fs.readFileSync(FIXTURE) }]);
  const created = await rawRequest(`${server.url}/v1/noise-suppressor/jobs`, { method: 'POST', headers: { 'Content-Type': m.contentType, Authorization: `Bearer ${token}` }, body: m.body });
  expect(created.status).toBe(202);
  const id = JSON.parse(created.body.toString()).id as string;
  for (let i = 0; ; i++) {
    const job = JSON.parse((await rawRequest(`${server.url}/v1/noise-suppressor/jobs/${id}`, { headers: { Authorization: `Bearer ${token}` } })).body.toString());
    if (job.status === 'succeeded') break;
    if (i > 600 || job.status === 'failed') throw new Error(`job ${job.status}`);
    await new Promise((res) => setTimeout(res, 100));
  }
  const proxy = await startProxy(server.url, { cut: { match: /\/result$/, after: 10_000, times: 2 } });
  try {
    const r = await driver('py_resume.py', { URL: proxy.url, JOB_ID: id, OUT_FILE: path.join(out, 'resumed.wav') });
    expectOk(r);
    expect(r.report.file).toEqual({ bytes: direct.length, resumes: 1, sha: sha(direct), filename: 'speech-noisy-16k-mono_denoised.wav' });
    expect(r.report.memory).toEqual({ bytes: direct.length, resumes: 1, sha: sha(direct) });
    expect(r.report.lastProgress).toEqual([direct.length, direct.length]);
    expect(proxy.requests.filter((q) => q.url.endsWith('/result')).map((q) => [q.action, q.status, q.range])).toEqual([
      ['cut', 200, null],
      ['passed', 206, 'bytes=10000-'],
      ['cut', 200, null],
      ['passed', 206, 'bytes=10000-'],
    ]);
  } finally {
    await proxy.close();
  }
});

/** A stand-in for a server whose stream cannot start: answers the upgrade, then as `?mode=` says. */
function startUnreadyServer(): ReturnType<typeof startWsStandIn> {
  return startWsStandIn((ws, req) => {
    const mode = new URL(req.url ?? '/', 'http://x').searchParams.get('mode');
    if (mode === 'error') {
      ws.send(JSON.stringify({ type: 'error', error: { type: 'internal_error', message: 'could not start the stream: no worker', request_id: 'req_unready' } }));
      ws.close(1011, 'internal_error');
    } else if (mode === 'close') ws.close(1012, 'restarting');
    else ws.send('[1]');
  });
}

test('live streams with asyncio: paced, callback, ticket, sync helper, refusals, a mid-stream error and one before ready typed', async () => {
  const pcm = wavData(fs.readFileSync(FIXTURE));
  fs.writeFileSync(path.join(out, 'speech.pcm'), pcm);
  const unready = await startUnreadyServer();
  const r = await driver('py_streams.py', { PCM_FILE: path.join(out, 'speech.pcm'), FAKE_URL: unready.url }).finally(() => unready.close());
  // Nothing on stderr: a stream closed without end() (the ticket's) logs no "Future exception was never retrieved".
  expect(r.stderr).toBe('');
  expectOk(r);
  const rep = r.report;
  const expected = sha(wavData(direct));
  expect(rep.paced.elapsedS).toBeGreaterThanOrEqual(2.9);
  expect(rep.paced).toMatchObject({ ready: { model: 'nsm-1', latency_ms: 32 }, types: ['ready', 'done'], outBytes: pcm.length, sha: expected, closeCode: 1000 });
  expect(rep.paced.done).toMatchObject({ input_seconds: 3, output_seconds: 3, bytes_in: pcm.length, bytes_out: pcm.length });
  expect(rep.callback).toEqual({ outBytes: pcm.length, sha: expected, messages: ['ready', 'done'] });
  expect(rep.sync).toEqual({ outBytes: pcm.length, sha: expected, output_seconds: 3 });
  expect(rep.ticket).toBe('ready');
  expect(rep.unknownOption).toMatchObject({ class: 'InvalidRequestError', type: 'invalid_request', status: 400 });
  expect(rep.unknownOption.message).toMatch(/turbo/);
  expect(rep.badToken).toMatchObject({ class: 'AuthenticationError', type: 'invalid_token', status: 401, request_id: expect.stringMatching(/^req_/) });
  expect(rep.midStream).toMatchObject({ class: 'StreamError', type: 'invalid_request', closeCode: 1007 });
  expect(rep.beforeReady).toEqual({
    error: { class: 'StreamError', type: 'internal_error', status: null, closeCode: 1011, request_id: 'req_unready', message: 'could not start the stream: no worker' },
    close: { class: 'StreamError', type: 'connection_closed', status: null, closeCode: 1012, request_id: null, message: 'stream closed with 1012 (restarting) before ready' },
    junk: expect.objectContaining({ class: 'StreamError', type: 'unexpected_message', message: 'expected ready, got [1]' }),
  });
});
