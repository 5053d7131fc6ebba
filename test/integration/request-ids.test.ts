// Every response carries an X-Request-Id and every error body the envelope {"error": {"type", "message",
// "request_id"}} — outside /v1 too (issue 27 item 8): the probes, /metrics and its 401, /openapi.json, the console's
// pages and API, and Node's own refusals of malformed requests (bad framing, oversized headers, header timeout),
// which the real server process answers instead of closing with no body. Jobs-API refusals keep their reason in the
// request log and the request line (issue 29 item 4).
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import path from 'node:path';
import request from 'supertest';
import { createApp, type AppHandle } from '../../src/app';
import { PROJECT_ROOT, type Config } from '../../src/config';
import { answerClientErrors } from '../../src/http/client-errors';
import { until } from '../helpers/jobs-helpers';
import { closeQuietly, createToken, eventually, testConfig } from '../helpers/service-helpers';

const REQUEST_ID = /^req_[0-9a-f]{32}$/;

/** The response has our id, and (for an error) the envelope carrying the same id. */
function expectId(res: { headers: Record<string, unknown> }): string {
  const id = String(res.headers['x-request-id']);
  expect(id).toMatch(REQUEST_ID);
  return id;
}
function expectEnvelope(res: { status: number; headers: Record<string, unknown>; body: unknown }, status: number, type: string): void {
  expect(res.status).toBe(status);
  const id = expectId(res);
  expect(res.body).toMatchObject({ error: { type, message: expect.any(String), request_id: id } });
}

describe('outside /v1, through the app', () => {
  let config: Config;
  let handle: AppHandle;
  let guarded: AppHandle;
  const lines: Array<Record<string, unknown>> = [];

  beforeAll(async () => {
    config = testConfig({ logRequests: true, adminSecret: 'request-ids-secret' });
    handle = await createApp(config, { log: (line) => lines.push(JSON.parse(line) as Record<string, unknown>) });
    guarded = await createApp({ ...config, metricsToken: 'metrics-secret' }, { store: handle.store, engine: handle.engine!, log: () => undefined });
  });
  afterAll(async () => {
    await guarded?.close();
    await handle?.close();
    fs.rmSync(config.dataDir, { recursive: true, force: true });
  });

  test('probes, /metrics, /openapi.json and the redirects carry an X-Request-Id; a client-sent one is not echoed', async () => {
    for (const p of ['/healthz', '/readyz', '/metrics', '/openapi.json']) {
      const res = await request(handle.app).get(p).set('X-Request-Id', 'client-chosen-id');
      expect([p, res.status]).toEqual([p, 200]);
      expect(expectId(res)).not.toBe('client-chosen-id');
    }
    expectId(await request(handle.app).head('/healthz').expect(200));
    expectId(await request(handle.app).get('/').expect(302));
    expectId(await request(guarded.app).get('/metrics').set('Authorization', 'Bearer metrics-secret').expect(200));
    // Two calls, two ids.
    const [a, b] = await Promise.all([request(handle.app).get('/healthz'), request(handle.app).get('/healthz')]);
    expect(expectId(a)).not.toBe(expectId(b));
  });

  test('/metrics 401 and /readyz 503 are error envelopes with that id', async () => {
    const refused = await request(guarded.app).get('/metrics').set('Authorization', 'Bearer wrong');
    expectEnvelope(refused, 401, 'invalid_token');
    expect(refused.headers['www-authenticate']).toBe('Bearer realm="metrics"');
    // No header at all: missing_token, as the gateway says it (issue 35, item 13).
    expectEnvelope(await request(guarded.app).get('/metrics'), 401, 'missing_token');
    expectEnvelope(await request(guarded.app).get('/metrics').set('Authorization', 'Basic eDp5'), 401, 'invalid_token');

    guarded.beginDrain();
    const draining = await request(guarded.app).get('/readyz');
    expectEnvelope(draining, 503, 'not_ready');
    expect(draining.body).toMatchObject({ status: 'not_ready', failed: { server: 'shutting down' } });
    expect(draining.body.error.message).toBe('not ready: server: shutting down');
  });

  test('console pages and every console error carry the id; errors keep their type and message', async () => {
    expectId(await request(handle.app).get('/console').expect(301));
    const page = await request(handle.app).get('/console/').expect(200);
    expect(page.headers['content-type']).toMatch(/text\/html/);
    expectId(page);
    expectId(await request(handle.app).get('/console/console.css').expect(200));
    expectId(await request(handle.app).get('/console/api/session').expect(200));

    const anon = await request(handle.app).get('/console/api/workspaces');
    expectEnvelope(anon, 401, 'not_signed_in');
    expect(anon.body.error.message).toBe('sign in first');
    expectEnvelope(await request(handle.app).post('/console/api/login').set('Content-Type', 'text/plain').send('x'), 415, 'unsupported_media_type');
    expectEnvelope(await request(handle.app).post('/console/api/login').set('Content-Type', 'application/json').send('{"secret":'), 400, 'bad_request');
    expectEnvelope(await request(handle.app).post('/console/api/login').send({ secret: 'wrong' }), 401, 'invalid_secret');
    expectEnvelope(await request(handle.app).get('/console/api/workspaces').set('Sec-Fetch-Site', 'cross-site'), 403, 'csrf_failed');

    const login = await request(handle.app).post('/console/api/login').send({ secret: 'request-ids-secret' }).expect(200);
    const cookie = ([] as string[]).concat(login.headers['set-cookie'] ?? []).find((c) => c.startsWith('ns_console_session='))!.split(';')[0];
    expectEnvelope(await request(handle.app).post('/console/api/workspaces').set('Cookie', cookie).send({ name: 'x' }), 403, 'csrf_failed');
    const csrf = login.body.csrf_token as string;
    const bad = await request(handle.app).post('/console/api/workspaces').set('Cookie', cookie).set('X-CSRF-Token', csrf).send({ name: ' ' });
    expectEnvelope(bad, 400, 'bad_request');
    expect(bad.body.error.message).toBe('workspace name is required');
    expectEnvelope(await request(handle.app).get('/console/api/no-such-thing').set('Cookie', cookie), 404, 'not_found');
    expectEnvelope(await request(handle.app).get('/console/api/workspaces/ws_none/usage').set('Cookie', cookie), 404, 'not_found');
    // The Jobs page's endpoints (src/jobs/console-api.ts) answer the same way.
    expectEnvelope(await request(handle.app).get('/console/api/jobs/job_none').set('Cookie', cookie), 404, 'not_found');
    expectEnvelope(await request(handle.app).get('/console/api/jobs?status=bogus').set('Cookie', cookie), 400, 'bad_request');
  });

  test('jobs-API refusals keep their reason: request log error_message and the request line', async () => {
    const token = await createToken(handle.store);
    const form = (fields: Record<string, string>) => {
      let r = request(handle.app).post('/v1/noise-suppressor/jobs').set('Authorization', `Bearer ${token}`);
      for (const [k, v] of Object.entries(fields)) r = r.field(k, v);
      return r;
    };
    const refusedUrl = await form({ url: 'ftp://example.com/a.wav' });
    expectEnvelope(refusedUrl, 400, 'url_not_allowed');
    const unknownField = await form({ bogus: 'x' });
    expectEnvelope(unknownField, 400, 'invalid_request');

    for (const res of [refusedUrl, unknownField]) {
      const id = String(res.headers['x-request-id']);
      // The row is written as the response finishes, a moment after the client has it.
      const row = await until(async () => (await handle.store.queryRequests({ limit: 50 })).find((r) => r.requestId === id), 5000, 20);
      expect(row).toMatchObject({ status: 400, errorType: res.body.error.type, errorMessage: res.body.error.message });
      await eventually(() => lines.some((l) => l.request_id === id));
      expect(lines.find((l) => l.request_id === id)).toMatchObject({ status: 400, error_type: res.body.error.type, error_message: res.body.error.message });
    }
    expect(refusedUrl.body.error.message).toMatch(/must be an http or https URL/);
  });
});

