// The echo reference on jobs and in the CLI, through the whole app on a loopback port: a job with an echo_reference
// part (its result is the /denoise answer byte for byte, its stats and input say so, its files go when it is done),
// a job whose reference is too short (fails invalid_request, refunded), a URL job with echo_reference_url, and the
// CLI: `nsm denoise --echo-reference` (in-process) and `nsm jobs submit --echo-reference --wait` against the server.
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import type http from 'node:http';
import path from 'node:path';
import request from 'supertest';
import { createApp, type AppHandle } from '../../src/app';
import { PROJECT_ROOT, type Config } from '../../src/config';
import type { JobView } from '../../src/jobs/views';
import { echoScene, writeMono } from '../helpers/echo-helpers';
import { until } from '../helpers/jobs-helpers';
import { closeQuietly, listen, testConfig } from '../helpers/service-helpers';

const API = '/v1/noise-suppressor';
const NSM = path.join(PROJECT_ROOT, 'bin', 'nsm.js');

const binary = ((res: http.IncomingMessage, cb: (err: Error | null, body: Buffer) => void): void => {
  const chunks: Buffer[] = [];
  res.on('data', (c: Buffer) => chunks.push(c));
  res.on('end', () => cb(null, Buffer.concat(chunks)));
}) as unknown as Parameters<request.Test['parse']>[0];

function nsm(args: string[], env: Record<string, string>, cwd: string): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [NSM, ...args], { env: { ...process.env, ...env }, cwd, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    child.on('close', (code) => resolve({ code, stdout, stderr })); // 'close': after the last of its output has been read
  });
}

