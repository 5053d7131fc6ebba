// Live streams at the edges (issue 35), through the whole app on loopback: audio and `end` sent before `ready`
// (buffered, nothing lost, equal to /denoise), a workspace whose credits run out mid-stream (what the held minutes
// cover is flushed, then 4402 saying the credits are used up), the key revoked or expired while its stream runs
// (4401 within a renewal period), and upgrades the WebSocket layer would refuse (no Sec-WebSocket-Key, a bad version)
// answered with the envelope and X-Request-Id.
import crypto from 'node:crypto';
import fs from 'node:fs';
import type http from 'node:http';
import { createApp, type AppHandle } from '../../src/app';
import type { Config } from '../../src/config';
import type { GatewayStore } from '../../src/store/gateway/types';
import { closeQuietly, fixture, multipartBody, noiseWav, rawRequest, testConfig } from '../helpers/service-helpers';
import { serveApp, StreamClient, STREAM_PATH, wavData } from '../helpers/streaming-helpers';

/** A workspace with `credits` a month and a key for it. */
async function tenant(store: GatewayStore, credits = 1_000_000, expiresAt: string | null = null): Promise<{ token: string; id: string; workspaceId: string }> {
  const ws = await store.createWorkspace(`faults-${crypto.randomUUID()}`, 'enterprise', { creditsPerMonth: credits, requestsPerMinute: 100_000 });
  const { token, record } = await store.createToken({ workspaceId: ws.id, name: 't', scopes: ['*'], allowedIps: [], expiresAt });
  return { token, id: record.id, workspaceId: ws.id };
}

async function denoise(base: string, token: string, wav: Buffer, model: string): Promise<Buffer> {
  const { body, contentType } = multipartBody([
    { name: 'file', filename: 'a.wav', contentType: 'audio/wav', data: wav },
    { name: 'model', value: model },
  ]);
  const r = await rawRequest(`${base}/v1/noise-suppressor/denoise`, { method: 'POST', headers: { Authorization: `Bearer ${token}`, 'Content-Type': contentType }, body });
  expect(r.status).toBe(200);
  return wavData(r.body);
}

/** The stream's close code, or 'still open' after `ms`. */
function closedWithin(c: StreamClient, ms: number): Promise<number | string> {
  return Promise.race([c.closed.then((x) => x.code), new Promise<string>((r) => setTimeout(() => r('still open'), ms).unref())]);
}

