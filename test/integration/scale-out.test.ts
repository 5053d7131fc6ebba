// Scale-out scenarios with real processes: two gateway processes (`node dist/src/server.js`, as `npm start` runs it)
// sharing one real PostgreSQL (DATABASE_URL) and one real Redis (REDIS_URL), both from Debian's packages in temporary
// directories. Exact credits across both gateways, exact per-token and per-address rate limits across both, a key
// revoked through one gateway's console refused by the other at once, console sessions and sign-in limits shared.
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import http from 'node:http';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { PROJECT_ROOT } from '../../src/config';
import { openStore } from '../../src/store';
import { POSTGRES_MIGRATIONS } from '../../src/store/gateway/migrations/postgres';
import type { GatewayStore } from '../../src/store/gateway/types';
import { freePort, startPostgres, startRedis, type PostgresServer, type RedisServer, serverBinaries } from '../helpers/real-servers';
import { eventually, fixture, multipartBody, rawRequest, type RawResponse } from '../helpers/service-helpers';

// Fails the suite at once, with one line naming the Debian packages, when the server binaries are missing.
beforeAll(() => {
  serverBinaries();
});

const run = promisify(execFile);
const ADMIN_SECRET = 'scale-out-test-admin-secret';

interface Gateway {
  url: string;
  child: ChildProcess;
  output: () => string;
}

let pg: PostgresServer;
let redis: RedisServer;
let databaseUrl: string;
let store: GatewayStore;
const gateways: Gateway[] = [];
const dirs: string[] = [];

