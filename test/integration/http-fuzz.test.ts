// Fuzz of the file endpoints over HTTP against a real `npm start` process (gateway and file-work process): seeded
// clients send /denoise, /denoise/batch and /jobs calls with random fields (known names with random values, unknown
// and repeated names), file and echo_reference parts that are audio, garbage, empty, truncated or missing, malformed
// multipart bodies (no boundary, a wrong one, no closing line, a part cut off, a huge header line), other content
// types, bad tokens; and raw requests over TCP whose framing lies (a Content-Length never sent, chunk sizes that are
// not numbers, a request cut off in its headers); and the JSON endpoints (the console's API with a signed-in session,
// jobs by id, webhooks, stream tickets) hostile ids, query strings and bodies. Then: the process is alive and logged nothing uncaught, every answer
// is a documented status (no 500, 502 or 504; 503 only with Retry-After), every refusal is the JSON envelope with its
// request id, no credit is left held once the jobs are cancelled, and a normal /denoise afterwards succeeds.
// HTTP_FUZZ_SEED=N replays a run; HTTP_FUZZ_MS sets its length; HTTP_FUZZ_DUMP=FILE writes every outcome to FILE.
import crypto from 'node:crypto';
import fs from 'node:fs';
import net from 'node:net';
import { loadConfig } from '../../src/config';
import { openSqliteStore } from '../../src/store/gateway/sqlite';
import type { GatewayStore } from '../../src/store/gateway/types';
import { fixture } from '../helpers/audio-helpers';
import { fuzzClients, picker } from '../helpers/fuzz';
import { eventually, multipartBody, rawRequest, testConfig, type RawResponse } from '../helpers/service-helpers';
import { startServerProcess, type ServerProcess } from '../helpers/streaming-process-helpers';

const SEED = Number(process.env.HTTP_FUZZ_SEED || crypto.randomInt(1, 2 ** 31));
const FUZZ_MS = Number(process.env.HTTP_FUZZ_MS ?? 3000);
const CONCURRENCY = 4;
const API = '/v1/noise-suppressor';
const ADMIN_SECRET = 'http-fuzz-admin-secret-0123456789';

/** Field names the endpoints know, and values valid or not. */
const FIELDS: Record<string, string[]> = {
  model: ['nsm-1', 'nsm-2', 'nsm-4', 'nsm-2-hd', 'nsm-9', '', 'NSM-1'],
  attenuation_limit_db: ['0', '12', '100', '-1', '1e309', 'NaN', 'x'],
  output_format: ['wav', 'flac', 'mp3', 'opus', 'm4a', 'video', 'exe', ''],
  response: ['json', 'file', 'zip', ''],
  keep_input_sample_rate: ['true', 'false', 'maybe'],
  loudness: ['podcast', 'broadcast', 'keep', 'loud'],
  loudness_lufs: ['-16', '-5', '-41', '0', 'abc'],
  speech_segments: ['true', 'false', '2'],
  trim_silence: ['true', 'false', ''],
  trim_silence_max_pause_s: ['0.5', '-1', '1e9'],
  vad_threshold: ['0.5', '0.1', '2'],
  vad_min_speech_ms: ['250', '-5', '99999'],
  vad_hangover_ms: ['300', 'x'],
  webhook_url: ['http://127.0.0.1:1/hook', 'ftp://x', 'not a url', 'https://example.invalid/h'],
  url: ['http://127.0.0.1:1/a.wav', 'file:///etc/passwd', 'http://[::1]/x', ''],
  [`x_${'y'.repeat(300)}`]: ['1'],
  'name"with\r\nbreak': ['1'],
};

/** The clients' outcome: what an answer broke of the documented behaviour, if anything. */
interface Outcome {
  label: string;
  actions: string[];
  status: number | null;
  /** A refusal's error type. */
  type?: string;
  problems: string[];
}

