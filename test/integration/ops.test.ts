// Operations surface of the whole app (createApp: gateway, in-process model service, real engine, ffmpeg, SQLite)
// over HTTP: the probes, GET /metrics after a mix of real calls, the structured request lines, the request log's
// reasons for refused calls, and the start-up check of DATA_DIR.
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import request from 'supertest';
import { createApp, type AppHandle } from '../../src/app';
import { PROJECT_ROOT, type Config } from '../../src/config';
import { openSqliteStore } from '../../src/store/gateway/sqlite';
import { createToken, eventually, fixture, testConfig } from '../helpers/service-helpers';

const API = '/v1/noise-suppressor';
const MONO_16K = fixture('speech-noisy-16k-mono.wav');

interface Sample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

/** Prometheus text format → samples (enough of the format for these checks: no escapes in our label values). */
function parseMetrics(text: string): Sample[] {
  const out: Sample[] = [];
  for (const line of text.split('\n')) {
    if (!line || line.startsWith('#')) continue;
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$/.exec(line);
    if (!m) throw new Error(`not a sample line: ${line}`);
    const labels: Record<string, string> = {};
    for (const pair of (m[2] ?? '').match(/[a-zA-Z_][a-zA-Z0-9_]*="[^"]*"/g) ?? []) {
      const eq = pair.indexOf('=');
      labels[pair.slice(0, eq)] = pair.slice(eq + 2, -1);
    }
    out.push({ name: m[1], labels, value: Number(m[3]) });
  }
  return out;
}

/** The value of the one sample with this name whose labels include `labels`; undefined when there is none. */
function value(samples: Sample[], name: string, labels: Record<string, string> = {}): number | undefined {
  const found = samples.filter((s) => s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v));
  if (found.length > 1) throw new Error(`${name} ${JSON.stringify(labels)} matches ${found.length} samples`);
  return found[0]?.value;
}