async function startGateway(env: Record<string, string>): Promise<Gateway> {
  const port = await freePort();
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'scale-gw-'));
  dirs.push(dataDir);
  const child = spawn(process.execPath, [path.join(PROJECT_ROOT, 'dist/src/server.js')], {
    env: {
      ...process.env,
      PORT: String(port),
      HOST: '127.0.0.1',
      DATA_DIR: dataDir,
      WORKERS: '1',
      NODE_ENV: 'test',
      ADMIN_SECRET,
      DATABASE_URL: databaseUrl,
      REDIS_URL: redis.url,
      UNAUTHENTICATED_REQUESTS_PER_MINUTE: '20',
      // Up to all K credit holders may land on one gateway: its model service queues them rather than answering
      // 503 (admission control is tested on its own in upstream-replicas / model-service-guard).
      MODEL_QUEUE_PER_WORKER: '32',
      ...env,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  child.stdout!.on('data', (d: Buffer) => (out = (out + d.toString()).slice(-50_000)));
  child.stderr!.on('data', (d: Buffer) => (out = (out + d.toString()).slice(-50_000)));
  await eventually(() => out.includes('listening on') || child.exitCode !== null, 60_000).catch(() => undefined);
  if (!out.includes('listening on')) throw new Error(`gateway did not start:\n${out}`);
  return { url: `http://127.0.0.1:${port}`, child, output: () => out };
}

function stopGateway(g: Gateway): Promise<void> {
  return new Promise((resolve) => {
    if (g.child.exitCode !== null || g.child.signalCode !== null) return resolve();
    const force = setTimeout(() => g.child.kill('SIGKILL'), 20_000);
    g.child.once('exit', () => {
      clearTimeout(force);
      resolve();
    });
    g.child.kill('SIGTERM');
  });
}

beforeAll(async () => {
  [pg, redis] = await Promise.all([startPostgres(), startRedis()]);
  databaseUrl = await pg.createDatabase('scale_out');
  // The schema is created by the migrate command, as an operator would before rolling out replicas.
  const migrated = await run(process.execPath, [path.join(PROJECT_ROOT, 'dist/src/cli/db.js'), 'migrate'], {
    env: { ...process.env, DATABASE_URL: databaseUrl },
  });
  const versions = POSTGRES_MIGRATIONS.map((m) => m.version);
  expect(migrated.stdout).toMatch(new RegExp(`^PostgreSQL postgres://postgres@127\\.0\\.0\\.1:\\d+/scale_out: applied migrations ${versions.join(', ')}; schema version ${versions.at(-1)}\\n$`));
  const again = await run(process.execPath, [path.join(PROJECT_ROOT, 'dist/src/cli/db.js'), 'migrate'], {
    env: { ...process.env, DATABASE_URL: databaseUrl },
  });
  expect(again.stdout).toMatch(new RegExp(`up to date, schema version ${versions.at(-1)}`));
  store = await openStore({ dataDir: os.tmpdir(), databaseUrl });
  gateways.push(...(await Promise.all([startGateway({}), startGateway({})])));
  for (const g of gateways) {
    // The JSON start-up line names the engines (passwords hidden).
    const started = JSON.parse(g.output().split('\n').find((l) => l.includes('"event":"started"'))!);
    expect(started.store).toMatch(/^PostgreSQL postgres:\/\/postgres@127\.0\.0\.1:\d+\/scale_out$/);
    expect(started.shared_state).toMatch(/^Redis redis:\/\/127\.0\.0\.1:\d+$/);
  }
}, 180_000);

afterAll(async () => {
  await Promise.all(gateways.map(stopGateway));
  await store?.close();
  await Promise.all([pg?.stop(), redis?.stop()]);
  for (const d of dirs) fs.rmSync(d, { recursive: true, force: true });
}, 60_000);

const gw = (i: number): Gateway => gateways[i % 2];

async function json(res: RawResponse): Promise<{ error?: { type: string } } & Record<string, unknown>> {
  return JSON.parse(res.body.toString('utf8') || '{}');
}

test('a workspace with K credits, 4K parallel denoise calls spread over both gateways: exactly K succeed', async () => {
  const K = 12;
  const ws = await store.createWorkspace('credits-race', 'enterprise', { creditsPerMonth: K, requestsPerMinute: 10_000 });
  const { token } = await store.createToken({ workspaceId: ws.id, name: 't', scopes: ['*'], allowedIps: [], expiresAt: null });
  const { body, contentType } = multipartBody([
    { name: 'model', value: 'nsm-1' },
    { name: 'file', filename: 'talk.wav', data: fs.readFileSync(fixture('speech-noisy-16k-mono.wav')) },
  ]);
  const results = await Promise.all(
    Array.from({ length: 4 * K }, async (_, i) => {
      const res = await rawRequest(`${gw(i).url}/v1/noise-suppressor/denoise`, {
        method: 'POST',
        headers: { Authorization: `Bearer ${token}`, 'Content-Type': contentType, 'Content-Length': body.length },
        body,
      });
      return { gateway: i % 2, status: res.status, type: res.status === 200 ? null : (await json(res)).error?.type, retryAfter: res.headers['retry-after'] };
    }),
  );
  const ok = results.filter((r) => r.status === 200);
  expect(ok).toHaveLength(K);
  // Every refusal is a credit refusal: 402 once settled, 429 while held (which gateway wins the holds varies).
  for (const r of results.filter((x) => x.status !== 200)) {
    expect([`402 quota_exhausted`, `429 rate_limited`]).toContain(`${r.status} ${r.type}`);
    if (r.status === 429) expect(r.retryAfter).toBe('2');
  }
  await eventually(async () => (await store.creditsUsed(ws.id, new Date())) >= K);
  expect(await store.creditsUsed(ws.id, new Date())).toBe(K);
  expect(await store.creditsHeld(ws.id, new Date())).toBe(0); // no hold leaked
  // Rows are written as responses finish, a moment after the client has its answer. The refusals of a minute share
  // rows (their `calls` count them): every call is counted once.
  const calls = (rows: Array<{ calls?: number }>) => rows.reduce((s, r) => s + (r.calls ?? 1), 0);
  let logged = await store.queryRequests({ workspaceId: ws.id, limit: 1000 });
  await eventually(async () => calls((logged = await store.queryRequests({ workspaceId: ws.id, limit: 1000 }))) >= 4 * K);
  expect(calls(logged)).toBe(4 * K);
  expect(await store.countRequests({ workspaceId: ws.id })).toBe(4 * K);
  expect(logged.reduce((s, r) => s + r.creditsCharged, 0)).toBe(K);
}, 120_000);

test('a free-plan token hammered through both gateways: exactly 60 pass in the minute', async () => {
  const ws = await store.createWorkspace('rate-race', 'free');
  const { token } = await store.createToken({ workspaceId: ws.id, name: 't', scopes: ['*'], allowedIps: [], expiresAt: null });
  const started = Date.now();
  const results = await Promise.all(
    Array.from({ length: 150 }, (_, i) =>
      rawRequest(`${gw(i).url}/v1/noise-suppressor/models`, { headers: { 'X-API-Key': token } }),
    ),
  );
  expect(Date.now() - started).toBeLessThan(50_000); // the whole burst fits in the minute
  const ok = results.filter((r) => r.status === 200);
  expect(ok).toHaveLength(60);
  expect(results.filter((r) => r.status === 429)).toHaveLength(90);
  // The two gateways count in one window: every remaining value from 59 down to 0 handed out exactly once.
  expect(ok.map((r) => Number(r.headers['ratelimit-remaining'])).sort((a, b) => a - b)).toEqual(Array.from({ length: 60 }, (_, i) => i));
  const limited = results.find((r) => r.status === 429)!;
  expect(limited.headers['ratelimit-limit']).toBe('60');
  expect(Number(limited.headers['retry-after'])).toBeGreaterThan(0);
  expect(Number(limited.headers['retry-after'])).toBeLessThanOrEqual(60);
}, 60_000);

test('a key revoked through one gateway (console) is refused by the other at once; sessions are shared', async () => {
  const ws = await store.createWorkspace('revoke', 'scale');
  const { token, record } = await store.createToken({ workspaceId: ws.id, name: 'to-revoke', scopes: ['*'], allowedIps: [], expiresAt: null });
  expect((await rawRequest(`${gw(0).url}/v1/noise-suppressor/models`, { headers: { 'X-API-Key': token } })).status).toBe(200);

  // Sign in on gateway 1; the session works on gateway 0 as well.
  const login = await rawRequest(`${gw(1).url}/console/api/login`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json' },
    body: Buffer.from(JSON.stringify({ secret: ADMIN_SECRET })),
  });
  expect(login.status).toBe(200);
  const cookie = ([] as string[]).concat(login.headers['set-cookie'] ?? []).find((c) => c.startsWith('ns_console_session='))!.split(';')[0];
  const csrf = (await json(login)).csrf_token as string;
  const session0 = await json(await rawRequest(`${gw(0).url}/console/api/session`, { headers: { Cookie: cookie } }));
  expect(session0).toMatchObject({ signed_in: true, csrf_token: csrf });

  const revoked = await rawRequest(`${gw(1).url}/console/api/keys/${record.id}/revoke`, {
    method: 'POST',
    headers: { Cookie: cookie, 'X-CSRF-Token': csrf, 'Content-Type': 'application/json' },
    body: Buffer.from('{}'),
  });
  expect(revoked.status).toBe(200);
  const refused = await rawRequest(`${gw(0).url}/v1/noise-suppressor/models`, { headers: { 'X-API-Key': token } });
  expect(refused.status).toBe(401);
  expect((await json(refused)).error!.type).toBe('key_revoked');

  // The playground key a session takes on one gateway is the same on the other (sealed in Redis).
  const pgKey = (g: Gateway) =>
    rawRequest(`${g.url}/console/api/playground/key`, {
      method: 'POST',
      headers: { Cookie: cookie, 'X-CSRF-Token': csrf, 'Content-Type': 'application/json' },
      body: Buffer.from(JSON.stringify({ workspace_id: ws.id })),
    });
  const first = await json(await pgKey(gw(0)));
  const second = await json(await pgKey(gw(1)));
  expect(first.token).toMatch(/^mw_live_/);
  expect(second.token).toBe(first.token);
  // Signing out on one gateway ends the session everywhere and revokes its playground key.
  expect((await rawRequest(`${gw(0).url}/console/api/logout`, { method: 'POST', headers: { Cookie: cookie, 'X-CSRF-Token': csrf } })).status).toBe(200);
  expect(await json(await rawRequest(`${gw(1).url}/console/api/session`, { headers: { Cookie: cookie } }))).toEqual({ signed_in: false });
  await eventually(async () => Boolean((await store.getToken(first.key_id as string))!.revokedAt));
  expect((await store.getToken(first.key_id as string))!.revokedAt).not.toBeNull();
}, 60_000);

test('unauthenticated requests are limited per address across both gateways', async () => {
  // UNAUTHENTICATED_REQUESTS_PER_MINUTE=20 on both; the previous test's key_revoked call from this address counted.
  const results = await Promise.all(Array.from({ length: 40 }, (_, i) => rawRequest(`${gw(i).url}/v1/noise-suppressor/models`, {})));
  const statuses = results.map((r) => r.status);
  expect(statuses.filter((s) => s === 401)).toHaveLength(19);
  expect(statuses.filter((s) => s === 429)).toHaveLength(21);
  expect(results.find((r) => r.status === 429)!.headers['retry-after']).toBeDefined();
}, 60_000);

test('failed console sign-ins count across both gateways', async () => {
  const attempt = (g: Gateway, secret: string) =>
    rawRequest(`${g.url}/console/api/login`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json' },
      body: Buffer.from(JSON.stringify({ secret })),
    });
  const statuses = [];
  for (let i = 0; i < 5; i++) statuses.push((await attempt(gw(i), 'wrong')).status);
  expect(statuses).toEqual([401, 401, 401, 401, 401]);
  const blocked0 = await attempt(gw(0), ADMIN_SECRET);
  const blocked1 = await attempt(gw(1), ADMIN_SECRET);
  expect([blocked0.status, blocked1.status]).toEqual([429, 429]);
  expect(Number(blocked1.headers['retry-after'])).toBeGreaterThan(800);
}, 60_000);

