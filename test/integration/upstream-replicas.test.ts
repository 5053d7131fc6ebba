// Several model services behind one gateway (issue 12 part 3), with real processes: MODEL_SERVICE_URL lists two
// `node dist/src/model-service-main.js` replicas. Calls are balanced by fewest in flight; a replica killed with
// kill -9 under load costs only the calls in flight on it at that moment (refunded), the rest move to the other
// replica (a connection that failed before any body was sent is retried there); a stopped (SIGSTOP) replica is
// skipped; restarted, it takes traffic again.
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { createApp, type AppHandle } from '../../src/app';
import { PROJECT_ROOT, type Config } from '../../src/config';
import { openSqliteStore } from '../../src/store/gateway/sqlite';
import type { GatewayStore } from '../../src/store/gateway/types';
import { closeQuietly, listen, multipartBody, noiseWav, rawRequest, testConfig } from '../helpers/service-helpers';
import { freePort } from '../../scripts/lib/free-port';

const MAIN = path.join(PROJECT_ROOT, 'dist/src/model-service-main.js');
const TOKEN = 'replica-test-token-0123456789abcdef';
const DENOISE = '/v1/noise-suppressor/denoise';

interface Replica {
  port: number;
  url: string;
  child: ChildProcess;
}

describe('two model-service replicas behind one gateway', () => {
  let config: Config;
  let store: GatewayStore;
  const replicas: Replica[] = [];
  const apps: AppHandle[] = [];
  const servers: http.Server[] = [];
  const { body, contentType } = multipartBody([{ name: 'file', filename: 'a.wav', data: noiseWav(1) }]);

  async function startReplica(port: number): Promise<Replica> {
    const child = spawn(process.execPath, [MAIN], {
      env: { PATH: process.env.PATH, DATA_DIR: config.dataDir, WORKERS: '1', NODE_ENV: 'test', MODEL_SERVICE_TOKEN: TOKEN, MODEL_SERVICE_PORT: String(port) },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`replica did not start:\n${out}`)), 30_000);
      const onData = (d: Buffer) => {
        out += d.toString();
        if (/Model service ready/.test(out)) {
          clearTimeout(timer);
          resolve();
        }
      };
      child.stdout!.on('data', onData);
      child.stderr!.on('data', onData);
      child.on('exit', () => clearTimeout(timer));
    });
    return { port, url: `http://127.0.0.1:${port}`, child };
  }

  /** SIGKILL and wait for the exit (at once when it already exited). */
  async function kill9(r: Replica): Promise<void> {
    if (r.child.exitCode !== null || r.child.signalCode !== null) return;
    const exited = new Promise((res) => r.child.once('exit', res));
    r.child.kill('SIGKILL');
    await exited;
  }

  async function gateway(overrides: Partial<Config>): Promise<{ handle: AppHandle; url: string }> {
    const handle = await createApp(
      { ...config, modelServiceUrl: replicas.map((r) => r.url).join(','), modelServiceToken: TOKEN, ...overrides },
      { store, log: () => undefined },
    );
    apps.push(handle);
    const started = await listen(handle.app);
    servers.push(started.server);
    return { handle, url: started.url };
  }

  async function workspaceToken(): Promise<{ token: string; workspaceId: string }> {
    const ws = await store.createWorkspace(`ws-${Math.random().toString(36).slice(2)}`, 'scale');
    const { token } = await store.createToken({ workspaceId: ws.id, name: 't', scopes: ['*'], allowedIps: [], expiresAt: null });
    return { token, workspaceId: ws.id };
  }

  function denoise(url: string, token: string): Promise<{ status: number; type?: string; error?: string }> {
    return rawRequest(`${url}${DENOISE}`, {
      method: 'POST',
      headers: { Authorization: `Bearer ${token}`, 'Content-Type': contentType, 'Content-Length': body.length },
      body,
    }).then(
      (r) => {
        let type: string | undefined;
        try {
          type = JSON.parse(r.body.toString()).error?.type;
        } catch {
          type = undefined;
        }
        return { status: r.status, type };
      },
      (e: Error) => ({ status: 0, error: e.message }),
    );
  }

  beforeAll(async () => {
    config = testConfig({ workers: 1 });
    store = openSqliteStore(config);
    const ports = [await freePort(), await freePort()];
    replicas.push(...(await Promise.all(ports.map((p) => startReplica(p)))));
  });

  afterAll(async () => {
    for (const s of servers) await closeQuietly(s);
    for (const a of apps) await a.close();
    for (const r of replicas) {
      if (r.child.exitCode === null && r.child.signalCode === null) {
        r.child.kill('SIGCONT');
        r.child.kill('SIGKILL');
      }
    }
    await store.close();
    fs.rmSync(config.dataDir, { recursive: true, force: true });
  });

  test('kill -9 under load: only the calls in flight on it fail, refunded; restarted, it takes traffic again', async () => {
    const { handle, url } = await gateway({ upstreamHealthIntervalMs: 200, breakerThreshold: 3, breakerCooldownMs: 1000 });
    const [a, b] = handle.forwarder.replicas;
    const { token, workspaceId } = await workspaceToken();

    // Steady load: 4 clients, each calling back to back until told to stop.
    let stop = false;
    const results: Array<{ status: number; type?: string; error?: string }> = [];
    const client = async () => {
      while (!stop) results.push(await denoise(url, token));
    };
    const load = Promise.all([client(), client(), client(), client()]);

    await new Promise((r) => setTimeout(r, 1500));
    expect(a.sent).toBeGreaterThan(0); // both replicas are in use (fewest in flight)
    expect(b.sent).toBeGreaterThan(0);
    const doneBeforeKill = results.length;
    const inFlightOnA = a.inFlight;
    await kill9(replicas[0]);
    await new Promise((r) => setTimeout(r, 2000));
    stop = true;
    await load;

    const afterKill = results.slice(doneBeforeKill);
    const failed = afterKill.filter((r) => r.status !== 200);
    expect(results.slice(0, doneBeforeKill).every((r) => r.status === 200)).toBe(true);
    expect(afterKill.length).toBeGreaterThan(failed.length); // the load went on, on replica b
    expect(failed.length).toBeLessThanOrEqual(inFlightOnA);
    for (const f of failed) expect(f).toMatchObject({ status: 502, type: 'upstream_unavailable' });
    // Credits: exactly one per successful call (the failed ones were refunded).
    const ok = results.filter((r) => r.status === 200).length;
    expect(await store.creditsUsed(workspaceId, new Date())).toBe(ok);
    expect(a.healthy).toBe(false);

    // Restart on the same port: health checks bring it back, and it serves again.
    replicas[0] = await startReplica(replicas[0].port);
    for (let i = 0; i < 100 && !(a.healthy && a.breaker.snapshot().state === 'closed'); i++) await new Promise((r) => setTimeout(r, 100));
    expect(a.healthy).toBe(true);
    expect(a.breaker.snapshot().state).toBe('closed');
    const sentBefore = a.sent;
    const again = await Promise.all(Array.from({ length: 6 }, () => denoise(url, token)));
    expect(again.every((r) => r.status === 200)).toBe(true);
    expect(a.sent).toBeGreaterThan(sentBefore);
  });

  test('before any health check notices, a refused connection is retried on the other replica', async () => {
    // Health checks too rare to matter here: only the retry can save these calls.
    const { handle, url } = await gateway({ upstreamHealthIntervalMs: 600_000, breakerThreshold: 100 });
    const [a] = handle.forwarder.replicas;
    const { token } = await workspaceToken();
    await new Promise((r) => setTimeout(r, 300)); // the start-up health check has seen both replicas alive
    expect(a.healthy).toBe(true);
    await kill9(replicas[0]);
    // As many at once as the surviving replica admits (1 worker × MODEL_QUEUE_PER_WORKER 4).
    const results = await Promise.all(Array.from({ length: 4 }, () => denoise(url, token)));
    expect(results.map((r) => r.status)).toEqual([200, 200, 200, 200]);
    expect(a.breaker.snapshot().consecutiveFailures).toBeGreaterThan(0); // it was tried and failed over
    replicas[0] = await startReplica(replicas[0].port);
  });

  test('a stopped (SIGSTOP) replica: no 100 Continue in time → the call goes to the other replica', async () => {
    const { handle, url } = await gateway({ upstreamHealthIntervalMs: 600_000, upstreamConnectTimeoutMs: 500, breakerThreshold: 100 });
    const [a] = handle.forwarder.replicas;
    const { token } = await workspaceToken();
    await new Promise((r) => setTimeout(r, 300)); // the start-up health check has seen both replicas alive
    expect(a.healthy).toBe(true);
    replicas[0].child.kill('SIGSTOP');
    try {
      const results = await Promise.all(Array.from({ length: 4 }, () => denoise(url, token)));
      expect(results.map((r) => r.status)).toEqual([200, 200, 200, 200]);
      expect(a.breaker.snapshot().consecutiveFailures).toBeGreaterThan(0);
    } finally {
      replicas[0].child.kill('SIGCONT');
    }
  });

  test('no replica can take the call → 502 upstream_unavailable, then circuit_open once every breaker is open', async () => {
    const { url } = await gateway({ upstreamHealthIntervalMs: 600_000, breakerThreshold: 1, breakerCooldownMs: 60_000 });
    const { token, workspaceId } = await workspaceToken();
    for (const r of replicas) await kill9(r);
    const first = await denoise(url, token);
    expect(first).toMatchObject({ status: 502, type: 'upstream_unavailable' });
    const next = await denoise(url, token);
    expect(next).toMatchObject({ status: 503, type: 'circuit_open' });
    expect(await store.creditsUsed(workspaceId, new Date())).toBe(0);
  });
});
