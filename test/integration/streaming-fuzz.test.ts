// Fuzz of the live-stream protocol against real server processes (issue 35): the gateway with its in-process engine,
// and a gateway relaying to a model-service process (MODEL_SERVICE_URL: relay.ts and /internal/stream). Seeded
// clients open streams of any model and encoding (G.711 too), with or without speech events and an echo reference,
// send random text and binary messages (any JSON, 0 and 1 bytes, sizes that are not whole frames, 1 MiB and more,
// invalid UTF-8), in random orders (before `ready`, end first, end twice, audio after end), pings, raw garbage on the
// socket, abrupt closes and socket destroys at random moments, and raw upgrade requests cut off at random points.
// Then: every process is alive, every stream the server closed got a documented close code (and its error message
// where the protocol promises one), streams that ended normally returned every byte, no credit is left held, and a
// normal stream opened afterwards equals /denoise. STREAM_FUZZ_SEED=N replays a run; STREAM_FUZZ_MS sets its length.
import crypto from 'node:crypto';
import fs from 'node:fs';
import net from 'node:net';
import WebSocket from 'ws';
import { loadConfig } from '../../src/config';
import { openSqliteStore } from '../../src/store/gateway/sqlite';
import type { GatewayStore } from '../../src/store/gateway/types';
import { eventually, fixture, multipartBody, rawRequest, testConfig } from '../helpers/service-helpers';
import { fuzzClients, picker } from '../helpers/fuzz';
import { startModelServiceProcess, startServerProcess, type ServerProcess } from '../helpers/streaming-process-helpers';
import { STREAM_PATH, StreamClient, wavData } from '../helpers/streaming-helpers';

const SEED = Number(process.env.STREAM_FUZZ_SEED || crypto.randomInt(1, 2 ** 31));
const FUZZ_MS = Number(process.env.STREAM_FUZZ_MS ?? 4000);
const CONCURRENCY = 6;
const IDLE_MS = 1500;
const SERVICE_TOKEN = 'stream-fuzz-model-service-token-0123456789';
/** Close codes the server may send a fuzzing client (docs/streaming.md); 1011 would be a defect here. */
const DOCUMENTED = new Set([1000, 1002, 1007, 1009, 4408]);

const TEXTS = [
  'null', '0', '-1e309', 'true', '[]', '[1,2,{"type":"end"}]', '"end"', '{}', '{"type":null}', '{"type":5}', '{"type":"END"}',
  '{"type":{"type":"end"}}', '{"type":"end","extra":[1]}', '{"type":"end"}', '{', '', ' ', '{"type":"end"}{"type":"end"}',
  '['.repeat(60_000) + ']'.repeat(60_000), `{"type":"${'x'.repeat(300_000)}"}`, `{"a":${'{"a":'.repeat(20_000)}1${'}'.repeat(20_001)}`,
];

interface Outcome {
  label: string;
  actions: string[];
  code: number | null;
  /** We closed or destroyed it ourselves (any code then). */
  self: boolean;
  errors: Array<{ type: string; message: string }>;
  done: { stats: Record<string, number> } | null;
  /** Whole-frame audio sent before the first end, when nothing invalid was sent. */
  validBytes: number;
  received: number;
  /** Output bytes per input byte: the echo reference's channel is not sent back. */
  outShare: number;
  sentInvalidUtf8: boolean;
  refused?: number;
}

