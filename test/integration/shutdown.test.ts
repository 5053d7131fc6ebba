// SIGTERM with work in flight (issue 9 item 17): the real `npm start` server process. What finishes within
// SHUTDOWN_GRACE_MS finishes; what cannot (a long denoise, an upload still coming in) gets 503 upstream_unavailable
// with Retry-After instead of an empty reply, is refunded, and the process exits 0.
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { PROJECT_ROOT, type Config } from '../../src/config';
import { openSqliteStore } from '../../src/store/gateway/sqlite';
import type { GatewayStore } from '../../src/store/gateway/types';
import { eventually, multipartBody, noiseWav, rawRequest, testConfig } from '../helpers/service-helpers';
import { freePort } from '../../scripts/lib/free-port';

const SERVER = path.join(PROJECT_ROOT, 'dist/src/server.js');
const DENOISE = '/v1/noise-suppressor/denoise';

interface Reply {
  status: number;
  retryAfter?: string;
  type?: string;
  requestId?: string;
  error?: string;
}

function post(url: string, headers: Record<string, string | number>, body: Buffer, opts: { stallAfter?: number } = {}): Promise<Reply> {
  return new Promise((resolve) => {
    const req = http.request(url, { method: 'POST', headers });
    req.on('response', (res) => {
      let text = '';
      res.on('data', (c) => (text += c));
      res.on('end', () => {
        let type: string | undefined;
        try {
          type = JSON.parse(text).error?.type;
        } catch {
          type = undefined;
        }
        resolve({
          status: res.statusCode ?? 0,
          retryAfter: res.headers['retry-after'] as string | undefined,
          type,
          requestId: res.headers['x-request-id'] as string | undefined,
        });
      });
      res.on('error', (e) => resolve({ status: res.statusCode ?? 0, error: e.message }));
    });
    req.on('error', (e) => resolve({ status: 0, error: e.message }));
    if (opts.stallAfter !== undefined) req.write(body.subarray(0, opts.stallAfter));
    else req.end(body);
  });
}

describe('SIGTERM under load', () => {
  let config: Config;
  let store: GatewayStore;
  let child: ChildProcess;
  let output = '';

  beforeAll(async () => {
    config = testConfig();
    store = openSqliteStore(config);
  });
  afterAll(async () => {
    if (child && child.exitCode === null) child.kill('SIGKILL');
    await store.close();
    fs.rmSync(config.dataDir, { recursive: true, force: true });
  });

  test('calls that cannot finish within the grace get 503 + Retry-After, are refunded; the process exits 0', async () => {
    const ws = await store.createWorkspace('acme', 'scale');
    const { token } = await store.createToken({ workspaceId: ws.id, name: 't', scopes: ['*'], allowedIps: [], expiresAt: null });
    const port = await freePort();
    child = spawn(process.execPath, [SERVER], {
      env: {
        PATH: process.env.PATH,
        DATA_DIR: config.dataDir,
        PORT: String(port),
        HOST: '127.0.0.1',
        WORKERS: '1',
        ADMIN_SECRET: 'shutdown-test-admin-secret',
        LOG_REQUESTS: 'false',
        SHUTDOWN_GRACE_MS: '500',
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    child.stdout!.on('data', (d: Buffer) => (output += d.toString()));
    child.stderr!.on('data', (d: Buffer) => (output += d.toString()));
    const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
    await eventually(() => /listening on/.test(output) || child.exitCode !== null, 30_000).catch(() => undefined);
    if (!/listening on/.test(output)) throw new Error(`server did not start:\n${output}`);
    const url = `http://127.0.0.1:${port}${DENOISE}`;

    // A: four minutes of audio through the slowest model (several seconds of work); B: an upload that stalls.
    const long = multipartBody([
      { name: 'model', value: 'nsm-4' },
      { name: 'file', filename: 'long.wav', data: noiseWav(240) },
    ]);
    const a = post(url, { Authorization: `Bearer ${token}`, 'Content-Type': long.contentType, 'Content-Length': long.body.length }, long.body);
    const short = multipartBody([{ name: 'file', filename: 'b.wav', data: noiseWav(2) }]);
    const b = post(
      url,
      { Authorization: `Bearer ${token}`, 'Content-Type': short.contentType, 'Content-Length': short.body.length },
      short.body,
      { stallAfter: 1000 },
    );
    await new Promise((r) => setTimeout(r, 1000));
    const signalled = Date.now();
    child.kill('SIGTERM');

    const [ra, rb] = await Promise.all([a, b]);
    for (const r of [ra, rb]) {
      expect(r).toMatchObject({ status: 503, type: 'upstream_unavailable', retryAfter: '5' });
    }
    expect(await exited).toBe(0);
    expect(Date.now() - signalled).toBeLessThan(15_000);
    expect(output).toMatch(/shut down cleanly/);
    // No new connections once stopping.
    await expect(rawRequest(`http://127.0.0.1:${port}/v1/noise-suppressor/models`, {})).rejects.toThrow(/ECONNREFUSED/);

    // Nothing charged; both calls are in the request log as 503.
    expect(await store.creditsUsed(ws.id, new Date())).toBe(0);
    const rows = await store.queryRequests({ workspaceId: ws.id });
    expect(rows.map((r) => r.status).sort()).toEqual([503, 503]);
  });
});
