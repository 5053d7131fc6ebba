// Outbound HTTP to user-chosen URLs (job inputs, webhooks) through the address guard: connect and idle timeouts,
// a byte limit, and redirects followed by hand so each hop is checked again.
import type dns from 'node:dns';
import fs from 'node:fs';
import http from 'node:http';
import https from 'node:https';
import { pipeline } from 'node:stream/promises';
import { Transform } from 'node:stream';
import { assertLiteralHostAllowed, guardedLookup, parseUserUrl, UrlNotAllowedError, type GuardOptions } from './url-guard';
import { removeFailedWrite } from '../failed-write';

export interface SafeHttpOptions extends GuardOptions {
  /** Time to resolve the host and open the connection (TLS included). */
  connectTimeoutMs: number;
  /** Longest silence while waiting for response headers or body bytes. */
  idleTimeoutMs: number;
  signal?: AbortSignal;
}

/** The fetch failed for a reason the user can act on (status, size, timeout, unreachable host). */
export class FetchFailedError extends Error {
  readonly type: string = 'url_fetch_failed';
}

export class FetchTooLargeError extends FetchFailedError {
  override readonly type = 'too_large';
}

const USER_AGENT = 'noise-suppression-gateway-jobs/1.0';
const REDIRECTS = new Set([301, 302, 303, 307, 308]);
export const MAX_REDIRECTS = 5;

interface OneRequest {
  method: 'GET' | 'POST';
  url: URL;
  headers: Record<string, string>;
  body?: Buffer;
}

/** One request over a guarded connection; resolves with the response (headers received). */
function requestOnce(req: OneRequest, opts: SafeHttpOptions): Promise<http.IncomingMessage> {
  return new Promise((resolve, reject) => {
    try {
      assertLiteralHostAllowed(req.url, opts);
    } catch (err) {
      return reject(err);
    }
    const client = req.url.protocol === 'https:' ? https : http;
    let settled = false;
    const fail = (err: Error): void => {
      if (settled) return;
      settled = true;
      clearTimeout(connectTimer);
      outgoing.destroy();
      reject(err);
    };
    const outgoing = client.request(req.url, {
      method: req.method,
      headers: { 'user-agent': USER_AGENT, ...req.headers, ...(req.body ? { 'content-length': String(req.body.length) } : {}) },
      lookup: guardedLookup(opts) as unknown as typeof dns.lookup,
      agent: false,
      signal: opts.signal,
    });
    const connectTimer = setTimeout(
      () => fail(new FetchFailedError(`could not connect to ${req.url.host} within ${opts.connectTimeoutMs} ms`)),
      opts.connectTimeoutMs,
    );
    outgoing.on('socket', (socket) => {
      const connected = (): void => {
        clearTimeout(connectTimer);
        // Idle limit for the whole exchange: before the headers it fails the request, after them it breaks the
        // body stream (the reader sees the error).
        outgoing.setTimeout(opts.idleTimeoutMs, () => {
          const err = new FetchFailedError(`${req.url.host} sent nothing for ${opts.idleTimeoutMs} ms`);
          if (!settled) fail(err);
          else outgoing.destroy(err);
        });
      };
      if (!socket.connecting) connected();
      else socket.once(req.url.protocol === 'https:' ? 'secureConnect' : 'connect', connected);
    });
    outgoing.on('error', (err: NodeJS.ErrnoException) => {
      if (err instanceof UrlNotAllowedError) return fail(err);
      if (err.name === 'AbortError') return fail(err);
      fail(new FetchFailedError(`${req.url.host}: ${err.code ?? err.message}`));
    });
    outgoing.on('response', (res) => {
      if (settled) {
        res.resume();
        return;
      }
      settled = true;
      resolve(res);
    });
    outgoing.end(req.body);
  });
}

