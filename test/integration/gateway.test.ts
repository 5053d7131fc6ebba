// The gateway pipeline over real HTTP and a real SQLite store. The Forwarder here stands in for
// the model service at the gateway's boundary (it answers like one); nothing shipped is mocked.
import fs from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import express from 'express';
import request from 'supertest';
import { loadConfig, type Config } from '../../src/config';
import { createGateway, createGatewayErrorHandler, gatewayNotFoundHandler } from '../../src/gateway';
import { loggerToCallback } from '../../src/logging';
import { ROUTES } from '../../src/gateway/routes';
import type { EndpointSpec, Forwarder } from '../../src/gateway/types';
import { openSqliteStore } from '../../src/store/gateway/sqlite';
import type { GatewayStore, NewToken, PlanId, RequestLogEntry } from '../../src/store/gateway/types';
import { eventually } from '../helpers/service-helpers';

/** Calls in 'gate' mode wait at the stand-in model service until the test opens the gate, so they overlap for sure. */
const gate = {
  waiting: [] as Array<() => void>,
  open: false,
  pass(): Promise<void> {
    return this.open ? Promise.resolve() : new Promise((r) => this.waiting.push(r));
  },
  release(): void {
    this.open = true;
    for (const r of this.waiting.splice(0)) r();
  },
};

/** Answers like the model service; the X-Test-Upstream header picks a failure mode. */
const modelServiceLike: Forwarder = async (req, res, ctx) => {
  let bytes = 0;
  for await (const chunk of req) bytes += (chunk as Buffer).length;
  ctx.bytesIn = bytes;
  const mode = req.headers['x-test-upstream'];
  if (mode === 'gate') await gate.pass();
  if (mode === 'throw') throw new Error('forwarder exploded');
  if (mode === 'hang') {
    // Never answers; gives up when the client goes away, as a real forwarder would.
    await new Promise((r) => res.once('close', r));
    return { status: 499, ok: false };
  }
  ctx.upstreamMs = 2;
  res.setHeader('X-Gateway-Upstream-Ms', '2');
  if (mode === 'reject') {
    res.status(422).json({ detail: 'could not decode the uploaded file' });
    return { status: 422, ok: false, upstreamMs: 2 };
  }
  if (mode === 'down') {
    res.status(502).json({ error: { type: 'upstream_unavailable', message: 'down', request_id: ctx.requestId } });
    return { status: 502, ok: false };
  }
  const body = JSON.stringify({ endpoint: ctx.route!.endpoint, bytes });
  ctx.bytesOut = Buffer.byteLength(body);
  res.status(200).type('application/json').send(body);
  return { status: 200, ok: true, upstreamMs: 2 };
};

let dataDir: string;
let config: Config;
let store: GatewayStore;
/** JSON log lines the gateway wrote (diagnostics go through its pino logger). */
const logLines: string[] = [];
const testLogger = loggerToCallback((line) => logLines.push(line), 'gateway');

function buildApp(opts: { trustProxy?: Config['trustProxy']; routes?: EndpointSpec[]; now?: () => number; config?: Partial<Config> } = {}): express.Express {
  const app = express();
  const cfg = { ...config, trustProxy: opts.trustProxy ?? 0, ...opts.config };
  app.use(createGateway({ config: cfg, store, forward: modelServiceLike, routes: opts.routes, now: opts.now, logger: testLogger }));
  app.get('/hello', (_req, res) => {
    res.type('text').send('hi');
  });
  app.use(gatewayNotFoundHandler);
  app.use(createGatewayErrorHandler(testLogger));
  return app;
}

async function workspace(name: string, plan: PlanId = 'enterprise', custom?: { requestsPerMinute?: number; creditsPerMonth?: number }) {
  return await store.createWorkspace(name, plan, custom ?? (plan === 'enterprise' ? { requestsPerMinute: 100_000, creditsPerMonth: 100_000 } : undefined));
}

async function token(workspaceId: string, over: Partial<NewToken> = {}): Promise<string> {
  return (await store.createToken({ workspaceId, name: 'test', scopes: ['*'], allowedIps: [], expiresAt: null, ...over })).token;
}

/** Credits of a workspace held by calls in flight this month. */
async function heldCredits(workspaceId: string): Promise<number> {
  return store.creditsHeld(workspaceId, new Date());
}

/** The log row is written on 'finish', which can trail the client seeing the body by a tick. */
async function loggedRow(requestId: string): Promise<RequestLogEntry> {
  let row: RequestLogEntry | undefined;
  await eventually(async () => {
    row = (await store.queryRequests({ limit: 1000 })).find((r) => r.requestId === requestId);
    return row !== undefined;
  }).catch(() => {
    throw new Error(`no log row for ${requestId}`);
  });
  return row!;
}

