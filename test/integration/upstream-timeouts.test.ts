// Whose fault is a stall (issue 9 items 3, 5 and 11)? The real gateway and forwarder with a real SQLite store in front
// of a stand-in model service (a plain HTTP server whose behaviour each test picks), driven by raw HTTP clients that
// upload slowly, stall, or stop reading.
//   - A slow or stalled CLIENT gets 408 (or a closed connection), is refunded, and never feeds the breaker.
//   - A steady upload is never cut however long it takes.
//   - A model service that stops accepting the upload, or goes silent / dies in the middle of its response body, is
//     an upstream failure: the client gets a clean abort and a refund; the log and the breaker record the failure.
import fs from 'node:fs';
import http from 'node:http';
import express from 'express';
import type { Config } from '../../src/config';
import { createGateway, gatewayErrorHandler } from '../../src/gateway';
import { openSqliteStore } from '../../src/store/gateway/sqlite';
import type { GatewayStore, RequestLogEntry } from '../../src/store/gateway/types';
import { createModelServiceForwarder, type ModelServiceForwarder } from '../../src/upstream/forwarder';
import { closeQuietly, listen, testConfig } from '../helpers/service-helpers';

type Mode = 'ok' | 'stop-reading' | 'stall-mid-body' | 'die-mid-body' | 'big-body';

const DENOISE = '/v1/noise-suppressor/denoise';