test('a gateway killed with kill -9 mid-call: its credit hold expires and the others reclaim it', async () => {
  const doomed = await startGateway({ CREDIT_RESERVATION_TTL_MS: '1500' });
  gateways.push(doomed); // stopped in afterAll if the test fails before the kill
  const ws = await store.createWorkspace('dead-gateway', 'enterprise', { creditsPerMonth: 1, requestsPerMinute: 10_000 });
  const { token } = await store.createToken({ workspaceId: ws.id, name: 't', scopes: ['*'], allowedIps: [], expiresAt: null });
  const held = () => store.creditsHeld(ws.id, new Date());
  // A slow upload through the doomed gateway: the credit is held before the body is read.
  const { body, contentType } = multipartBody([{ name: 'file', filename: 'talk.wav', data: fs.readFileSync(fixture('speech-noisy-16k-mono.wav')) }]);
  const req = http.request(`${doomed.url}/v1/noise-suppressor/denoise`, {
    method: 'POST',
    headers: { Authorization: `Bearer ${token}`, 'Content-Type': contentType, 'Content-Length': body.length },
  });
  req.on('error', () => undefined);
  req.write(body.subarray(0, 100));
  await eventually(async () => (await held()) > 0, 10_000).catch(() => undefined);
  if ((await held()) !== 1) throw new Error(`no credit hold seen; the gateway said:\n${doomed.output()}`);
  doomed.child.kill('SIGKILL');
  await new Promise((r) => doomed.child.once('exit', r));
  req.destroy();

  const denoise = () =>
    rawRequest(`${gw(0).url}/v1/noise-suppressor/denoise`, {
      method: 'POST',
      headers: { Authorization: `Bearer ${token}`, 'Content-Type': contentType, 'Content-Length': body.length },
      body,
    });
  const busy = await denoise();
  expect(busy.status).toBe(429); // the dead gateway's hold still counts until it expires
  expect((await json(busy)).error!.type).toBe('rate_limited');
  // The hold expires 1.5 s after the dead gateway took it (CREDIT_RESERVATION_TTL_MS): retried until then.
  let ok = busy;
  await eventually(async () => (ok = await denoise()).status !== 429, 10_000);
  expect(ok.status).toBe(200); // the hold has expired: reclaimed by this reservation
  // The call's own hold is settled as its response ends.
  await eventually(async () => (await store.creditsUsed(ws.id, new Date())) > 0);
  expect(await store.creditsUsed(ws.id, new Date())).toBe(1);
  expect(await held()).toBe(0);
}, 120_000);