describe('echo reference on jobs and in the CLI', () => {
  let config: Config;
  let handle: AppHandle;
  let server: http.Server;
  let base: string;
  let token: string;
  let workspace: string;
  let dir: string;
  let mic: string;
  let far: string;
  /** The /denoise answer for mic + far (what every other way must give, byte for byte). */
  let expected: Buffer;

  beforeAll(async () => {
    config = testConfig();
    config.jobs = { ...config.jobs, allowPrivateUrls: true };
    handle = await createApp(config, { log: () => undefined });
    ({ server, url: base } = await listen(handle.app));
    const ws = await handle.store.createWorkspace('echo-jobs', 'scale');
    workspace = ws.id;
    token = (await handle.store.createToken({ workspaceId: ws.id, name: 't', scopes: ['*'], allowedIps: [], expiresAt: null })).token;
    dir = fs.mkdtempSync(path.join(config.dataDir, 'echo-'));
    const scene = await echoScene({ rate: 16000, seconds: 8, nearFrom: 6, delayMs: 50 });
    mic = path.join(dir, 'mic.wav');
    far = path.join(dir, 'far.wav');
    writeMono(mic, 16000, scene.mic);
    writeMono(far, 16000, scene.ref);
    const res = await request(handle.app).post(`${API}/denoise`).set('Authorization', `Bearer ${token}`).attach('file', mic).attach('echo_reference', far).buffer(true).parse(binary);
    expect(res.status).toBe(200);
    expected = res.body;
  });

  afterAll(async () => {
    await closeQuietly(server);
    await handle.close();
    fs.rmSync(config.dataDir, { recursive: true, force: true });
  });

  const auth = () => ({ Authorization: `Bearer ${token}` });
  const finished = (id: string): Promise<JobView> =>
    until(async () => {
      const job = (await request(handle.app).get(`${API}/jobs/${id}`).set(auth())).body as JobView;
      return job.status === 'succeeded' || job.status === 'failed' ? job : undefined;
    }, 60_000);
  const jobFiles = (): string[] => fs.readdirSync(path.join(config.jobs.dir, 'inputs'));
  const credits = (): Promise<number> => handle.store.creditsUsed(workspace, new Date());

  test('a job with an echo_reference part: the /denoise answer byte for byte; stats and input say so; its files go', async () => {
    const res = await request(handle.app).post(`${API}/jobs`).set(auth()).attach('file', mic).attach('echo_reference', far, 'far-end.wav');
    expect(res.status).toBe(202);
    expect(res.body.input).toEqual({
      source: 'upload', url: null, filename: 'mic.wav', bytes: fs.statSync(mic).size,
      echo_reference: { source: 'upload', url: null, filename: 'far-end.wav', bytes: fs.statSync(far).size },
    });
    const job = await finished(res.body.id);
    expect(job.status).toBe('succeeded');
    expect(job.stats).toMatchObject({ echo_reference: true, echo_reference_active: true, duration_s: 8 });
    const audio = await request(handle.app).get(job.result!.url).set(auth()).buffer(true).parse(binary);
    expect(audio.body.equals(expected)).toBe(true);
    expect(jobFiles().filter((f) => f.startsWith(job.id))).toEqual([]);
  });

  test('a job whose reference is too short fails (invalid_request, saying so) and is refunded; nothing stays on disk', async () => {
    const short = path.join(dir, 'short.wav');
    writeMono(short, 16000, new Float32Array(3 * 16000).fill(0.01));
    const before = await credits();
    const res = await request(handle.app).post(`${API}/jobs`).set(auth()).attach('file', mic).attach('echo_reference', short);
    expect(res.status).toBe(202);
    const job = await finished(res.body.id);
    expect(job.status).toBe('failed');
    expect(job.error).toMatchObject({ type: 'invalid_request' });
    expect(job.error!.message).toMatch(/^echo_reference is shorter than half of the file \(3 s against 8 s\)/);
    await until(async () => ((await credits()) === before ? true : undefined));
    expect(jobFiles().filter((f) => f.startsWith(job.id))).toEqual([]);

    // Refused at once: an empty reference, a reference as text, both a part and a URL.
    const empty = path.join(dir, 'empty.wav');
    fs.writeFileSync(empty, '');
    const refusals = await Promise.all([
      request(handle.app).post(`${API}/jobs`).set(auth()).attach('file', mic).attach('echo_reference', empty),
      request(handle.app).post(`${API}/jobs`).set(auth()).field('echo_reference', 'far.wav').attach('file', mic),
      request(handle.app).post(`${API}/jobs`).set(auth()).field('echo_reference_url', 'http://127.0.0.1:9/far.wav').attach('file', mic).attach('echo_reference', far),
    ]);
    expect(refusals.map((r) => [r.status, r.body.error?.type])).toEqual([[400, 'invalid_request'], [400, 'invalid_request'], [400, 'invalid_request']]);
    expect(refusals.map((r) => r.body.error.message)).toEqual([
      'the echo_reference file is empty',
      '"echo_reference" must be a file part (multipart/form-data with a filename), not a text field',
      'send either an echo_reference file or an echo_reference_url, not both',
    ]);
  });

  test('a URL job with echo_reference_url: both fetched by the runner', async () => {
    const media = await listen((req, res) => {
      const file = req.url === '/call/mic.wav' ? mic : req.url === '/call/far.wav' ? far : null;
      if (!file) {
        res.statusCode = 404;
        return res.end();
      }
      res.setHeader('Content-Type', 'audio/wav');
      fs.createReadStream(file).pipe(res);
    });
    try {
      const res = await request(handle.app).post(`${API}/jobs`).set(auth()).field('url', `${media.url}/call/mic.wav`).field('echo_reference_url', `${media.url}/call/far.wav`);
      expect(res.status).toBe(202);
      expect(res.body.input.echo_reference).toEqual({ source: 'url', url: `${media.url}/call/far.wav`, filename: 'far.wav', bytes: null });
      const job = await finished(res.body.id);
      expect(job.status).toBe('succeeded');
      const audio = await request(handle.app).get(job.result!.url).set(auth()).buffer(true).parse(binary);
      expect(audio.body.equals(expected)).toBe(true);

      const missing = await request(handle.app).post(`${API}/jobs`).set(auth()).attach('file', mic).field('echo_reference_url', `${media.url}/call/nothing.wav`);
      const failed = await finished(missing.body.id);
      expect(failed.error).toMatchObject({ type: 'url_fetch_failed' });
    } finally {
      await closeQuietly(media.server);
    }
  });

  test('CLI: nsm denoise --echo-reference (in-process) and nsm jobs submit --echo-reference --wait give the same bytes', async () => {
    const local = await nsm(['denoise', mic, '--echo-reference', far, '-o', path.join(dir, 'clean.wav')], {}, dir);
    expect(local.code).toBe(0);
    expect(local.stderr).toMatch(/, echo −\d+\.\d dB \(delay \d+ ms\)/);
    expect(fs.readFileSync(path.join(dir, 'clean.wav')).equals(expected)).toBe(true);

    const env = { NSM_URL: base, NSM_TOKEN: token };
    const remote = await nsm(['jobs', 'submit', mic, '--echo-reference', far, '--wait', '-o', path.join(dir, 'job.wav'), '-q'], env, dir);
    expect(remote.code).toBe(0);
    expect(fs.readFileSync(path.join(dir, 'job.wav')).equals(expected)).toBe(true);

    const usage = await nsm(['denoise', mic, far, '--echo-reference', far, '-d', dir], {}, dir);
    expect(usage.code).toBe(2);
    expect(usage.stderr).toMatch(/--echo-reference goes with one input/);
    const missing = await nsm(['denoise', mic, '--echo-reference', path.join(dir, 'nope.wav'), '-o', path.join(dir, 'x.wav')], {}, dir);
    expect(missing.code).toBe(3);
    expect(missing.stderr).toMatch(/input not found: .*nope\.wav \(--echo-reference\)/);
  });
});
