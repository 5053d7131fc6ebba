// Job uploads under abuse (issue 27): a stalled upload is timed out like /denoise's (408, hold released; item 3),
// concurrent uploads, chunked included, cannot take the disk below JOBS_MIN_FREE_DISK_MB (507, refunded; item 4),
// and every 429 too_many_jobs carries Retry-After (item 9). The whole app with a real SQLite store; the disk floor is
// set just under the free space statfs reports when the suite starts, so a few tens of MB reach it.
import fs from 'node:fs';
import http from 'node:http';
import { createApp, type AppHandle } from '../../src/app';
import type { Config } from '../../src/config';
import { closeQuietly, fixture, listen, multipartBody, rawRequest, testConfig, type RawResponse } from '../helpers/service-helpers';

const API = '/v1/noise-suppressor';
const MONO = fixture('speech-noisy-16k-mono.wav');
const MB = 1024 * 1024;
/** Room above the floor when the suite starts. */
const HEADROOM = 150 * MB;

describe('job uploads: stalls, the disk floor, 429s', () => {
  let config: Config;
  let handle: AppHandle;
  let base: string;
  let server: http.Server;

  beforeAll(async () => {
    config = testConfig({ clientIdleTimeoutMs: 1000 });
    // No runner: accepted inputs stay on disk, as queued jobs' would.
    config.jobs = { ...config.jobs, runner: false, maxActivePerWorkspace: 2 };
    fs.mkdirSync(config.jobs.dir, { recursive: true });
    const s = fs.statfsSync(config.jobs.dir);
    config.jobs.minFreeDiskBytes = Number(s.bavail) * Number(s.bsize) - HEADROOM;
    handle = await createApp(config, { log: () => undefined });
    ({ server, url: base } = await listen(handle.app));
  });

  afterAll(async () => {
    await closeQuietly(server);
    await handle.close();
    fs.rmSync(config.dataDir, { recursive: true, force: true });
  });

  async function tenant(name: string, credits = 1000): Promise<{ token: string; ws: string }> {
    const ws = await handle.store.createWorkspace(name, 'enterprise', { creditsPerMonth: credits, requestsPerMinute: 10_000 });
    const { token } = await handle.store.createToken({ workspaceId: ws.id, name: 't', scopes: ['*'], allowedIps: [], expiresAt: null });
    return { token, ws: ws.id };
  }

  const post = (token: string, body: Buffer | Buffer[], headers: Record<string, string | number>): Promise<RawResponse> =>
    rawRequest(`${base}${API}/jobs`, { method: 'POST', headers: { Authorization: `Bearer ${token}`, ...headers }, body });
  const errorOf = (r: RawResponse): string | undefined => (JSON.parse(r.body.toString()) as { error?: { type?: string } }).error?.type;

  test('every 429 too_many_jobs carries Retry-After, and is refunded', async () => {
    const t = await tenant('uploads-429');
    const { body, contentType } = multipartBody([{ name: 'file', filename: 'a.wav', data: fs.readFileSync(MONO) }]);
    const replies = await Promise.all(Array.from({ length: 8 }, () => post(t.token, body, { 'Content-Type': contentType, 'Content-Length': body.length })));
    const refused = replies.filter((r) => r.status === 429);
    expect(replies.filter((r) => r.status === 202).length).toBe(2);
    expect(refused.length).toBe(6);
    for (const r of refused) {
      expect(errorOf(r)).toBe('too_many_jobs');
      expect(Number(r.headers['retry-after'])).toBeGreaterThan(0);
    }
    expect(await handle.store.creditsUsed(t.ws, new Date())).toBe(2);
  });

  test('a stalled upload (80 of 100000 bytes, then silence) gets 408 request_timeout at CLIENT_IDLE_TIMEOUT_MS; its hold is released', async () => {
    const t = await tenant('uploads-stall', 2);
    const { body, contentType } = multipartBody([{ name: 'file', filename: 'a.wav', data: Buffer.alloc(99_000, 1) }]);
    const reply = await new Promise<RawResponse>((resolve, reject) => {
      const req = http.request(`${base}${API}/jobs`, {
        method: 'POST',
        headers: { Authorization: `Bearer ${t.token}`, 'Content-Type': contentType, 'Content-Length': 100_000 },
      });
      // A client that never answers would hang this test on a server without the clock; give up after 10 s.
      const giveUp = setTimeout(() => req.destroy(new Error('no answer within 10 s')), 10_000);
      req.on('response', (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => {
          clearTimeout(giveUp);
          resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks) });
        });
      });
      req.on('error', (err) => {
        clearTimeout(giveUp);
        reject(err);
      });
      req.write(body.subarray(0, 80));
    });
    expect(reply.status).toBe(408);
    expect(errorOf(reply)).toBe('request_timeout');
    expect(reply.headers.connection).toBe('close');
    expect(await handle.store.creditsHeld(t.ws, new Date())).toBe(0);
    expect(await handle.store.creditsUsed(t.ws, new Date())).toBe(0);
    expect(fs.readdirSync(handle.jobs.files.incoming)).toEqual([]);
  });

  test('concurrent uploads, one chunked, stop at the disk floor: 507 insufficient_storage, refunded', async () => {
    const MiB = Buffer.alloc(MB, 3);
    // A multipart body of `mb` MiB of audio, as 1 MiB pieces (one buffer, sent many times).
    const body = (mb: number): { pieces: Buffer[]; length: number; contentType: string } => {
      const boundary = '----floor' + Math.random().toString(16).slice(2);
      const head = Buffer.from(`--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="big.wav"\r\n\r\n`);
      const tail = Buffer.from(`\r\n--${boundary}--\r\n`);
      const pieces = [head, ...Array.from({ length: mb }, () => MiB), tail];
      return { pieces, length: pieces.reduce((n, p) => n + p.length, 0), contentType: `multipart/form-data; boundary=${boundary}` };
    };
    const free = (): number => {
      const s = fs.statfsSync(config.jobs.dir);
      return Number(s.bavail) * Number(s.bsize);
    };
    // This machine's disk is shared: another process may write or free tens of MB meanwhile. A round in which the
    // free space moved by more than the margin (other than by our own input) does not count, and runs again.
    const margin = 50 * MB;
    for (let round = 1; ; round++) {
      const t = await tenant(`uploads-disk-${round}`);
      for (const f of fs.readdirSync(handle.jobs.files.inputs)) fs.rmSync(`${handle.jobs.files.inputs}/${f}`);
      const before = free();
      const room = before - config.jobs.minFreeDiskBytes;
      // Three uploads of 100 MiB (two declared, one chunked) against 150 MiB of room: only one fits, ±50 MiB.
      const size = Math.round(room / MB / 1.5);
      const bodies = [body(size), body(size), body(size)];
      const replies = await Promise.all([
        post(t.token, bodies[0].pieces, { 'Content-Type': bodies[0].contentType, 'Content-Length': bodies[0].length }),
        post(t.token, bodies[1].pieces, { 'Content-Type': bodies[1].contentType, 'Transfer-Encoding': 'chunked' }),
        post(t.token, bodies[2].pieces, { 'Content-Type': bodies[2].contentType, 'Content-Length': bodies[2].length }),
      ]).then((rs) => rs.map((r) => ({ status: r.status, type: r.status === 202 ? null : errorOf(r) })));
      const kept = fs.readdirSync(handle.jobs.files.inputs).reduce((n, f) => n + fs.statSync(`${handle.jobs.files.inputs}/${f}`).size, 0);
      const moved = Math.abs(before - free() - kept);
      if (moved > margin && round < 4) continue;
      expect(replies.filter((r) => r.status === 202).length).toBe(1);
      expect(replies.filter((r) => r.status === 507 && r.type === 'insufficient_storage').length).toBe(2);
      // Only the accepted input is on disk; the refused uploads left nothing.
      expect(fs.readdirSync(handle.jobs.files.incoming)).toEqual([]);
      expect(kept).toBe(size * MB);
      expect(await handle.store.creditsUsed(t.ws, new Date())).toBe(1);
      expect(await handle.store.creditsHeld(t.ws, new Date())).toBe(0);
      break;
    }
  });
});
