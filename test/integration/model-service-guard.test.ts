// The model service's front door (issue 9 items 4 and 8), with the real engine, ffmpeg and SQLite:
//   - it answers only the gateway: `Authorization: Bearer <MODEL_SERVICE_TOKEN>` (in-process: a random secret per
//     start); the standalone one refuses to start without the variable and binds 127.0.0.1 unless
//     MODEL_SERVICE_HOST says otherwise;
//   - admission control: beyond `workers × MODEL_QUEUE_PER_WORKER` requests at once the answer is 503
//     upstream_unavailable with Retry-After at once, before the upload is read, with no charge, and the breaker
//     stays closed.
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { createApp, type AppHandle } from '../../src/app';
import { PROJECT_ROOT, type Config } from '../../src/config';
import { fixture, listen, closeQuietly, multipartBody, rawRequest, testConfig } from '../helpers/service-helpers';
import { freePort } from '../../scripts/lib/free-port';

const MAIN = path.join(PROJECT_ROOT, 'dist/src/model-service-main.js');
const DENOISE = '/v1/noise-suppressor/denoise';
const MONO = fs.readFileSync(fixture('speech-noisy-16k-mono.wav'));

function nonLoopbackIPv4(): string | null {
  for (const list of Object.values(os.networkInterfaces())) {
    for (const a of list ?? []) if (a.family === 'IPv4' && !a.internal) return a.address;
  }
  return null;
}

/** Spawns the standalone model service; resolves with its output once it printed `ready` or exited. */
function startStandalone(env: NodeJS.ProcessEnv, dataDir: string): Promise<{ code: number | null; output: string; kill: () => void }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [MAIN], {
      env: { PATH: process.env.PATH, DATA_DIR: dataDir, WORKERS: '1', NODE_ENV: 'test', ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let output = '';
    const kill = () => {
      if (child.exitCode === null) child.kill('SIGKILL');
    };
    const timer = setTimeout(() => resolve({ code: null, output: output + '\n[still running after 20 s]', kill }), 20_000);
    const onData = (d: Buffer) => {
      output += d.toString();
      if (/Model service ready/.test(output)) {
        clearTimeout(timer);
        resolve({ code: null, output, kill });
      }
    };
    child.stdout.on('data', onData);
    child.stderr.on('data', onData);
    // 'close', not 'exit': 'exit' can come before the child's last stderr chunk (the refusal this test reads).
    child.on('close', (code) => {
      clearTimeout(timer);
      resolve({ code, output, kill });
    });
  });
}

describe('model service authentication', () => {
  let config: Config;
  let handle: AppHandle;
  let token: string;

  beforeAll(async () => {
    config = testConfig({ workers: 1 });
    handle = await createApp(config, { log: () => undefined });
    const ws = await handle.store.createWorkspace('acme', 'scale');
    token = (await handle.store.createToken({ workspaceId: ws.id, name: 't', scopes: ['*'], allowedIps: [], expiresAt: null })).token;
  });
  afterAll(async () => {
    await handle.close();
    fs.rmSync(config.dataDir, { recursive: true, force: true });
  });

  test('the in-process model service refuses calls without the per-start secret; the gateway still gets through', async () => {
    const { body, contentType } = multipartBody([{ name: 'file', filename: 'a.wav', data: MONO }]);
    const direct = await rawRequest(`${handle.modelServiceUrl}/denoise`, {
      method: 'POST',
      headers: { 'Content-Type': contentType, 'Content-Length': body.length },
      body,
    });
    expect(direct.status).toBe(401);
    expect(JSON.parse(direct.body.toString()).detail).toMatch(/MODEL_SERVICE_TOKEN/);
    for (const auth of ['Bearer wrong-token', 'Basic Zm9vOmJhcg==', 'Bearer ']) {
      const res = await rawRequest(`${handle.modelServiceUrl}/health`, { headers: { Authorization: auth } });
      expect(res.status).toBe(401);
    }

    const viaGateway = await rawRequest(`http://127.0.0.1:${await gatewayPort(handle)}${DENOISE}`, {
      method: 'POST',
      headers: { Authorization: `Bearer ${token}`, 'Content-Type': contentType, 'Content-Length': body.length },
      body,
    });
    expect(viaGateway.status).toBe(200);
  });
});

let gatewayServer: http.Server | null = null;
async function gatewayPort(handle: AppHandle): Promise<number> {
  if (gatewayServer) await closeQuietly(gatewayServer);
  const started = await listen(handle.app);
  gatewayServer = started.server;
  return Number(new URL(started.url).port);
}
afterAll(async () => {
  if (gatewayServer) await closeQuietly(gatewayServer);
});