describe('client and upstream stalls', () => {
  let config: Config;
  let store: GatewayStore;
  let upstream: { server: http.Server; url: string };
  let mode: Mode = 'ok';
  let gateway: { server: http.Server; url: string } | null = null;
  let forwarder: ModelServiceForwarder;
  const upstreamSockets = new Set<import('node:net').Socket>();
  const clients: http.ClientRequest[] = [];

  const timeouts: Partial<Config> = {
    upstreamTimeoutMs: 500, // processing time allowed AFTER the upload
    upstreamIdleTimeoutMs: 400,
    clientIdleTimeoutMs: 400,
    clientMinBytesPerSecond: 100, // ≥ 40 bytes per 400 ms window
    breakerThreshold: 3,
    breakerCooldownMs: 60_000,
  };

  async function startGateway(): Promise<void> {
    if (gateway) await closeQuietly(gateway.server);
    forwarder = createModelServiceForwarder({ config: { ...config, ...timeouts }, baseUrl: upstream.url });
    const app = express();
    app.use(createGateway({ config, store, forward: forwarder }));
    app.use(gatewayErrorHandler);
    gateway = await listen(app);
  }

  beforeAll(async () => {
    config = testConfig();
    store = openSqliteStore(config);
    upstream = await listen((req, res) => {
      if (mode === 'stop-reading') {
        req.pause(); // accepts the connection, never reads the upload
        return;
      }
      let received = 0;
      req.on('data', (c: Buffer) => (received += c.length));
      req.on('end', () => {
        switch (mode) {
          case 'ok':
            res.writeHead(200, { 'Content-Type': 'application/json' });
            res.end(JSON.stringify({ received }));
            return;
          case 'stall-mid-body':
            res.writeHead(200, { 'Content-Type': 'audio/wav', 'Content-Length': '100000' });
            res.write(Buffer.alloc(1000)); // then silence, connection open
            return;
          case 'die-mid-body':
            res.writeHead(200, { 'Content-Type': 'audio/wav', 'Content-Length': '100000' });
            res.write(Buffer.alloc(1000), () => setTimeout(() => req.socket.destroy(), 50));
            return;
          case 'big-body': {
            res.writeHead(200, { 'Content-Type': 'audio/wav', 'Content-Length': String(64 * 1024 * 1024) });
            const chunk = Buffer.alloc(1024 * 1024);
            let sent = 0;
            const pump = (): void => {
              while (sent < 64 && res.write(chunk)) sent++;
              if (sent < 64) res.once('drain', pump);
              else res.end();
            };
            pump();
            res.on('close', () => undefined);
            return;
          }
          default:
            res.end();
        }
      });
    });
    upstream.server.on('connection', (s) => {
      upstreamSockets.add(s);
      s.on('close', () => upstreamSockets.delete(s));
    });
    await startGateway();
  });

  afterAll(async () => {
    if (gateway) await closeQuietly(gateway.server);
    await closeQuietly(upstream.server);
    await store.close();
    fs.rmSync(config.dataDir, { recursive: true, force: true });
  });

  beforeEach(async () => {
    mode = 'ok';
    // A stand-in that stopped reading never notices its peer left: close what earlier tests left behind.
    for (const sock of upstreamSockets) sock.destroy();
    upstreamSockets.clear();
    await startGateway(); // a fresh breaker per test
  });

  async function workspaceToken(): Promise<{ token: string; workspaceId: string }> {
    const ws = await store.createWorkspace(`ws-${Math.random().toString(36).slice(2)}`, 'scale');
    const { token } = await store.createToken({ workspaceId: ws.id, name: 't', scopes: ['*'], allowedIps: [], expiresAt: null });
    return { token, workspaceId: ws.id };
  }

  async function logRow(requestId: string | undefined): Promise<RequestLogEntry> {
    for (let i = 0; i < 200; i++) {
      const row = (await store.queryRequests({ limit: 100 })).find((e) => e.requestId === requestId);
      if (row) return row;
      await new Promise((r) => setTimeout(r, 10));
    }
    throw new Error(`no log row for ${requestId}`);
  }

  interface Outcome {
    status: number;
    headers: http.IncomingHttpHeaders;
    body: Buffer;
    /** The response ended cleanly (all bytes) rather than being cut. */
    complete: boolean;
    error?: string;
    ms: number;
  }

  /**
   * POSTs `total` bytes in chunks of `chunk` every `everyMs` ms (Content-Length declared up front). With
   * `readResponse: false` the response body is never read.
   */
  function upload(token: string, opts: { total: number; chunk: number; everyMs: number; readResponse?: boolean; giveUpMs?: number }): Promise<Outcome> {
    const started = Date.now();
    return new Promise((resolve) => {
      let settled = false;
      let timer: NodeJS.Timeout | undefined;
      const done = (o: Omit<Outcome, 'ms'>): void => {
        if (settled) return;
        settled = true;
        clearInterval(timer);
        clearTimeout(giveUp);
        resolve({ ...o, ms: Date.now() - started });
      };
      const req = http.request(`${gateway!.url}${DENOISE}`, {
        method: 'POST',
        headers: { Authorization: `Bearer ${token}`, 'Content-Type': 'application/octet-stream', 'Content-Length': opts.total },
      });
      const giveUp = setTimeout(() => {
        req.destroy();
        done({ status: 0, headers: {}, body: Buffer.alloc(0), complete: false, error: 'client gave up waiting' });
      }, opts.giveUpMs ?? 10_000);
      req.on('response', (res) => {
        const chunks: Buffer[] = [];
        if (opts.readResponse === false) {
          // Never read: answer with the headers at once; the socket is destroyed later by cleanup.
          res.pause();
          clients.push(req);
          done({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.alloc(0), complete: false, error: 'not read' });
          return;
        }
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => done({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks), complete: res.complete }));
        res.on('error', (e) => done({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks), complete: false, error: e.message }));
        res.on('close', () => done({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks), complete: res.complete }));
      });
      req.on('error', (e) => done({ status: 0, headers: {}, body: Buffer.alloc(0), complete: false, error: e.message }));
      let sent = 0;
      const tick = (): void => {
        if (sent >= opts.total) return;
        const n = Math.min(opts.chunk, opts.total - sent);
        sent += n;
        req.write(Buffer.alloc(n, 1));
        if (sent >= opts.total) {
          clearInterval(timer);
          req.end();
        }
      };
      tick();
      if (sent < opts.total) timer = setInterval(tick, opts.everyMs);
    });
  }

  test('5 uploads at ~1 byte per 100 ms get 408, refunded, and the breaker stays closed for everybody', async () => {
    const slow = await workspaceToken();
    const results = await Promise.all(
      Array.from({ length: 5 }, () => upload(slow.token, { total: 10_000, chunk: 1, everyMs: 100 })),
    );
    for (const r of results) {
      expect(r.status).toBe(408);
      expect(JSON.parse(r.body.toString()).error.type).toBe('request_timeout');
      expect(r.headers.connection).toBe('close');
      expect(r.ms).toBeLessThan(3000);
      const row = await logRow(r.headers['x-request-id'] as string);
      expect(row).toMatchObject({ status: 408, errorType: 'request_timeout', creditsCharged: 0 });
    }
    expect(await store.creditsUsed(slow.workspaceId, new Date())).toBe(0);
    expect(forwarder.breaker.snapshot()).toEqual({ state: 'closed', consecutiveFailures: 0 });

    // Another workspace is served normally.
    const other = await workspaceToken();
    const ok = await upload(other.token, { total: 2000, chunk: 2000, everyMs: 10 });
    expect(ok.status).toBe(200);
    expect(JSON.parse(ok.body.toString())).toEqual({ received: 2000 });
    expect(await store.creditsUsed(other.workspaceId, new Date())).toBe(1);
  });

  test('a steady upload that takes far longer than UPSTREAM_TIMEOUT_MS is not cut', async () => {
    const { token, workspaceId } = await workspaceToken();
    // 1.6 s of uploading at ~2 KB/s (above the 100 B/s floor) against a 500 ms upstream timeout.
    const r = await upload(token, { total: 3200, chunk: 50, everyMs: 25 });
    expect(r.status).toBe(200);
    expect(r.ms).toBeGreaterThan(1000);
    expect(JSON.parse(r.body.toString())).toEqual({ received: 3200 });
    expect(await store.creditsUsed(workspaceId, new Date())).toBe(1);
  });

  test('an upload that stops half-way gets 408 (no bytes at all for a window)', async () => {
    const { token, workspaceId } = await workspaceToken();
    const r = await new Promise<{ status: number; body: string }>((resolve, reject) => {
      const req = http.request(`${gateway!.url}${DENOISE}`, {
        method: 'POST',
        headers: { Authorization: `Bearer ${token}`, 'Content-Length': 5000 },
      });
      req.on('response', (res) => {
        let body = '';
        res.on('data', (c) => (body += c));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
      });
      req.on('error', reject);
      req.write(Buffer.alloc(2500)); // and nothing more
    });
    expect(r.status).toBe(408);
    expect(JSON.parse(r.body).error.type).toBe('request_timeout');
    expect(await store.creditsUsed(workspaceId, new Date())).toBe(0);
    expect(forwarder.breaker.snapshot().consecutiveFailures).toBe(0);
  });

  test('a model service that stops reading the upload → 504 after UPSTREAM_IDLE_TIMEOUT_MS, a breaker failure', async () => {
    mode = 'stop-reading';
    const { token, workspaceId } = await workspaceToken();
    // Big enough to fill the socket buffers between gateway and stand-in.
    const r = await upload(token, { total: 24 * 1024 * 1024, chunk: 1024 * 1024, everyMs: 5 });
    expect(r.status).toBe(504);
    expect(JSON.parse(r.body.toString()).error.type).toBe('upstream_timeout');
    expect(await store.creditsUsed(workspaceId, new Date())).toBe(0);
    expect(forwarder.breaker.snapshot().consecutiveFailures).toBe(1);
  });

  test('model service silent mid-body: the client is cut within the idle timeout, refunded; log and breaker say failure', async () => {
    mode = 'stall-mid-body';
    const { token, workspaceId } = await workspaceToken();
    const r = await upload(token, { total: 100, chunk: 100, everyMs: 10, giveUpMs: 5000 });
    expect(r.error).not.toBe('client gave up waiting'); // today: hangs as long as the model service does
    expect(r.status).toBe(200); // the status line was already out ...
    expect(r.complete).toBe(false); // ... but the body is visibly cut, never passed off as complete
    expect(r.body.length).toBeLessThan(100_000);
    expect(r.ms).toBeLessThan(3000);
    const row = await logRow(r.headers['x-request-id'] as string);
    expect(row).toMatchObject({ status: 504, errorType: 'upstream_timeout', creditsCharged: 0 });
    expect(await store.creditsUsed(workspaceId, new Date())).toBe(0);
    expect(forwarder.breaker.snapshot().consecutiveFailures).toBe(1);
  });

  test('model service dies mid-body: cut response, refund, logged 502 upstream_unavailable, counted as a failure', async () => {
    mode = 'die-mid-body';
    const { token, workspaceId } = await workspaceToken();
    const r = await upload(token, { total: 100, chunk: 100, everyMs: 10 });
    expect(r.complete).toBe(false);
    const row = await logRow(r.headers['x-request-id'] as string);
    expect(row).toMatchObject({ status: 502, errorType: 'upstream_unavailable', creditsCharged: 0 });
    expect(await store.creditsUsed(workspaceId, new Date())).toBe(0);
    expect(forwarder.breaker.snapshot().consecutiveFailures).toBe(1);
  });

  test('a client that stops reading the answer is disconnected, not held forever; the breaker is untouched', async () => {
    mode = 'big-body';
    const { token, workspaceId } = await workspaceToken();
    const r = await upload(token, { total: 100, chunk: 100, everyMs: 10, readResponse: false });
    expect(r.status).toBe(200);
    const started = Date.now();
    // The gateway gives up on the reader after CLIENT_IDLE_TIMEOUT_MS without progress and logs why.
    const row = await logRow(r.headers['x-request-id'] as string);
    expect(Date.now() - started).toBeLessThan(3000);
    expect(row).toMatchObject({ status: 408, errorType: 'request_timeout', creditsCharged: 0 });
    expect(row.bytesOut).toBeLessThan(64 * 1024 * 1024);
    expect(await store.creditsUsed(workspaceId, new Date())).toBe(0);
    expect(forwarder.breaker.snapshot()).toEqual({ state: 'closed', consecutiveFailures: 0 });
    for (const c of clients) c.destroy();
    // The stand-in's side of that call was closed too.
    await new Promise((r2) => setTimeout(r2, 100));
    expect(upstreamSockets.size).toBe(0);
  });
});
