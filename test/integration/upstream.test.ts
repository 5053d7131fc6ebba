// The gateway → model-service boundary against a stand-in model service (a plain HTTP server whose behaviour each
// test chooses): pass-through, body limits, error mapping, timeout and the circuit breaker. The real gateway and a
// real SQLite store sit in front. The boundary against the real model-service process is in upstream-process.test.ts.
import fs from 'node:fs';
import http from 'node:http';
import type net from 'node:net';
import express from 'express';
import { modelServiceReady } from '../../src/app/readiness';
import type { Config } from '../../src/config';
import { createGateway, gatewayErrorHandler } from '../../src/gateway';
import type { EndpointSpec } from '../../src/gateway/types';
import { ROUTES } from '../../src/gateway/routes';
import { openSqliteStore } from '../../src/store/gateway/sqlite';
import type { GatewayStore } from '../../src/store/gateway/types';
import { createModelServiceForwarder, type ModelServiceForwarder } from '../../src/upstream/forwarder';
import { closeQuietly, createToken, listen, rawRequest, testConfig } from '../helpers/service-helpers';

type Mode = 'ok' | 'slow' | 'fail500' | 'busy503' | 'big413' | 'hang' | 'reset';

interface Seen {
  method: string;
  url: string;
  headers: http.IncomingHttpHeaders;
  bodyBytes: number;
  completed: boolean;
}

const SMALL_LIMIT = 4096;