describe('live streams at the edges', () => {
  let config: Config;
  let handle: AppHandle;
  let server: http.Server;
  let base: string;
  let ws: string;

  beforeAll(async () => {
    // Renewals (and so the key's re-checks) every 333 ms.
    config = testConfig({ creditReservationTtlMs: 1000, clientIdleTimeoutMs: 5000, workers: 1 });
    handle = await createApp(config);
    const served = await serveApp(handle);
    server = served.server;
    base = served.http;
    ws = served.ws;
  });

  afterAll(async () => {
    await closeQuietly(server);
    await handle.close();
    fs.rmSync(config.dataDir, { recursive: true, force: true });
  });

  // First in this file: the live worker starts with the first stream, so `ready` comes only after seconds.
  test('audio and end sent before ready are buffered: whole output, equal to /denoise', async () => {
    const { token } = await tenant(handle.store);
    const wav = fs.readFileSync(fixture('speech-noisy-16k-mono.wav'));
    const input = wavData(wav);
    const c = new StreamClient(`${ws}?model=nsm-2`, { Authorization: `Bearer ${token}` });
    let readyAt = 0;
    void c.ready.then(() => (readyAt = performance.now()));
    await new Promise<void>((resolve) => c.ws.once('open', () => resolve()));
    c.send(input, 1280);
    c.end();
    const sentAt = performance.now();
    expect((await c.closed).code).toBe(1000);
    expect(readyAt).toBeGreaterThan(sentAt); // all of it really went before `ready`
    expect(c.errors).toEqual([]);
    expect(c.done).toMatchObject({ stats: { input_seconds: 3, output_seconds: 3, credits_charged: 1 } });
    expect(c.audio.length).toBe(input.length);
    expect(Buffer.compare(c.audio, await denoise(base, token, wav, 'nsm-2'))).toBe(0);
  }, 60_000);

  test('credits that run out mid-stream: the held minute is flushed in full, then 4402 "used up"', async () => {
    const oneCredit = await tenant(handle.store, 1);
    const other = await tenant(handle.store);
    const wav = noiseWav(75);
    const input = wavData(wav);
    const c = new StreamClient(`${ws}?model=nsm-1`, { Authorization: `Bearer ${oneCredit.token}` });
    await c.ready;
    c.send(input, 32_000);
    expect((await c.closed).code).toBe(4402);
    // Exactly the minute held (before: what was still in the pipeline was thrown away)...
    expect(c.audio.length).toBe(60 * 16000 * 2);
    expect(c.errors[0]).toMatchObject({ type: 'error', error: { type: 'quota_exhausted' } });
    expect(c.errors[0].error.message).toMatch(/used up its 1 credits/);
    expect(c.errors[0].error.message).not.toMatch(/in flight/);
    // ...and what /denoise gives for that minute.
    const minute = noiseWav(60); // the same samples as the first minute of `wav`
    expect(Buffer.compare(wavData(minute), input.subarray(0, 60 * 16000 * 2))).toBe(0);
    expect(Buffer.compare(c.audio, await denoise(base, other.token, minute, 'nsm-1'))).toBe(0);
    expect(await handle.store.creditsUsed(oneCredit.workspaceId, new Date())).toBe(1);
    expect(await handle.store.creditsHeld(oneCredit.workspaceId, new Date())).toBe(0);
  }, 90_000);

  test('a key revoked while its stream runs: error key_revoked and close 4401 within a renewal period', async () => {
    const key = await tenant(handle.store);
    const c = new StreamClient(ws, { Authorization: `Bearer ${key.token}` });
    await c.ready;
    const ticker = setInterval(() => c.ws.readyState === c.ws.OPEN && c.ws.send(Buffer.alloc(640)), 20);
    try {
      await new Promise((r) => setTimeout(r, 300));
      expect(c.closeCode).toBeNull();
      await handle.store.revokeToken(key.id);
      // A renewal period is 333 ms here: closed well within 2 s.
      expect(await closedWithin(c, 2000)).toBe(4401);
    } finally {
      clearInterval(ticker);
      c.ws.terminate();
    }
    expect(c.errors[0]).toMatchObject({ error: { type: 'key_revoked' } });
    expect(c.received).toBeGreaterThan(0);
    expect(await handle.store.creditsHeld(key.workspaceId, new Date())).toBe(0);
  }, 30_000);

  test('a key that expires while its stream runs: key_expired, 4401', async () => {
    const key = await tenant(handle.store, 1_000_000, new Date(Date.now() + 1200).toISOString());
    const c = new StreamClient(ws, { Authorization: `Bearer ${key.token}` });
    await c.ready;
    const ticker = setInterval(() => c.ws.readyState === c.ws.OPEN && c.ws.send(Buffer.alloc(640)), 20);
    try {
      expect(await closedWithin(c, 3000)).toBe(4401);
    } finally {
      clearInterval(ticker);
      c.ws.terminate();
    }
    expect(c.errors[0]).toMatchObject({ error: { type: 'key_expired' } });
  }, 30_000);

  test('no Sec-WebSocket-Key, or a version other than 13: 400 with the envelope and X-Request-Id; the slot is free again', async () => {
    const key = await tenant(handle.store);
    const headers = { Authorization: `Bearer ${key.token}`, Connection: 'Upgrade', Upgrade: 'websocket' };
    const noKey = await rawRequest(`${base}${STREAM_PATH}`, { headers: { ...headers, 'Sec-WebSocket-Version': '13' } });
    const badVersion = await rawRequest(`${base}${STREAM_PATH}`, { headers: { ...headers, 'Sec-WebSocket-Key': 'dGhlIHNhbXBsZSBub25jZQ==', 'Sec-WebSocket-Version': '12' } });
    for (const r of [noKey, badVersion]) {
      expect(r.status).toBe(400);
      expect(r.headers['x-request-id']).toMatch(/^req_/);
      const body = JSON.parse(r.body.toString()) as { error: { type: string; message: string; request_id: string } };
      expect(body.error).toMatchObject({ type: 'invalid_request', request_id: r.headers['x-request-id'] });
    }
    expect(JSON.parse(noKey.body.toString()).error.message).toMatch(/Sec-WebSocket-Key/);
    expect(badVersion.headers['sec-websocket-version']).toBe('13');
    // Nothing held and the stream slot free: a stream opens and runs.
    const c = new StreamClient(ws, { Authorization: `Bearer ${key.token}` });
    await c.ready;
    c.send(Buffer.alloc(3200));
    c.end();
    expect((await c.closed).code).toBe(1000);
    expect(await handle.store.creditsHeld(key.workspaceId, new Date())).toBe(0);
  }, 30_000);
});
