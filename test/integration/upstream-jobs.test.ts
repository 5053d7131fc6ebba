// Jobs reach the model services through the forwarder's replica set (balancer, breakers, health checks): a job skips
// a replica that is down, and one whose breaker the gateway's own calls opened, and succeeds on its first attempt on
// the replica that works. Real parts: the whole app (gateway, runner, SQLite), a real in-process model service on
// loopback with a real engine; the broken replica is a closed port, or a stand-in that fails every call but /health.
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import request from 'supertest';
import { createApp, startModelServiceServer, closeServer, type AppHandle } from '../../src/app';
import type { Config } from '../../src/config';
import { createInferenceEngine } from '../../src/inference/runtime/engine';
import type { InferenceEngine } from '../../src/inference/types';
import type { JobView } from '../../src/jobs/views';
import { JOB_STREAM_PATH } from '../../src/model-service/job-stream';
import { closeQuietly, createToken, fixture, listen, testConfig } from '../helpers/service-helpers';
import { until } from '../helpers/jobs-helpers';
import { freePort } from '../../scripts/lib/free-port';

const API = '/v1/noise-suppressor';
const TOKEN = 'upstream-jobs-test-token-0123456789';
const INPUT = fixture('speech-noisy-16k-mono.wav');

describe('jobs use the forwarder replicas', () => {
  let serviceConfig: Config;
  let engine: InferenceEngine;
  let service: { server: http.Server; url: string };
  const configs: Config[] = [];
  const apps: AppHandle[] = [];
  const logs: string[] = [];

  beforeAll(async () => {
    serviceConfig = testConfig({ workers: 1 });
    configs.push(serviceConfig);
    engine = await createInferenceEngine(serviceConfig);
    service = await startModelServiceServer(serviceConfig, engine, TOKEN, () => undefined);
  });

  afterAll(async () => {
    for (const a of apps) await a.close();
    await closeServer(service.server);
    await engine.close();
    for (const c of configs) fs.rmSync(c.dataDir, { recursive: true, force: true });
  });

  /** A gateway (with its job runner) in front of `urls`, on its own DATA_DIR. */
  async function gateway(urls: string[], overrides: Partial<Config> = {}): Promise<{ handle: AppHandle; token: string }> {
    const config = testConfig({ modelServiceUrl: urls.join(','), modelServiceToken: TOKEN, ...overrides });
    configs.push(config);
    const handle = await createApp(config, { log: (l) => logs.push(l) });
    apps.push(handle);
    return { handle, token: await createToken(handle.store) };
  }

  async function runJob(handle: AppHandle, token: string): Promise<JobView> {
    const auth = { Authorization: `Bearer ${token}` };
    const res = await request(handle.app).post(`${API}/jobs`).set(auth).field('model', 'nsm-1').attach('file', INPUT);
    expect(res.status).toBe(202);
    const id = res.body.id as string;
    return until(async () => {
      const job = (await request(handle.app).get(`${API}/jobs/${id}`).set(auth)).body as JobView;
      return job.status === 'succeeded' || job.status === 'failed' ? job : undefined;
    }, 60_000, 100);
  }

  test('a replica that is down is skipped: the job succeeds on its first attempt', async () => {
    const down = `http://127.0.0.1:${await freePort()}`; // nothing listens there
    const { handle, token } = await gateway([down, service.url]);
    const job = await runJob(handle, token);
    expect([job.status, job.attempts]).toEqual(['succeeded', 1]);
    expect(handle.forwarder.replicas[0].healthy).toBe(false);
    expect(logs.some((l) => /attempt 1 failed/.test(l))).toBe(false);
  });

  test('a replica whose breaker is open is skipped, though its /health answers', async () => {
    let jobStreams = 0;
    const failing = await listen((req, res) => {
      if (req.url === '/health') {
        res.writeHead(200, { 'Content-Type': 'application/json' });
        res.end('{"status":"ok"}');
        return;
      }
      if (req.url?.startsWith(JOB_STREAM_PATH)) jobStreams++;
      res.writeHead(500, { 'Content-Type': 'application/json', Connection: 'close' });
      res.end('{"detail":"stand-in failure"}');
    });
    try {
      const { handle, token } = await gateway([failing.url, service.url], { breakerThreshold: 1, breakerCooldownMs: 600_000 });
      const [a] = handle.forwarder.replicas;
      // The gateway's own calls open the stand-in's breaker (one failure is enough here).
      // Their answers do not matter, only the breaker's state after them; a call the stand-in fails may be answered
      // before its upload is all sent, and the client then sees EPIPE instead (a fresh-clone CI run did once).
      for (let i = 0; i < 5 && a.breaker.snapshot().state !== 'open'; i++) {
        await request(handle.app).post(`${API}/denoise`).set({ Authorization: `Bearer ${token}` }).field('model', 'nsm-1').attach('file', INPUT)
          .catch((err: NodeJS.ErrnoException) => {
            if (err.code !== 'EPIPE' && err.code !== 'ECONNRESET') throw err;
          });
      }
      expect(a.breaker.snapshot().state).toBe('open');
      const job = await runJob(handle, token);
      expect([job.status, job.attempts]).toEqual(['succeeded', 1]);
      expect(jobStreams).toBe(0);
    } finally {
      await closeQuietly(failing.server);
    }
  });

  test('no replica reachable (the only one restarting): the job waits without spending attempts and succeeds once it is back', async () => {
    const port = await freePort();
    // The default breaker cooldown (30 s): the runner must retry an unreachable service every 2 s, not after the
    // cooldown (it did, and the wait below for two tries timed out).
    const { handle, token } = await gateway([`http://127.0.0.1:${port}`]);
    const auth = { Authorization: `Bearer ${token}` };
    const res = await request(handle.app).post(`${API}/jobs`).set(auth).field('model', 'nsm-1').attach('file', INPUT);
    expect(res.status).toBe(202);
    const id = res.body.id as string;
    // Several tries meet the closed port; none counts as an attempt (before, each did: 3 and the job failed).
    await until(async () => (logs.filter((l) => l.includes(id) && /no model service reachable/.test(l)).length >= 2 ? true : undefined), 30_000, 100);
    const down = (await request(handle.app).get(`${API}/jobs/${id}`).set(auth)).body as JobView;
    expect(down).toMatchObject({ status: 'queued', attempts: 0 });
    // The replica comes back on its port.
    const back = await startModelServiceServer(serviceConfig, engine, TOKEN, () => undefined);
    const relay = http.createServer((req, res) => {
      const up = http.request(`${back.url}${req.url}`, { method: req.method, headers: req.headers }, (r) => {
        res.writeHead(r.statusCode ?? 502, r.headers);
        r.pipe(res);
      });
      up.on('error', () => res.destroy());
      req.pipe(up);
    });
    await new Promise<void>((resolve) => relay.listen(port, '127.0.0.1', resolve));
    try {
      const job = await until(async () => {
        const j = (await request(handle.app).get(`${API}/jobs/${id}`).set(auth)).body as JobView;
        return j.status === 'succeeded' || j.status === 'failed' ? j : undefined;
      }, 60_000, 100);
      expect([job.status, job.attempts]).toEqual(['succeeded', 1]);
    } finally {
      await closeQuietly(relay);
      await closeServer(back.server);
    }
  });
});
