// Live streams through the load balancer of docker-compose.scale.yml: Debian's nginx runs deploy/nginx/nginx.conf
// (only the gateways' addresses, the listen port and the pid file replaced) in front of two real
// `node dist/src/server.js` gateways sharing one SQLite store and, as in the compose file, one real Redis. The
// WebSocket upgrade passes through, audio flows both ways, and a browser's ticket is redeemed through nginx every
// time, also when the upgrade reaches the other gateway than the one that issued the ticket (nginx balances both by
// least connections; tickets are in Redis). nginx is Debian's `nginx`, which `npm test`'s prerequisites step
// (scripts/test-prereqs.js) installs as it does PostgreSQL and Redis; without it the suite fails with one line
// naming the package, as the PostgreSQL and Redis suites do, instead of being skipped.
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { PROJECT_ROOT, type Config } from '../../src/config';
import { openSqliteStore } from '../../src/store/gateway/sqlite';
import type { GatewayStore } from '../../src/store/gateway/types';
import { startRedis, type RedisServer } from '../helpers/real-servers';
import { eventually, fixture, rawRequest, testConfig } from '../helpers/service-helpers';
import { STREAM_PATH, StreamClient, wavData } from '../helpers/streaming-helpers';
import { freePort } from '../../scripts/lib/free-port';

const SERVER = path.join(PROJECT_ROOT, 'dist/src/server.js');
const CONF = path.join(PROJECT_ROOT, 'deploy/nginx/nginx.conf');

// eslint-disable-next-line @typescript-eslint/no-var-requires
const { findNginx } = require('../../../scripts/server-binaries.js') as { findNginx: () => string | null };

/** The nginx binary, or one line saying how to get it (thrown where the suite starts, so it fails, not skips). */
function nginxBinary(): string {
  const found = findNginx();
  if (found === null) {
    throw new Error("this test runs Debian's nginx, which is not installed: run npm test as root (its prerequisites step installs it) or apt-get install -y nginx");
  }
  return found;
}

/** The deploy config with local addresses; every replaced line must exist, so a changed config fails here. */
function localConfig(gatewayPorts: number[], port: number, dir: string): string {
  let text = fs.readFileSync(CONF, 'utf8');
  const replace = (from: string, to: string): void => {
    if (!text.includes(from)) throw new Error(`deploy/nginx/nginx.conf no longer has "${from}"`);
    text = text.split(from).join(to);
  };
  replace('gateway-1:8080', `127.0.0.1:${gatewayPorts[0]}`);
  replace('gateway-2:8080', `127.0.0.1:${gatewayPorts[1]}`);
  replace('listen 8080;', `listen 127.0.0.1:${port};`);
  replace('pid /tmp/nginx.pid;', `pid ${path.join(dir, 'nginx.pid')};`);
  return text;
}