/** One fuzzing WebSocket client: a random query, then a random script of actions. */
async function wsClient(url: string, token: string, rnd: () => number, label: string): Promise<Outcome> {
  const pick = picker(rnd);
  const int = (lo: number, hi: number): number => lo + Math.floor(rnd() * (hi - lo + 1));
  const encoding = pick(['pcm_s16le', 'pcm_s16le', 'pcm_f32le', 'mulaw', 'alaw'] as const);
  // Random bytes as an echo reference (NaN, ±Inf and 1e38 floats among them) go through the canceller; as
  // speech, through the speech detector.
  const echo = rnd() < 0.3;
  const channels = echo ? pick([2, 2, 3]) : pick([1, 1, 2]);
  const rate = encoding === 'mulaw' || encoding === 'alaw' ? pick([8000, 8000, 16000]) : pick([16000, 16000, 8000, 44100]);
  const frame = { pcm_s16le: 2, pcm_f32le: 4, mulaw: 1, alaw: 1 }[encoding] * channels;
  const q =
    `model=${pick(['nsm-1', 'nsm-2', 'nsm-1', 'nsm-2', 'nsm-3', 'nsm-4', 'nsm-2-hd'])}&encoding=${encoding}&channels=${channels}&sample_rate=${rate}` +
    `${echo ? '&echo_reference=last' : ''}${rnd() < 0.25 ? '&vad=true' : ''}`;
  const o: Outcome = { label, actions: [q], code: null, self: false, errors: [], done: null, validBytes: 0, received: 0, sentInvalidUtf8: false, outShare: echo ? (channels - 1) / channels : 1 };
  const ws = new WebSocket(`${url}?${q}`, { headers: { Authorization: `Bearer ${token}` }, perMessageDeflate: false, maxPayload: 64 * 1024 * 1024 });
  ws.on('error', () => undefined);
  const closed = new Promise<void>((resolve) => ws.on('close', (code) => ((o.code = code), resolve())));
  ws.on('unexpected-response', (_req, res) => {
    o.refused = res.statusCode;
    res.resume();
  });
  ws.on('message', (data, isBinary) => {
    if (isBinary) return void (o.received += (data as Buffer).length);
    const msg = JSON.parse(String(data)) as { type: string; error?: Outcome['errors'][0]; stats?: Record<string, number> };
    if (msg.type === 'error') o.errors.push(msg.error!);
    if (msg.type === 'done') o.done = { stats: msg.stats! };
  });
  const early = rnd() < 0.4;
  const started = await new Promise<boolean>((resolve) => {
    ws.once(early ? 'open' : 'message', () => resolve(true));
    ws.once('close', () => resolve(false));
  });
  let ended = false;
  let invalid = false;
  const steps = int(1, 12);
  for (let i = 0; started && i < steps && ws.readyState === WebSocket.OPEN; i++) {
    const r = rnd();
    let action: string;
    if (r < 0.3) {
      const n = frame * int(1, 1500);
      ws.send(crypto.randomBytes(n));
      if (!ended) o.validBytes += n;
      action = `audio ${n}`;
    } else if (r < 0.37) {
      const n = pick([0, 1, 2, 3, 5, frame * int(1, 50) + (frame > 1 ? int(1, frame - 1) : 0)]);
      ws.send(Buffer.alloc(n, 7));
      if (n % frame !== 0) invalid = true;
      else if (!ended) o.validBytes += n;
      action = `odd ${n}`;
    } else if (r < 0.4) {
      const n = pick([1024 * 1024, 1024 * 1024 + frame]);
      ws.send(crypto.randomBytes(n));
      invalid = true; // 1 MiB is accepted, more is 1009: either way not counted
      action = `big ${n}`;
    } else if (r < 0.58) {
      const t = rnd() < 0.15 ? crypto.randomBytes(int(1, 300)).toString('latin1') : pick(TEXTS);
      ws.send(t);
      if (t === '{"type":"end"}' || t === '{"type":"end","extra":[1]}') ended = true;
      else invalid = true;
      action = `text ${JSON.stringify(t.slice(0, 30))}${t.length > 30 ? `…(${t.length})` : ''}`;
    } else if (r < 0.62) {
      ws.send(Buffer.from([0x7b, 0xff, 0xfe, 0xc3, 0x28]), { binary: false });
      o.sentInvalidUtf8 = true;
      invalid = true;
      action = 'invalid utf-8 text';
    } else if (r < 0.68) {
      ws.ping(crypto.randomBytes(int(0, 125)));
      action = 'ping';
    } else if (r < 0.76) {
      ws.send(JSON.stringify({ type: 'end' }));
      ended = true;
      action = 'end';
    } else if (r < 0.79) {
      (ws as unknown as { _socket: net.Socket })._socket.write(crypto.randomBytes(int(1, 64)));
      // What the bytes mean to the server is anyone's guess (a close frame with any code, say): only liveness counts.
      o.self = true;
      invalid = true;
      action = 'raw garbage';
    } else if (r < 0.83) {
      o.self = true;
      ws.close(pick([1000, 1001, 3000, 4000, 4999]));
      action = 'close';
    } else if (r < 0.87) {
      o.self = true;
      ws.terminate();
      action = 'terminate';
    } else {
      const ms = int(0, 60);
      await new Promise((res) => setTimeout(res, ms));
      action = `wait ${ms}`;
    }
    o.actions.push(action);
    if (rnd() < 0.5) await new Promise((res) => setImmediate(res));
  }
  if (invalid) o.validBytes = -1;
  // Left open: the server's idle clock (4408) or the end's flush closes it.
  const deadline = setTimeout(() => ws.terminate(), IDLE_MS + 20_000);
  await closed;
  clearTimeout(deadline);
  return o;
}

