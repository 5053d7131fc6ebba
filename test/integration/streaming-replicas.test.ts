// Live streams with remote model services (issue 28, scale-out): MODEL_SERVICE_URL lists two real
// `node dist/src/model-service-main.js` processes; the gateway relays each client's WebSocket to one replica's
// /internal/stream, where it stays. Streams spread over both replicas and give the same audio as /denoise; a replica
// killed mid-stream ends only its own streams (error message + 1011), billed for what was streamed; a replica that
// stops reading makes the gateway stop reading its client (bounded buffering); with no replica the upgrade is refused.
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import type http from 'node:http';
import path from 'node:path';
import WebSocket from 'ws';
import { createApp, type AppHandle } from '../../src/app';
import { PROJECT_ROOT, type Config } from '../../src/config';
import { openSqliteStore } from '../../src/store/gateway/sqlite';
import type { GatewayStore } from '../../src/store/gateway/types';
import { closeQuietly, eventually, fixture, multipartBody, rawRequest, testConfig } from '../helpers/service-helpers';
import { refusal, serveApp, StreamClient, wavData } from '../helpers/streaming-helpers';
import { freePort } from '../../scripts/lib/free-port';

const MAIN = path.join(PROJECT_ROOT, 'dist/src/model-service-main.js');
const TOKEN = 'stream-replica-test-token-0123456789';

interface Replica {
  port: number;
  url: string;
  child: ChildProcess;
}