describe('model-service forwarder', () => {
  let config: Config;
  let store: GatewayStore;
  let token: string;
  let upstream: { server: http.Server; url: string };
  let mode: Mode = 'ok';
  let seen: Seen[] = [];
  let gatewayUrl: string;
  let gatewayServer: http.Server;
  let forwarder: ModelServiceForwarder;

  // denoise gets a small body limit so the streaming cut-off can be tested with small bodies.
  const routes: EndpointSpec[] = ROUTES.map((r) => (r.endpoint === 'denoise' ? { ...r, maxBodyBytes: SMALL_LIMIT } : r));

  /** `now`: the breakers' clock (the tests that wait out a cool-down move it instead of sleeping). */
  async function startGateway(overrides: Partial<Config>, baseUrl: string, now?: () => number): Promise<void> {
    if (gatewayServer) await closeQuietly(gatewayServer);
    forwarder = createModelServiceForwarder({ config: { ...config, ...overrides }, baseUrl, now });
    const app = express();
    app.use(createGateway({ config, store, forward: forwarder, routes }));
    app.use(gatewayErrorHandler);
    const started = await listen(app);
    gatewayServer = started.server;
    gatewayUrl = started.url;
  }

  beforeAll(async () => {
    config = testConfig({ upstreamTimeoutMs: 500, breakerThreshold: 3, breakerCooldownMs: 400 });
    store = openSqliteStore(config);
    token = await createToken(store);
    upstream = await listen((req, res) => {
      const record: Seen = { method: req.method ?? '', url: req.url ?? '', headers: req.headers, bodyBytes: 0, completed: false };
      seen.push(record);
      req.on('data', (c: Buffer) => (record.bodyBytes += c.length));
      req.on('end', () => {
        record.completed = true;
        const json = (status: number, body: unknown, extra: Record<string, string> = {}) => {
          res.writeHead(status, { 'Content-Type': 'application/json', 'X-Upstream-Custom': 'yes', ...extra });
          res.end(JSON.stringify(body));
        };
        switch (mode) {
          case 'ok':
            return json(200, { path: req.url, received: record.bodyBytes });
          case 'slow':
            return setTimeout(() => json(200, { slow: true }), 1500);
          case 'fail500':
            return json(500, { detail: 'boom' });
          case 'busy503':
            return json(503, { detail: 'starting' }, { 'Retry-After': '7' });
          case 'big413':
            return json(413, { detail: 'file "x.wav" is larger than 100 MB' });
          case 'hang':
            return; // never answers
          case 'reset':
            return req.socket.destroy();
        }
      });
    });
    await startGateway({}, upstream.url);
  });

  afterAll(async () => {
    await closeQuietly(gatewayServer);
    await closeQuietly(upstream.server);
    await store.close();
    fs.rmSync(config.dataDir, { recursive: true, force: true });
  });

  beforeEach(async () => {
    mode = 'ok';
    seen = [];
  });

  const auth = () => ({ Authorization: `Bearer ${token}` });

  test('maps the endpoint path, keeps the query, streams the body, strips credentials and adds headers', async () => {
    const body = Buffer.alloc(3000, 7);
    const res = await rawRequest(`${gatewayUrl}/v1/noise-suppressor/denoise?x=1&y=two`, {
      method: 'POST',
      headers: { ...auth(), 'Content-Type': 'application/octet-stream', 'Content-Length': body.length, 'X-Request-Id': 'abc-123' },
      body,
    });
    expect(res.status).toBe(200);
    expect(JSON.parse(res.body.toString())).toEqual({ path: '/denoise?x=1&y=two', received: 3000 });
    // The gateway's own id, forwarded upstream and logged; the client's is kept beside it as client_request_id.
    const requestId = res.headers['x-request-id'] as string;
    expect(requestId).toMatch(/^req_[0-9a-f]{32}$/);
    expect(res.headers['x-upstream-custom']).toBe('yes');
    expect(Number(res.headers['x-gateway-upstream-ms'])).toBeGreaterThanOrEqual(0);
    expect(res.headers['x-gateway-upstream-ms']).toMatch(/^\d+$/);
    expect(seen).toHaveLength(1);
    expect(seen[0].headers.authorization).toBeUndefined();
    expect(seen[0].headers['x-api-key']).toBeUndefined();
    expect(seen[0].headers['x-request-id']).toBe(requestId);
    expect(seen[0].headers['x-forwarded-for']).toBe('127.0.0.1');

    // The gateway's request log gets bytes and upstream time from the forwarder's context.
    const [logged] = await store.queryRequests({ limit: 1 });
    expect(logged.requestId).toBe(requestId);
    expect(logged.clientRequestId).toBe('abc-123');
    expect(logged.bytesIn).toBe(3000);
    expect(logged.bytesOut).toBe(res.body.length);
    expect(logged.upstreamMs).not.toBeNull();
  });

  test('GET endpoints map to the model service root paths (denoise/batch too)', async () => {
    for (const endpoint of ['models', 'sample', 'health']) {
      const res = await rawRequest(`${gatewayUrl}/v1/noise-suppressor/${endpoint}`, { headers: auth() });
      expect(res.status).toBe(200);
      expect(JSON.parse(res.body.toString()).path).toBe(`/${endpoint}`);
    }
    const res = await rawRequest(`${gatewayUrl}/v1/noise-suppressor/denoise/batch`, {
      method: 'POST',
      headers: { ...auth(), 'Content-Length': 2 },
      body: Buffer.from('hi'),
    });
    expect(JSON.parse(res.body.toString()).path).toBe('/denoise/batch');
  });

  test('a chunked body over the route limit is cut off with 413 payload_too_large', async () => {
    const chunks = Array.from({ length: 10 }, () => Buffer.alloc(1000, 1)); // 10 000 > 4096, no Content-Length
    const res = await rawRequest(`${gatewayUrl}/v1/noise-suppressor/denoise`, { method: 'POST', headers: auth(), body: chunks });
    expect(res.status).toBe(413);
    const body = JSON.parse(res.body.toString());
    expect(body.error.type).toBe('payload_too_large');
    expect(body.error.request_id).toBe(res.headers['x-request-id']);
    // The model service never received the whole body.
    await new Promise((r) => setTimeout(r, 50));
    expect(seen.every((s) => !s.completed || s.bodyBytes <= SMALL_LIMIT)).toBe(true);
  });

  test('a declared Content-Length over the limit is refused before contacting the model service', async () => {
    const res = await rawRequest(`${gatewayUrl}/v1/noise-suppressor/denoise`, {
      method: 'POST',
      headers: { ...auth(), 'Content-Length': SMALL_LIMIT + 1 },
      body: Buffer.alloc(SMALL_LIMIT + 1),
    });
    expect(res.status).toBe(413);
    expect(JSON.parse(res.body.toString()).error.type).toBe('payload_too_large');
    expect(seen).toHaveLength(0);
  });

  test('an upstream 413 becomes the gateway envelope payload_too_large with its detail', async () => {
    mode = 'big413';
    const res = await rawRequest(`${gatewayUrl}/v1/noise-suppressor/models`, { headers: auth() });
    expect(res.status).toBe(413);
    const body = JSON.parse(res.body.toString());
    expect(body.error).toEqual({ type: 'payload_too_large', message: 'file "x.wav" is larger than 100 MB', request_id: res.headers['x-request-id'] });
    expect(res.headers['x-gateway-upstream-ms']).toMatch(/^\d+$/);
  });

  test('an upstream 503 becomes 503 upstream_unavailable (Retry-After kept)', async () => {
    mode = 'busy503';
    const res = await rawRequest(`${gatewayUrl}/v1/noise-suppressor/health`, { headers: auth() });
    expect(res.status).toBe(503);
    expect(JSON.parse(res.body.toString()).error.type).toBe('upstream_unavailable');
    expect(res.headers['retry-after']).toBe('7');
    forwarder.breaker.success(false); // keep the breaker out of the next tests
  });

  test('model-service 4xx/5xx bodies pass through unchanged', async () => {
    mode = 'fail500';
    const res = await rawRequest(`${gatewayUrl}/v1/noise-suppressor/health`, { headers: auth() });
    expect(res.status).toBe(500);
    expect(JSON.parse(res.body.toString())).toEqual({ detail: 'boom' });
    forwarder.breaker.success(false);
  });

  test('connection refused → 502 upstream_unavailable; connection reset → 502', async () => {
    // A port nobody listens on: bind one, then close it.
    const tmp = await listen(() => undefined);
    const deadUrl = tmp.url;
    await closeQuietly(tmp.server);
    await startGateway({}, deadUrl);
    const res = await rawRequest(`${gatewayUrl}/v1/noise-suppressor/models`, { headers: auth() });
    expect(res.status).toBe(502);
    const body = JSON.parse(res.body.toString());
    expect(body.error.type).toBe('upstream_unavailable');
    expect(body.error.message).toMatch(/ECONNREFUSED/);

    await startGateway({}, upstream.url);
    mode = 'reset';
    const reset = await rawRequest(`${gatewayUrl}/v1/noise-suppressor/models`, { headers: auth() });
    expect(reset.status).toBe(502);
    expect(JSON.parse(reset.body.toString()).error.type).toBe('upstream_unavailable');
  });

  test('keep-alive: calls share one connection to the replica; one it drops is retried once on a new connection', async () => {
    await startGateway({}, upstream.url); // a new forwarder: an empty connection pool
    const sockets = new Set<net.Socket>();
    const served = new Set<net.Socket>();
    let dropping = false;
    let dropped = 0;
    const onRequest = (req: http.IncomingMessage, res: http.ServerResponse): void => {
      sockets.add(req.socket);
      res.on('finish', () => served.add(req.socket));
    };
    // As a replica whose keep-alive timer fired just as the gateway reused the connection: a connection that already
    // served a call is dropped before 100 Continue, so nothing of the body went out.
    const onContinue = (req: http.IncomingMessage, res: http.ServerResponse): void => {
      if (dropping && served.has(req.socket)) {
        dropped++;
        req.socket.destroy();
        return;
      }
      res.writeContinue();
      upstream.server.emit('request', req, res);
    };
    upstream.server.prependListener('request', onRequest);
    upstream.server.on('checkContinue', onContinue);
    try {
      const body = Buffer.alloc(1000, 3);
      const post = () =>
        rawRequest(`${gatewayUrl}/v1/noise-suppressor/denoise`, {
          method: 'POST',
          headers: { ...auth(), 'Content-Type': 'application/octet-stream', 'Content-Length': body.length },
          body,
        });
      for (let i = 0; i < 3; i++) expect((await post()).status).toBe(200);
      expect((await rawRequest(`${gatewayUrl}/v1/noise-suppressor/models`, { headers: auth() })).status).toBe(200);
      expect(sockets.size).toBe(1);

      dropping = true;
      const res = await post();
      expect(res.status).toBe(200);
      expect(JSON.parse(res.body.toString())).toEqual({ path: '/denoise', received: 1000 });
      expect(dropped).toBe(1);
      expect(sockets.size).toBe(2);
      // Not a failure of the replica: breaker and health untouched.
      expect(forwarder.upstreams()[0]).toMatchObject({ state: 'closed', consecutiveFailures: 0, healthy: true, inFlight: 0 });
    } finally {
      upstream.server.removeListener('request', onRequest);
      upstream.server.removeListener('checkContinue', onContinue);
    }
  });

  test('no response headers within upstreamTimeoutMs → 504 upstream_timeout', async () => {
    await startGateway({ upstreamTimeoutMs: 200 }, upstream.url);
    mode = 'hang';
    const started = Date.now();
    const res = await rawRequest(`${gatewayUrl}/v1/noise-suppressor/models`, { headers: auth() });
    expect(res.status).toBe(504);
    expect(JSON.parse(res.body.toString()).error.type).toBe('upstream_timeout');
    expect(Date.now() - started).toBeLessThan(1500);
  });

  test('circuit breaker: opens after N failures, answers circuit_open with Retry-After, half-open trial closes it', async () => {
    let clock = Date.now();
    await startGateway({ breakerThreshold: 3, breakerCooldownMs: 400 }, upstream.url, () => clock);
    mode = 'fail500';
    for (let i = 0; i < 3; i++) {
      const res = await rawRequest(`${gatewayUrl}/v1/noise-suppressor/health`, { headers: auth() });
      expect(res.status).toBe(500);
    }
    const callsBefore = seen.length;
    const open = await rawRequest(`${gatewayUrl}/v1/noise-suppressor/health`, { headers: auth() });
    expect(open.status).toBe(503);
    expect(JSON.parse(open.body.toString()).error.type).toBe('circuit_open');
    expect(Number(open.headers['retry-after'])).toBeGreaterThanOrEqual(1);
    expect(seen.length).toBe(callsBefore); // the model service was not called
    expect(forwarder.breaker.snapshot().state).toBe('open');

    // Just before the cool-down ends it is still open; after it a trial call goes through; a failing trial reopens it.
    clock += 390;
    expect((await rawRequest(`${gatewayUrl}/v1/noise-suppressor/health`, { headers: auth() })).status).toBe(503);
    clock += 60;
    const failedTrial = await rawRequest(`${gatewayUrl}/v1/noise-suppressor/health`, { headers: auth() });
    expect(failedTrial.status).toBe(500);
    expect((await rawRequest(`${gatewayUrl}/v1/noise-suppressor/health`, { headers: auth() })).status).toBe(503);

    // Next trial succeeds and closes it.
    clock += 450;
    mode = 'ok';
    const trial = await rawRequest(`${gatewayUrl}/v1/noise-suppressor/health`, { headers: auth() });
    expect(trial.status).toBe(200);
    expect(forwarder.breaker.snapshot().state).toBe('closed');
    expect((await rawRequest(`${gatewayUrl}/v1/noise-suppressor/health`, { headers: auth() })).status).toBe(200);
  });

  /** A breaker opened by one failure, then half-open with a slow trial call at the service (its answer to come). */
  async function slowTrial(): Promise<{ trial: ReturnType<typeof rawRequest> }> {
    await startGateway({ breakerThreshold: 1, breakerCooldownMs: 200, upstreamTimeoutMs: 5000 }, upstream.url);
    mode = 'fail500';
    expect((await rawRequest(`${gatewayUrl}/v1/noise-suppressor/health`, { headers: auth() })).status).toBe(500);
    await new Promise((r) => setTimeout(r, 250));
    mode = 'slow';
    const trial = rawRequest(`${gatewayUrl}/v1/noise-suppressor/health`, { headers: auth() });
    await new Promise((r) => setTimeout(r, 100));
    return { trial };
  }

  test('half-open lets exactly one trial through while it runs', async () => {
    const { trial } = await slowTrial();
    const concurrent = await rawRequest(`${gatewayUrl}/v1/noise-suppressor/health`, { headers: auth() });
    expect(concurrent.status).toBe(503);
    expect(JSON.parse(concurrent.body.toString()).error.type).toBe('circuit_open');
    expect((await trial).status).toBe(200);
    expect(forwarder.breaker.snapshot().state).toBe('closed');
  });

  test("a /readyz that finds the model service ready closes a half-open breaker, also while another call holds the trial", async () => {
    const { trial } = await slowTrial();
    mode = 'ok'; // the trial already has its slow answer coming; the service answers the rest at once
    // Before the probe: refused, the trial holds the breaker.
    expect((await rawRequest(`${gatewayUrl}/v1/noise-suppressor/health`, { headers: auth() })).status).toBe(503);
    await modelServiceReady(forwarder);
    expect(forwarder.breaker.snapshot().state).toBe('closed');
    expect((await rawRequest(`${gatewayUrl}/v1/noise-suppressor/health`, { headers: auth() })).status).toBe(200);
    expect((await trial).status).toBe(200);
    expect(forwarder.breaker.snapshot().state).toBe('closed');
  });

  test('timeouts and connection errors count as breaker failures; client aborts do not', async () => {
    await startGateway({ breakerThreshold: 2, breakerCooldownMs: 10_000, upstreamTimeoutMs: 150 }, upstream.url);
    mode = 'hang';
    expect((await rawRequest(`${gatewayUrl}/v1/noise-suppressor/health`, { headers: auth() })).status).toBe(504);

    // A client that gives up is not the model service's fault.
    await new Promise<void>((resolve) => {
      const req = http.request(`${gatewayUrl}/v1/noise-suppressor/health`, { headers: auth() });
      req.on('error', () => resolve());
      req.end();
      setTimeout(() => {
        req.destroy();
        resolve();
      }, 50);
    });
    await new Promise((r) => setTimeout(r, 50));
    expect(forwarder.breaker.snapshot()).toEqual({ state: 'closed', consecutiveFailures: 1 });

    mode = 'reset';
    expect((await rawRequest(`${gatewayUrl}/v1/noise-suppressor/health`, { headers: auth() })).status).toBe(502);
    expect(forwarder.breaker.snapshot().state).toBe('open');
    const open = await rawRequest(`${gatewayUrl}/v1/noise-suppressor/health`, { headers: auth() });
    expect(open.status).toBe(503);
    expect(Number(open.headers['retry-after'])).toBe(10);
  });
});
