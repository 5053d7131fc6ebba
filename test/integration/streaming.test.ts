// Live streaming through the whole app (gateway, engine, real WebSocket client `ws`) on loopback: the protocol
// (ready, binary in/out, end, done, close 1000), refusals before the upgrade as ordinary HTTP answers with the
// envelope, output equal to /denoise's for the same 16 kHz (or 8 kHz) mono file whatever the client's chunk sizes, billing per
// started minute, the request log row, tickets, and faults mid-stream (bad frames, idle).
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import request from 'supertest';
import WebSocket from 'ws';
import { createApp, type AppHandle } from '../../src/app';
import type { Config } from '../../src/config';
import { createToken, fixture, testConfig } from '../helpers/service-helpers';

const API = '/v1/noise-suppressor';

interface StreamRun {
  ready: Record<string, unknown>;
  audio: Buffer;
  done: Record<string, unknown> | null;
  errors: Array<Record<string, unknown>>;
  closeCode: number;
}

/** Streams `pcm` in chunks whose sizes come from `sizes` (cycled), then `end`; collects everything the server sent. */
function runStream(url: string, headers: Record<string, string>, pcm: Buffer, sizes: number[], opts: { end?: boolean } = {}): Promise<StreamRun> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(url, { headers });
    const audio: Buffer[] = [];
    const errors: Array<Record<string, unknown>> = [];
    let ready: Record<string, unknown> | null = null;
    let done: Record<string, unknown> | null = null;
    ws.on('unexpected-response', (_req, res) => reject(new Error(`refused with ${res.statusCode}`)));
    ws.on('error', reject);
    ws.on('message', (data, isBinary) => {
      if (isBinary) {
        audio.push(Buffer.from(data as Buffer));
        return;
      }
      const msg = JSON.parse(String(data)) as Record<string, unknown>;
      if (msg.type === 'ready') {
        ready = msg;
        let off = 0;
        let i = 0;
        while (off < pcm.length) {
          const n = sizes[i++ % sizes.length];
          ws.send(pcm.subarray(off, off + n));
          off += n;
        }
        if (opts.end !== false) ws.send(JSON.stringify({ type: 'end' }));
      } else if (msg.type === 'done') done = msg;
      else if (msg.type === 'error') errors.push(msg);
    });
    ws.on('close', (code) => resolve({ ready: ready ?? {}, audio: Buffer.concat(audio), done, errors, closeCode: code }));
  });
}

/** The HTTP answer to an upgrade the server refused. */
function refusal(url: string, headers: Record<string, string>): Promise<{ status: number; body: Record<string, any>; headers: http.IncomingHttpHeaders }> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(url, { headers });
    ws.on('open', () => reject(new Error('upgrade was accepted')));
    ws.on('error', () => undefined);
    ws.on('unexpected-response', (_req, res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode!, body: JSON.parse(Buffer.concat(chunks).toString() || '{}'), headers: res.headers }));
    });
  });
}

/** Samples of a 16-bit PCM WAV (data chunk). */
function wavData(buf: Buffer): Buffer {
  let off = 12;
  while (off + 8 <= buf.length) {
    const id = buf.toString('ascii', off, off + 4);
    const size = buf.readUInt32LE(off + 4);
    if (id === 'data') return buf.subarray(off + 8, off + 8 + size);
    off += 8 + size + (size % 2);
  }
  throw new Error('no data chunk');
}