const wav = fs.readFileSync(fixture('speech-noisy-16k-mono.wav'));
const ogg = fs.readFileSync(fixture('speech-noisy-44k1-stereo.ogg'));

function fileData(rnd: () => number): { data: Buffer; name: string } {
  const r = rnd();
  if (r < 0.35) return { data: wav, name: 'a.wav' };
  if (r < 0.45) return { data: ogg, name: 'b.ogg' };
  if (r < 0.55) return { data: wav.subarray(0, Math.floor(rnd() * 200)), name: 'cut.wav' };
  if (r < 0.65) return { data: Buffer.alloc(0), name: 'empty.wav' };
  if (r < 0.8) return { data: crypto.randomBytes(Math.floor(rnd() * 20_000)), name: 'noise.bin' };
  // A WAV header that promises far more than follows, or a RIFF with a chunk size past the end.
  const head = Buffer.from(wav.subarray(0, 44));
  head.writeUInt32LE(0xfffffff0, rnd() < 0.5 ? 4 : 40);
  return { data: Buffer.concat([head, crypto.randomBytes(Math.floor(rnd() * 3000))]), name: 'lies.wav' };
}

function parseJson(b: Buffer): { error?: { type?: unknown }; type?: unknown; detail?: unknown } | null {
  try {
    const v = JSON.parse(b.toString()) as unknown;
    return v !== null && typeof v === 'object' ? (v as { error?: { type?: unknown }; detail?: unknown }) : null;
  } catch {
    return null;
  }
}

/** Checks an answer against the documented behaviour. */
function judge(res: RawResponse, o: Outcome): void {
  o.status = res.status;
  if (res.status >= 500 && res.status !== 503) o.problems.push(`status ${res.status}: ${res.body.toString().slice(0, 300)}`);
  if (res.status === 503 && res.headers['retry-after'] === undefined) o.problems.push('503 without Retry-After');
  if (res.status >= 400) {
    if (!/^req_/.test(String(res.headers['x-request-id'] ?? ''))) o.problems.push(`${res.status} without X-Request-Id`);
    const body = parseJson(res.body);
    if (body === null) o.problems.push(`${res.status} with a body that is not JSON: ${res.body.toString().slice(0, 200)}`);
    else if (typeof body.error?.type !== 'string' && typeof body.detail !== 'string') o.problems.push(`${res.status} without the envelope: ${res.body.toString().slice(0, 200)}`);
    else o.type = String(body.error?.type ?? body.type ?? 'detail');
  } else if (res.body.length === 0) o.problems.push(`${res.status} with an empty body`);
}

