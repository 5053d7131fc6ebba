// Shared helpers for the service/upstream/api tests: temp config, tokens, raw multipart, zip reading.
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import zlib from 'node:zlib';
import { loadConfig, PROJECT_ROOT, type Config } from '../../src/config';
import { pcm16WavHeader } from '../../src/audio/wav';
import type { GatewayStore } from '../../src/store/gateway/types';

export const FIXTURES = path.join(PROJECT_ROOT, 'fixtures');
export const fixture = (name: string): string => path.join(FIXTURES, name);

/**
 * A Config with its own data/tmp directories; everything else from the defaults (real ffmpeg, real models/). One file
 * worker: a second cost each of the 65 apps the suite builds ~0.24 s of CPU (its thread, modules and ONNX sessions);
 * tests about the pool's size or concurrency ask for more.
 */
export function testConfig(overrides: Partial<Config> = {}): Config {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'ns-test-'));
  // The worker count through WORKERS, so that what derives from it (the jobs' concurrency) follows an override.
  const base = loadConfig({ DATA_DIR: dataDir, WORKERS: String(overrides.workers ?? 1), NODE_ENV: 'test' } as NodeJS.ProcessEnv);
  return { ...base, logRequests: false, ...overrides };
}

export async function createToken(store: GatewayStore, scopes: string[] = ['*'], plan: 'free' | 'scale' = 'scale'): Promise<string> {
  const ws = await store.createWorkspace(`ws-${Math.random().toString(36).slice(2)}`, plan);
  return (await store.createToken({ workspaceId: ws.id, name: 'test', scopes, allowedIps: [], expiresAt: null })).token;
}

/** Entries of the temp dir (request directories must all be gone after a request completes). */
export function tmpEntries(config: Config): string[] {
  try {
    return fs.readdirSync(config.tmpDir);
  } catch {
    return [];
  }
}

/** Waits until `check` is true (cleanup after 'close' is asynchronous; a store is read through a promise). */
export async function eventually(check: () => boolean | Promise<boolean>, timeoutMs = 5000): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > end) throw new Error('condition not met in time');
    await new Promise((r) => setTimeout(r, 25));
  }
}

export interface ZipEntry {
  name: string;
  data: Buffer;
}

/** Reads a zip through its central directory (sizes are there even when the writer streamed with data descriptors). */
export function readZip(zip: Buffer): ZipEntry[] {
  let eocd = -1;
  for (let i = zip.length - 22; i >= Math.max(0, zip.length - 22 - 65535); i--) {
    if (zip.readUInt32LE(i) === 0x06054b50) {
      eocd = i;
      break;
    }
  }
  if (eocd < 0) throw new Error('not a zip: no end of central directory');
  const count = zip.readUInt16LE(eocd + 10);
  let p = zip.readUInt32LE(eocd + 16);
  const entries: ZipEntry[] = [];
  for (let n = 0; n < count; n++) {
    if (zip.readUInt32LE(p) !== 0x02014b50) throw new Error('bad central directory entry');
    const method = zip.readUInt16LE(p + 10);
    const compSize = zip.readUInt32LE(p + 20);
    const nameLen = zip.readUInt16LE(p + 28);
    const extraLen = zip.readUInt16LE(p + 30);
    const commentLen = zip.readUInt16LE(p + 32);
    const localOffset = zip.readUInt32LE(p + 42);
    const name = zip.subarray(p + 46, p + 46 + nameLen).toString('utf8');
    const localNameLen = zip.readUInt16LE(localOffset + 26);
    const localExtraLen = zip.readUInt16LE(localOffset + 28);
    const start = localOffset + 30 + localNameLen + localExtraLen;
    const raw = zip.subarray(start, start + compSize);
    const data = method === 0 ? Buffer.from(raw) : zlib.inflateRawSync(raw);
    entries.push({ name, data });
    p += 46 + nameLen + extraLen + commentLen;
  }
  return entries;
}

