// The gateway → model-service boundary with a REAL second process: `node dist/src/model-service-main.js`,
// and gateways built by createApp with config.modelServiceUrl pointing at it.
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import request from 'supertest';
import { createApp, type AppHandle } from '../../src/app';
import { PROJECT_ROOT, type Config } from '../../src/config';
import { openSqliteStore } from '../../src/store/gateway/sqlite';
import type { GatewayStore } from '../../src/store/gateway/types';
import { createToken, fixture, noiseWav, rawRequest, testConfig } from '../helpers/service-helpers';
import { freePort } from '../../scripts/lib/free-port';

const API = '/v1/noise-suppressor';
const STEREO_44K = fixture('speech-noisy-44k1-stereo.wav');
const MODEL_TOKEN = 'upstream-process-test-token-0123456789';

describe('gateway → real model-service process', () => {
  let config: Config;
  let store: GatewayStore;
  let token: string;
  let child: ChildProcess;
  let serviceUrl: string;
  let childOutput = '';
  const startup: Array<{ status: number; body: string }> = [];
  /** /readyz and /healthz answers polled just before each /health poll while the service started. */
  const probesDuringStartup: Array<{ readyz: number; healthz: number; body: string }> = [];
  const apps: AppHandle[] = [];

  async function gateway(overrides: Partial<Config>): Promise<AppHandle> {
    const handle = await createApp({ ...config, modelServiceUrl: serviceUrl, modelServiceToken: MODEL_TOKEN, ...overrides }, { store, log: () => undefined });
    apps.push(handle);
    return handle;
  }

  beforeAll(async () => {
    config = testConfig();
    store = openSqliteStore(config);
    token = await createToken(store);
    const port = await freePort();
    serviceUrl = `http://127.0.0.1:${port}`;
    child = spawn(process.execPath, [path.join(PROJECT_ROOT, 'dist/src/model-service-main.js')], {
      env: {
        ...process.env,
        PORT: String(await freePort()),
        MODEL_SERVICE_PORT: String(port),
        HOST: '127.0.0.1',
        DATA_DIR: config.dataDir,
        WORKERS: '1',
        NODE_ENV: 'test',
        MODEL_SERVICE_TOKEN: MODEL_TOKEN,
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    child.stdout!.on('data', (d: Buffer) => (childOutput += d.toString()));
    child.stderr!.on('data', (d: Buffer) => (childOutput += d.toString()));
    // Poll from the first moment: the service listens at once and says "starting" until the engine is ready.
    const deadline = Date.now() + 30_000;
    for (;;) {
      if (Date.now() > deadline) throw new Error(`model service did not start:\n${childOutput}`);
      try {
        const readyz = await rawRequest(`${serviceUrl}/readyz`, {});
        const healthz = await rawRequest(`${serviceUrl}/healthz`, {});
        probesDuringStartup.push({ readyz: readyz.status, healthz: healthz.status, body: readyz.body.toString() });
        const res = await rawRequest(`${serviceUrl}/health`, { headers: { Authorization: `Bearer ${MODEL_TOKEN}` } });
        startup.push({ status: res.status, body: res.body.toString() });
        if (res.status === 200) break;
      } catch {
        // not listening yet
      }
      await new Promise((r) => setTimeout(r, 10));
    }
  });

  afterAll(async () => {
    for (const a of apps) await a.close();
    if (child.exitCode === null) child.kill('SIGKILL');
    await store.close();
    fs.rmSync(config.dataDir, { recursive: true, force: true });
  });

  const auth = () => ({ Authorization: `Bearer ${token}` });

  test('while the engine starts the model service answers 503 {"detail":"starting",...}, then 200', async () => {
    const before = startup.slice(0, -1);
    expect(startup[startup.length - 1].status).toBe(200);
    expect(before.length).toBeGreaterThan(0);
    for (const r of before) {
      expect(r.status).toBe(503);
      expect(JSON.parse(r.body)).toEqual({ detail: 'starting', type: 'unavailable', request_id: expect.stringMatching(/^req_/) });
    }
  });

  test('its probes: alive from the first moment, ready (200) only once the engine is', async () => {
    // Every poll whose /health said "starting" came after a /readyz poll, which therefore said 503 too.
    const starting = probesDuringStartup.slice(0, startup.length - 1);
    expect(starting.length).toBeGreaterThan(0);
    for (const p of starting) {
      expect(p).toMatchObject({ readyz: 503, healthz: 200 });
      expect(JSON.parse(p.body)).toEqual({
        status: 'not_ready',
        failed: { engine: 'starting' },
        error: { type: 'not_ready', message: 'not ready: engine: starting', request_id: expect.stringMatching(/^req_[0-9a-f]{32}$/) },
      });
    }
    const ready = await rawRequest(`${serviceUrl}/readyz`, {});
    expect([ready.status, ready.body.toString()]).toEqual([200, '{"status":"ready"}']);
  });

  test("its own GET /metrics: engine state and the audio it processed; the gateway's /readyz asks it", async () => {
    const handle = await gateway({});
    expect((await request(handle.app).get('/readyz')).body).toEqual({ status: 'ready' });
    const res = await request(handle.app).post(`${API}/denoise`).set(auth()).field('model', 'nsm-1').attach('file', STEREO_44K);
    expect(res.status).toBe(200);
    const seconds = JSON.parse(res.headers['x-ns-stats']).duration_s;
    const metrics = (await rawRequest(`${serviceUrl}/metrics`, {})).body.toString();
    expect(metrics).toMatch(/^ns_engine_workers\{service="model-service"\} 1$/m);
    expect(metrics).toMatch(/^ns_engine_busy_workers\{service="model-service"\} 0$/m);
    const audio = /^ns_audio_seconds_total\{model="nsm-1",service="model-service"\} (\S+)$/m.exec(metrics);
    expect(Number(audio?.[1])).toBeCloseTo(seconds, 3);
    expect(metrics).toMatch(/^ns_process_resident_memory_bytes\{service="model-service"\} \d+/m);
    // The gateway's registry has the gateway's side only: no engine, no audio seconds counted twice.
    const gw = (await request(handle.app).get('/metrics')).text;
    expect(gw).toMatch(/^ns_http_requests_total\{endpoint="denoise",method="POST",status="200",error_type="none",service="gateway"\} 1$/m);
    expect(gw).not.toMatch(/^ns_engine_workers/m);
    expect(gw).not.toMatch(/^ns_audio_seconds_total\{/m);
  });

  test('forwarded calls work end to end and carry X-Gateway-Upstream-Ms', async () => {
    const handle = await gateway({});
    expect(handle.engine).toBeNull(); // the remote service does the work
    expect(handle.modelServiceUrl).toBe(serviceUrl);
    const res = await request(handle.app).post(`${API}/denoise`).set(auth()).field('response', 'json').attach('file', STEREO_44K);
    expect(res.status).toBe(200);
    expect(res.body.filename).toBe('speech-noisy-44k1-stereo_denoised.wav');
    expect(Number(res.headers['x-gateway-upstream-ms'])).toBeGreaterThan(0);
    expect(JSON.parse(res.headers['x-ns-stats']).processing_s).toBeGreaterThan(0);

    const health = await request(handle.app).get(`${API}/health`).set(auth());
    expect(health.status).toBe(200);
    expect(health.body.workers.size).toBe(1);
    expect(health.headers['x-gateway-upstream-ms']).toMatch(/^\d+$/);

    const bad = await request(handle.app).post(`${API}/denoise`).set(auth()).field('model', 'nope').attach('file', STEREO_44K);
    expect(bad.status).toBe(400);
    expect(bad.body.detail).toMatch(/unknown model/);
    expect(bad.headers['x-gateway-upstream-ms']).toMatch(/^\d+$/);
  });

  test('small timeout → 504 upstream_timeout; repeated failures open the circuit; after the cool-down a trial call closes it', async () => {
    const handle = await gateway({ upstreamTimeoutMs: 150, breakerThreshold: 2, breakerCooldownMs: 1000 });
    // A minute of stereo 48 kHz audio through nsm-4 takes seconds on any machine, far longer than 150 ms (the 3 s
    // fixture did not: a fast machine answered it within the timeout).
    const long = noiseWav(60, 48000, 2);
    for (let i = 0; i < 2; i++) {
      const res = await request(handle.app).post(`${API}/denoise`).set(auth()).field('model', 'nsm-4').attach('file', long, 'long.wav');
      expect(res.status).toBe(504);
      expect(res.body.error.type).toBe('upstream_timeout');
    }
    const open = await request(handle.app).get(`${API}/health`).set(auth());
    expect(open.status).toBe(503);
    expect(open.body.error.type).toBe('circuit_open');
    expect(open.headers['retry-after']).toBe('1');
    expect(open.headers['x-request-id']).toBe(open.body.error.request_id);

    await new Promise((r) => setTimeout(r, 1100));
    // The trial call (fast) goes through and closes the circuit.
    const trial = await request(handle.app).get(`${API}/health`).set(auth());
    expect(trial.status).toBe(200);
    expect(handle.forwarder.breaker.snapshot().state).toBe('closed');
    expect((await request(handle.app).get(`${API}/models`).set(auth())).status).toBe(200);

    // The request log kept the error types.
    const logged = await store.queryRequests({ errorType: 'upstream_timeout' });
    expect(logged.length).toBeGreaterThanOrEqual(2);
  });

  test('model service killed → 502 upstream_unavailable, then circuit_open after the threshold', async () => {
    const handle = await gateway({ breakerThreshold: 2, breakerCooldownMs: 60_000 });
    const exited = new Promise((r) => child.once('exit', r));
    child.kill('SIGKILL');
    await exited;
    for (let i = 0; i < 2; i++) {
      const res = await request(handle.app).get(`${API}/models`).set(auth());
      expect(res.status).toBe(502);
      expect(res.body.error.type).toBe('upstream_unavailable');
      expect(res.body.error.message).toMatch(/ECONNREFUSED/);
    }
    const res = await request(handle.app).post(`${API}/denoise`).set(auth()).attach('file', STEREO_44K);
    expect(res.status).toBe(503);
    expect(res.body.error.type).toBe('circuit_open');
    expect(Number(res.headers['retry-after'])).toBe(60);
    // Not ready: the one upstream's breaker is open.
    const ready = await request(handle.app).get('/readyz');
    expect(ready.status).toBe(503);
    expect(ready.body.failed.model_service).toMatch(/circuit breaker is open/);
    const metrics = (await request(handle.app).get('/metrics')).text;
    expect(metrics).toContain(`ns_upstream_breaker_state{upstream="${serviceUrl}",state="open",service="gateway"} 1`);
    // A gateway whose breaker is still closed asks the dead service and reports why.
    const other = await gateway({});
    const refused = await request(other.app).get('/readyz');
    expect(refused.status).toBe(503);
    expect(refused.body.failed.model_service).toMatch(/ECONNREFUSED/);
  });
});
