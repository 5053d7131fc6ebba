// Draining live streams (issue 28): SIGTERM to a real `node dist/src/server.js` with streams open. A stream that
// ends within SHUTDOWN_GRACE_MS finishes normally (done, 1000); one still open at the end of the grace gets an error
// message and close 1012, billed for what it streamed; an upgrade that still reaches the server once shutdown began
// gets 503 with Retry-After; the process exits 0. In-process, /readyz draining (beginDrain) refuses new streams.
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { createApp } from '../../src/app';
import { PROJECT_ROOT, type Config } from '../../src/config';
import { openSqliteStore } from '../../src/store/gateway/sqlite';
import type { GatewayStore } from '../../src/store/gateway/types';
import { closeQuietly, createToken, eventually, fixture, rawRequest, testConfig } from '../helpers/service-helpers';
import { refusal, serveApp, STREAM_PATH, StreamClient, wavData } from '../helpers/streaming-helpers';
import { freePort } from '../../scripts/lib/free-port';

const SERVER = path.join(PROJECT_ROOT, 'dist/src/server.js');
const GRACE_MS = 1500;

describe('SIGTERM with live streams open', () => {
  let config: Config;
  let store: GatewayStore;
  let child: ChildProcess;
  let output = '';

  beforeAll(() => {
    config = testConfig();
    store = openSqliteStore(config);
  });
  afterAll(async () => {
    if (child && child.exitCode === null) child.kill('SIGKILL');
    await store.close();
    fs.rmSync(config.dataDir, { recursive: true, force: true });
  });

  test('a short stream finishes, an open one gets 1012 at the end of the grace, a late upgrade gets 503; exit 0', async () => {
    const ws = await store.createWorkspace('acme', 'scale');
    const { token } = await store.createToken({ workspaceId: ws.id, name: 't', scopes: ['*'], allowedIps: [], expiresAt: null });
    const auth = { Authorization: `Bearer ${token}` };
    const port = await freePort();
    child = spawn(process.execPath, [SERVER], {
      env: {
        PATH: process.env.PATH,
        DATA_DIR: config.dataDir,
        PORT: String(port),
        HOST: '127.0.0.1',
        WORKERS: '1',
        ADMIN_SECRET: 'stream-shutdown-test-admin-secret',
        LOG_REQUESTS: 'false',
        SHUTDOWN_GRACE_MS: String(GRACE_MS),
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    child.stdout!.on('data', (d: Buffer) => (output += d.toString()));
    child.stderr!.on('data', (d: Buffer) => (output += d.toString()));
    const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
    await eventually(() => /listening on/.test(output) || child.exitCode !== null, 30_000);
    if (!/listening on/.test(output)) throw new Error(`server did not start:\n${output}`);
    const url = `ws://127.0.0.1:${port}${STREAM_PATH}`;
    const second = wavData(fs.readFileSync(fixture('speech-noisy-16k-mono.wav'))).subarray(0, 32000);

    const short = new StreamClient(url, auth);
    const long = new StreamClient(url, auth);
    await Promise.all([short.ready, long.ready]);
    short.send(second);
    long.send(second);
    await eventually(() => short.received > 0 && long.received > 0, 10_000);

    // An upgrade request whose first bytes are in when the signal comes (its connection is not idle, so it stays).
    const late = net.connect(port, '127.0.0.1');
    let answer = '';
    late.on('data', (d: Buffer) => (answer += d.toString()));
    const lateClosed = new Promise<void>((resolve) => late.once('close', () => resolve()));
    await new Promise<void>((resolve) => late.write(`GET ${STREAM_PATH} HTTP/1.1\r\nHost: 127.0.0.1\r\n`, () => resolve()));
    // A round trip on another connection: the server has read what was sent before it.
    expect((await rawRequest(`http://127.0.0.1:${port}/healthz`, {})).status).toBe(200);

    const signalled = Date.now();
    child.kill('SIGTERM');
    await eventually(() => /"event":"shutdown"/.test(output), 10_000);
    late.write(
      `Authorization: Bearer ${token}\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\n` +
        'Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n',
    );
    await lateClosed;
    expect(answer).toMatch(/^HTTP\/1\.1 503 /);
    expect(answer).toMatch(/\r\nretry-after: 5\r\n/i);
    expect(JSON.parse(answer.slice(answer.indexOf('\r\n\r\n') + 4)).error).toMatchObject({ type: 'upstream_unavailable' });

    // Within the grace: the short stream ends normally.
    short.end();
    expect((await short.closed).code).toBe(1000);
    expect(short.done).toMatchObject({ stats: { input_seconds: 1, credits_charged: 1 } });
    expect(short.audio.length).toBe(second.length);

    // The long one is told and closed when the grace is over.
    expect((await long.closed).code).toBe(1012);
    expect(Date.now() - signalled).toBeGreaterThanOrEqual(GRACE_MS - 100);
    expect(long.errors[0]).toMatchObject({ type: 'error', error: { type: 'upstream_unavailable' } });
    expect(await exited).toBe(0);
    expect(output).toMatch(/1 stream\(s\) closed with 1012/);
    expect(output).toMatch(/shut down cleanly/);

    // Both billed for the minute they started, nothing left held; both in the request log.
    expect(await store.creditsUsed(ws.id, new Date())).toBe(2);
    expect(await store.creditsHeld(ws.id, new Date())).toBe(0);
    const rows = await store.queryRequests({ workspaceId: ws.id, limit: 10 });
    const streams = rows.filter((r) => r.endpoint === 'stream');
    expect(streams).toHaveLength(2);
    expect(streams.map((r) => r.errorType ?? null).sort()).toEqual([null, 'upstream_unavailable']);
  }, 60_000);

  test('/readyz draining refuses new streams with 503; a stream already open goes on', async () => {
    const cfg = testConfig();
    const handle = await createApp(cfg);
    const served = await serveApp(handle);
    try {
      const auth = { Authorization: `Bearer ${await createToken(handle.store)}` };
      const open = new StreamClient(served.ws, auth);
      await open.ready;
      handle.beginDrain();
      expect((await rawRequest(`${served.http}/readyz`, {})).status).toBe(503);
      const refused = await refusal(served.ws, auth);
      expect(refused.status).toBe(503);
      expect(refused.body.error).toMatchObject({ type: 'upstream_unavailable' });
      expect(Number(refused.headers['retry-after'])).toBeGreaterThan(0);
      open.send(Buffer.alloc(6400));
      open.end();
      expect((await open.closed).code).toBe(1000);
      expect(open.audio.length).toBe(6400);
    } finally {
      await closeQuietly(served.server);
      await handle.close();
      fs.rmSync(cfg.dataDir, { recursive: true, force: true });
    }
  }, 30_000);
});
