// openapi.json against the OpenAPI 3.1 schema, and against the service itself: real responses of every endpoint
// (the whole app: gateway, in-process model service, engine, ffmpeg, SQLite; plus gateways in front of a model
// service that is down, slow or failing) are checked for a documented status, documented content type, JSON bodies
// valid against their schemas, and headers: every API header sent is documented, every required one is sent.
//
// Validator: @apidevtools/swagger-parser (maintained; validates against the official OpenAPI 3.1 JSON schema and
// adds the semantic checks a schema cannot express, e.g. unique operationIds and declared path parameters; it also
// dereferences $refs so the response schemas can be compiled). Bodies and JSON headers: Ajv in draft 2020-12 mode,
// the JSON Schema dialect of OpenAPI 3.1.
import fs from 'node:fs';
import http from 'node:http';
import SwaggerParser from '@apidevtools/swagger-parser';
import Ajv2020 from 'ajv/dist/2020';
import addFormats from 'ajv-formats';
import request from 'supertest';
import { createApp, OPENAPI_PATH, type AppHandle } from '../../src/app';
import type { Config } from '../../src/config';
import { until } from '../helpers/jobs-helpers';
import { closeQuietly, createToken, fixture, listen, testConfig } from '../helpers/service-helpers';

type Json = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

/** Response headers the API defines or relies on; whichever of these a response carries must be documented. */
const API_HEADERS = [
  'x-request-id',
  'ratelimit-limit',
  'ratelimit-remaining',
  'ratelimit-reset',
  'retry-after',
  'x-gateway-upstream-ms',
  'x-ns-stats',
  'x-ns-batch',
  'content-disposition',
  'allow',
  'www-authenticate',
  'cache-control',
  'location',
  'accept-ranges',
  'content-range',
  'etag',
  'last-modified',
];

/** Keys of a path item that are operations (a path item may also hold `parameters`, `summary`, ...). */
const HTTP_METHODS = new Set(['get', 'put', 'post', 'delete', 'options', 'head', 'patch', 'trace']);

const ajv = new Ajv2020({ allErrors: true, strict: true });
addFormats(ajv);
ajv.addFormat('binary', true); // OpenAPI's marker for raw bytes
ajv.addKeyword('example');
const compiled = new WeakMap<object, ReturnType<typeof ajv.compile>>();
function validator(schema: Json) {
  let v = compiled.get(schema);
  if (!v) {
    v = ajv.compile(schema);
    compiled.set(schema, v);
  }
  return v;
}

const baseType = (ct: string): string => ct.split(';')[0].trim().toLowerCase();

interface Seen {
  response: request.Response;
  path: string;
  method: string;
}