async function httpClient(base: string, token: string, rnd: () => number, label: string): Promise<Outcome> {
  const pick = picker(rnd);
  const o: Outcome = { label, actions: [], status: null, problems: [] };
  const endpoint = pick(['denoise', 'denoise', 'denoise/batch', 'jobs', 'jobs', 'models', 'nothing-here']);
  const parts: Array<{ name: string; value?: string; data?: Buffer; filename?: string; contentType?: string }> = [];
  const fieldCount = Math.floor(rnd() * 5);
  const names = Object.keys(FIELDS);
  for (let i = 0; i < fieldCount; i++) {
    const name = pick(names);
    parts.push({ name, value: pick(FIELDS[name]) });
  }
  const fileName = endpoint === 'denoise/batch' ? 'files' : 'file';
  const files = rnd() < 0.1 ? 0 : rnd() < 0.8 ? 1 : Math.floor(rnd() * 4) + 2;
  for (let i = 0; i < files; i++) {
    const f = fileData(rnd);
    parts.push({ name: rnd() < 0.9 ? fileName : pick(['files', 'file', 'audio']), data: f.data, filename: f.name, contentType: pick(['audio/wav', 'application/octet-stream', 'text/plain']) });
  }
  if (rnd() < 0.3) {
    const f = fileData(rnd);
    parts.push({ name: 'echo_reference', data: f.data, filename: `ref-${f.name}`, contentType: 'audio/wav' });
  }
  if (rnd() < 0.1) parts.push({ name: 'file', value: 'a field where a file belongs' });
  o.actions.push(`${endpoint} [${parts.map((p) => `${p.name}${p.filename ? `=@${p.filename}(${p.data!.length})` : `=${JSON.stringify(p.value).slice(0, 20)}`}`).join(' ')}]`);
  let { body, contentType } = multipartBody(parts);
  const mangle = rnd();
  if (mangle < 0.06) {
    contentType = 'multipart/form-data';
    o.actions.push('no boundary');
  } else if (mangle < 0.12) {
    contentType = 'multipart/form-data; boundary=not-the-one';
    o.actions.push('wrong boundary');
  } else if (mangle < 0.18) {
    body = body.subarray(0, Math.floor(rnd() * body.length));
    o.actions.push(`cut to ${body.length}`);
  } else if (mangle < 0.22) {
    body = Buffer.concat([Buffer.from(`--${contentType.split('boundary=')[1]}\r\nContent-Disposition: form-data; name="${'n'.repeat(100_000)}"\r\n\r\nx\r\n`), body]);
    o.actions.push('huge part header');
  } else if (mangle < 0.27) {
    contentType = pick(['application/json', 'application/x-www-form-urlencoded', 'text/plain', '']);
    body = pick([Buffer.from('{"model":"nsm-1","file":"AAAA"}'), Buffer.from('model=nsm-1&file=x'), crypto.randomBytes(500)]);
    o.actions.push(`content type ${JSON.stringify(contentType)}`);
  }
  const headers: Record<string, string | number> = { 'Content-Length': body.length };
  if (contentType) headers['Content-Type'] = contentType;
  const auth = rnd();
  if (auth < 0.85) headers.Authorization = `Bearer ${token}`;
  else if (auth < 0.92) headers.Authorization = pick(['Bearer', 'Bearer x', `Bearer ${token}x`, 'Basic Zm9vOmJhcg==']);
  if (auth >= 0.85) o.actions.push(`auth ${String(headers.Authorization ?? 'none').slice(0, 20)}`);
  const method = endpoint === 'models' ? pick(['GET', 'POST']) : pick(['POST', 'POST', 'POST', 'PUT', 'GET']);
  const query = rnd() < 0.15 ? `?${pick(['model=nsm-1', 'a=%zz', 'x'.repeat(5000), 'output_format=mp3&output_format=wav'])}` : '';
  o.actions.unshift(`${method}${query ? ` ${query.slice(0, 30)}` : ''}`);
  try {
    judge(await rawRequest(`${base}${API}/${endpoint}${query}`, { method, headers, body }), o);
  } catch (err) {
    // A connection the server ended because the body was not what it said (an upload cut off is answered, or reset).
    o.actions.push(`client error ${(err as Error).message}`);
  }
  return o;
}