describe('live streams through nginx (deploy/nginx/nginx.conf)', () => {
  let config: Config;
  let store: GatewayStore;
  let redis: RedisServer;
  let dir: string;
  let gatewayPorts: number[] = [];
  const children: ChildProcess[] = [];
  let base: string;
  let token: string;
  let NGINX = '';

  async function startGateway(port: number): Promise<void> {
    const child = spawn(process.execPath, [SERVER], {
      env: {
        PATH: process.env.PATH,
        DATA_DIR: config.dataDir,
        PORT: String(port),
        HOST: '127.0.0.1',
        WORKERS: '1',
        TRUST_PROXY: '1',
        ADMIN_SECRET: 'stream-nginx-test-admin-secret',
        REDIS_URL: redis.url,
        LOG_REQUESTS: 'false',
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    children.push(child);
    let out = '';
    child.stdout!.on('data', (d: Buffer) => (out += d.toString()));
    child.stderr!.on('data', (d: Buffer) => (out += d.toString()));
    await eventually(() => /listening on/.test(out) || child.exitCode !== null, 30_000);
    if (child.exitCode !== null) throw new Error(`gateway did not start:\n${out}`);
  }

  beforeAll(async () => {
    NGINX = nginxBinary();
    config = testConfig();
    store = openSqliteStore(config);
    const ws = await store.createWorkspace('acme', 'scale');
    token = (await store.createToken({ workspaceId: ws.id, name: 't', scopes: ['*'], allowedIps: [], expiresAt: null })).token;
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'nginx-test-'));
    redis = await startRedis();
    gatewayPorts = [await freePort(), await freePort()];
    // One after the other: the first one creates the database's schema.
    for (const p of gatewayPorts) await startGateway(p);
    const port = await freePort();
    fs.writeFileSync(path.join(dir, 'nginx.conf'), localConfig(gatewayPorts, port, dir));
    // nginx opens /dev/stdout and /dev/stderr (its logs): those must be a file here, not Node's socket pairs.
    const logPath = path.join(dir, 'nginx.log');
    const log = fs.openSync(logPath, 'a');
    const args = ['-p', dir, '-c', path.join(dir, 'nginx.conf')];
    const check = spawnSync(NGINX, ['-t', ...args], { stdio: ['ignore', log, log] });
    if (check.status !== 0) throw new Error(`nginx -t failed:\n${fs.readFileSync(logPath, 'utf8')}`);
    const nginx = spawn(NGINX, [...args, '-g', 'daemon off;'], { stdio: ['ignore', log, log] });
    children.push(nginx);
    fs.closeSync(log);
    base = `127.0.0.1:${port}`;
    await eventually(async () => {
      if (nginx.exitCode !== null) throw new Error(`nginx exited:\n${fs.readFileSync(logPath, 'utf8')}`);
      return rawRequest(`http://${base}/healthz`, {}).then(
        (r) => r.status === 200,
        () => false,
      );
    }, 20_000);
  }, 90_000);

  afterAll(async () => {
    for (const c of children.reverse()) {
      if (c.exitCode !== null || c.signalCode !== null) continue;
      const exited = new Promise((r) => c.once('exit', r));
      c.kill('SIGTERM');
      await exited;
    }
    await store?.close();
    await redis?.stop();
    if (config) fs.rmSync(config.dataDir, { recursive: true, force: true });
    if (dir) fs.rmSync(dir, { recursive: true, force: true });
  });

  test('the upgrade passes through and the audio comes back whole', async () => {
    const input = wavData(fs.readFileSync(fixture('speech-noisy-16k-mono.wav')));
    const stream = new StreamClient(`ws://${base}${STREAM_PATH}?model=nsm-2`, { Authorization: `Bearer ${token}` });
    expect(await stream.ready).toMatchObject({ type: 'ready', model: 'nsm-2' });
    stream.send(input, 640);
    stream.end();
    expect((await stream.closed).code).toBe(1000);
    expect(stream.errors).toEqual([]);
    expect(stream.audio.length).toBe(input.length);
  }, 30_000);

  /** Calls each gateway answered (its own /metrics): tickets issued, streams accepted. */
  async function served(): Promise<Array<{ tickets: number; streams: number }>> {
    return Promise.all(
      gatewayPorts.map(async (port) => {
        const text = (await rawRequest(`http://127.0.0.1:${port}/metrics`, {})).body.toString();
        const count = (endpoint: string, status: number): number =>
          text
            .split('\n')
            .filter((l) => l.startsWith('ns_http_requests_total{') && l.includes(`endpoint="${endpoint}"`) && l.includes(`status="${status}"`))
            .reduce((sum, l) => sum + Number(l.split(' ').pop()), 0);
        return { tickets: count('stream/tickets', 201), streams: count('stream', 101) };
      }),
    );
  }

  test("a browser's ticket, issued through nginx, is redeemed through nginx every time, on whichever gateway", async () => {
    // Which gateway nginx picks is its own affair (least connections per nginx worker): tickets are taken until at
    // least 6 were redeemed and one of them on the gateway that did not issue it (at most 30).
    let redeemed = 0;
    let crossed = 0;
    while ((redeemed < 6 || crossed === 0) && redeemed < 30) {
      const before = await served();
      const issued = await rawRequest(`http://${base}${STREAM_PATH}/tickets`, { method: 'POST', headers: { Authorization: `Bearer ${token}` } });
      expect(issued.status).toBe(201);
      const { ticket } = JSON.parse(issued.body.toString()) as { ticket: string };
      const stream = new StreamClient(`ws://${base}${STREAM_PATH}?ticket=${ticket}`, {});
      await stream.ready;
      stream.send(Buffer.alloc(3200));
      stream.end();
      expect((await stream.closed).code).toBe(1000);
      redeemed++;
      // The stream is counted when its gateway has written its log row, a moment after the close.
      let after = await served();
      await eventually(async () => (after = await served()).reduce((n, g, i) => n + g.streams - before[i].streams, 0) === 1);
      const issuer = after.findIndex((g, i) => g.tickets > before[i].tickets);
      const acceptor = after.findIndex((g, i) => g.streams > before[i].streams);
      expect(issuer).toBeGreaterThanOrEqual(0);
      if (issuer !== acceptor) crossed++;
    }
    expect(crossed).toBeGreaterThan(0);
  }, 60_000);
});
