// Upgrade requests to routes other than the stream (issue 35), on a real `node dist/src/server.js`: `POST /denoise`
// with `Connection: Upgrade` + `Upgrade: websocket` and a valid body, its client then gone, used to get no answer
// and hold a request slot until UPSTREAM_TIMEOUT_MS (four of them pinned every slot); and SIGTERM afterwards logged
// shutdown_cut and never exited, its upgrade sockets still open. Now such a request is refused at once (400, the
// envelope, X-Request-Id), ordinary calls go through at once after it, a bodiless upgrade request (curl --http2 on
// http://) is served as plain HTTP, and SIGTERM exits after the grace with every socket closed.
import fs from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import { loadConfig } from '../../src/config';
import { routeUpgrades } from '../../src/http/upgrades';
import { openSqliteStore } from '../../src/store/gateway/sqlite';
import { closeQuietly, eventually, fixture, multipartBody, rawRequest, testConfig } from '../helpers/service-helpers';
import { startServerProcess, type ServerProcess } from '../helpers/streaming-process-helpers';

const GRACE_MS = 1500;

/** Writes a whole request on a raw socket; resolves with what came back within `waitMs`, then destroys the socket. */
function rawCall(port: number, head: string, body: Buffer, waitMs: number): Promise<{ answer: string; closedByServer: boolean }> {
  return new Promise((resolve) => {
    const socket = net.connect(port, '127.0.0.1');
    let answer = '';
    let closedByServer = false;
    socket.on('error', () => undefined);
    socket.on('data', (d: Buffer) => (answer += d.toString('latin1')));
    socket.on('end', () => (closedByServer = true));
    socket.on('connect', () => {
      socket.write(head);
      socket.write(body);
    });
    setTimeout(() => {
      socket.destroy(); // the client is gone
      resolve({ answer, closedByServer });
    }, waitMs);
  });
}