function expectEnvelope(res: request.Response, status: number, type: string): void {
  expect(res.status).toBe(status);
  expect(res.body).toEqual({ error: { type, message: expect.any(String), request_id: res.headers['x-request-id'] } });
  expect(res.body.error.message.length).toBeGreaterThan(0);
}

beforeEach(async () => {
  dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'gateway-test-'));
  config = loadConfig({ DATA_DIR: dataDir, NODE_ENV: 'test' });
  store = openSqliteStore(config);
});

afterEach(async () => {
  await store.close();
  fs.rmSync(dataDir, { recursive: true, force: true });
});

describe('routing and request ids', () => {
  test('unknown service, unknown endpoint and wrong method use the envelope; 405 carries Allow', async () => {
    const app = buildApp();
    expectEnvelope(await request(app).get('/v1/voice-clone/models'), 404, 'service_not_found');
    expectEnvelope(await request(app).get('/v1'), 404, 'service_not_found');
    expectEnvelope(await request(app).get('/v1/noise-suppressor/nope'), 404, 'endpoint_not_found');
    expectEnvelope(await request(app).get('/v1/noise-suppressor'), 404, 'endpoint_not_found');
    const wrong = await request(app).get('/v1/noise-suppressor/denoise');
    expectEnvelope(wrong, 405, 'method_not_allowed');
    expect(wrong.headers.allow).toBe('POST');
    const wrongGet = await request(app).delete('/v1/noise-suppressor/models');
    expectEnvelope(wrongGet, 405, 'method_not_allowed');
    expect(wrongGet.headers.allow).toBe('GET, HEAD');
  });

  test('X-Request-Id on every response and equal to the logged id', async () => {
    const app = buildApp();
    const ws = await workspace('acme');
    const tok = await token(ws.id);
    logLines.length = 0;
    const responses = await Promise.all([
      request(app).get('/v1/nope/x'),
      request(app).get('/v1/noise-suppressor/nope'),
      request(app).put('/v1/noise-suppressor/models'),
      request(app).get('/v1/noise-suppressor/models'),
      request(app).get('/v1/noise-suppressor/models').set('Authorization', `Bearer ${tok}`),
      request(app).post('/v1/noise-suppressor/denoise').set('X-API-Key', tok).set('X-Test-Upstream', 'throw'),
    ]);
    expect(responses.map((r) => r.status)).toEqual([404, 404, 405, 401, 200, 500]);
    // One structured error line for the exception: level, the request id the client got, the error and its stack.
    const failures = logLines.map((l) => JSON.parse(l)).filter((l) => l.level === 'error');
    expect(failures).toHaveLength(1);
    expect(failures[0]).toMatchObject({
      service: 'gateway',
      msg: 'POST /v1/noise-suppressor/denoise failed',
      request_id: responses[5].headers['x-request-id'],
      err: { message: 'forwarder exploded', type: 'Error' },
    });
    expect(failures[0].err.stack).toContain('forwarder exploded');
    for (const res of responses) {
      const id = res.headers['x-request-id'];
      expect(id).toMatch(/^req_[0-9a-f]{32}$/);
      expect((await loggedRow(id)).status).toBe(res.status);
    }
    expect(new Set(responses.map((r) => r.headers['x-request-id'])).size).toBe(responses.length);
    const ok = await loggedRow(responses[4].headers['x-request-id']);
    expect(ok).toMatchObject({ service: 'noise-suppressor', endpoint: 'models', method: 'GET', status: 200, upstreamMs: 2, creditsCharged: 0 });
    expect(ok.tokenId).not.toBeNull();
    expect((await loggedRow(responses[3].headers['x-request-id'])).errorType).toBe('missing_token');
    // The 500 path: envelope, and the credit charged before forwarding is refunded.
    expectEnvelope(responses[5], 500, 'internal_error');
    expect((await loggedRow(responses[5].headers['x-request-id'])).creditsCharged).toBe(0);
    expect(await store.creditsUsed(ws.id, new Date())).toBe(0);

    // Paths outside /v1 get an id too, whether the app or the fallback 404 answers.
    const hello = await request(app).get('/hello');
    expect(hello.text).toBe('hi');
    expect(hello.headers['x-request-id']).toMatch(/^req_/);
    const lost = await request(app).get('/nowhere');
    expect(lost.status).toBe(404);
    expect(lost.body.error.request_id).toBe(lost.headers['x-request-id']);
  });

  test('the request id is always our own; a safe client X-Request-Id is kept beside it as client_request_id', async () => {
    const app = buildApp();
    const ws = await workspace('acme');
    const tok = await token(ws.id);
    // Two calls with the same client id: two rows, two different ids (the client's id was once reused as ours).
    const first = await request(app).get('/v1/noise-suppressor/models').set('X-Request-Id', 'client-123.abc');
    const second = await request(app).get('/v1/noise-suppressor/models').set('X-API-Key', tok).set('X-Request-Id', 'client-123.abc');
    expect(first.headers['x-request-id']).toMatch(/^req_[0-9a-f]{32}$/);
    expect(second.headers['x-request-id']).toMatch(/^req_[0-9a-f]{32}$/);
    expect(first.headers['x-request-id']).not.toBe(second.headers['x-request-id']);
    expect(first.body.error.request_id).toBe(first.headers['x-request-id']);
    expect(await loggedRow(first.headers['x-request-id'])).toMatchObject({ errorType: 'missing_token', clientRequestId: 'client-123.abc' });
    expect(await loggedRow(second.headers['x-request-id'])).toMatchObject({ status: 200, clientRequestId: 'client-123.abc' });
    const rows = await store.queryRequests({ limit: 1000 });
    expect(new Set(rows.map((r) => r.requestId)).size).toBe(rows.length);
    // Ids that could inject into headers or logs are not kept at all.
    const replaced = await request(app).get('/v1/noise-suppressor/models').set('X-Request-Id', 'bad id <script>');
    expect(replaced.headers['x-request-id']).toMatch(/^req_[0-9a-f]{32}$/);
    expect((await loggedRow(replaced.headers['x-request-id'])).clientRequestId).toBeNull();
    const tooLong = await request(app).get('/v1/noise-suppressor/models').set('X-Request-Id', 'a'.repeat(200));
    expect(tooLong.headers['x-request-id']).toMatch(/^req_/);
    expect((await loggedRow(tooLong.headers['x-request-id'])).clientRequestId).toBeNull();
  });
});