/** A raw TCP client: an upgrade request cut off, destroyed at once, with a body, or without a key. */
async function rawClient(port: number, token: string, rnd: () => number, label: string): Promise<Outcome> {
  const kind = Math.floor(rnd() * 5);
  const o: Outcome = { label, actions: [`raw ${kind}`], code: null, self: true, errors: [], done: null, validBytes: -1, received: 0, outShare: 1, sentInvalidUtf8: false };
  const key = kind === 3 ? '' : 'Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n';
  const body = kind === 4 ? 'Content-Length: 5\r\n\r\nhello' : '\r\n';
  const request = `GET ${STREAM_PATH} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${token}\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n${key}Sec-WebSocket-Version: 13\r\n${body}`;
  const socket = net.connect(port, '127.0.0.1');
  socket.on('error', () => undefined);
  let answer = '';
  socket.on('data', (d: Buffer) => (answer += d.toString('latin1')));
  const closed = new Promise<void>((resolve) => socket.once('close', () => resolve()));
  if (!(await new Promise<boolean>((resolve) => (socket.once('connect', () => resolve(true)), socket.once('close', () => resolve(false)))))) {
    o.refused = 0; // no server to talk to
    o.code = 1006;
    return o;
  }
  if (kind === 0) socket.write(request.slice(0, Math.floor(rnd() * request.length)));
  else socket.write(request);
  if (kind <= 1) {
    await new Promise((r) => setTimeout(r, Math.floor(rnd() * 30)));
    socket.destroy();
  } else {
    // A refusal (no key, a body) must come at once, as the envelope with X-Request-Id; a valid one is a 101.
    setTimeout(() => socket.destroy(), 10_000).unref();
    await eventually(() => answer.includes('\r\n\r\n') || socket.destroyed, 10_000).catch(() => undefined);
    const status = Number(/^HTTP\/1\.1 (\d+)/.exec(answer)?.[1] ?? 0);
    o.refused = status;
    if (status !== 101 && !/\r\nx-request-id: req_/i.test(answer)) o.errors.push({ type: 'no_request_id', message: answer.slice(0, 200) });
    socket.destroy();
  }
  await closed;
  o.code = 1006;
  return o;
}

function fuzz(proc: ServerProcess, token: string, seed: number): Promise<Outcome[]> {
  const url = `ws://127.0.0.1:${proc.port}${STREAM_PATH}`;
  return fuzzClients(seed, { ms: FUZZ_MS, concurrency: CONCURRENCY, alive: () => proc.alive() }, (own, label) =>
    own() < 0.12 ? rawClient(proc.port, token, own, label) : wsClient(url, token, own, label),
  );
}

/** What is wrong with an outcome (empty when it is as documented). */
function problems(o: Outcome): string[] {
  const p: string[] = [];
  if (o.code === null) p.push('never closed');
  if (o.refused !== undefined && (o.refused >= 500 || o.refused === 0)) p.push(`refused with ${o.refused}`);
  if (o.refused === undefined || o.refused === 101) {
    if (!o.self && o.code !== null && !DOCUMENTED.has(o.code)) p.push(`closed with ${o.code}`);
    // Our own error codes come with an error message first; 1002, 1009 and invalid UTF-8 are the WebSocket layer's.
    if (!o.self && (o.code === 4408 || (o.code === 1007 && !o.sentInvalidUtf8)) && o.errors.length === 0) p.push(`${o.code} without an error message`);
    if (o.done && o.validBytes >= 0) {
      if (o.done.stats.bytes_in !== o.validBytes) p.push(`done says ${o.done.stats.bytes_in} bytes in, ${o.validBytes} sent`);
      if (o.received !== o.validBytes * o.outShare) p.push(`received ${o.received} bytes for ${o.validBytes} × ${o.outShare}`);
    }
  }
  if (o.errors.some((e) => e.type === 'internal_error' || e.type === 'no_request_id')) p.push(`errors ${JSON.stringify(o.errors)}`);
  return p;
}

async function denoiseFile(base: string, token: string): Promise<Buffer> {
  const { body, contentType } = multipartBody([
    { name: 'file', filename: 'a.wav', contentType: 'audio/wav', data: fs.readFileSync(fixture('speech-noisy-16k-mono.wav')) },
    { name: 'model', value: 'nsm-2' },
  ]);
  const r = await rawRequest(`${base}/v1/noise-suppressor/denoise`, { method: 'POST', headers: { Authorization: `Bearer ${token}`, 'Content-Type': contentType }, body });
  expect(r.status).toBe(200);
  return wavData(r.body);
}