/** JSON values of every kind and size, for bodies of the JSON endpoints. */
const JSON_VALUES: unknown[] = [
  null, true, 0, -1, 1.5, 1e300, 'NaN', '', 'x'.repeat(5000), '../../etc/passwd', '\u0000', '💥', [], [1, 'a'], {}, { name: null },
  { name: 'w2', plan: 'pro' }, 'free', 'pro', 'enterprise', 'custom', 10, 1e12, ['noise-suppressor:denoise'], '*', ['127.0.0.1'],
  ['::1/200'], ['not-an-ip'], '2026-13-45', '2099-01-01T00:00:00Z', { __proto__: { admin: true } }, { constructor: { prototype: { x: 1 } } },
];
const JSON_NAMES = ['name', 'plan', 'scopes', 'allowed_ips', 'expires_at', 'workspace_id', 'new_workspace', 'requests_per_minute', 'credits_per_month', 'secret', '__proto__', 'constructor'];
const IDS = ['x', '..', '%2e%2e', `job_${'a'.repeat(300)}`, '%00', '%zz', 'null', '__proto__', 'constructor', '-1', '%F0%9F%92%A5'];
const CONSOLE_ROUTES: Array<[string, string]> = [
  ['GET', '/session'], ['POST', '/login'], ['GET', '/keys'], ['POST', '/keys'], ['POST', '/keys/ID/revoke'], ['GET', '/meta'],
  ['POST', '/playground/key'], ['GET', '/requests'], ['GET', '/workspaces'], ['POST', '/workspaces'], ['POST', '/workspaces/ID/plan'],
  ['GET', '/workspaces/ID/usage'], ['GET', '/jobs'], ['GET', '/jobs/ID'], ['POST', '/jobs/ID/cancel'], ['GET', '/jobs/ID/result'],
  ['GET', '/webhooks/secret'], ['POST', '/webhooks/secret/rotate'], ['GET', '/webhooks/deliveries'],
];
const API_ROUTES: Array<[string, string]> = [
  ['GET', '/jobs'], ['GET', '/jobs/ID'], ['DELETE', '/jobs/ID'], ['POST', '/jobs/ID/cancel'], ['GET', '/jobs/ID/result'], ['HEAD', '/jobs/ID/result'],
  ['POST', '/stream/tickets'], ['GET', '/webhooks/secret'], ['POST', '/webhooks/secret/rotate'], ['GET', '/webhooks/deliveries'], ['PATCH', '/jobs'],
];

/** The console's session for the JSON client (signed in once; a client that ends it signs in again). */
interface ConsoleSession {
  cookie: string;
  csrf: string;
}

async function signIn(base: string): Promise<ConsoleSession> {
  const res = await rawRequest(`${base}/console/api/login`, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: Buffer.from(JSON.stringify({ secret: ADMIN_SECRET })) });
  const cookie = String(res.headers['set-cookie'] ?? '').split(';')[0];
  return { cookie, csrf: String((parseJson(res.body) as { csrf_token?: string } | null)?.csrf_token ?? '') };
}

