// Helpers for the streaming tests: a WebSocket client (`ws`) driven step by step, the HTTP answer to a refused
// upgrade, the samples of a WAV, and a gateway test server whose upgrades go through the app.
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import type { AddressInfo } from 'node:net';
import WebSocket from 'ws';
import { createApp, type AppHandle } from '../../src/app';
import { PROJECT_ROOT, type Config } from '../../src/config';
import { openSqliteStore } from '../../src/store/gateway/sqlite';
import type { GatewayStore } from '../../src/store/gateway/types';
import { freePort } from '../../scripts/lib/free-port';
import { closeQuietly, eventually, testConfig } from './service-helpers';

export const STREAM_PATH = '/v1/noise-suppressor/stream';

/** One stream as a client sees it: everything the server sent, and when. */
export class StreamClient {
  readonly ws: WebSocket;
  readonly ready: Promise<Record<string, unknown>>;
  readonly closed: Promise<{ code: number; reason: string }>;
  readonly errors: Array<Record<string, any>> = [];
  done: Record<string, any> | null = null;
  closeCode: number | null = null;
  /** Binary messages received. */
  messages = 0;
  /** Speech events (vad=true) as sent, each with the audio bytes received before it and when it came. */
  readonly speech: Array<{ type: string; at_ms: number; decided_ms: number; afterBytes: number; receivedAt: number }> = [];
  private readonly chunks: Buffer[] = [];
  private bytes = 0;

  constructor(url: string, headers: Record<string, string>) {
    this.ws = new WebSocket(url, { headers, perMessageDeflate: false });
    this.ws.on('error', () => undefined); // 'close' follows; refusals are the test's to read (refusal())
    this.ready = new Promise((resolve, reject) => {
      this.ws.on('message', (data, isBinary) => {
        if (isBinary) {
          const b = Buffer.from(data as Buffer);
          this.chunks.push(b);
          this.bytes += b.length;
          this.messages++;
          return;
        }
        const msg = JSON.parse(String(data)) as Record<string, any>;
        if (msg.type === 'ready') resolve(msg);
        else if (msg.type === 'done') this.done = msg;
        else if (msg.type === 'error') this.errors.push(msg);
        else if (msg.type === 'speech_start' || msg.type === 'speech_end') {
          this.speech.push({ ...(msg as { type: string; at_ms: number; decided_ms: number }), afterBytes: this.bytes, receivedAt: performance.now() });
        }
      });
      this.ws.once('unexpected-response', (_req, res) => {
        let body = '';
        res.on('data', (c: Buffer) => (body += c.toString()));
        res.on('end', () => reject(new Error(`refused with ${res.statusCode}: ${body}`)));
      });
      this.ws.once('close', () => reject(new Error('closed before ready')));
    });
    this.ready.catch(() => undefined);
    this.closed = new Promise((resolve) => {
      this.ws.on('close', (code, reason) => {
        this.closeCode = code;
        resolve({ code, reason: reason.toString() });
      });
    });
  }

  /** Bytes of denoised audio received so far. */
  get received(): number {
    return this.bytes;
  }

  get audio(): Buffer {
    return Buffer.concat(this.chunks);
  }

  /** Sends `pcm` in messages of `chunk` bytes. */
  send(pcm: Buffer, chunk = 640): void {
    for (let off = 0; off < pcm.length; off += chunk) this.ws.send(pcm.subarray(off, off + chunk));
  }

  end(): void {
    this.ws.send(JSON.stringify({ type: 'end' }));
  }
}

/** The HTTP answer to an upgrade the server refused. */
export function refusal(url: string, headers: Record<string, string>): Promise<{ status: number; body: Record<string, any>; headers: http.IncomingHttpHeaders }> {
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

/** Samples of a 16-bit PCM WAV (its data chunk). */
export function wavData(buf: Buffer): Buffer {
  let off = 12;
  while (off + 8 <= buf.length) {
    const id = buf.toString('ascii', off, off + 4);
    const size = buf.readUInt32LE(off + 4);
    if (id === 'data') return buf.subarray(off + 8, off + 8 + size);
    off += 8 + size + (size % 2);
  }
  throw new Error('no data chunk');
}

/** The app on a loopback port with its upgrades attached; `ws` is the stream URL. */
export async function serveApp(handle: AppHandle): Promise<{ server: http.Server; http: string; ws: string }> {
  const server = http.createServer(handle.app);
  handle.attachServer(server);
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const port = (server.address() as AddressInfo).port;
  return { server, http: `http://127.0.0.1:${port}`, ws: `ws://127.0.0.1:${port}${STREAM_PATH}` };
}

/**
 * A gateway on `config` and `store` whose streams are relayed to a model-service process of its own
 * (MODEL_SERVICE_URL, token `token`): its stream URL, and close() for the gateway and the process.
 */
export async function relayedGateway(config: Config, store: GatewayStore, token: string): Promise<{ ws: string; close(): Promise<void> }> {
  const port = await freePort();
  const replica = spawn(process.execPath, [path.join(PROJECT_ROOT, 'dist/src/model-service-main.js')], {
    env: { PATH: process.env.PATH, DATA_DIR: config.dataDir, WORKERS: '1', NODE_ENV: 'test', MODEL_SERVICE_TOKEN: token, MODEL_SERVICE_PORT: String(port) },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  replica.stdout!.on('data', (d: Buffer) => (out += d.toString()));
  replica.stderr!.on('data', (d: Buffer) => (out += d.toString()));
  await eventually(() => /Model service ready/.test(out) || replica.exitCode !== null, 30_000);
  if (replica.exitCode !== null) throw new Error(`model service did not start:\n${out}`);
  const gateway = await createApp({ ...config, modelServiceUrl: `http://127.0.0.1:${port}`, modelServiceToken: token }, { store, log: () => undefined });
  const served = await serveApp(gateway);
  return {
    ws: served.ws,
    async close() {
      await closeQuietly(served.server);
      await gateway.close();
      replica.kill('SIGKILL');
    },
  };
}

export interface StreamingServer {
  config: Config;
  store: GatewayStore;
  handle: AppHandle;
  /** ws://… of the stream endpoint. */
  base: string;
  /** A key of a workspace on the scale plan. */
  token: string;
  /** Stops the server and the app, closes the store, removes the data folder. */
  close(): Promise<void>;
}

/** The whole app with its in-process engine on a loopback port and a temp DATA_DIR, with a key of `workspace`. */
export async function streamingServer(workspace: string): Promise<StreamingServer> {
  const config = testConfig();
  const store = openSqliteStore(config);
  const handle = await createApp(config, { store, log: () => undefined });
  const served = await serveApp(handle);
  const ws = await store.createWorkspace(workspace, 'scale');
  const token = (await store.createToken({ workspaceId: ws.id, name: 't', scopes: ['*'], allowedIps: [], expiresAt: null })).token;
  return {
    config,
    store,
    handle,
    base: served.ws,
    token,
    async close() {
      await closeQuietly(served.server);
      await handle.close();
      await store.close();
      fs.rmSync(config.dataDir, { recursive: true, force: true });
    },
  };
}