/** GET with redirects re-checked (each hop goes through the guard again); returns the final response. */
async function getFollowing(url: URL, opts: SafeHttpOptions, field: string): Promise<{ res: http.IncomingMessage; url: URL }> {
  let current = url;
  for (let hop = 0; ; hop++) {
    const res = await requestOnce({ method: 'GET', url: current, headers: { accept: '*/*' } }, opts);
    const status = res.statusCode ?? 0;
    if (!REDIRECTS.has(status)) return { res, url: current };
    res.resume();
    const location = res.headers.location;
    if (!location) throw new FetchFailedError(`${current.host} answered ${status} without a Location`);
    if (hop >= MAX_REDIRECTS) throw new FetchFailedError(`more than ${MAX_REDIRECTS} redirects`);
    let next: URL;
    try {
      next = new URL(location, current);
    } catch {
      throw new FetchFailedError(`redirect to an invalid URL: ${location.slice(0, 200)}`);
    }
    current = parseUserUrl(next.toString(), `${field} (redirected)`);
  }
}

/** The URL's last path segment, for naming the result (talk.mp3 → talk_denoised.wav). */
export function fileNameFromUrl(url: URL): string {
  const raw = url.pathname.split('/').filter(Boolean).pop() ?? '';
  let last: string;
  try {
    last = decodeURIComponent(raw);
  } catch {
    last = raw; // a malformed %-sequence: keep it as sent
  }
  return last.replace(/[\u0000-\u001f\u007f]/g, '').slice(0, 200) || 'audio';
}

/**
 * Downloads `url` to `dest` (streamed to disk, never buffered), at most `maxBytes`. Refuses non-2xx answers,
 * oversize bodies (declared or counted) and silent peers. Removes `dest` on failure.
 */
export async function downloadToFile(
  url: URL,
  dest: string,
  maxBytes: number,
  opts: SafeHttpOptions,
  field = 'url',
): Promise<{ bytes: number; finalUrl: URL; contentType: string | null }> {
  const { res, url: finalUrl } = await getFollowing(url, opts, field);
  const status = res.statusCode ?? 0;
  if (status < 200 || status > 299) {
    res.resume();
    throw new FetchFailedError(`${finalUrl.host} answered HTTP ${status} for ${finalUrl.pathname}`);
  }
  const declared = Number(res.headers['content-length']);
  if (Number.isFinite(declared) && declared > maxBytes) {
    res.destroy();
    throw new FetchTooLargeError(`the file at the URL is ${declared} bytes; the limit is ${maxBytes}`);
  }
  let bytes = 0;
  const counter = new Transform({
    transform(chunk: Buffer, _enc, cb) {
      bytes += chunk.length;
      if (bytes > maxBytes) return cb(new FetchTooLargeError(`the file at the URL is larger than ${maxBytes} bytes`));
      cb(null, chunk);
    },
  });
  const file = fs.createWriteStream(dest);
  try {
    await pipeline(res, counter, file, { signal: opts.signal });
  } catch (err) {
    await removeFailedWrite(file, dest);
    if (err instanceof FetchFailedError || (err as Error).name === 'AbortError') throw err;
    throw new FetchFailedError(`download from ${finalUrl.host} broke off: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`);
  }
  if (bytes === 0) {
    await fs.promises.rm(dest, { force: true });
    throw new FetchFailedError(`${finalUrl.host} returned an empty body`);
  }
  return { bytes, finalUrl, contentType: (res.headers['content-type'] as string | undefined) ?? null };
}

/**
 * POSTs a JSON body (a webhook). Redirects are not followed (a 3xx is a failed attempt). Resolves with the status
 * and the first bytes of the answer, for the delivery log.
 */
export async function postJson(
  url: URL,
  body: string,
  headers: Record<string, string>,
  opts: SafeHttpOptions,
): Promise<{ status: number; snippet: string }> {
  const res = await requestOnce(
    { method: 'POST', url, headers: { 'content-type': 'application/json', ...headers }, body: Buffer.from(body, 'utf8') },
    opts,
  );
  const chunks: Buffer[] = [];
  let size = 0;
  await new Promise<void>((resolve) => {
    res.on('data', (c: Buffer) => {
      if (size < 512) chunks.push(c);
      size += c.length;
      if (size > 64 * 1024) res.destroy(); // the receiver's answer is not read further
    });
    res.on('end', resolve);
    res.on('close', resolve);
    res.on('error', () => resolve());
  });
  return { status: res.statusCode ?? 0, snippet: Buffer.concat(chunks).toString('utf8').slice(0, 200) };
}