/** JSON endpoints: hostile ids, query strings (arrays, nested keys, huge values) and bodies, signed in or not. */
async function jsonClient(base: string, token: string, session: ConsoleSession, rnd: () => number, label: string): Promise<Outcome> {
  const pick = picker(rnd);
  const o: Outcome = { label, actions: [], status: null, problems: [] };
  const onConsole = rnd() < 0.55;
  const [routeMethod, route] = pick(onConsole ? CONSOLE_ROUTES : API_ROUTES);
  const method = rnd() < 0.1 ? pick(['GET', 'POST', 'PUT', 'DELETE', 'PATCH']) : routeMethod;
  const id = rnd() < 0.8 ? pick(IDS) : encodeURIComponent(JSON.stringify(pick(JSON_VALUES))).slice(0, 300);
  const query: string[] = [];
  for (let i = Math.floor(rnd() * 4); i > 0; i--) {
    const k = pick(['limit', 'cursor', 'status', 'workspace', 'days', 'offset', 'endpoint', 'since', 'ids']);
    const v = pick(['-1', '0', '1', '1e308', 'abc', '', '%zz', 'x'.repeat(3000), 'queued', 'null', '9999999999999999999']);
    query.push(pick([`${k}=${v}`, `${k}[]=${v}&${k}[]=1`, `${k}[a][b]=${v}`, `${k}=${v}&${k}=2`]));
  }
  const url = `${base}${onConsole ? '/console/api' : API}${route.replace('ID', id)}${query.length ? `?${query.join('&')}` : ''}`;
  const headers: Record<string, string | number> = {};
  if (onConsole) {
    if (rnd() < 0.85) headers.Cookie = rnd() < 0.9 ? session.cookie : pick(['ns_console_session=x', 'ns_console_session=%zz; ns_console_session=y', 'a'.repeat(9000)]);
    if (rnd() < 0.85) headers['X-CSRF-Token'] = rnd() < 0.9 ? session.csrf : pick(['', 'x', `${session.csrf}x`]);
  } else if (rnd() < 0.9) headers.Authorization = `Bearer ${token}`;
  let body: Buffer | undefined;
  if (method !== 'GET' && method !== 'HEAD' && rnd() < 0.85) {
    const kind = rnd();
    if (kind < 0.6) {
      const fields: Record<string, unknown> = {};
      for (let i = Math.floor(rnd() * 5); i > 0; i--) fields[pick(JSON_NAMES)] = pick(JSON_VALUES);
      body = Buffer.from(rnd() < 0.1 ? JSON.stringify([fields]) : JSON.stringify(fields));
      headers['Content-Type'] = pick(['application/json', 'application/json', 'application/json; charset=utf-16', 'text/plain', 'application/x-www-form-urlencoded']);
    } else if (kind < 0.85) {
      body = Buffer.from(pick(['{', 'null', '"text"', '1', `{"a":${'['.repeat(5000)}`, '\u0000\u0001', 'name=a&plan=pro&scopes[]=x']));
      headers['Content-Type'] = pick(['application/json', 'application/x-www-form-urlencoded']);
    } else {
      body = Buffer.alloc(Math.floor(rnd() * 300_000), 'a');
      headers['Content-Type'] = 'application/json';
    }
    headers['Content-Length'] = body.length;
  }
  o.actions.push(`${method} ${url.slice(base.length, base.length + 120)}${body ? ` body ${body.length} B ${body.toString('latin1', 0, 60)}` : ''}`);
  try {
    const res = await rawRequest(url, { method, headers, body });
    // A HEAD answer has no body to hold the envelope.
    if (method === 'HEAD') {
      o.status = res.status;
      if (res.status >= 500 && res.status !== 503) o.problems.push(`status ${res.status}`);
    } else judge(res, o);
  } catch (err) {
    o.actions.push(`client error ${(err as Error).message}`);
  }
  return o;
}

/** Raw TCP: requests whose framing lies. Only the process's survival counts for these. */
async function rawClient(port: number, token: string, rnd: () => number, label: string): Promise<Outcome> {
  const kind = Math.floor(rnd() * 4);
  const o: Outcome = { label, actions: [`raw ${kind}`], status: null, problems: [] };
  const head = `POST ${API}/denoise HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${token}\r\nContent-Type: multipart/form-data; boundary=b\r\n`;
  const request = [
    `${head}Content-Length: 1000000\r\n\r\n--b\r\nContent-Disposition: form-data; name="file"; filename="a.wav"\r\n\r\n`,
    `${head}Transfer-Encoding: chunked\r\n\r\nzz\r\nhello\r\n`,
    head.slice(0, Math.floor(rnd() * head.length)),
    `${head}Content-Length: 5\r\nContent-Length: 7\r\n\r\nhello`,
  ][kind];
  const socket = net.connect(port, '127.0.0.1');
  socket.on('error', () => undefined);
  const closed = new Promise<void>((resolve) => socket.once('close', () => resolve()));
  socket.on('data', () => undefined);
  socket.write(request);
  if (kind === 0) socket.write(wav.subarray(0, Math.floor(rnd() * wav.length)));
  await new Promise((r) => setTimeout(r, Math.floor(rnd() * 100)));
  socket.destroy();
  await closed;
  return o;
}