interface RawAnswer {
  status: number;
  headers: Record<string, string>;
  body: unknown;
}

/** Sends `bytes` on a fresh connection and reads until the server closes it; the answer parsed. */
function rawExchange(port: number, bytes: string | Buffer, opts: { keepOpen?: boolean } = {}): Promise<RawAnswer> {
  return new Promise((resolve, reject) => {
    const socket = net.connect(port, '127.0.0.1');
    const chunks: Buffer[] = [];
    socket.on('data', (d) => chunks.push(d));
    socket.on('error', reject);
    socket.on('close', () => {
      const text = Buffer.concat(chunks).toString('latin1');
      const split = text.indexOf('\r\n\r\n');
      if (split < 0) return reject(new Error(`no HTTP answer before the close: ${JSON.stringify(text)}`));
      const [statusLine, ...headerLines] = text.slice(0, split).split('\r\n');
      const headers: Record<string, string> = {};
      for (const h of headerLines) headers[h.slice(0, h.indexOf(':')).toLowerCase()] = h.slice(h.indexOf(':') + 1).trim();
      const raw = text.slice(split + 4);
      let body: unknown = raw;
      try {
        body = JSON.parse(raw);
      } catch {
        // not JSON: kept as text, the assertions say so
      }
      resolve({ status: Number(statusLine.split(' ')[1]), headers, body });
    });
    socket.write(bytes);
    if (!opts.keepOpen) socket.on('end', () => socket.end());
  });
}