describe('standalone model service', () => {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'ms-standalone-'));
  afterAll(() => fs.rmSync(dataDir, { recursive: true, force: true }));

  test('refuses to start without MODEL_SERVICE_TOKEN (or with a short one)', async () => {
    for (const env of [{}, { MODEL_SERVICE_TOKEN: 'short' }]) {
      const started = Date.now();
      const r = await startStandalone({ MODEL_SERVICE_PORT: String(await freePort()), ...env }, dataDir);
      r.kill();
      expect(r.code).not.toBe(0);
      expect(r.code).not.toBeNull();
      expect(r.output).toMatch(/MODEL_SERVICE_TOKEN must be set/);
      expect(Date.now() - started).toBeLessThan(10_000);
    }
  });

  test('binds 127.0.0.1 by default even when HOST is 0.0.0.0; MODEL_SERVICE_HOST opens it up', async () => {
    const token = 'standalone-test-token-0123456789';
    const port = await freePort();
    const r = await startStandalone({ MODEL_SERVICE_TOKEN: token, MODEL_SERVICE_PORT: String(port), HOST: '0.0.0.0' }, dataDir);
    try {
      expect(r.output).toMatch(new RegExp(`listening on http://127\\.0\\.0\\.1:${port}`));
      const ok = await rawRequest(`http://127.0.0.1:${port}/health`, { headers: { Authorization: `Bearer ${token}` } });
      expect(ok.status).toBe(200);
      const anon = await rawRequest(`http://127.0.0.1:${port}/health`, {});
      expect(anon.status).toBe(401);
      const ip = nonLoopbackIPv4();
      if (ip) {
        await expect(rawRequest(`http://${ip}:${port}/health`, {})).rejects.toThrow(/ECONNREFUSED/);
      }
    } finally {
      r.kill();
    }

    const ip = nonLoopbackIPv4();
    if (!ip) return; // no non-loopback interface on this machine: nothing more to show
    const port2 = await freePort();
    const open = await startStandalone({ MODEL_SERVICE_TOKEN: token, MODEL_SERVICE_PORT: String(port2), MODEL_SERVICE_HOST: '0.0.0.0' }, dataDir);
    try {
      const res = await rawRequest(`http://${ip}:${port2}/health`, { headers: { Authorization: `Bearer ${token}` } });
      expect(res.status).toBe(200);
    } finally {
      open.kill();
    }
  });
});

describe('admission control', () => {
  let config: Config;
  let handle: AppHandle;
  let url: string;
  let server: http.Server;

  beforeAll(async () => {
    // One worker, one request slot; the breaker would open after 2 failures.
    config = testConfig({ workers: 1, modelQueuePerWorker: 1, breakerThreshold: 2, clientMinBytesPerSecond: 100 });
    handle = await createApp(config, { log: () => undefined });
    const started = await listen(handle.app);
    server = started.server;
    url = started.url;
  });
  afterAll(async () => {
    await closeQuietly(server);
    await handle.close();
    fs.rmSync(config.dataDir, { recursive: true, force: true });
  });

  test('beyond the bound: 503 upstream_unavailable + Retry-After at once, upload unread, no charge, breaker closed', async () => {
    const ws = await handle.store.createWorkspace('busy', 'scale');
    const token = (await handle.store.createToken({ workspaceId: ws.id, name: 't', scopes: ['*'], allowedIps: [], expiresAt: null })).token;
    const { body, contentType } = multipartBody([{ name: 'file', filename: 'a.wav', data: MONO }]);
    const headers = { Authorization: `Bearer ${token}`, 'Content-Type': contentType, 'Content-Length': body.length };

    // Call A holds the only slot: its upload trickles in over ~1.5 s.
    const first = new Promise<{ status: number }>((resolve, reject) => {
      const req = http.request(`${url}${DENOISE}`, { method: 'POST', headers });
      req.on('response', (res) => {
        res.resume();
        res.on('end', () => resolve({ status: res.statusCode ?? 0 }));
      });
      req.on('error', reject);
      const parts = 15;
      const size = Math.ceil(body.length / parts);
      let i = 0;
      const tick = setInterval(() => {
        req.write(body.subarray(i * size, (i + 1) * size));
        if (++i >= parts) {
          clearInterval(tick);
          req.end();
        }
      }, 100);
    });
    await new Promise((r) => setTimeout(r, 300));

    // Five more while it runs: each declares a 50 MB upload but sends only its headers and a few bytes.
    const busy = await Promise.all(
      Array.from(
        { length: 5 },
        () =>
          new Promise<{ status: number; retryAfter: string | undefined; type: string; ms: number }>((resolve, reject) => {
            const t0 = Date.now();
            const req = http.request(`${url}${DENOISE}`, {
              method: 'POST',
              headers: { ...headers, 'Content-Length': 50 * 1024 * 1024 },
            });
            req.on('response', (res) => {
              let text = '';
              res.on('data', (c) => (text += c));
              res.on('end', () => {
                req.destroy();
                resolve({ status: res.statusCode ?? 0, retryAfter: res.headers['retry-after'] as string | undefined, type: JSON.parse(text).error.type, ms: Date.now() - t0 });
              });
            });
            req.on('error', reject);
            req.write(body.subarray(0, 100));
          }),
      ),
    );
    for (const r of busy) {
      expect(r.status).toBe(503);
      expect(r.type).toBe('upstream_unavailable');
      expect(Number(r.retryAfter)).toBeGreaterThanOrEqual(1);
      expect(r.ms).toBeLessThan(1000);
    }
    expect((await first).status).toBe(200);
    expect(handle.forwarder.breaker.snapshot()).toEqual({ state: 'closed', consecutiveFailures: 0 });

    // The slot is free again.
    const after = await rawRequest(`${url}${DENOISE}`, { method: 'POST', headers, body });
    expect(after.status).toBe(200);
    // Only the two calls that were served cost a credit.
    expect(await handle.store.creditsUsed(ws.id, new Date())).toBe(2);
    const health = await rawRequest(`${url}/v1/noise-suppressor/health`, { headers: { Authorization: `Bearer ${token}` } });
    expect(JSON.parse(health.body.toString()).admission).toMatchObject({ capacity: 1, rejected: 5 });
  });
});