describe('authentication', () => {
  test('missing, invalid, revoked and expired tokens are 401 with their own types', async () => {
    const app = buildApp();
    const ws = await workspace('acme');
    const models = '/v1/noise-suppressor/models';
    expectEnvelope(await request(app).get(models), 401, 'missing_token');
    expectEnvelope(await request(app).get(models).set('Authorization', 'Bearer nope'), 401, 'invalid_token');
    expectEnvelope(await request(app).get(models).set('Authorization', `Bearer mw_live_${'A'.repeat(32)}`), 401, 'invalid_token');
    expectEnvelope(await request(app).get(models).set('Authorization', 'Basic dXNlcjpwYXNz'), 401, 'invalid_token');
    expectEnvelope(await request(app).get(models).set('X-API-Key', ''), 401, 'invalid_token');
    // a Basic header from a proxy does not hide a valid X-API-Key
    const valid = await token(ws.id);
    expect((await request(app).get(models).set('Authorization', 'Basic dXNlcjpwYXNz').set('X-API-Key', valid)).status).toBe(200);

    const revoked = await store.createToken({ workspaceId: ws.id, name: 'r', scopes: ['*'], allowedIps: [], expiresAt: null });
    await store.revokeToken(revoked.record.id);
    const r = await request(app).get(models).set('X-API-Key', revoked.token);
    expectEnvelope(r, 401, 'key_revoked');
    expect(r.headers['ratelimit-limit']).toBeUndefined(); // not authenticated → no rate-limit headers

    const expired = await token(ws.id, { expiresAt: new Date(Date.now() - 1000).toISOString() });
    expectEnvelope(await request(app).get(models).set('Authorization', `Bearer ${expired}`), 401, 'key_expired');
    const future = await token(ws.id, { expiresAt: new Date(Date.now() + 3_600_000).toISOString() });
    expect((await request(app).get(models).set('Authorization', `Bearer ${future}`)).status).toBe(200);
  });

  test('Bearer and X-API-Key are equivalent and share one rate-limit budget; last used is recorded', async () => {
    const app = buildApp();
    const ws = await workspace('acme', 'free');
    const created = await store.createToken({ workspaceId: ws.id, name: 't', scopes: ['*'], allowedIps: [], expiresAt: null });
    expect(created.record.lastUsedAt).toBeNull();
    const a = await request(app).get('/v1/noise-suppressor/models').set('Authorization', `Bearer ${created.token}`);
    const b = await request(app).get('/v1/noise-suppressor/models').set('X-API-Key', created.token);
    expect([a.status, b.status]).toEqual([200, 200]);
    expect(a.body).toEqual(b.body);
    expect(a.headers['ratelimit-limit']).toBe('60');
    expect(Number(a.headers['ratelimit-remaining']) - Number(b.headers['ratelimit-remaining'])).toBe(1);
    expect((await store.getToken(created.record.id))!.lastUsedAt).not.toBeNull();
    // The clear token is never written to the log.
    expect(JSON.stringify(await store.queryRequests({ limit: 1000 }))).not.toContain('mw_live_');
  });
});