describe("Node's own refusals, from the real server process (npm start)", () => {
  let child: ChildProcess;
  let port: number;
  let config: Config;

  beforeAll(async () => {
    config = testConfig();
    child = spawn(process.execPath, [path.join(PROJECT_ROOT, 'dist/src/server.js')], {
      env: { ...process.env, PORT: '0', HOST: '127.0.0.1', DATA_DIR: config.dataDir, WORKERS: '1', NODE_ENV: 'test', ADMIN_SECRET: 'x', LOG_FORMAT: '' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let output = '';
    child.stdout!.on('data', (d: Buffer) => (output += d.toString()));
    child.stderr!.on('data', (d: Buffer) => (output += d.toString()));
    await eventually(() => /"event":"started"/.test(output) || child.exitCode !== null, 60_000);
    const started = output.split('\n').find((l) => l.includes('"event":"started"'));
    if (!started) throw new Error(`server did not start:\n${output}`);
    port = Number(new URL((JSON.parse(started) as { url: string }).url).port);
  });
  afterAll(async () => {
    if (child && child.exitCode === null) {
      const exited = new Promise((r) => child.once('exit', r));
      child.kill('SIGTERM');
      await exited;
    }
    fs.rmSync(config.dataDir, { recursive: true, force: true });
  });

  const expectRawEnvelope = (res: RawAnswer, status: number, type: string): void => {
    expect(res.status).toBe(status);
    expect(res.headers['x-request-id']).toMatch(REQUEST_ID);
    expect(res.headers['content-type']).toBe('application/json; charset=utf-8');
    expect(res.headers.connection).toBe('close');
    expect(res.body).toMatchObject({ error: { type, message: expect.any(String), request_id: res.headers['x-request-id'] } });
  };

  test('bad framing (an unknown method; Content-Length beside chunked) is 400 invalid_request with the envelope', async () => {
    const garbage = await rawExchange(port, 'BR@KEN /healthz HTTP/1.1\r\nHost: x\r\n\r\n');
    expectRawEnvelope(garbage, 400, 'invalid_request');
    expect((garbage.body as { error: { message: string } }).error.message).toMatch(/^The request is not valid HTTP\/1\.1/);
    const smuggled = await rawExchange(
      port,
      'POST /v1/noise-suppressor/denoise HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n',
    );
    expectRawEnvelope(smuggled, 400, 'invalid_request');
  });

  test('headers over the limit are 431 headers_too_large with the envelope', async () => {
    const big = await rawExchange(port, `GET /healthz HTTP/1.1\r\nHost: x\r\nX-Filler: ${'a'.repeat(20_000)}\r\n\r\n`);
    expectRawEnvelope(big, 431, 'headers_too_large');
  });

  test('a broken request after a good one on a kept-alive connection still gets its answer', async () => {
    const res = await new Promise<string>((resolve, reject) => {
      const socket = net.connect(port, '127.0.0.1');
      const chunks: Buffer[] = [];
      socket.on('data', (d) => {
        chunks.push(d);
        // The first answer is complete: now the broken request on the same connection.
        if (chunks.length === 1) socket.write('NOT HTTP AT ALL\r\n\r\n');
      });
      socket.on('error', reject);
      socket.on('close', () => resolve(Buffer.concat(chunks).toString('latin1')));
      socket.write('GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n');
    });
    const answers = res.split(/(?=HTTP\/1\.1 \d{3} )/);
    expect(answers.map((a) => a.slice(0, 12))).toEqual(['HTTP/1.1 200', 'HTTP/1.1 400']);
    const ids = answers.map((a) => /x-request-id: (\S+)/i.exec(a)?.[1]);
    expect(ids[0]).toMatch(REQUEST_ID);
    expect(ids[1]).toMatch(REQUEST_ID);
    expect(ids[0]).not.toBe(ids[1]);
    expect(JSON.parse(answers[1].slice(answers[1].indexOf('\r\n\r\n') + 4))).toMatchObject({ error: { type: 'invalid_request', request_id: ids[1] } });
  });
});

describe('answerClientErrors: headers that do not arrive in time', () => {
  test('408 request_timeout with the envelope once headersTimeout passes', async () => {
    // Small timeouts so Node's own clock fires quickly; the test waits for the answer, not for a set time.
    const server = http.createServer({ headersTimeout: 200, requestTimeout: 300, connectionsCheckingInterval: 50 }, (_req, res) => res.end('ok'));
    answerClientErrors(server);
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    try {
      const { port } = server.address() as net.AddressInfo;
      const res = await rawExchange(port, 'GET / HTTP/1.1\r\nHost: x\r\nX-Half: a', { keepOpen: true });
      expect(res.status).toBe(408);
      expect(res.headers['x-request-id']).toMatch(REQUEST_ID);
      expect(res.body).toEqual({
        error: { type: 'request_timeout', message: 'The request headers did not arrive in time.', request_id: res.headers['x-request-id'] },
      });
    } finally {
      await closeQuietly(server);
    }
  });
});