/** RIFF/WAVE header fields of a PCM WAV. */
export function wavInfo(buf: Buffer): { sampleRate: number; channels: number; bitsPerSample: number } {
  if (buf.toString('ascii', 0, 4) !== 'RIFF' || buf.toString('ascii', 8, 12) !== 'WAVE') throw new Error('not a WAV');
  let p = 12;
  while (p + 8 <= buf.length) {
    const id = buf.toString('ascii', p, p + 4);
    const size = buf.readUInt32LE(p + 4);
    if (id === 'fmt ') {
      return { channels: buf.readUInt16LE(p + 10), sampleRate: buf.readUInt32LE(p + 12), bitsPerSample: buf.readUInt16LE(p + 22) };
    }
    p += 8 + size + (size % 2);
  }
  throw new Error('no fmt chunk');
}

export interface Part {
  name: string;
  value?: string;
  filename?: string;
  data?: Buffer;
  contentType?: string;
}

/** A multipart/form-data body built by hand (for raw requests: aborts, chunked uploads, odd names). */
export function multipartBody(parts: Part[]): { body: Buffer; contentType: string } {
  const boundary = '----nstest' + Math.random().toString(16).slice(2);
  const chunks: Buffer[] = [];
  for (const part of parts) {
    let head = `--${boundary}\r\nContent-Disposition: form-data; name="${part.name}"`;
    if (part.filename !== undefined) head += `; filename="${part.filename.replace(/"/g, '%22')}"`;
    head += '\r\n';
    if (part.filename !== undefined) head += `Content-Type: ${part.contentType ?? 'application/octet-stream'}\r\n`;
    head += '\r\n';
    chunks.push(Buffer.from(head, 'utf8'), part.data ?? Buffer.from(part.value ?? '', 'utf8'), Buffer.from('\r\n'));
  }
  chunks.push(Buffer.from(`--${boundary}--\r\n`));
  return { body: Buffer.concat(chunks), contentType: `multipart/form-data; boundary=${boundary}` };
}

export interface RawResponse {
  status: number;
  headers: http.IncomingHttpHeaders;
  body: Buffer;
}

export function rawRequest(
  url: string,
  opts: { method?: string; headers?: Record<string, string | number>; body?: Buffer | Buffer[] },
): Promise<RawResponse> {
  return new Promise((resolve, reject) => {
    const req = http.request(url, { method: opts.method ?? 'GET', headers: opts.headers }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks) }));
      res.on('error', reject);
    });
    req.on('error', reject);
    const bodies = opts.body === undefined ? [] : Array.isArray(opts.body) ? opts.body : [opts.body];
    for (const b of bodies) req.write(b);
    req.end();
  });
}

export function listen(handler: http.RequestListener): Promise<{ server: http.Server; url: string }> {
  const server = http.createServer(handler);
  return new Promise((resolve) => {
    server.listen(0, '127.0.0.1', () => {
      const addr = server.address() as { port: number };
      resolve({ server, url: `http://127.0.0.1:${addr.port}` });
    });
  });
}

export function closeQuietly(server: http.Server): Promise<void> {
  return new Promise((resolve) => {
    server.closeAllConnections();
    server.close(() => resolve());
  });
}

/** A 16-bit PCM WAV of `seconds` of deterministic noise (a long input without a fixture file). */
export function noiseWav(seconds: number, rate = 16000, channels = 1): Buffer {
  const frames = Math.round(seconds * rate);
  const data = Buffer.alloc(frames * channels * 2);
  let x = 12345;
  for (let i = 0; i < frames * channels; i++) {
    x = (x * 1103515245 + 12345) & 0x7fffffff;
    data.writeInt16LE(((x >> 8) % 6000) - 3000, i * 2);
  }
  const header = pcm16WavHeader(data.length, rate, channels);
  return Buffer.concat([header, data]);
}