describe('upgrade requests on routes other than the stream', () => {
  let dataDir: string;
  let server: ServerProcess;
  let token: string;

  beforeAll(async () => {
    dataDir = testConfig().dataDir;
    const store = openSqliteStore(loadConfig({ DATA_DIR: dataDir } as NodeJS.ProcessEnv));
    const ws = await store.createWorkspace('upgrades', 'scale');
    token = (await store.createToken({ workspaceId: ws.id, name: 't', scopes: ['*'], allowedIps: [], expiresAt: null })).token;
    await store.close();
    server = await startServerProcess(dataDir, { SHUTDOWN_GRACE_MS: String(GRACE_MS) });
  }, 90_000);

  afterAll(() => {
    server?.kill();
    fs.rmSync(dataDir, { recursive: true, force: true });
  });

  test('POST /denoise with Upgrade and a body, client gone (x5): each refused at once; ordinary calls go through at once', async () => {
    const { body, contentType } = multipartBody([{ name: 'file', filename: 'a.wav', contentType: 'audio/wav', data: fs.readFileSync(fixture('speech-noisy-16k-mono.wav')) }]);
    const head =
      `POST /v1/noise-suppressor/denoise HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer ${token}\r\nConnection: Upgrade\r\n` +
      `Upgrade: websocket\r\nContent-Type: ${contentType}\r\nContent-Length: ${body.length}\r\n\r\n`;
    const calls = await Promise.all(Array.from({ length: 5 }, () => rawCall(server.port, head, body, 1500)));
    for (const { answer } of calls) {
      expect(answer).toMatch(/^HTTP\/1\.1 400 /);
      expect(answer).toMatch(/\r\nX-Request-Id: req_[0-9a-f]{32}\r\n/i);
      const envelope = JSON.parse(answer.slice(answer.indexOf('\r\n\r\n') + 4)) as { error: { type: string; message: string } };
      expect(envelope.error.type).toBe('invalid_request');
      expect(envelope.error.message).toMatch(/Upgrade/);
    }
    // Ordinary calls: answered at once (before the fix: 503 upstream_unavailable for minutes).
    const t0 = Date.now();
    const plain = await Promise.all(
      Array.from({ length: 3 }, () =>
        rawRequest(`${server.url}/v1/noise-suppressor/denoise`, { method: 'POST', headers: { Authorization: `Bearer ${token}`, 'Content-Type': contentType }, body }),
      ),
    );
    expect(plain.map((r) => r.status)).toEqual([200, 200, 200]);
    expect(Date.now() - t0).toBeLessThan(20_000);
    expect(server.alive()).toBe(true);
  }, 60_000);

  test('a bodiless upgrade request (curl --http2 on http://) is served as plain HTTP', async () => {
    const r = await rawRequest(`${server.url}/v1/noise-suppressor/models`, {
      headers: { Authorization: `Bearer ${token}`, Connection: 'Upgrade, HTTP2-Settings', Upgrade: 'h2c', 'HTTP2-Settings': 'AAMAAABkAAQCAAAAAAIAAAAA' },
    });
    expect(r.status).toBe(200);
    expect(r.headers['x-request-id']).toMatch(/^req_/);
    expect(JSON.parse(r.body.toString())).toHaveProperty('models');
  });

  test('SIGTERM after such calls, with an upgrade socket still open: exits 0 after the grace, every socket closed', async () => {
    const { body, contentType } = multipartBody([{ name: 'file', filename: 'a.wav', contentType: 'audio/wav', data: fs.readFileSync(fixture('speech-noisy-16k-mono.wav')) }]);
    const head =
      `POST /v1/noise-suppressor/denoise HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer ${token}\r\nConnection: Upgrade\r\n` +
      `Upgrade: websocket\r\nContent-Type: ${contentType}\r\nContent-Length: ${body.length}\r\n\r\n`;
    await Promise.all(Array.from({ length: 4 }, () => rawCall(server.port, head, body, 300)));
    // One that stays: sends its upgrade request, never reads, never closes.
    const holder = net.connect(server.port, '127.0.0.1');
    holder.on('error', () => undefined);
    const holderClosed = new Promise<void>((resolve) => holder.once('close', () => resolve()));
    holder.write(`GET /v1/noise-suppressor/models HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${token}\r\nConnection: Upgrade\r\nUpgrade: h2c\r\n\r\n`);
    holder.pause();
    await new Promise((r) => setTimeout(r, 200));
    const t0 = Date.now();
    server.child.kill('SIGTERM');
    const exit = await Promise.race([server.exited, new Promise<null>((r) => setTimeout(() => r(null), GRACE_MS + 20_000).unref())]);
    expect(exit).toEqual({ code: 0, signal: null });
    expect(Date.now() - t0).toBeLessThan(GRACE_MS + 15_000);
    expect(server.output()).toMatch(/shut down cleanly/);
    holder.resume();
    await holderClosed;
  }, 60_000);
});

test('a pending upgrade whose client leaves: its response closes at once, so whatever the handler held is freed', async () => {
  // A handler that holds the request (as a slow forwarded call would) and notes when its response closes.
  let closedAt = 0;
  const server = http.createServer();
  routeUpgrades(server, (_req, res) => res.on('close', () => (closedAt = Date.now())));
  const accepted = new Set<net.Socket>();
  server.on('connection', (c: net.Socket) => accepted.add(c));
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  try {
    const socket = net.connect((server.address() as net.AddressInfo).port, '127.0.0.1');
    await new Promise<void>((r) => socket.once('connect', () => r()));
    socket.write('GET /v1/noise-suppressor/models HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: h2c\r\n\r\n');
    await new Promise((r) => setTimeout(r, 200));
    expect(closedAt).toBe(0);
    const leftAt = Date.now();
    socket.end(); // the client is gone (FIN)
    await eventually(() => closedAt > 0, 2000);
    expect(closedAt - leftAt).toBeLessThan(1000);
  } finally {
    for (const c of accepted) c.destroy();
    await closeQuietly(server);
  }
});