describe('IP allow-lists', () => {
  test('socket address matched against IPs and CIDRs; IPv4-mapped IPv6 treated as IPv4', async () => {
    const app = buildApp();
    const ws = await workspace('acme');
    const call = (tok: string) => request(app).get('/v1/noise-suppressor/models').set('X-API-Key', tok);
    for (const rules of [['127.0.0.1'], ['127.0.0.0/8'], ['::ffff:127.0.0.1'], ['::ffff:127.0.0.0/104'], ['10.0.0.0/8', '127.0.0.1/32'], ['::1', '127.0.0.1']]) {
      expect((await call(await token(ws.id, { allowedIps: rules }))).status).toBe(200);
    }
    const denied = await call(await token(ws.id, { allowedIps: ['10.0.0.0/8', '2001:db8::/32'] }));
    expectEnvelope(denied, 403, 'ip_not_allowed');
    expect(denied.headers['ratelimit-limit']).toBeDefined(); // after auth: rate-limit headers present
    expect((await loggedRow(denied.headers['x-request-id'])).clientIp).toBe('127.0.0.1');
  });

  test('X-Forwarded-For is used only when trustProxy is set (IPv4 and IPv6)', async () => {
    const ws = await workspace('acme');
    const v4 = await token(ws.id, { allowedIps: ['203.0.113.0/24'] });
    const v6 = await token(ws.id, { allowedIps: ['2001:db8::/32'] });
    const untrusted = buildApp();
    const trusted = buildApp({ trustProxy: 1 });
    const models = '/v1/noise-suppressor/models';
    expect((await request(untrusted).get(models).set('X-API-Key', v4).set('X-Forwarded-For', '203.0.113.9')).status).toBe(403);
    expect((await request(trusted).get(models).set('X-API-Key', v4).set('X-Forwarded-For', '10.0.0.1, 203.0.113.9')).status).toBe(200);
    expect((await request(trusted).get(models).set('X-API-Key', v4).set('X-Forwarded-For', '198.51.100.1')).status).toBe(403);
    expect((await request(trusted).get(models).set('X-API-Key', v6).set('X-Forwarded-For', '2001:db8:5::1')).status).toBe(200);
    expect((await request(trusted).get(models).set('X-API-Key', v6).set('X-Forwarded-For', '2001:db9::1')).status).toBe(403);
  });
});

describe('scopes and plans', () => {
  const endpoints: Array<[string, 'get' | 'post', string]> = [
    ['denoise', 'post', 'noise-suppressor:denoise'],
    ['denoise/batch', 'post', 'noise-suppressor:denoise-batch'],
    ['models', 'get', 'noise-suppressor:models'],
    ['sample', 'get', 'noise-suppressor:sample'],
    ['health', 'get', 'noise-suppressor:health'],
  ];
  const scopeRows: Array<[string, string[]]> = [
    ['*', endpoints.map((e) => e[0])],
    ['noise-suppressor:*', endpoints.map((e) => e[0])],
    ...endpoints.map(([endpoint, , scope]) => [scope, [endpoint]] as [string, string[]]),
  ];

  test.each(scopeRows)('scope %s allows exactly %j', async (scope, allowed) => {
    const app = buildApp();
    const ws = await workspace('acme');
    const tok = await token(ws.id, { scopes: [scope] });
    for (const [endpoint, method] of endpoints) {
      const res = await request(app)[method](`/v1/noise-suppressor/${endpoint}`).set('Authorization', `Bearer ${tok}`);
      if (allowed.includes(endpoint)) {
        expect(res.status).toBe(200);
        expect(res.body.endpoint).toBe(endpoint);
      } else {
        expectEnvelope(res, 403, 'scope_denied');
        expect(res.headers['ratelimit-remaining']).toBeDefined();
      }
    }
  });

  test('a scope for another service does not grant noise-suppressor', async () => {
    const app = buildApp();
    const ws = await workspace('acme');
    const tok = await token(ws.id, { scopes: ['voice-lab:*', 'noise-suppressor:models'] });
    expectEnvelope(await request(app).get('/v1/noise-suppressor/health').set('X-API-Key', tok), 403, 'scope_denied');
  });

  test('plan_forbids_service: a workspace exclusion, and a service outside the plan', async () => {
    const withOtherService: EndpointSpec[] = [
      ...ROUTES,
      { service: 'voice-lab', endpoint: 'clone', method: 'POST', scope: 'voice-lab:clone', credits: 1, maxBodyBytes: 1024 },
    ];
    const app = buildApp({ routes: withOtherService });
    const free = await workspace('free-ws', 'free');
    const tok = await token(free.id);
    expect((await request(app).get('/v1/noise-suppressor/models').set('X-API-Key', tok)).status).toBe(200);
    // free includes only noise-suppressor
    expectEnvelope(await request(app).post('/v1/voice-lab/clone').set('X-API-Key', tok), 403, 'plan_forbids_service');
    // enterprise includes every service
    const ent = await workspace('ent');
    expect((await request(app).post('/v1/voice-lab/clone').set('X-API-Key', await token(ent.id))).status).toBe(200);
    // a workspace-level exclusion removes a service its plan includes; no credit is charged
    await store.setExcludedServices(free.id, ['noise-suppressor']);
    expectEnvelope(await request(app).post('/v1/noise-suppressor/denoise').set('X-API-Key', tok), 403, 'plan_forbids_service');
    expect(await store.creditsUsed(free.id, new Date())).toBe(0);
  });
});