describe('probes, metrics and request lines of the whole app', () => {
  let config: Config;
  let handle: AppHandle;
  let token: string;
  const lines: string[] = [];
  const logged = () => lines.map((l) => JSON.parse(l) as Record<string, unknown>);

  beforeAll(async () => {
    config = testConfig({ logRequests: true, workers: 2 });
    handle = await createApp(config, { log: (line) => lines.push(line), processMetrics: true });
    token = await createToken(handle.store, ['*']);
  });

  afterAll(async () => {
    await handle.close();
    fs.rmSync(config.dataDir, { recursive: true, force: true });
  });

  test('GET /healthz and /readyz: no token, tiny JSON bodies, HEAD too, not logged as API calls', async () => {
    const alive = await request(handle.app).get('/healthz');
    expect(alive.status).toBe(200);
    expect(alive.text).toBe('{"status":"ok"}');
    expect(alive.headers['content-type']).toMatch(/^application\/json/);
    expect(alive.headers['cache-control']).toBe('no-store');

    const ready = await request(handle.app).get('/readyz');
    expect(ready.status).toBe(200);
    expect(ready.text).toBe('{"status":"ready"}');

    const head = await request(handle.app).head('/readyz');
    expect(head.status).toBe(200);
    expect(head.text ?? '').toBe('');
    expect(await handle.store.queryRequests({})).toHaveLength(0);
  });

  test('readiness fails (503, which check and why) when the store is unreachable, and while draining', async () => {
    const cfg = testConfig();
    const store = openSqliteStore(cfg);
    const other = await createApp(cfg, { store, engine: handle.engine!, log: () => undefined });
    try {
      expect((await request(other.app).get('/readyz')).status).toBe(200);
      other.beginDrain();
      const draining = await request(other.app).get('/readyz');
      expect(draining.status).toBe(503);
      expect(draining.body).toEqual({
        status: 'not_ready',
        failed: { server: 'shutting down' },
        error: { type: 'not_ready', message: 'not ready: server: shutting down', request_id: draining.headers['x-request-id'] },
      });
      expect((await request(other.app).get('/healthz')).status).toBe(200); // still alive

      const fresh = await createApp(cfg, { store, engine: handle.engine!, log: () => undefined });
      await store.close();
      const down = await request(fresh.app).get('/readyz');
      expect(down.status).toBe(503);
      expect(down.body.status).toBe('not_ready');
      expect(Object.keys(down.body.failed)).toEqual(['store']);
      expect(down.body.failed.store).toMatch(/not open|closed/i);
      await fresh.close();
    } finally {
      await other.close();
      fs.rmSync(cfg.dataDir, { recursive: true, force: true });
    }
  });

  test('GET /metrics counts calls by endpoint/status/error type, latency, credits, refunds, rate limits, audio and engine state', async () => {
    const auth = { Authorization: `Bearer ${token}` };
    // 1 denoise that works, 1 that the model service refuses (refunded), 1 models call, 1 without a token.
    const ok = await request(handle.app).post(`${API}/denoise`).set(auth).field('model', 'nsm-1').attach('file', MONO_16K);
    expect(ok.status).toBe(200);
    const stats = JSON.parse(ok.headers['x-ns-stats']);
    const refused = await request(handle.app).post(`${API}/denoise`).set(auth).attach('file', fixture('not-audio.wav'));
    expect(refused.status).toBe(422);
    expect((await request(handle.app).get(`${API}/models`).set(auth)).status).toBe(200);
    expect((await request(handle.app).get(`${API}/models`)).status).toBe(401);
    // A workspace allowed 1 request a minute: the second call is refused with 429.
    const ws = await handle.store.createWorkspace('one-a-minute', 'enterprise', { requestsPerMinute: 1 });
    const slow = (await handle.store.createToken({ workspaceId: ws.id, name: 't', scopes: ['*'], allowedIps: [], expiresAt: null })).token;
    expect((await request(handle.app).get(`${API}/health`).set('X-API-Key', slow)).status).toBe(200);
    expect((await request(handle.app).get(`${API}/health`).set('X-API-Key', slow)).status).toBe(429);
    // Unknown endpoints are counted under "other", not under the client's path.
    expect((await request(handle.app).get(`${API}/no-such-thing-${Date.now()}`).set(auth)).status).toBe(404);

    // The request-log hook runs when the response has finished, so the last call's count can trail its answer.
    await eventually(async () => {
      const samples = parseMetrics((await request(handle.app).get('/metrics')).text);
      return value(samples, 'ns_http_requests_total', { endpoint: 'other', status: '404' }) !== undefined;
    });
    const res = await request(handle.app).get('/metrics');
    expect(res.status).toBe(200);
    expect(res.headers['content-type']).toBe('text/plain; version=0.0.4; charset=utf-8');
    const m = parseMetrics(res.text);
    const svc = { service: 'gateway' };

    expect(value(m, 'ns_http_requests_total', { ...svc, endpoint: 'denoise', method: 'POST', status: '200', error_type: 'none' })).toBe(1);
    expect(value(m, 'ns_http_requests_total', { endpoint: 'denoise', status: '422', error_type: 'invalid_audio' })).toBe(1);
    expect(value(m, 'ns_http_requests_total', { endpoint: 'models', status: '200' })).toBe(1);
    expect(value(m, 'ns_http_requests_total', { endpoint: 'models', status: '401', error_type: 'missing_token' })).toBe(1);
    expect(value(m, 'ns_http_requests_total', { endpoint: 'health', status: '429', error_type: 'rate_limited' })).toBe(1);
    expect(value(m, 'ns_http_requests_total', { endpoint: 'other', status: '404', error_type: 'endpoint_not_found' })).toBe(1);
    expect(value(m, 'ns_rate_limited_total', { endpoint: 'health' })).toBe(1);

    expect(value(m, 'ns_http_request_duration_seconds_count', { endpoint: 'denoise' })).toBe(2);
    expect(value(m, 'ns_http_request_duration_seconds_bucket', { endpoint: 'denoise', le: '+Inf' })).toBe(2);
    expect(value(m, 'ns_upstream_request_duration_seconds_count', { endpoint: 'denoise' })).toBe(2);
    expect(value(m, 'ns_upstream_request_duration_seconds_count', { endpoint: 'models' })).toBe(1);
    // The 401 never reached the model service.
    expect(value(m, 'ns_http_request_duration_seconds_count', { endpoint: 'models' })).toBe(2);

    expect(value(m, 'ns_credits_charged_total', { endpoint: 'denoise' })).toBe(2);
    expect(value(m, 'ns_credits_refunded_total', { endpoint: 'denoise' })).toBe(1);

    expect(value(m, 'ns_audio_seconds_total', { model: 'nsm-1' })).toBeCloseTo(stats.duration_s, 3);
    expect(value(m, 'ns_processing_seconds_total', { model: 'nsm-1' })).toBeCloseTo(stats.processing_s, 3);
    expect(value(m, 'ns_files_total', { model: 'nsm-1' })).toBe(1);
    expect(value(m, 'ns_rtf_count', { model: 'nsm-1' })).toBe(1);
    expect(value(m, 'ns_audio_seconds_total', { model: 'nsm-2' })).toBeUndefined(); // the refused file processed nothing

    expect(value(m, 'ns_engine_workers')).toBe(2);
    expect(value(m, 'ns_engine_busy_workers')).toBe(0);
    expect(value(m, 'ns_engine_queue_depth')).toBe(0);
    const upstream = handle.modelServiceUrl;
    expect(value(m, 'ns_upstream_breaker_state', { upstream, state: 'closed' })).toBe(1);
    expect(value(m, 'ns_upstream_breaker_state', { upstream, state: 'open' })).toBe(0);
    expect(value(m, 'ns_upstream_consecutive_failures', { upstream })).toBe(0);
  });

  test('one JSON line per API call with request id, workspace, key prefix, endpoint, status, error, upstream ms, audio seconds, model', async () => {
    const before = lines.length;
    const res = await request(handle.app).post(`${API}/denoise`).set('X-API-Key', token).field('model', 'nsm-2').attach('file', MONO_16K);
    expect(res.status).toBe(200);
    const bad = await request(handle.app).post(`${API}/denoise`).set('X-API-Key', token).field('model', 'nsm-9').attach('file', MONO_16K);
    expect(bad.status).toBe(400);
    const linesOf = (id: string) => logged().filter((l) => l.request_id === id).length;
    await eventually(() => linesOf(res.headers['x-request-id']) > 0 && linesOf(bad.headers['x-request-id']) > 0);
    const records = lines.slice(before).map((l) => JSON.parse(l) as Record<string, unknown>);
    const line = records.find((r) => r.request_id === res.headers['x-request-id'])!;
    const [ws] = await handle.store.listWorkspaces();
    expect(line).toMatchObject({
      level: 'info',
      service: 'gateway',
      msg: 'POST /v1/noise-suppressor/denoise 200',
      method: 'POST',
      endpoint: 'denoise',
      status: 200,
      error_type: null,
      workspace: ws.id,
      key_prefix: token.slice(0, 12),
      credits: 1,
      model: 'nsm-2',
      audio_s: JSON.parse(res.headers['x-ns-stats']).duration_s,
    });
    expect(line.upstream_ms).toBe(Number(res.headers['x-gateway-upstream-ms']));
    expect(typeof line.total_ms).toBe('number');
    expect(new Date(line.time as string).toISOString()).toBe(line.time);

    const refused = records.find((r) => r.request_id === bad.headers['x-request-id'])!;
    expect(refused).toMatchObject({ status: 400, error_type: 'invalid_request', credits: 0, model: null, audio_s: null });
    expect(refused.error_message).toMatch(/unknown model "nsm-9"/);
    expect(logged().filter((l) => l.request_id === bad.headers['x-request-id'])).toHaveLength(1);
  });

  test("the request log keeps the model service's reason for 400/422 and the gateway's message for its own errors", async () => {
    const bad = await request(handle.app).post(`${API}/denoise`).set('X-API-Key', token).attach('file', fixture('empty.wav'));
    expect(bad.status).toBe(422);
    const none = await request(handle.app).get(`${API}/models`).set('X-API-Key', 'mw_live_' + 'x'.repeat(32));
    expect(none.status).toBe(401);
    await eventually(async () => {
      const ids = (await handle.store.queryRequests({ limit: 1000 })).map((r) => r.requestId);
      return ids.includes(bad.headers['x-request-id']) && ids.includes(none.headers['x-request-id']);
    });
    const [row] = await handle.store.queryRequests({ errorType: 'invalid_audio' }).then((rows) =>
      rows.filter((r) => r.requestId === bad.headers['x-request-id']),
    );
    expect(row).toMatchObject({ status: 422, errorType: 'invalid_audio', errorMessage: bad.body.detail, creditsCharged: 0 });
    const [gw] = (await handle.store.queryRequests({ errorType: 'invalid_token' })).filter((r) => r.requestId === none.headers['x-request-id']);
    expect(gw.errorMessage).toBe(none.body.error.message);
  });

  test('the Grafana dashboard in docs/ uses only metrics that /metrics really serves', async () => {
    const dashboard = JSON.parse(fs.readFileSync(path.join(PROJECT_ROOT, 'docs', 'grafana-dashboard.json'), 'utf8'));
    const exprs: string[] = [];
    for (const panel of dashboard.panels) for (const t of panel.targets ?? []) exprs.push(t.expr);
    expect(exprs.length).toBeGreaterThan(15);
    const used = new Set(exprs.flatMap((e) => e.match(/\bns_[a-z0-9_]+/g) ?? []).map((n) => n.replace(/_(bucket|sum|count)$/, '')));
    const text = (await request(handle.app).get('/metrics')).text;
    const served = new Set([...text.matchAll(/^# TYPE (\S+) /gm)].map((m) => m[1]));
    expect([...used].filter((n) => !served.has(n))).toEqual([]);
    // And the other way round: every ns_ metric we serve (apart from Node's process ones) is on the dashboard.
    const ours = [...served].filter((n) => n.startsWith('ns_') && !/^ns_(process_|nodejs_)/.test(n));
    expect(ours.filter((n) => !used.has(n) && n !== 'ns_upstream_consecutive_failures')).toEqual([]);
  });

  test('METRICS_TOKEN guards /metrics with a bearer token', async () => {
    const cfg = { ...testConfig(), metricsToken: 's3cret-metrics' };
    const guarded = await createApp(cfg, { engine: handle.engine!, log: () => undefined });
    try {
      const none = await request(guarded.app).get('/metrics');
      expect(none.status).toBe(401);
      expect(none.headers['www-authenticate']).toMatch(/^Bearer/);
      expect(none.body.error.type).toBe('missing_token'); // no Authorization header (issue 35, item 13)
      expect((await request(guarded.app).get('/metrics').set('Authorization', 'Bearer wrong')).status).toBe(401);
      const ok = await request(guarded.app).get('/metrics').set('Authorization', 'Bearer s3cret-metrics');
      expect(ok.status).toBe(200);
      expect(ok.text).toContain('# TYPE ns_http_requests_total counter');
      // Probes stay open.
      expect((await request(guarded.app).get('/healthz')).status).toBe(200);
    } finally {
      await guarded.close();
      fs.rmSync(cfg.dataDir, { recursive: true, force: true });
    }
  });
});

describe('start-up check of DATA_DIR', () => {
  const runAsNobody = typeof process.getuid === 'function' && process.getuid() === 0;

  test('a DATA_DIR the service user cannot write stops the start with one clear line (not a SQLite error)', () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ns-readonly-'));
    fs.chmodSync(dir, 0o555); // like a bind mount owned by another user
    try {
      const r = spawnSync(process.execPath, [path.join(PROJECT_ROOT, 'dist/src/server.js')], {
        env: { ...process.env, DATA_DIR: dir, PORT: '0', HOST: '127.0.0.1', WORKERS: '1', NODE_ENV: 'test', LOG_FORMAT: 'json' },
        encoding: 'utf8',
        timeout: 30_000,
        // root may write anywhere: run the server as nobody, as the container runs it as "node".
        ...(runAsNobody ? { uid: 65534, gid: 65534 } : {}),
      });
      expect(r.status).toBe(1);
      const out = r.stdout.trim().split('\n');
      expect(out).toHaveLength(1);
      const line = JSON.parse(out[0]);
      expect(line).toMatchObject({ level: 'fatal', event: 'failed_to_start' });
      expect(line.msg).toContain(`DATA_DIR=${dir} is not writable by`);
      expect(line.msg).toContain('EACCES');
      expect(line.msg).not.toMatch(/sqlite/i);
      expect(fs.readdirSync(dir)).toEqual([]);
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
});