describe(`live protocol fuzz (seed ${SEED}, STREAM_FUZZ_SEED to replay)`, () => {
  const dirs: string[] = [];
  const procs: ServerProcess[] = [];
  const stores: GatewayStore[] = [];
  let inProcess: ServerProcess;
  let relaying: ServerProcess;
  let modelService: ServerProcess;
  const tokens = new Map<ServerProcess, { token: string; store: GatewayStore; workspaceId: string }>();

  beforeAll(async () => {
    process.stderr.write(`streaming-fuzz: seed ${SEED} (STREAM_FUZZ_SEED=${SEED} replays it)\n`);
    const a = testConfig().dataDir;
    const b = testConfig().dataDir;
    dirs.push(a, b);
    const common = { CLIENT_IDLE_TIMEOUT_MS: String(IDLE_MS), FILE_WORK_PROCESS: 'false', LIVE_WORKERS: '1' };
    [inProcess, modelService] = await Promise.all([
      startServerProcess(a, common),
      startModelServiceProcess(b, { MODEL_SERVICE_TOKEN: SERVICE_TOKEN }),
    ]);
    relaying = await startServerProcess(b, { ...common, MODEL_SERVICE_URL: modelService.url, MODEL_SERVICE_TOKEN: SERVICE_TOKEN });
    procs.push(inProcess, modelService, relaying);
    for (const [proc, dir] of [[inProcess, a], [relaying, b]] as const) {
      const store = openSqliteStore(loadConfig({ DATA_DIR: dir } as NodeJS.ProcessEnv));
      stores.push(store);
      const ws = await store.createWorkspace(`fuzz-${proc.port}`, 'enterprise', { creditsPerMonth: 1_000_000, requestsPerMinute: 1_000_000 });
      const { token } = await store.createToken({ workspaceId: ws.id, name: 'fuzz', scopes: ['*'], allowedIps: [], expiresAt: null });
      tokens.set(proc, { token, store, workspaceId: ws.id });
    }
  }, 120_000);

  afterAll(async () => {
    for (const p of procs) p.kill();
    for (const s of stores) await s.close();
    for (const d of dirs) fs.rmSync(d, { recursive: true, force: true });
  });

  test.each([
    ['the gateway with its in-process engine', () => inProcess, 1],
    ['a gateway relaying to a model-service process', () => relaying, 2],
  ] as const)('%s survives it; then a normal stream equals /denoise', async (_name, which, salt) => {
    const proc = which();
    const { token, store, workspaceId } = tokens.get(proc)!;
    const outcomes = await fuzz(proc, token, SEED + salt);
    const involved = proc === relaying ? [relaying, modelService] : [inProcess];
    for (const p of involved) expect({ process: p.port, alive: p.alive(), tail: p.alive() ? '' : p.output().slice(-1500) }).toEqual({ process: p.port, alive: true, tail: '' });
    const codes = new Map<string, number>();
    for (const o of outcomes) {
      const k = o.refused !== undefined && o.refused !== 101 ? `HTTP ${o.refused}` : `${o.self ? 'self ' : ''}${o.code}`;
      codes.set(k, (codes.get(k) ?? 0) + 1);
    }
    process.stderr.write(`streaming-fuzz (${proc.port}): ${outcomes.length} clients; ${[...codes].sort().map(([k, v]) => `${k}: ${v}`).join(', ')}\n`);
    const bad = outcomes.map((o) => ({ o, p: problems(o) })).filter((x) => x.p.length > 0);
    const report = bad.slice(0, 5).map(({ o, p }) => `${o.label} [${o.actions.join(', ')}] → ${o.code}: ${p.join('; ')}`).join('\n');
    expect(`seed ${SEED}: ${bad.length} of ${outcomes.length} clients wrong\n${report}`).toBe(`seed ${SEED}: 0 of ${outcomes.length} clients wrong\n`);
    expect(outcomes.length).toBeGreaterThan(10);
    expect(proc.output()).not.toMatch(/uncaught|unhandled/i);
    expect(modelService.output()).not.toMatch(/uncaught|unhandled/i);

    // Nothing held once every stream is over: each stream settled its credits.
    await eventually(async () => (await store.creditsHeld(workspaceId, new Date())) === 0, 15_000);

    // A normal stream afterwards: whole output, equal to /denoise.
    const expected = await denoiseFile(proc.url, token);
    const input = wavData(fs.readFileSync(fixture('speech-noisy-16k-mono.wav')));
    const c = new StreamClient(`ws://127.0.0.1:${proc.port}${STREAM_PATH}?model=nsm-2`, { Authorization: `Bearer ${token}` });
    await c.ready;
    c.send(input, 1280);
    c.end();
    expect((await c.closed).code).toBe(1000);
    expect(c.audio.length).toBe(input.length);
    expect(Buffer.compare(c.audio, expected)).toBe(0);
  }, 120_000);
});