describe('live streaming over WebSocket', () => {
  let config: Config;
  let handle: AppHandle;
  let server: http.Server;
  let base: string;
  let token: string;
  const input = wavData(fs.readFileSync(fixture('speech-noisy-16k-mono.wav')));

  beforeAll(async () => {
    config = testConfig({ clientIdleTimeoutMs: 1500 });
    handle = await createApp(config);
    server = http.createServer(handle.app);
    handle.attachServer(server);
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    base = `ws://127.0.0.1:${(server.address() as AddressInfo).port}${API}/stream`;
    token = await createToken(handle.store);
  });

  afterAll(async () => {
    await new Promise((r) => server.close(r));
    await handle.close();
  });

  test('output equals /denoise for the same 16 kHz mono file, whatever the chunk sizes; total out = total in', async () => {
    const http1 = await request(handle.app)
      .post(`${API}/denoise`)
      .set('Authorization', `Bearer ${token}`)
      .attach('file', fixture('speech-noisy-16k-mono.wav'))
      .field('model', 'nsm-2')
      .buffer(true)
      .parse((res, cb) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => cb(null, Buffer.concat(chunks)));
      });
    expect(http1.status).toBe(200);
    const expected = wavData(http1.body as Buffer);
    const auth = { Authorization: `Bearer ${token}` };
    const a = await runStream(`${base}?model=nsm-2`, auth, input, [640]);
    const b = await runStream(`${base}?model=nsm-2&sample_rate=16000&encoding=pcm_s16le`, auth, input, [2, 998, 64, 6000, 320]);
    for (const run of [a, b]) {
      expect(run.errors).toEqual([]);
      expect(run.closeCode).toBe(1000);
      expect(run.ready).toMatchObject({ type: 'ready', model: 'nsm-2', sample_rate: 16000, encoding: 'pcm_s16le', channels: 1 });
      expect(run.ready.latency_ms).toBe(32);
      expect(run.audio.length).toBe(input.length);
      expect(Buffer.compare(run.audio, expected)).toBe(0);
      expect(run.done).toMatchObject({ type: 'done', stats: { model: 'nsm-2', input_seconds: 3, credits_charged: 1 } });
    }
  }, 60_000);

  test.each(['nsm-1', 'nsm-2', 'nsm-4'])('%s at 8 kHz (telephony): output equals /denoise of the same 8 kHz file, whatever the chunk sizes', async (model) => {
    const wav8k = spawnSync(config.ffmpegPath, ['-v', 'error', '-i', fixture('speech-noisy-16k-mono.wav'), '-ar', '8000', '-c:a', 'pcm_s16le', '-f', 'wav', '-'], { maxBuffer: 1 << 24 }).stdout;
    const file = await request(handle.app)
      .post(`${API}/denoise`)
      .set('Authorization', `Bearer ${token}`)
      .attach('file', wav8k, 'call.wav')
      .field('model', model)
      .buffer(true)
      .parse((res, cb) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => cb(null, Buffer.concat(chunks)));
      });
    expect(file.status).toBe(200);
    expect(JSON.parse(String(file.headers['x-ns-stats']))).toMatchObject({ output_sample_rate: 8000, processing_sample_rate: 8000 });
    const expected = wavData(file.body as Buffer);
    const pcm = wavData(wav8k);
    const auth = { Authorization: `Bearer ${token}` };
    for (const sizes of [[320], [2, 998, 64, 160, 6000]]) {
      const run = await runStream(`${base}?model=${model}&sample_rate=8000`, auth, pcm, sizes);
      expect(run.errors).toEqual([]);
      expect(run.audio.length).toBe(pcm.length);
      expect(Buffer.compare(run.audio, expected)).toBe(0);
    }
  }, 60_000);

  test('float encoding, 48 kHz stereo through nsm-2-hd: aligned, same length, finite', async () => {
    const frames = 48000;
    const pcm = Buffer.alloc(frames * 2 * 4);
    for (let i = 0; i < frames; i++) {
      const s = 0.3 * Math.sin((2 * Math.PI * 440 * i) / 48000);
      pcm.writeFloatLE(s, 8 * i);
      pcm.writeFloatLE(-s, 8 * i + 4);
    }
    const run = await runStream(`${base}?model=nsm-2-hd&sample_rate=48000&encoding=pcm_f32le&channels=2`, { 'X-API-Key': token }, pcm, [3840]);
    expect(run.errors).toEqual([]);
    expect(run.audio.length).toBe(pcm.length);
    for (let i = 0; i < run.audio.length; i += 4) expect(Number.isFinite(run.audio.readFloatLE(i))).toBe(true);
  }, 60_000);

  test('refusals come before the upgrade, as HTTP answers with the envelope', async () => {
    const noKey = await refusal(base, {});
    expect(noKey.status).toBe(401);
    expect(noKey.body.error).toMatchObject({ type: 'missing_token' });
    expect(noKey.headers['x-request-id']).toBeTruthy();
    const badRate = await refusal(`${base}?sample_rate=7000`, { Authorization: `Bearer ${token}` });
    expect(badRate.status).toBe(400);
    expect(badRate.body.error).toMatchObject({ type: 'invalid_request' });
    expect(badRate.body.error.message).toMatch(/sample_rate/);
    const unknown = await refusal(`${base}?foo=1`, { Authorization: `Bearer ${token}` });
    expect(unknown.status).toBe(400);
    const denoiseOnly = await createToken(handle.store, ['noise-suppressor:denoise']);
    const scope = await refusal(base, { Authorization: `Bearer ${denoiseOnly}` });
    expect(scope.status).toBe(403);
    expect(scope.body.error).toMatchObject({ type: 'scope_denied' });
    // A plain GET (no upgrade) is told to upgrade.
    const plain = await request(handle.app).get(`${API}/stream`).set('Authorization', `Bearer ${token}`);
    expect(plain.status).toBe(426);
  });

  test('browsers: POST /stream/tickets, then the upgrade with ?ticket= and no headers; a ticket works once', async () => {
    const res = await request(handle.app).post(`${API}/stream/tickets`).set('Authorization', `Bearer ${token}`);
    expect(res.status).toBe(201);
    expect(res.body.ticket).toMatch(/^tk_/);
    expect(Date.parse(res.body.expires_at)).toBeGreaterThan(Date.now());
    const run = await runStream(`${base}?ticket=${res.body.ticket}`, {}, input, [640]);
    expect(run.errors).toEqual([]);
    expect(run.audio.length).toBe(input.length);
    const again = await refusal(`${base}?ticket=${res.body.ticket}`, {});
    expect(again.status).toBe(401);
    expect(again.body.error).toMatchObject({ type: 'invalid_token' });
  }, 30_000);

  test('concurrent streams are limited per plan (free: 2): the third is refused with 429 and Retry-After', async () => {
    const free = await createToken(handle.store, ['*'], 'free');
    const open = (): Promise<WebSocket> =>
      new Promise((resolve, reject) => {
        const ws = new WebSocket(base, { headers: { Authorization: `Bearer ${free}` } });
        ws.on('message', () => resolve(ws));
        ws.on('error', reject);
      });
    const [one, two] = await Promise.all([open(), open()]);
    const third = await refusal(base, { Authorization: `Bearer ${free}` });
    expect(third.status).toBe(429);
    expect(third.body.error.type).toBe('too_many_streams');
    expect(Number(third.headers['retry-after'])).toBeGreaterThan(0);
    one.close();
    two.close();
  });

  test('billing: 1 credit per started minute, settled at close, one request-log row', async () => {
    const billed = await createToken(handle.store);
    const ws = (await handle.store.findTokenByHash(require('node:crypto').createHash('sha256').update(billed).digest('hex')))!;
    const before = await handle.store.creditsUsed(ws.workspaceId, new Date());
    // 61 s of silence: two started minutes.
    const pcm = Buffer.alloc(61 * 16000 * 2);
    const run = await runStream(base, { Authorization: `Bearer ${billed}` }, pcm, [32000]);
    expect(run.done).toMatchObject({ stats: { credits_charged: 2, input_seconds: 61 } });
    expect(await handle.store.creditsUsed(ws.workspaceId, new Date())).toBe(before + 2);
    expect(await handle.store.creditsHeld(ws.workspaceId, new Date())).toBe(0);
    let rows: Awaited<ReturnType<AppHandle['store']['queryRequests']>> = [];
    for (let i = 0; i < 50 && rows.length === 0; i++) {
      rows = await handle.store.queryRequests({ workspaceId: ws.workspaceId, limit: 10 });
      if (rows.length === 0) await new Promise((r) => setTimeout(r, 20));
    }
    expect(rows).toHaveLength(1);
    expect(rows[0]).toMatchObject({ endpoint: 'stream', status: 101, creditsCharged: 2, bytesIn: pcm.length, bytesOut: pcm.length });
  }, 60_000);

  test('faults mid-stream: frames that are not whole → error + 1007; silence past the idle limit → 4408', async () => {
    const odd = await runStream(base, { Authorization: `Bearer ${token}` }, Buffer.alloc(3), [3], { end: false });
    expect(odd.errors[0]).toMatchObject({ type: 'error', error: { type: 'invalid_request' } });
    expect(odd.closeCode).toBe(1007);
    const idle = await runStream(base, { Authorization: `Bearer ${token}` }, Buffer.alloc(640), [640], { end: false });
    expect(idle.errors[0]).toMatchObject({ error: { type: 'request_timeout' } });
    expect(idle.closeCode).toBe(4408);
  }, 30_000);
});
