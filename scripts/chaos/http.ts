// Chaos suite: a raw HTTP client that never hangs (every call has a deadline) and reports what really happened on
// the wire: status, headers, body, whether the body was complete, or that no reply came at all.
import http from 'node:http';

export interface Reply {
  status: number; // 0: no response (connection refused/reset, empty reply, deadline)
  headers: http.IncomingHttpHeaders;
  body: Buffer;
  /** The response body arrived in full (not cut). */
  complete: boolean;
  ms: number;
  /** Milliseconds until the response headers arrived (-1: none). */
  headersMs: number;
  /** Transport error or 'deadline' when no complete answer came. */
  error?: string;
}

export interface CallOptions {
  method?: string;
  headers?: Record<string, string | number | string[]>;
  /** Whole body, or chunks written with `chunkDelayMs` between them. */
  body?: Buffer | Buffer[];
  chunkDelayMs?: number;
  /** Stop writing after this many bytes (a client that stalls). */
  stallAfter?: number;
  /** Give up after this long (the reply then has status 0 or an incomplete body and error 'deadline'). */
  deadlineMs?: number;
  /** Read at most this many body bytes (then stop reading: a client that stops reading). */
  readLimit?: number;
  /** Keep at most this many body bytes in memory (the rest is counted, not kept). */
  keepBytes?: number;
  /** Read the answer no faster than this (bytes per second): a client on a slow link. */
  readRate?: number;
  /** Called when the response headers arrive. */
  onResponse?: (status: number, headers: http.IncomingHttpHeaders) => void;
  agent?: http.Agent | false;
}

export function call(url: string, opts: CallOptions = {}): Promise<Reply> {
  const started = Date.now();
  return new Promise<Reply>((resolve) => {
    let settled = false;
    let status = 0;
    let headers: http.IncomingHttpHeaders = {};
    const chunks: Buffer[] = [];
    let kept = 0;
    let complete = false;
    let headersMs = -1;
    const keep = opts.keepBytes ?? 64 * 1024 * 1024;
    const finish = (error?: string): void => {
      if (settled) return;
      settled = true;
      clearTimeout(deadline);
      req.destroy();
      resolve({ status, headers, body: Buffer.concat(chunks), complete, ms: Date.now() - started, headersMs, error });
    };
    const req = http.request(url, { method: opts.method ?? 'GET', headers: opts.headers, agent: opts.agent ?? false });
    const deadline = setTimeout(() => finish('deadline'), opts.deadlineMs ?? 60_000);
    req.on('error', (e: NodeJS.ErrnoException) => finish(e.code ?? e.message));
    req.on('response', (res) => {
      status = res.statusCode ?? 0;
      headers = res.headers;
      headersMs = Date.now() - started;
      opts.onResponse?.(status, headers);
      let read = 0;
      const readStart = Date.now();
      res.on('data', (c: Buffer) => {
        read += c.length;
        if (opts.readRate) {
          const aheadMs = (read / opts.readRate) * 1000 - (Date.now() - readStart);
          if (aheadMs > 20) {
            res.pause();
            setTimeout(() => res.resume(), aheadMs);
          }
        }
        if (kept < keep) {
          chunks.push(c);
          kept += c.length;
        }
        if (opts.readLimit !== undefined && read >= opts.readLimit) res.pause();
      });
      res.on('end', () => {
        complete = res.complete;
        finish();
      });
      res.on('error', (e: NodeJS.ErrnoException) => finish(e.code ?? e.message));
      res.on('close', () => finish(res.complete ? undefined : 'response cut'));
    });
    const bodies = opts.body === undefined ? [] : Array.isArray(opts.body) ? opts.body : [opts.body];
    if (opts.stallAfter !== undefined) {
      const all = Buffer.concat(bodies);
      req.write(all.subarray(0, opts.stallAfter));
      return; // never ends the request
    }
    if (opts.chunkDelayMs && bodies.length > 1) {
      let i = 0;
      const next = (): void => {
        if (settled) return;
        if (i >= bodies.length) {
          req.end();
          return;
        }
        req.write(bodies[i++]);
        setTimeout(next, opts.chunkDelayMs);
      };
      next();
      return;
    }
    for (const b of bodies) req.write(b);
    req.end();
  });
}

export interface Part {
  name: string;
  value?: string;
  filename?: string;
  data?: Buffer;
  contentType?: string;
  /** Raw Content-Disposition parameters instead of the usual name/filename. */
  rawDisposition?: string;
}

/** multipart/form-data built by hand, so the suite can also send malformed variants. */
export function multipart(parts: Part[], boundary = '----chaos' + Math.random().toString(16).slice(2)): { body: Buffer; contentType: string } {
  const chunks: Buffer[] = [];
  for (const part of parts) {
    let head = `--${boundary}\r\nContent-Disposition: form-data; `;
    if (part.rawDisposition !== undefined) head += part.rawDisposition;
    else {
      head += `name="${part.name}"`;
      if (part.filename !== undefined) head += `; filename="${part.filename.replace(/"/g, '%22')}"`;
    }
    head += '\r\n';
    if (part.filename !== undefined || part.data !== undefined) head += `Content-Type: ${part.contentType ?? 'application/octet-stream'}\r\n`;
    head += '\r\n';
    chunks.push(Buffer.from(head, 'utf8'), part.data ?? Buffer.from(part.value ?? '', 'utf8'), Buffer.from('\r\n'));
  }
  chunks.push(Buffer.from(`--${boundary}--\r\n`));
  return { body: Buffer.concat(chunks), contentType: `multipart/form-data; boundary=${boundary}` };
}

export function jsonOf(reply: Reply): Record<string, unknown> | null {
  try {
    return JSON.parse(reply.body.toString('utf8')) as Record<string, unknown>;
  } catch {
    return null;
  }
}

export function errorType(reply: Reply): string | undefined {
  const j = jsonOf(reply) as { error?: { type?: string } } | null;
  return j?.error?.type;
}

export function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}

/** Runs `fn` over `items` with at most `limit` at once; results in input order. */
export async function pool<T, R>(items: T[], limit: number, fn: (item: T, index: number) => Promise<R>): Promise<R[]> {
  const results: R[] = new Array(items.length);
  let next = 0;
  await Promise.all(
    Array.from({ length: Math.max(1, Math.min(limit, items.length)) }, async () => {
      while (next < items.length) {
        const i = next++;
        results[i] = await fn(items[i], i);
      }
    }),
  );
  return results;
}

export function percentile(values: number[], p: number): number {
  if (values.length === 0) return NaN;
  const s = [...values].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.max(0, Math.ceil((p / 100) * s.length) - 1))];
}
