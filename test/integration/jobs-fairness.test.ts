// One tenant cannot stall jobs for everyone (issue 27, item 1): URL downloads have a total deadline and a minimum
// rate; they take a download slot, not a processing slot, so with JOBS_CONCURRENCY 1 another workspace's short job
// runs while a slow URL trickles; and a workspace holding more than its share of processing slots while another
// waits gives one back. Real app, real model service, real SQLite, loopback senders.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import request from 'supertest';
import { createApp, type AppHandle } from '../../src/app';
import type { Config } from '../../src/config';
import { downloadToFile, FetchFailedError } from '../../src/jobs/outbound/safe-http';
import type { JobView } from '../../src/jobs/views';
import { closeQuietly, eventually, fixture, listen, testConfig } from '../helpers/service-helpers';
import { makeLongWav, until } from '../helpers/jobs-helpers';

const API = '/v1/noise-suppressor';
const MONO = fixture('speech-noisy-16k-mono.wav');

/** A sender that declares `declared` bytes, then writes `chunk` bytes every `everyMs` for ever. */
async function trickler(declared: number, chunk: number, everyMs: number) {
  const drips = new Set<NodeJS.Timeout>();
  let requests = 0;
  let open = 0;
  const { server, url } = await listen((_req, res) => {
    requests++;
    open++;
    res.writeHead(200, { 'Content-Type': 'audio/wav', 'Content-Length': String(declared) });
    const drip = setInterval(() => res.write(Buffer.alloc(chunk, 1)), everyMs);
    drips.add(drip);
    res.on('close', () => {
      open--;
      clearInterval(drip);
      drips.delete(drip);
    });
  });
  return {
    url: `${url}/slow.wav`,
    requests: () => requests,
    open: () => open,
    async close() {
      for (const d of drips) clearInterval(d);
      await closeQuietly(server);
    },
  };
}

describe('URL downloads: deadline and minimum rate', () => {
  let dir: string;
  beforeAll(() => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'jobs-dl-'));
  });
  afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

  test('a sender under the minimum rate is cut after one window, the partial file removed', async () => {
    const sender = await trickler(100_000, 1, 50); // 20 bytes/s, never idle
    const dest = path.join(dir, 'rate.part');
    try {
      const started = Date.now();
      const err = await downloadToFile(new URL(sender.url), dest, 1e6, {
        allowPrivate: true,
        connectTimeoutMs: 2000,
        idleTimeoutMs: 400,
        minBytesPerSecond: 1000,
      }).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(FetchFailedError);
      expect((err as Error).message).toMatch(/sent less than 400 bytes in 400 ms \(slower than 1000 bytes\/s\)/);
      expect(Date.now() - started).toBeLessThan(5000);
      expect(fs.existsSync(dest)).toBe(false);
      await eventually(() => sender.open() === 0);
    } finally {
      await sender.close();
    }
  });

  test('a sender above the minimum rate still stops at the total deadline', async () => {
    const sender = await trickler(10_000_000, 500, 50); // 10 KB/s: over the rate, far from done
    const dest = path.join(dir, 'deadline.part');
    try {
      const err = await downloadToFile(new URL(sender.url), dest, 1e8, {
        allowPrivate: true,
        connectTimeoutMs: 2000,
        idleTimeoutMs: 300,
        minBytesPerSecond: 1000,
        deadlineMs: 1200,
      }).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(FetchFailedError);
      expect((err as Error).message).toMatch(/did not complete within 1200 ms/);
      expect(fs.existsSync(dest)).toBe(false);
      await eventually(() => sender.open() === 0);
    } finally {
      await sender.close();
    }
  });
});