describe('rate limits', () => {
  test('RateLimit-* on every authenticated response; 429 rate_limited with Retry-After; slots come back after 60 s', async () => {
    let clock = Date.UTC(2030, 0, 1, 12, 0, 15);
    const app = buildApp({ now: () => clock });
    const ws = await workspace('acme', 'enterprise', { requestsPerMinute: 3, creditsPerMonth: 100 });
    const tok = await token(ws.id);
    const models = () => request(app).get('/v1/noise-suppressor/models').set('X-API-Key', tok);
    const remaining: string[] = [];
    const resets: string[] = [];
    for (let i = 0; i < 3; i++) {
      const res = await models();
      expect(res.status).toBe(200);
      expect(res.headers['ratelimit-limit']).toBe('3');
      remaining.push(res.headers['ratelimit-remaining']);
      resets.push(res.headers['ratelimit-reset']);
      clock += 1_000;
    }
    expect(remaining).toEqual(['2', '1', '0']);
    expect(resets).toEqual(['60', '59', '58']); // until the oldest counted request leaves the window
    clock += 5_000; // 12:00:23
    const limited = await models();
    expectEnvelope(limited, 429, 'rate_limited');
    expect(limited.headers['retry-after']).toBe('52');
    expect(limited.headers['ratelimit-remaining']).toBe('0');
    expect(limited.headers['ratelimit-reset']).toBe('52');
    // a rejected POST is not charged
    expect((await request(app).post('/v1/noise-suppressor/denoise').set('X-API-Key', tok)).status).toBe(429);
    expect(await store.creditsUsed(ws.id, new Date(clock))).toBe(0);
    // another token of the same workspace has its own budget
    expect((await request(app).get('/v1/noise-suppressor/models').set('X-API-Key', await token(ws.id))).status).toBe(200);
    clock = Date.UTC(2030, 0, 1, 12, 1, 15); // the first request has left the window, the other two not yet
    const again = await models();
    expect(again.status).toBe(200);
    expect(again.headers['ratelimit-remaining']).toBe('0');
    expect(again.headers['ratelimit-reset']).toBe('1');
    expect((await models()).status).toBe(429);
  });

  test('no burst across a minute boundary: at most the limit in any 60 s (a fixed window let 2x through)', async () => {
    let clock = Date.UTC(2030, 0, 1, 12, 0, 59, 500);
    const app = buildApp({ now: () => clock });
    const ws = await workspace('acme', 'enterprise', { requestsPerMinute: 5, creditsPerMonth: 100 });
    const tok = await token(ws.id);
    const statusAt = async (t: number) => {
      clock = t;
      return (await request(app).get('/v1/noise-suppressor/health').set('X-API-Key', tok)).status;
    };
    const base = Date.UTC(2030, 0, 1, 12, 0, 59, 500);
    const before = [];
    for (let i = 0; i < 5; i++) before.push(await statusAt(base + i));
    expect(before).toEqual([200, 200, 200, 200, 200]);
    // One second later the clock minute has changed; a fixed window would admit 5 more here.
    const after = [];
    for (let i = 0; i < 5; i++) after.push(await statusAt(base + 1_000 + i));
    expect(after).toEqual([429, 429, 429, 429, 429]);
    expect(await statusAt(base + 59_999)).toBe(429);
    expect(await statusAt(base + 60_000)).toBe(200); // the first one left the window
    expect(await statusAt(base + 60_000)).toBe(429);
  });

  test('plan rates: free 60/min', async () => {
    const clock = Date.UTC(2030, 0, 1, 12, 0, 0);
    const app = buildApp({ now: () => clock });
    const tok = await token((await workspace('acme', 'free')).id);
    const statuses: number[] = [];
    for (let i = 0; i < 61; i++) statuses.push((await request(app).get('/v1/noise-suppressor/health').set('X-API-Key', tok)).status);
    expect(statuses.filter((s) => s === 200)).toHaveLength(60);
    expect(statuses[60]).toBe(429);
  });

  test('unauthenticated requests are limited per client address (429 + Retry-After) and the excess is not logged', async () => {
    let clock = Date.UTC(2030, 0, 1, 12, 0, 0);
    const app = buildApp({ now: () => clock, config: { unauthenticatedRequestsPerMinute: 4 }, trustProxy: 1 });
    const ws = await workspace('acme');
    const tok = await token(ws.id);
    const from = (ip: string) => ({ 'X-Forwarded-For': ip });
    const junk = [
      () => request(app).get('/v1/noise-suppressor/models').set(from('198.51.100.7')),
      () => request(app).get('/v1/noise-suppressor/models').set(from('198.51.100.7')).set('X-API-Key', `mw_live_${'A'.repeat(32)}`),
      () => request(app).get('/v1/nope/x').set(from('198.51.100.7')),
      () => request(app).put('/v1/noise-suppressor/models').set(from('198.51.100.7')),
    ];
    const statuses: number[] = [];
    let last!: request.Response;
    for (let i = 0; i < 12; i++) {
      last = await junk[i % junk.length]();
      statuses.push(last.status);
    }
    expect(statuses.slice(0, 4)).toEqual([401, 401, 404, 405]);
    expect(statuses.slice(4)).toEqual(Array(8).fill(429));
    expectEnvelope(last, 429, 'rate_limited');
    expect(last.headers['retry-after']).toBe('60');
    // A valid token from the same address is not affected, nor is another address.
    expect((await request(app).get('/v1/noise-suppressor/models').set(from('198.51.100.7')).set('X-API-Key', tok)).status).toBe(200);
    expect((await request(app).get('/v1/noise-suppressor/models').set(from('198.51.100.8'))).status).toBe(401);
    // IPv6 addresses count per /64: rotating the interface id buys nothing.
    const v6 = [];
    for (let i = 1; i <= 6; i++) v6.push((await request(app).get('/v1/noise-suppressor/models').set(from(`2001:db8:1:2::${i.toString(16)}`))).status);
    expect(v6).toEqual([401, 401, 401, 401, 429, 429]);
    // Only what was answered normally is in the log: 4 + 1 + 1 + 4 rows, not 20. The calls ran one after the other,
    // so only the last row can still trail its response.
    await eventually(async () => (await store.countRequests({})) >= 10);
    expect(await store.countRequests({})).toBe(10);
    clock += 60_000;
    expect((await request(app).get('/v1/noise-suppressor/models').set(from('198.51.100.7'))).status).toBe(401);
  });
});

