// Outbound HTTP to user-chosen URLs (job inputs, webhooks) through the address guard: connect and idle timeouts, a
// total deadline and a minimum transfer rate (a peer that trickles bytes is not idle, but must not hold us for
// ever), a byte limit, and redirects followed by hand so each hop is checked again.
import type dns from 'node:dns';
import fs from 'node:fs';
import http from 'node:http';
import https from 'node:https';
import { pipeline } from 'node:stream/promises';
import { Transform } from 'node:stream';
import { assertLiteralHostAllowed, guardedLookup, networkReason, parseUserUrl, UrlNotAllowedError, type GuardOptions } from './url-guard';
import { removeFailedWrite } from '../failed-write';
import { ProgressWatch } from '../../upstream/watchdogs';
import { PRIVATE_FILE_MODE } from '../../startup/private-files';
import { InsufficientStorageError, type SpaceClaim } from '../../storage/disk-budget';

export interface SafeHttpOptions extends GuardOptions {
  /** Time to resolve the host and open the connection (TLS included). */
  connectTimeoutMs: number;
  /** Longest silence while waiting for response headers or body bytes. */
  idleTimeoutMs: number;
  /** The whole exchange (connect, redirects, headers, body) must be over within this; none when omitted. */
  deadlineMs?: number;
  /** Downloads: at least this many bytes per second, averaged over each idleTimeoutMs window; none when omitted. */
  minBytesPerSecond?: number;
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
      const dns = err.syscall === 'getaddrinfo' || err.code === 'ENOTFOUND' || err.code === 'ENODATA' || err.code === 'EAI_AGAIN';
      fail(new FetchFailedError(`${dns ? 'cannot resolve' : 'cannot reach'} ${req.url.host} (${networkReason(err.code, err.message)})`));
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

/** 1500 → "1500 ms", 900000 → "900 s". */
function duration(ms: number): string {
  return ms < 10_000 ? `${ms} ms` : `${Math.round(ms / 1000)} s`;
}

/**
 * Runs `fn` with a signal that also fires at the deadline; an abort by the deadline (or by `fn`'s own `stop`) rejects
 * with that reason, a FetchFailedError, rather than a bare AbortError. The caller's own abort stays an AbortError.
 */
async function bounded<T>(
  opts: SafeHttpOptions,
  what: string,
  fn: (opts: SafeHttpOptions, stop: (why: FetchFailedError) => void) => Promise<T>,
): Promise<T> {
  const ctl = new AbortController();
  const stop = (why: FetchFailedError): void => {
    if (!ctl.signal.aborted) ctl.abort(why);
  };
  const outer = opts.signal;
  const onOuter = (): void => {
    if (!ctl.signal.aborted) ctl.abort(outer!.reason);
  };
  if (outer?.aborted) onOuter();
  else outer?.addEventListener('abort', onOuter, { once: true });
  const timer =
    opts.deadlineMs !== undefined
      ? setTimeout(() => stop(new FetchFailedError(`${what} did not complete within ${duration(opts.deadlineMs!)}`)), opts.deadlineMs)
      : null;
  try {
    return await fn({ ...opts, signal: ctl.signal }, stop);
  } catch (err) {
    const reason: unknown = ctl.signal.reason;
    if (ctl.signal.aborted && reason instanceof FetchFailedError) throw reason;
    throw err;
  } finally {
    if (timer) clearTimeout(timer);
    outer?.removeEventListener('abort', onOuter);
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
 * Downloads `url` to `dest` (streamed to disk, never buffered), at most `maxBytes`, within the deadline and the
 * minimum rate of `opts`. Refuses non-2xx answers, oversize bodies (declared or counted) and silent or trickling
 * peers. With `space`, every chunk is taken from the disk budget before it is written (InsufficientStorageError when
 * the floor would be crossed). Removes `dest` on failure.
 */
export async function downloadToFile(
  url: URL,
  dest: string,
  maxBytes: number,
  opts: SafeHttpOptions,
  field = 'url',
  space?: (declared: number | undefined) => Promise<SpaceClaim | null>,
): Promise<{ bytes: number; finalUrl: URL; contentType: string | null }> {
  return bounded(opts, `the download from ${url.host}`, async (inner, stop) => {
    const { res, url: finalUrl } = await getFollowing(url, inner, field);
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
    const claim = space ? await space(Number.isFinite(declared) ? declared : undefined) : null;
    if (space && !claim) {
      res.destroy();
      throw new InsufficientStorageError('not enough free disk to fetch the input');
    }
    const windowMs = inner.idleTimeoutMs;
    const minBytes = inner.minBytesPerSecond ? Math.max(1, Math.floor((inner.minBytesPerSecond * windowMs) / 1000)) : 0;
    const watch = minBytes
      ? new ProgressWatch(windowMs, minBytes, () =>
          stop(new FetchFailedError(`${finalUrl.host} sent less than ${minBytes} bytes in ${duration(windowMs)} (slower than ${inner.minBytesPerSecond} bytes/s)`)),
        )
      : null;
    let bytes = 0;
    const counter = new Transform({
      transform(chunk: Buffer, _enc, cb) {
        bytes += chunk.length;
        watch?.progress(chunk.length);
        if (bytes > maxBytes) return cb(new FetchTooLargeError(`the file at the URL is larger than ${maxBytes} bytes`));
        if (!claim) return cb(null, chunk);
        claim.take(chunk.length).then(
          (ok) => (ok ? cb(null, chunk) : cb(new InsufficientStorageError('the disk reached its free-space floor during the download'))),
          (err: unknown) => cb(err as Error),
        );
      },
    });
    const file = fs.createWriteStream(dest, { mode: PRIVATE_FILE_MODE });
    watch?.arm();
    try {
      await pipeline(res, counter, file, { signal: inner.signal });
    } catch (err) {
      await removeFailedWrite(file, dest);
      if (err instanceof FetchFailedError || err instanceof InsufficientStorageError || (err as Error).name === 'AbortError') throw err;
      throw new FetchFailedError(`download from ${finalUrl.host} broke off: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`);
    } finally {
      watch?.disarm();
      claim?.release();
    }
    if (bytes === 0) {
      await fs.promises.rm(dest, { force: true });
      throw new FetchFailedError(`${finalUrl.host} returned an empty body`);
    }
    return { bytes, finalUrl, contentType: (res.headers['content-type'] as string | undefined) ?? null };
  });
}

/**
 * POSTs a JSON body (a webhook). Redirects are not followed (a 3xx is a failed attempt). Resolves with the status
 * and the first bytes of the answer, for the delivery log; the whole attempt, answer included, within the deadline.
 */
export async function postJson(
  url: URL,
  body: string,
  headers: Record<string, string>,
  opts: SafeHttpOptions,
): Promise<{ status: number; snippet: string }> {
  return bounded(opts, `the request to ${url.host}`, async (inner) => {
    const res = await requestOnce(
      { method: 'POST', url, headers: { 'content-type': 'application/json', ...headers }, body: Buffer.from(body, 'utf8') },
      inner,
    );
    const chunks: Buffer[] = [];
    let size = 0;
    await new Promise<void>((resolve, reject) => {
      const onAbort = (): void => {
        res.destroy();
        reject(inner.signal!.reason);
      };
      if (inner.signal?.aborted) return onAbort();
      inner.signal?.addEventListener('abort', onAbort, { once: true });
      const done = (): void => {
        inner.signal?.removeEventListener('abort', onAbort);
        resolve();
      };
      res.on('data', (c: Buffer) => {
        if (size < 512) chunks.push(c);
        size += c.length;
        if (size > 64 * 1024) res.destroy(); // the receiver's answer is not read further
      });
      res.on('end', done);
      res.on('close', done);
      res.on('error', done);
    });
    return { status: res.statusCode ?? 0, snippet: Buffer.concat(chunks).toString('utf8').slice(0, 200) };
  });
}