describe('job slots across workspaces', () => {
  let config: Config;
  let handle: AppHandle;
  const tokens: string[] = [];
  let longWav: string;

  beforeAll(async () => {
    config = testConfig();
    config.jobs = { ...config.jobs, allowPrivateUrls: true, concurrency: 1 };
    handle = await createApp(config, { log: () => undefined });
    for (const name of ['slow-url', 'other', 'third']) {
      const ws = await handle.store.createWorkspace(`fair-${name}`, 'scale');
      tokens.push((await handle.store.createToken({ workspaceId: ws.id, name: 't', scopes: ['*'], allowedIps: [], expiresAt: null })).token);
    }
    longWav = path.join(config.dataDir, 'long.wav');
    makeLongWav(config.ffmpegPath, longWav, 1800); // long enough that neither long job ends before the waiting one gets a slot, under CI load too (600 s did once)
  });

  afterAll(async () => {
    await handle.close();
    fs.rmSync(config.dataDir, { recursive: true, force: true });
  });

  const as = (token: string) => ({ Authorization: `Bearer ${token}` });
  const job = async (id: string, token: string): Promise<JobView> => (await request(handle.app).get(`${API}/jobs/${id}`).set(as(token))).body as JobView;

  test('JOBS_CONCURRENCY 1: another workspace\'s short job runs while a slow URL trickles in', async () => {
    const sender = await trickler(100_000, 1, 200);
    try {
      const slow = await request(handle.app).post(`${API}/jobs`).set(as(tokens[0])).field('url', sender.url);
      expect(slow.status).toBe(202);
      await eventually(() => sender.requests() === 1, 10_000);
      const quick = await request(handle.app).post(`${API}/jobs`).set(as(tokens[1])).field('model', 'nsm-1').attach('file', MONO);
      expect(quick.status).toBe(202);
      const done = await until(async () => {
        const j = await job(quick.body.id, tokens[1]);
        return j.status === 'succeeded' || j.status === 'failed' ? j : undefined;
      }, 30_000);
      expect(done.status).toBe('succeeded');
      // The slow download is still going: it held no processing slot.
      expect(sender.open()).toBe(1);
      expect((await job(slow.body.id, tokens[0])).status).toBe('running');
      const canceled = await request(handle.app).delete(`${API}/jobs/${slow.body.id}`).set(as(tokens[0]));
      expect(canceled.body.status).toBe('canceled');
      await eventually(() => sender.open() === 0, 5000);
    } finally {
      await sender.close();
    }
  });

  test('a workspace holding more than its share gives a processing slot back to a waiting one', async () => {
    config.jobs.concurrency = 2;
    const [a, , c] = tokens;
    // nsm-4 (about ten times nsm-1's cost): a long job must outlast the waiting one by far, whatever the machine's
    // speed (30 min of audio through nsm-1 took ~5 s on a fresh-clone run, and both long jobs were done by the check).
    const submitLong = () => request(handle.app).post(`${API}/jobs`).set(as(a)).field('model', 'nsm-4').attach('file', longWav);
    const a1 = (await submitLong()).body.id as string;
    const a2 = (await submitLong()).body.id as string;
    await until(async () => ((await job(a1, a)).status === 'running' && (await job(a2, a)).status === 'running' ? true : undefined), 30_000, 50);
    const quick = await request(handle.app).post(`${API}/jobs`).set(as(c)).field('model', 'nsm-1').attach('file', MONO);
    const done = await until(async () => {
      const j = await job(quick.body.id, c);
      return j.status === 'succeeded' || j.status === 'failed' ? j : undefined;
    }, 30_000, 50);
    expect(done.status).toBe('succeeded');
    // It ran before either long job finished: one of them gave its slot back (not counted as an attempt).
    const [j1, j2] = [await job(a1, a), await job(a2, a)];
    const quickEnd = Date.parse(done.finished_at!);
    for (const j of [j1, j2]) if (j.finished_at) expect(Date.parse(j.finished_at)).toBeGreaterThan(quickEnd);
    expect([j1.status, j2.status].filter((s) => s === 'succeeded')).toEqual([]);
    expect(Math.max(j1.attempts, j2.attempts)).toBe(1);
    for (const id of [a1, a2]) await request(handle.app).delete(`${API}/jobs/${id}`).set(as(a));
  });
});