describe('credits', () => {
  test('402 quota_exhausted when the month is used up; 0-credit endpoints still work', async () => {
    const app = buildApp();
    const ws = await workspace('acme', 'enterprise', { creditsPerMonth: 2, requestsPerMinute: 1000 });
    const tok = await token(ws.id);
    const denoise = () => request(app).post('/v1/noise-suppressor/denoise').set('X-API-Key', tok).attach('file', Buffer.from('RIFF....'), 'a.wav');
    expect((await denoise()).status).toBe(200);
    expect((await request(app).post('/v1/noise-suppressor/denoise/batch').set('X-API-Key', tok)).status).toBe(200);
    const exhausted = await denoise();
    expectEnvelope(exhausted, 402, 'quota_exhausted');
    expect(exhausted.headers['ratelimit-limit']).toBe('1000');
    expect((await request(app).get('/v1/noise-suppressor/models').set('X-API-Key', tok)).status).toBe(200);
    expect(await store.creditsUsed(ws.id, new Date())).toBe(2);
    // an upgrade lifts the limit immediately
    await store.setPlan(ws.id, 'enterprise', { creditsPerMonth: 3 });
    expect((await denoise()).status).toBe(200);
    const rows = await store.queryRequests({ workspaceId: ws.id, endpoint: 'denoise' });
    expect(rows.map((r) => [r.status, r.creditsCharged])).toEqual([[200, 1], [402, 0], [200, 1]]);
    expect(rows[2].bytesIn).toBeGreaterThan(8); // multipart body counted by the forwarder
  });

  test('refund when the model service rejects the input (4xx) or fails (5xx)', async () => {
    const app = buildApp();
    const ws = await workspace('acme');
    const tok = await token(ws.id);
    const post = (mode?: string) => {
      const r = request(app).post('/v1/noise-suppressor/denoise').set('X-API-Key', tok);
      return mode ? r.set('X-Test-Upstream', mode) : r;
    };
    const rejected = await post('reject');
    expect(rejected.status).toBe(422);
    expect(rejected.body).toEqual({ detail: 'could not decode the uploaded file' });
    expect(await store.creditsUsed(ws.id, new Date())).toBe(0);
    expect((await post('down')).status).toBe(502);
    expect(await store.creditsUsed(ws.id, new Date())).toBe(0);
    expect((await post()).status).toBe(200);
    expect(await store.creditsUsed(ws.id, new Date())).toBe(1);
    expect((await loggedRow(rejected.headers['x-request-id'])).creditsCharged).toBe(0);
  });

  test('payload_too_large from the declared Content-Length, before any charge', async () => {
    const small: EndpointSpec[] = ROUTES.map((r) => (r.endpoint === 'denoise' ? { ...r, maxBodyBytes: 64 } : r));
    const app = buildApp({ routes: small });
    const ws = await workspace('acme');
    const tok = await token(ws.id);
    expectEnvelope(
      await request(app).post('/v1/noise-suppressor/denoise').set('X-API-Key', tok).set('Content-Type', 'application/octet-stream').send(Buffer.alloc(65)),
      413,
      'payload_too_large',
    );
    expect(await store.creditsUsed(ws.id, new Date())).toBe(0);
    expect(ROUTES.find((r) => r.endpoint === 'denoise')!.maxBodyBytes).toBe(101 * 1024 * 1024);
    expect(ROUTES.find((r) => r.endpoint === 'denoise/batch')!.maxBodyBytes).toBe(201 * 1024 * 1024);
  });

  test('a client that aborts is logged (499) and its credit refunded', async () => {
    const app = buildApp();
    const ws = await workspace('acme');
    const tok = await token(ws.id);
    const server = app.listen(0, '127.0.0.1');
    await new Promise((r) => server.once('listening', r));
    try {
      const { port } = server.address() as AddressInfo;
      const req = http.request({
        host: '127.0.0.1',
        port,
        method: 'POST',
        path: '/v1/noise-suppressor/denoise',
        headers: { 'X-API-Key': tok, 'X-Test-Upstream': 'hang', 'X-Request-Id': 'abort-test-1', 'Content-Length': '4' },
      });
      req.on('error', () => undefined);
      req.end('abcd');
      // wait until the gateway holds the credit, then hang up
      await eventually(async () => (await heldCredits(ws.id)) > 0);
      expect(await heldCredits(ws.id)).toBe(1);
      req.destroy();
      let row: RequestLogEntry | undefined;
      await eventually(async () => {
        row = (await store.queryRequests({ workspaceId: ws.id })).find((r) => r.clientRequestId === 'abort-test-1');
        return row !== undefined;
      });
      expect(row).toMatchObject({ status: 499, creditsCharged: 0, endpoint: 'denoise' });
      expect(await store.creditsUsed(ws.id, new Date())).toBe(0);
      expect(await heldCredits(ws.id)).toBe(0);
    } finally {
      await new Promise((r) => server.close(r));
    }
  });

  test('credits held by calls in flight: 429 rate_limited with a short Retry-After, never 402; 402 only when settled', async () => {
    const app = buildApp();
    const ws = await workspace('acme', 'enterprise', { creditsPerMonth: 2, requestsPerMinute: 1000 });
    const tok = await token(ws.id);
    const server = app.listen(0, '127.0.0.1');
    await new Promise((r) => server.once('listening', r));
    try {
      const { port } = server.address() as AddressInfo;
      // Two calls that the "model service" holds: they hold both credits of the month.
      const hung = [1, 2].map(() => {
        const req = http.request({
          host: '127.0.0.1',
          port,
          method: 'POST',
          path: '/v1/noise-suppressor/denoise',
          headers: { 'X-API-Key': tok, 'X-Test-Upstream': 'hang', 'Content-Length': '4' },
        });
        req.on('error', () => undefined);
        req.end('abcd');
        return req;
      });
      await eventually(async () => (await heldCredits(ws.id)) >= 2);
      expect(await heldCredits(ws.id)).toBe(2);
      const denoise = () => request(app).post('/v1/noise-suppressor/denoise').set('X-API-Key', tok).attach('file', Buffer.from('RIFF....'), 'a.wav');
      const busy = await denoise();
      expectEnvelope(busy, 429, 'rate_limited'); // was 402 quota_exhausted, which clients must not retry
      expect(busy.headers['retry-after']).toBe('2');
      expect(busy.body.error.message).toMatch(/held by calls in flight/);
      // The held calls fail (client gone): their credits come back and a retry succeeds.
      for (const req of hung) req.destroy();
      await eventually(async () => (await heldCredits(ws.id)) === 0);
      expect((await denoise()).status).toBe(200);
      expect((await denoise()).status).toBe(200);
      expectEnvelope(await denoise(), 402, 'quota_exhausted'); // settled usage has reached the limit
      expect(await store.creditsUsed(ws.id, new Date())).toBe(2);
    } finally {
      server.closeAllConnections();
      await new Promise((r) => server.close(r));
    }
  });

  test('a credit hold left by a gateway that died mid-call expires and is reclaimed', async () => {
    let clock = Date.now();
    const app = buildApp({ now: () => clock });
    const ws = await workspace('acme', 'enterprise', { creditsPerMonth: 1, requestsPerMinute: 1000 });
    const tok = await token(ws.id);
    // Another gateway reserved the last credit, then died: it never settles, releases or renews it.
    expect((await store.reserveCredits(ws.id, 1, 1, new Date(clock), config.creditReservationTtlMs)).ok).toBe(true);
    const denoise = () => request(app).post('/v1/noise-suppressor/denoise').set('X-API-Key', tok);
    expectEnvelope(await denoise(), 429, 'rate_limited');
    clock += config.creditReservationTtlMs - 1;
    expect((await denoise()).status).toBe(429);
    clock += 1;
    expect((await denoise()).status).toBe(200);
    expect(await store.creditsUsed(ws.id, new Date(clock))).toBe(1);
    expect(await heldCredits(ws.id)).toBe(0);
  });

  test('a long call keeps its hold alive: the gateway renews it before it expires', async () => {
    // The renewal timer is the only interval on this path: it runs on fake time, the gateway reads `clock`, and
    // everything else (HTTP, polling) keeps the real timers.
    jest.useFakeTimers({ doNotFake: ['Date', 'hrtime', 'nextTick', 'performance', 'queueMicrotask', 'setImmediate', 'clearImmediate', 'setTimeout', 'clearTimeout'] });
    let clock = Date.now();
    const ttlMs = 300;
    const app = buildApp({ now: () => clock, config: { creditReservationTtlMs: ttlMs } });
    const ws = await workspace('acme', 'enterprise', { creditsPerMonth: 1, requestsPerMinute: 1000 });
    const tok = await token(ws.id);
    const server = app.listen(0, '127.0.0.1');
    await new Promise((r) => server.once('listening', r));
    try {
      const { port } = server.address() as AddressInfo;
      const req = http.request({
        host: '127.0.0.1',
        port,
        method: 'POST',
        path: '/v1/noise-suppressor/denoise',
        headers: { 'X-API-Key': tok, 'X-Test-Upstream': 'hang', 'Content-Length': '4' },
      });
      req.on('error', () => undefined);
      req.end('abcd');
      await eventually(async () => (await heldCredits(ws.id)) > 0);
      // Four TTLs later the hold is still there: reclaiming finds nothing expired.
      for (let t = 0; t < 4 * ttlMs; t += 50) {
        clock += 50;
        jest.advanceTimersByTime(50);
      }
      expect(await store.reclaimExpiredReservations(new Date(clock))).toBe(0);
      expect(await heldCredits(ws.id)).toBe(1);
      req.destroy();
      await eventually(async () => (await heldCredits(ws.id)) === 0);
      expect(await heldCredits(ws.id)).toBe(0);
    } finally {
      jest.useRealTimers();
      server.closeAllConnections();
      await new Promise((r) => server.close(r));
    }
  });

  test('50 concurrent calls against 10 remaining credits: exactly 10 succeed', async () => {
    const app = buildApp();
    const ws = await workspace('acme', 'enterprise', { creditsPerMonth: 1000, requestsPerMinute: 10_000 });
    expect((await store.chargeCredits(ws.id, 990, 1000, new Date())).ok).toBe(true);
    const tok = await token(ws.id);
    const server = app.listen(0, '127.0.0.1');
    await new Promise((r) => server.once('listening', r));
    try {
      const { port } = server.address() as AddressInfo;
      gate.open = false;
      const calls = Promise.all(
        Array.from({ length: 50 }, async (_, i) => {
          const res = await fetch(`http://127.0.0.1:${port}/v1/noise-suppressor/denoise`, {
            method: 'POST',
            headers: { Authorization: `Bearer ${tok}`, 'X-Test-Upstream': 'gate', 'Content-Type': 'application/octet-stream' },
            body: Buffer.alloc(1000, i),
          });
          const body = (await res.json()) as { error?: { type: string } };
          if (res.status === 429) expect(body.error!.type).toBe('rate_limited');
          return res.status === 402 ? body.error!.type : res.status;
        }),
      );
      // The ten calls that got a credit wait at the model service until all ten hold theirs at once.
      await eventually(async () => (await heldCredits(ws.id)) >= 10);
      gate.release();
      const statuses = await calls;
      expect(statuses.filter((s) => s === 200)).toHaveLength(10);
      // The others: 402 once the 10 are settled, 429 while some of them were still in flight.
      expect(statuses.filter((s) => s === 'quota_exhausted' || s === 429)).toHaveLength(40);
      expect(await store.creditsUsed(ws.id, new Date())).toBe(1000);
      expect(await heldCredits(ws.id)).toBe(0);
    } finally {
      gate.release();
      server.closeAllConnections();
      await new Promise((r) => server.close(r));
    }
  });
});