describe('live streams relayed to model-service replicas', () => {
  let config: Config;
  let store: GatewayStore;
  const replicas: Replica[] = [];
  const apps: AppHandle[] = [];
  const servers: http.Server[] = [];
  const input = wavData(fs.readFileSync(fixture('speech-noisy-16k-mono.wav')));

  async function startReplica(port: number, env: Record<string, string> = {}): Promise<Replica & { output: () => string }> {
    const child = spawn(process.execPath, [MAIN], {
      env: { PATH: process.env.PATH, DATA_DIR: config.dataDir, WORKERS: '1', NODE_ENV: 'test', MODEL_SERVICE_TOKEN: TOKEN, MODEL_SERVICE_PORT: String(port), ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    child.stdout!.on('data', (d: Buffer) => (out += d.toString()));
    child.stderr!.on('data', (d: Buffer) => (out += d.toString()));
    await eventually(() => /Model service ready/.test(out) || child.exitCode !== null, 30_000);
    if (child.exitCode !== null) throw new Error(`replica did not start:\n${out}`);
    return { port, url: `http://127.0.0.1:${port}`, child, output: () => out };
  }

  async function kill9(r: Replica): Promise<void> {
    if (r.child.exitCode !== null || r.child.signalCode !== null) return;
    const exited = new Promise((res) => r.child.once('exit', res));
    r.child.kill('SIGKILL');
    await exited;
  }

  async function gateway(urls: string[], overrides: Partial<Config> = {}) {
    const handle = await createApp({ ...config, modelServiceUrl: urls.join(','), modelServiceToken: TOKEN, ...overrides }, { store, log: () => undefined });
    apps.push(handle);
    const served = await serveApp(handle);
    servers.push(served.server);
    return { handle, ...served };
  }

  async function workspaceToken(): Promise<{ auth: Record<string, string>; token: string; workspaceId: string }> {
    const ws = await store.createWorkspace(`ws-${Math.random().toString(36).slice(2)}`, 'scale');
    const { token } = await store.createToken({ workspaceId: ws.id, name: 't', scopes: ['*'], allowedIps: [], expiresAt: null });
    return { auth: { Authorization: `Bearer ${token}` }, token, workspaceId: ws.id };
  }

  beforeAll(async () => {
    config = testConfig({ workers: 1 });
    store = openSqliteStore(config);
    const ports = [await freePort(), await freePort()];
    replicas.push(...(await Promise.all(ports.map((p) => startReplica(p)))));
  }, 60_000);

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

  test('streams run on the replicas, spread over both, each on one, with the same audio as /denoise', async () => {
    const g = await gateway(replicas.map((r) => r.url), { upstreamHealthIntervalMs: 200 });
    const [a, b] = g.handle.forwarder.replicas;
    const { auth, token } = await workspaceToken();
    const form = multipartBody([
      { name: 'model', value: 'nsm-2' },
      { name: 'file', filename: 'speech.wav', data: fs.readFileSync(fixture('speech-noisy-16k-mono.wav')) },
    ]);
    const file = await rawRequest(`${g.http}/v1/noise-suppressor/denoise`, {
      method: 'POST',
      headers: { Authorization: `Bearer ${token}`, 'Content-Type': form.contentType, 'Content-Length': form.body.length },
      body: form.body,
    });
    expect(file.status).toBe(200);
    const expected = wavData(file.body);

    const clients = Array.from({ length: 4 }, () => new StreamClient(`${g.ws}?model=nsm-2`, auth));
    const ready = await Promise.all(clients.map((c) => c.ready));
    for (const r of ready) expect(r).toMatchObject({ type: 'ready', model: 'nsm-2', latency_ms: 32 });
    // Each open stream is one call in flight on its replica: two each (fewest in flight).
    expect([a.inFlight, b.inFlight]).toEqual([2, 2]);
    for (const c of clients) {
      c.send(input, 640);
      c.end();
    }
    const closed = await Promise.all(clients.map((c) => c.closed));
    for (const [i, c] of clients.entries()) {
      expect(closed[i].code).toBe(1000);
      expect(c.errors).toEqual([]);
      expect(c.done).toMatchObject({ type: 'done', stats: { input_seconds: 3, credits_charged: 1 } });
      expect(Buffer.compare(c.audio, expected)).toBe(0);
    }
    await eventually(() => a.inFlight === 0 && b.inFlight === 0);
  }, 60_000);

  test('a replica killed mid-stream: its stream gets an error and 1011, billed for what was streamed; the other finishes', async () => {
    const g = await gateway(replicas.map((r) => r.url), { upstreamHealthIntervalMs: 200 });
    const [a, b] = g.handle.forwarder.replicas;
    const { auth, workspaceId } = await workspaceToken();
    const clients = [new StreamClient(g.ws, auth), new StreamClient(g.ws, auth)];
    await Promise.all(clients.map((c) => c.ready));
    expect([a.inFlight, b.inFlight]).toEqual([1, 1]);
    const first = input.subarray(0, 32000); // 1 s
    for (const c of clients) c.send(first, 640);
    await eventually(() => clients.every((c) => c.received > 0), 20_000);

    await kill9(replicas[0]);
    await eventually(() => clients.some((c) => c.closeCode !== null), 20_000);
    const failed = clients.find((c) => c.closeCode !== null)!;
    const survivor = clients.find((c) => c !== failed)!;
    expect(failed.closeCode).toBe(1011);
    expect(failed.errors[0]).toMatchObject({ type: 'error', error: { type: 'internal_error' } });
    expect(failed.errors[0].error.message).toMatch(/model service/);
    expect(a.healthy).toBe(false);

    // The other stream never noticed: the rest of its audio, end, all of it back.
    survivor.send(input.subarray(first.length), 640);
    survivor.end();
    expect((await survivor.closed).code).toBe(1000);
    expect(survivor.errors).toEqual([]);
    expect(survivor.audio.length).toBe(input.length);

    // One credit each (a started minute), nothing left held; the failed stream's row says what it carried.
    await eventually(async () => (await store.queryRequests({ workspaceId, limit: 10 })).length === 2);
    expect(await store.creditsUsed(workspaceId, new Date())).toBe(2);
    expect(await store.creditsHeld(workspaceId, new Date())).toBe(0);
    const rows = await store.queryRequests({ workspaceId, limit: 10 });
    const failedRow = rows.find((r) => r.errorType === 'internal_error')!;
    expect(failedRow).toMatchObject({ endpoint: 'stream', status: 101, creditsCharged: 1, bytesIn: first.length });
    await eventually(() => a.inFlight === 0 && b.inFlight === 0);

    replicas[0] = await startReplica(replicas[0].port);
    await eventually(() => a.healthy, 20_000);
  }, 90_000);

  test('a replica stopped with SIGTERM: its open stream gets 1012 at the end of its grace, new streams go to the other', async () => {
    const stopping = await startReplica(await freePort(), { SHUTDOWN_GRACE_MS: '1000' });
    replicas.push(stopping); // killed at the end if the test fails
    const g = await gateway([stopping.url, replicas[1].url]);
    const [s, other] = g.handle.forwarder.replicas;
    const { auth } = await workspaceToken();
    const clients = [new StreamClient(g.ws, auth), new StreamClient(g.ws, auth)];
    await Promise.all(clients.map((c) => c.ready));
    expect([s.inFlight, other.inFlight]).toEqual([1, 1]);
    for (const c of clients) c.send(input.subarray(0, 16000), 640);
    await eventually(() => clients.every((c) => c.received > 0), 20_000);

    const signalled = Date.now();
    const exited = new Promise((r) => stopping.child.once('exit', r));
    stopping.child.kill('SIGTERM');
    await eventually(() => /"event":"shutdown"/.test(stopping.output()), 10_000);
    const late = new StreamClient(g.ws, auth);
    await late.ready;
    expect(other.inFlight).toBe(2);

    await eventually(() => clients.some((c) => c.closeCode !== null), 20_000);
    const cut = clients.find((c) => c.closeCode !== null)!;
    expect(cut.closeCode).toBe(1012);
    expect(Date.now() - signalled).toBeGreaterThanOrEqual(900);
    expect(cut.errors[0]).toMatchObject({ error: { type: 'upstream_unavailable' } });
    await exited;
    expect(stopping.child.exitCode).toBe(0);
    for (const c of [clients.find((x) => x !== cut)!, late]) {
      c.send(input.subarray(0, 16000), 640);
      c.end();
      expect((await c.closed).code).toBe(1000);
    }
  }, 60_000);

  test('no replica can take the stream: refused before the upgrade with the envelope, nothing charged', async () => {
    const g = await gateway([`http://127.0.0.1:${await freePort()}`]);
    const { auth, workspaceId } = await workspaceToken();
    const refused = await refusal(g.ws, auth);
    expect(refused.status).toBe(502);
    expect(refused.body.error).toMatchObject({ type: 'upstream_unavailable' });
    expect(refused.headers['x-request-id']).toBeTruthy();
    expect(await store.creditsUsed(workspaceId, new Date())).toBe(0);
    expect(await store.creditsHeld(workspaceId, new Date())).toBe(0);
  });

  test("a replica's /internal/stream: the gateway's token only; output not read → it stops reading input", async () => {
    const url = `ws://127.0.0.1:${replicas[1].port}/internal/stream?model=nsm-1`;
    const noToken = await refusal(url, {});
    expect(noToken.status).toBe(401);
    expect(await refusal(`${url}&sample_rate=7`, { Authorization: `Bearer ${TOKEN}` })).toMatchObject({ status: 400 });
    const direct = new WebSocket(url, { headers: { Authorization: `Bearer ${TOKEN}` }, perMessageDeflate: false });
    const ready = await new Promise<Record<string, unknown>>((resolve) => direct.once('message', (d) => resolve(JSON.parse(String(d)))));
    expect(ready).toMatchObject({ type: 'ready', latency_samples: expect.any(Number) });
    direct.pause(); // never reads the denoised audio
    const total = 48 * 1024 * 1024;
    for (let off = 0; off < total; off += 1024 * 1024) direct.send(Buffer.alloc(1024 * 1024));
    let last = -1;
    let same = 0;
    await eventually(() => {
      const now = direct.bufferedAmount;
      same = now === last ? same + 1 : 0;
      last = now;
      return same >= 20;
    }, 30_000);
    expect(direct.bufferedAmount).toBeGreaterThan(total / 2);
    direct.terminate();
  }, 60_000);

  test('bounded buffering: a replica that stops reading stops the gateway reading its client; SIGCONT and it flows', async () => {
    const g = await gateway([replicas[1].url]);
    const [b] = g.handle.forwarder.replicas;
    const { auth, workspaceId } = await workspaceToken();
    const client = new StreamClient(`${g.ws}?model=nsm-1`, auth);
    await client.ready;
    replicas[1].child.kill('SIGSTOP');
    try {
      // 48 MiB (25 minutes of audio) at once: far more than the gateway may hold for a stream (1 MiB) plus what the
      // kernel's socket buffers take on two loopback connections.
      const total = 48 * 1024 * 1024;
      client.send(Buffer.alloc(total), 1024 * 1024);
      let last = -1;
      let same = 0;
      await eventually(() => {
        const now = client.ws.bufferedAmount;
        same = now === last ? same + 1 : 0;
        last = now;
        return same >= 20;
      }, 30_000);
      // Most of it is still on the client's side: the gateway took only what its bound and the sockets allow.
      expect(client.ws.bufferedAmount).toBeGreaterThan(total / 2);
      expect(client.received).toBe(0);
    } finally {
      replicas[1].child.kill('SIGCONT');
    }
    await eventually(() => client.received > 0, 30_000);
    client.ws.terminate();
    await eventually(() => b.inFlight === 0, 10_000);
    await eventually(async () => (await store.creditsHeld(workspaceId, new Date())) === 0, 10_000);
  }, 120_000);
});