describe(`HTTP fuzz of the file endpoints (seed ${SEED}, HTTP_FUZZ_SEED to replay)`, () => {
  let dir: string;
  let proc: ServerProcess;
  let store: GatewayStore;
  let token: string;
  let workspaceId: string;

  beforeAll(async () => {
    process.stderr.write(`http-fuzz: seed ${SEED} (HTTP_FUZZ_SEED=${SEED} replays it)\n`);
    dir = testConfig().dataDir;
    // npm start's layout: the gateway, and the file work in its own process. The budget of unauthenticated refusals
    // per address is off: the fuzz's 401/404/405 answers would use it up and hide what comes after.
    proc = await startServerProcess(dir, { FILE_WORK_PROCESS: 'true', WORKERS: '2', UNAUTHENTICATED_REQUESTS_PER_MINUTE: '0', ADMIN_SECRET });
    store = openSqliteStore(loadConfig({ DATA_DIR: dir } as NodeJS.ProcessEnv));
    const ws = await store.createWorkspace('http-fuzz', 'enterprise', { creditsPerMonth: 1_000_000, requestsPerMinute: 1_000_000 });
    workspaceId = ws.id;
    token = (await store.createToken({ workspaceId, name: 'fuzz', scopes: ['*'], allowedIps: [], expiresAt: null })).token;
  }, 120_000);

  afterAll(async () => {
    proc?.kill();
    await store?.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  test('the server survives it, answers only as documented, and still denoises', async () => {
    const session = await signIn(proc.url);
    expect(session.csrf).not.toBe('');
    const outcomes = await fuzzClients(SEED, { ms: FUZZ_MS, concurrency: CONCURRENCY, alive: () => proc.alive() }, (own, label) => {
      const kind = own();
      if (kind < 0.15) return rawClient(proc.port, token, own, label);
      return kind < 0.45 ? jsonClient(proc.url, token, session, own, label) : httpClient(proc.url, token, own, label);
    });
    expect({ alive: proc.alive(), tail: proc.alive() ? '' : proc.output().slice(-1500) }).toEqual({ alive: true, tail: '' });
    const statuses = new Map<string, number>();
    for (const o of outcomes) {
      const k = o.status === null ? 'none' : `${o.status}${o.type ? ` ${o.type}` : ''}`;
      statuses.set(k, (statuses.get(k) ?? 0) + 1);
    }
    process.stderr.write(`http-fuzz: ${outcomes.length} clients; ${[...statuses].sort().map(([k, v]) => `${k}: ${v}`).join(', ')}\n`);
    if (process.env.HTTP_FUZZ_DUMP) fs.writeFileSync(process.env.HTTP_FUZZ_DUMP, outcomes.map((o) => JSON.stringify(o)).join('\n'));
    const bad = outcomes.filter((o) => o.problems.length > 0);
    const report = bad.slice(0, 5).map((o) => `${o.label} [${o.actions.join(', ')}]: ${o.problems.join('; ')}`).join('\n');
    expect(`seed ${SEED}: ${bad.length} of ${outcomes.length} clients wrong\n${report}`).toBe(`seed ${SEED}: 0 of ${outcomes.length} clients wrong\n`);
    expect(outcomes.filter((o) => o.status === 200).length).toBeGreaterThan(0);
    expect(proc.output()).not.toMatch(/uncaught|unhandled/i);

    // The jobs it queued, cancelled; then nothing is held.
    const auth = { Authorization: `Bearer ${token}` };
    const list = JSON.parse((await rawRequest(`${proc.url}${API}/jobs?limit=100`, { headers: auth })).body.toString()) as { jobs?: Array<{ id: string; status: string }> };
    for (const j of list.jobs ?? []) if (j.status === 'queued' || j.status === 'running') await rawRequest(`${proc.url}${API}/jobs/${j.id}`, { method: 'DELETE', headers: auth });
    await eventually(async () => (await store.creditsHeld(workspaceId, new Date())) === 0, 30_000);

    const { body, contentType } = multipartBody([
      { name: 'file', filename: 'a.wav', contentType: 'audio/wav', data: wav },
      { name: 'model', value: 'nsm-2' },
    ]);
    const ok = await rawRequest(`${proc.url}${API}/denoise`, { method: 'POST', headers: { ...auth, 'Content-Type': contentType }, body });
    expect(ok.status).toBe(200);
    expect(ok.headers['content-type']).toBe('audio/wav');
  }, 180_000);
});