describe('openapi.json', () => {
  let api: Json;
  const exercised = new Set<string>();

  /** Checks one real response against the document; returns the problems found (empty = conforms). */
  function problems({ response: res, path, method }: Seen): string[] {
    const out: string[] = [];
    const op = api.paths[path]?.[method];
    if (!op) return [`${method.toUpperCase()} ${path} is not documented`];
    const spec = op.responses[String(res.status)] ?? op.responses.default;
    const where = `${method.toUpperCase()} ${path} → ${res.status}`;
    if (!spec) return [`${where}: status not documented`];
    exercised.add(`${method} ${path} ${res.status}`);

    // Content type and body.
    const ct = res.headers['content-type'] as string | undefined;
    const hasBody = Number(res.headers['content-length'] ?? 1) > 0 && method !== 'head';
    const content: Json = spec.content ?? {};
    if (hasBody && ct) {
      const key = Object.keys(content).find((k) => k === ct || baseType(k) === baseType(ct));
      if (!key) out.push(`${where}: content type ${ct} not documented (${Object.keys(content).join(', ') || 'none'})`);
      else if (baseType(ct) === 'application/json') {
        const v = validator(content[key].schema);
        if (!v(res.body)) out.push(`${where}: body ${JSON.stringify(res.body).slice(0, 200)} — ${ajv.errorsText(v.errors)}`);
      }
    }

    // Headers: sent ⊆ documented, required ⊆ sent, values valid.
    const documented = new Map<string, Json>(Object.entries(spec.headers ?? {}).map(([k, v]) => [k.toLowerCase(), v as Json]));
    for (const name of API_HEADERS) {
      const value = res.headers[name] as string | undefined;
      const doc = documented.get(name);
      if (value === undefined) {
        if (doc?.required) out.push(`${where}: required header ${name} missing`);
        continue;
      }
      if (!doc) {
        out.push(`${where}: sends ${name} (${value.slice(0, 60)}) but does not document it`);
        continue;
      }
      if (doc.schema) {
        const v = validator(doc.schema);
        const typed = doc.schema.type === 'integer' || doc.schema.type === 'number' ? Number(value) : value;
        if (!v(typed)) out.push(`${where}: header ${name}=${value} — ${ajv.errorsText(v.errors)}`);
      } else if (doc.content?.['application/json']) {
        const v = validator(doc.content['application/json'].schema);
        let parsed: unknown;
        try {
          parsed = JSON.parse(value);
        } catch {
          out.push(`${where}: header ${name} is not JSON`);
          continue;
        }
        if (!v(parsed)) out.push(`${where}: header ${name}=${value.slice(0, 120)} — ${ajv.errorsText(v.errors)}`);
      }
    }
    return out;
  }

  const conforms = (seen: Seen): void => {
    expect(problems(seen)).toEqual([]);
  };
  const at = (path: string, method: string) => (response: request.Response) => conforms({ response, path, method });

  beforeAll(async () => {
    // validate() checks the document and returns it dereferenced (the file itself is not changed).
    api = (await SwaggerParser.validate(JSON.parse(fs.readFileSync(OPENAPI_PATH, 'utf8')))) as Json;
  });

  test('is a valid OpenAPI 3.1 document with a licence, a real server, tag descriptions and binary uploads', () => {
    expect(api.openapi).toMatch(/^3\.1\./);
    expect(api.info.license).toEqual({ name: 'MIT', identifier: 'MIT' });
    expect(api.servers[0].url).toMatch(/^https?:\/\/[a-z0-9.-]+(:\d+)?$/);
    for (const tag of api.tags) expect(tag.description.length).toBeGreaterThan(20);
    const used = new Set<string>();
    for (const ops of Object.values(api.paths) as Json[]) {
      for (const [method, op] of Object.entries(ops) as Array<[string, Json]>) if (HTTP_METHODS.has(method)) for (const t of op.tags) used.add(t);
    }
    expect([...used].sort()).toEqual(api.tags.map((t: Json) => t.name).sort());
    const single = api.paths['/v1/noise-suppressor/denoise'].post.requestBody.content['multipart/form-data'].schema.properties.file;
    const batch = api.paths['/v1/noise-suppressor/denoise/batch'].post.requestBody.content['multipart/form-data'].schema.properties.files.items;
    for (const f of [single, batch]) expect(f).toMatchObject({ type: 'string', format: 'binary' });
    // The checker itself catches an undocumented header and a body that breaks its schema.
    const fake = { status: 200, headers: { 'content-type': 'application/json', 'x-ns-batch': '{}' }, body: { models: 'no' } } as unknown as request.Response;
    const found = problems({ response: fake, path: '/v1/noise-suppressor/models', method: 'get' });
    expect(found.join('\n')).toMatch(/sends x-ns-batch .* but does not document it/);
    expect(found.join('\n')).toMatch(/body .* must be array/);
    expect(found.join('\n')).toMatch(/required header x-request-id missing/);
    exercised.clear();
  });

  describe('real responses of the whole app', () => {
    let config: Config;
    let handle: AppHandle;
    let token: string;
    const API = '/v1/noise-suppressor';

    beforeAll(async () => {
      config = testConfig();
      handle = await createApp(config, { log: () => undefined });
      token = await createToken(handle.store, ['*']);
    });
    afterAll(async () => {
      await handle.close();
      fs.rmSync(config.dataDir, { recursive: true, force: true });
    });

    const auth = () => ({ Authorization: `Bearer ${token}` });

    test('POST /denoise: audio, json, 400, 401, 403, 405, 413, 422', async () => {
      const p = `${API}/denoise`;
      const check = at('/v1/noise-suppressor/denoise', 'post');
      const audio = await request(handle.app).post(p).set(auth()).field('model', 'nsm-1').attach('file', fixture('speech-noisy-16k-mono.wav'));
      expect(audio.status).toBe(200);
      check(audio);
      const flac = await request(handle.app).post(p).set(auth()).field('model', 'nsm-1').field('output_format', 'flac').attach('file', fixture('speech-noisy-16k-mono.wav'));
      expect(flac.headers['content-type']).toBe('audio/flac');
      check(flac);
      for (const [format, type] of [['mp3', 'audio/mpeg'], ['opus', 'audio/ogg'], ['m4a', 'audio/mp4']]) {
        const lossy = await request(handle.app).post(p).set(auth()).field('model', 'nsm-1').field('output_format', format)
          .field('loudness_lufs', '-16').attach('file', fixture('speech-noisy-16k-mono.wav'));
        expect([format, lossy.status, lossy.headers['content-type']]).toEqual([format, 200, type]);
        check(lossy);
      }
      const json = await request(handle.app).post(p).set(auth()).field('model', 'nsm-1').field('response', 'json').attach('file', fixture('speech-noisy-16k-mono.wav'));
      expect(json.status).toBe(200);
      expect(json.headers['content-disposition']).toBeUndefined();
      check(json);
      for (const res of [
        await request(handle.app).post(p).set(auth()).field('model', 'nsm-9').attach('file', fixture('speech-noisy-16k-mono.wav')),
        await request(handle.app).post(p).set(auth()).attach('file', fixture('not-audio.wav')),
        await request(handle.app).post(p).attach('file', fixture('speech-noisy-16k-mono.wav')),
        await request(handle.app).post(p).set('X-API-Key', 'mw_live_' + 'A'.repeat(32)),
        await request(handle.app).post(p).set('X-API-Key', await createToken(handle.store, ['noise-suppressor:models'])),
        await request(handle.app).get(p).set(auth()),
        await request(handle.app).post(p).set(auth()).set('Content-Type', 'multipart/form-data; boundary=x').set('Content-Length', String(500 * 1024 * 1024)),
      ]) {
        expect([400, 401, 403, 405, 413, 422]).toContain(res.status);
        check(res);
      }
    });

    test('POST /denoise/batch: zip, json, 400', async () => {
      const p = `${API}/denoise/batch`;
      const check = at('/v1/noise-suppressor/denoise/batch', 'post');
      const zip = await request(handle.app).post(p).set(auth()).field('model', 'nsm-1').attach('files', fixture('speech-noisy-16k-mono.wav')).attach('files', fixture('not-audio.wav'));
      expect(zip.status).toBe(200);
      check(zip);
      const json = await request(handle.app).post(p).set(auth()).field('model', 'nsm-1').field('response', 'json').attach('files', fixture('speech-noisy-16k-mono.wav'));
      expect(json.status).toBe(200);
      check(json);
      const bad = await request(handle.app).post(p).set(auth()).attach('file', fixture('speech-noisy-16k-mono.wav'));
      expect(bad.status).toBe(400);
      check(bad);
    });

    test('GET /models, /sample, /health, /openapi.json, 404s, HEAD-less 405', async () => {
      for (const [path, name] of [
        ['/models', 'models'],
        ['/sample', 'sample'],
        ['/health', 'health'],
      ]) {
        const res = await request(handle.app).get(`${API}${path}`).set(auth());
        expect([name, res.status]).toEqual([name, 200]);
        at(`/v1/noise-suppressor/${name}`, 'get')(res);
        const wrong = await request(handle.app).post(`${API}${path}`).set(auth());
        expect(wrong.status).toBe(405);
        at(`/v1/noise-suppressor/${name}`, 'get')(wrong);
      }
      const spec = await request(handle.app).get('/openapi.json');
      expect(spec.status).toBe(200);
      at('/openapi.json', 'get')(spec);
      // Unknown endpoint of a known service: the documented 404 envelope (checked against any operation's 404).
      const lost = await request(handle.app).get(`${API}/nope`).set(auth());
      expect(lost.status).toBe(404);
      at('/v1/noise-suppressor/models', 'get')(lost);
    });

    test('jobs: submit 202, list, poll, result 200/206/416, delete, 404 and 400', async () => {
      const JOBS = '/v1/noise-suppressor/jobs';
      const ONE = '/v1/noise-suppressor/jobs/{id}';
      const RESULT = '/v1/noise-suppressor/jobs/{id}/result';
      const submitted = await request(handle.app).post(`${API}/jobs`).set(auth()).field('model', 'nsm-1').attach('file', fixture('speech-noisy-16k-mono.wav'));
      expect(submitted.status).toBe(202);
      at(JOBS, 'post')(submitted);
      const id = submitted.body.id as string;
      const badForm = await request(handle.app).post(`${API}/jobs`).set(auth()).field('model', 'nsm-9').attach('file', fixture('speech-noisy-16k-mono.wav'));
      expect(badForm.status).toBe(400);
      at(JOBS, 'post')(badForm);
      const listed = await request(handle.app).get(`${API}/jobs`).set(auth());
      expect(listed.status).toBe(200);
      at(JOBS, 'get')(listed);
      const done = await until(async () => {
        const res = await request(handle.app).get(`${API}/jobs/${id}`).set(auth());
        return ['succeeded', 'failed'].includes(res.body.status) ? res : undefined;
      }, 60_000);
      expect(done.body.status).toBe('succeeded');
      at(ONE, 'get')(done);
      const whole = await request(handle.app).get(`${API}/jobs/${id}/result`).set(auth());
      expect(whole.status).toBe(200);
      at(RESULT, 'get')(whole);
      const part = await request(handle.app).get(`${API}/jobs/${id}/result`).set(auth()).set('Range', 'bytes=0-99');
      expect(part.status).toBe(206);
      at(RESULT, 'get')(part);
      const outside = await request(handle.app).get(`${API}/jobs/${id}/result`).set(auth()).set('Range', 'bytes=999999999-');
      expect(outside.status).toBe(416);
      at(RESULT, 'get')(outside);
      const unknown = await request(handle.app).get(`${API}/jobs/job_${'x'.repeat(24)}`).set(auth());
      expect(unknown.status).toBe(404);
      at(ONE, 'get')(unknown);
      const deleted = await request(handle.app).delete(`${API}/jobs/${id}`).set(auth());
      expect(deleted.status).toBe(200);
      at(ONE, 'delete')(deleted);
    });

    test('402 quota_exhausted and 429 rate_limited carry RateLimit-* (and Retry-After on 429)', async () => {
      const ws = await handle.store.createWorkspace('tiny', 'enterprise', { requestsPerMinute: 2, creditsPerMonth: 1 });
      const t = (await handle.store.createToken({ workspaceId: ws.id, name: 't', scopes: ['*'], allowedIps: [], expiresAt: null })).token;
      const first = await request(handle.app).post(`${API}/denoise`).set('X-API-Key', t).field('model', 'nsm-1').attach('file', fixture('speech-noisy-16k-mono.wav'));
      expect(first.status).toBe(200);
      const broke = await request(handle.app).post(`${API}/denoise`).set('X-API-Key', t).field('model', 'nsm-1').attach('file', fixture('speech-noisy-16k-mono.wav'));
      expect(broke.status).toBe(402);
      expect(broke.headers['ratelimit-limit']).toBe('2');
      at('/v1/noise-suppressor/denoise', 'post')(broke);
      const limited = await request(handle.app).get(`${API}/models`).set('X-API-Key', t);
      expect(limited.status).toBe(429);
      expect(limited.headers['retry-after']).toMatch(/^\d+$/);
      at('/v1/noise-suppressor/models', 'get')(limited);
    });

    test('operations: /healthz, /readyz (200 and 503), /metrics (200, and 401 with METRICS_TOKEN)', async () => {
      at('/healthz', 'get')(await request(handle.app).get('/healthz'));
      at('/readyz', 'get')(await request(handle.app).get('/readyz'));
      at('/metrics', 'get')(await request(handle.app).get('/metrics'));
      const cfg = { ...testConfig(), metricsToken: 'm-token' };
      const other = await createApp(cfg, { engine: handle.engine!, log: () => undefined });
      try {
        at('/metrics', 'get')(await request(other.app).get('/metrics'));
        other.beginDrain();
        const draining = await request(other.app).get('/readyz');
        expect(draining.status).toBe(503);
        at('/readyz', 'get')(draining);
      } finally {
        await other.close();
        fs.rmSync(cfg.dataDir, { recursive: true, force: true });
      }
    });
  });

  describe('the live stream (WebSocket upgrade) and its tickets', () => {
    let config: Config;
    let handle: AppHandle;
    let server: http.Server;
    let port: number;
    let token: string;
    const API = '/v1/noise-suppressor';
    beforeAll(async () => {
      config = testConfig();
      handle = await createApp(config, { log: () => undefined });
      token = await createToken(handle.store, ['*']);
      server = http.createServer(handle.app);
      handle.attachServer(server);
      await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
      port = (server.address() as import('node:net').AddressInfo).port;
    });
    afterAll(async () => {
      await closeQuietly(server);
      await handle.close();
      fs.rmSync(config.dataDir, { recursive: true, force: true });
    });

    /** An upgrade request: the 101 (socket then closed) or the refusal with its JSON body. */
    function upgrade(query: string, headers: Record<string, string>): Promise<request.Response> {
      return new Promise((resolve, reject) => {
        const req = http.request({
          host: '127.0.0.1', port, path: `${API}/stream${query}`,
          headers: { Connection: 'Upgrade', Upgrade: 'websocket', 'Sec-WebSocket-Version': '13', 'Sec-WebSocket-Key': 'dGhlIHNhbXBsZSBub25jZQ==', ...headers },
        });
        req.on('upgrade', (res, socket) => {
          socket.destroy();
          resolve({ status: 101, headers: res.headers, body: {} } as unknown as request.Response);
        });
        req.on('response', (res) => {
          const chunks: Buffer[] = [];
          res.on('data', (c: Buffer) => chunks.push(c));
          res.on('end', () => resolve({ status: res.statusCode, headers: res.headers, body: JSON.parse(Buffer.concat(chunks).toString()) } as unknown as request.Response));
        });
        req.on('error', reject);
        req.end();
      });
    }

    test('POST /stream/tickets 201; GET /stream: 101 with X-Request-Id, and 400, 401, 426 before the upgrade', async () => {
      const auth = { Authorization: `Bearer ${token}` };
      const tickets = await request(handle.app).post(`${API}/stream/tickets`).set(auth);
      expect(tickets.status).toBe(201);
      at(`${API}/stream/tickets`, 'post')(tickets);
      const check = at(`${API}/stream`, 'get');
      const plain = await request(handle.app).get(`${API}/stream`).set(auth);
      expect(plain.status).toBe(426);
      check(plain);
      const ok = await upgrade('', auth);
      expect(ok.status).toBe(101);
      expect(ok.headers['x-request-id']).toMatch(/\S/);
      check(ok);
      const bad = await upgrade('?sample_rate=5', auth);
      expect(bad.status).toBe(400);
      check(bad);
      const noKey = await upgrade('', {});
      expect(noKey.status).toBe(401);
      check(noKey);
    });
  });

  describe('real responses when the model service is down, slow or failing', () => {
    const servers: http.Server[] = [];
    const apps: AppHandle[] = [];
    const dirs: string[] = [];
    afterAll(async () => {
      for (const a of apps) await a.close();
      for (const s of servers) await closeQuietly(s);
      for (const d of dirs) fs.rmSync(d, { recursive: true, force: true });
    });

    async function gatewayTo(url: string, overrides: Partial<Config> = {}): Promise<{ app: AppHandle; token: string }> {
      const cfg = { ...testConfig(), modelServiceUrl: url, modelServiceToken: 'openapi-test-model-service-token', ...overrides };
      dirs.push(cfg.dataDir);
      const app = await createApp(cfg, { log: () => undefined });
      apps.push(app);
      return { app, token: await createToken(app.store, ['*']) };
    }

    /** A stand-in for the model service's HTTP answers (the gateway in front of it is the real one). */
    async function upstream(handler: http.RequestListener): Promise<string> {
      const { server, url } = await listen(handler);
      servers.push(server);
      return url;
    }

    test('502 upstream_unavailable, then 503 circuit_open with Retry-After', async () => {
      const dead = await upstream(() => undefined);
      await closeQuietly(servers.pop()!);
      const { app, token } = await gatewayTo(dead, { breakerThreshold: 1, breakerCooldownMs: 60_000 });
      const refused = await request(app.app).get('/v1/noise-suppressor/models').set('X-API-Key', token);
      expect(refused.status).toBe(502);
      at('/v1/noise-suppressor/models', 'get')(refused);
      const open = await request(app.app).get('/v1/noise-suppressor/models').set('X-API-Key', token);
      expect([open.status, open.body.error.type]).toEqual([503, 'circuit_open']);
      at('/v1/noise-suppressor/models', 'get')(open);
      const notReady = await request(app.app).get('/readyz');
      expect(notReady.status).toBe(503);
      at('/readyz', 'get')(notReady);
    });

    test('504 upstream_timeout', async () => {
      const silent = await upstream((req) => req.resume()); // reads, never answers
      const { app, token } = await gatewayTo(silent, { upstreamTimeoutMs: 200 });
      const res = await request(app.app).get('/v1/noise-suppressor/health').set('X-API-Key', token);
      expect(res.status).toBe(504);
      at('/v1/noise-suppressor/health', 'get')(res);
    });

    test('408 request_timeout for an upload that stalls', async () => {
      const reader = await upstream((req, res) => {
        req.resume();
        req.on('end', () => res.end('{}'));
      });
      const { app, token } = await gatewayTo(reader, { clientIdleTimeoutMs: 300, clientMinBytesPerSecond: 100 });
      const { server, url } = await listen(app.app);
      servers.push(server);
      const reply = await new Promise<{ status: number; headers: http.IncomingHttpHeaders; body: unknown }>((resolve, reject) => {
        const req = http.request(`${url}/v1/noise-suppressor/denoise`, {
          method: 'POST',
          headers: { 'X-API-Key': token, 'Content-Type': 'multipart/form-data; boundary=x', 'Content-Length': 100_000 },
        });
        req.on('response', (res) => {
          let text = '';
          res.on('data', (c) => (text += c));
          res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: JSON.parse(text) }));
        });
        req.on('error', reject);
        req.write('--x\r\n'); // and nothing more
      });
      expect([reply.status, (reply.body as { error: { type: string } }).error.type]).toEqual([408, 'request_timeout']);
      at('/v1/noise-suppressor/denoise', 'post')(reply as unknown as request.Response);
    });

    test("503 upstream_unavailable from a starting model service (its Retry-After), and its 500 passed through", async () => {
      const starting = await upstream((req, res) => {
        req.resume();
        const starting503 = req.url === '/models';
        const body = JSON.stringify({
          detail: starting503 ? 'starting' : 'internal error: boom',
          type: starting503 ? 'unavailable' : 'internal_error',
          request_id: String(req.headers['x-request-id']),
        });
        res.writeHead(starting503 ? 503 : 500, { 'Content-Type': 'application/json; charset=utf-8', ...(starting503 ? { 'Retry-After': '2' } : {}) });
        res.end(body);
      });
      const { app, token } = await gatewayTo(starting, { breakerThreshold: 100 });
      const unavailable = await request(app.app).get('/v1/noise-suppressor/models').set('X-API-Key', token);
      expect([unavailable.status, unavailable.headers['retry-after']]).toEqual([503, '2']);
      at('/v1/noise-suppressor/models', 'get')(unavailable);
      const failed = await request(app.app).get('/v1/noise-suppressor/health').set('X-API-Key', token);
      expect(failed.status).toBe(500);
      expect(failed.body.request_id).toBe(failed.headers['x-request-id']);
      at('/v1/noise-suppressor/health', 'get')(failed);
    });
  });

  test('every operation was exercised with a success, and the statuses seen cover the error responses', () => {
    const operations: string[] = [];
    for (const [path, ops] of Object.entries(api.paths) as Array<[string, Json]>) {
      for (const method of Object.keys(ops)) if (HTTP_METHODS.has(method)) operations.push(`${method} ${path}`);
    }
    // Success is a 2xx, or 101 for the WebSocket upgrade.
    const succeeded = operations.filter((op) => [...exercised].some((e) => e.startsWith(op + ' 2') || e === op + ' 101'));
    expect(succeeded).toEqual(operations);
    const statuses = new Set([...exercised].map((e) => e.split(' ').pop()));
    for (const s of ['400', '401', '402', '403', '404', '405', '408', '413', '422', '429', '500', '502', '503', '504']) expect([s, statuses.has(s)]).toEqual([s, true]);
  });
});
