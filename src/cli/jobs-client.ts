// The HTTP side of `nsm jobs`: the API client (token, retries of idempotent calls on 429/503, the error envelope), the
// streamed multipart upload, and the file name a download is saved under.
import fs from 'node:fs';
import http from 'node:http';
import https from 'node:https';
import path from 'node:path';

/** A JSON answer from the server, or its error envelope. */
export interface ApiAnswer {
  status: number;
  headers: http.IncomingHttpHeaders;
  json: any; // eslint-disable-line @typescript-eslint/no-explicit-any
}

export class ServerError extends Error {
  constructor(
    readonly status: number,
    readonly type: string,
    message: string,
  ) {
    super(message);
  }
}

export class Client {
  constructor(
    readonly base: string,
    private readonly token: string,
  ) {}

  private url(p: string): URL {
    return new URL(`${this.base}/v1/noise-suppressor/${p}`);
  }

  request(method: string, p: string, opts: { headers?: Record<string, string>; body?: (req: http.ClientRequest) => void } = {}): Promise<http.IncomingMessage> {
    const url = this.url(p);
    const client = url.protocol === 'https:' ? https : http;
    return new Promise((resolve, reject) => {
      const req = client.request(url, { method, headers: { Authorization: `Bearer ${this.token}`, ...opts.headers } });
      req.on('response', resolve);
      req.on('error', (err: NodeJS.ErrnoException) => reject(new ServerError(0, 'unreachable', `cannot reach ${this.base}: ${err.code ?? err.message}`)));
      if (opts.body) opts.body(req);
      else req.end();
    });
  }

  async json(method: string, p: string, opts: { headers?: Record<string, string>; body?: (req: http.ClientRequest) => void } = {}): Promise<ApiAnswer> {
    for (let attempt = 0; ; attempt++) {
      const res = await this.request(method, p, opts);
      const chunks: Buffer[] = [];
      for await (const c of res) chunks.push(c as Buffer);
      const text = Buffer.concat(chunks).toString('utf8');
      let json: unknown = null;
      try {
        json = JSON.parse(text);
      } catch {
        // not JSON
      }
      const status = res.statusCode ?? 0;
      // Rate limited or briefly unavailable: wait as told and retry idempotent calls.
      if ((status === 429 || status === 503) && method === 'GET' && attempt < 5) {
        const wait = Math.min(60, Number(res.headers['retry-after']) || 2);
        await new Promise((r) => setTimeout(r, wait * 1000));
        continue;
      }
      if (status >= 400) {
        const err = (json as { error?: { type?: string; message?: string } } | null)?.error;
        throw new ServerError(status, err?.type ?? 'http_error', err?.message ?? `HTTP ${status}${text ? `: ${text.slice(0, 200)}` : ''}`);
      }
      return { status, headers: res.headers, json };
    }
  }
}

/** A multipart body streamed from disk: fields, then the file parts one after another; Content-Length known in advance. */
export function multipartUpload(files: Array<{ field: string; path: string }>, fields: Array<[string, string]>, onBytes: (n: number) => void) {
  const boundary = '----nsm' + Math.random().toString(16).slice(2) + Date.now().toString(16);
  const partHead = (f: { field: string; path: string }, first: boolean): Buffer =>
    Buffer.from(
      `${first ? '' : '\r\n'}--${boundary}\r\nContent-Disposition: form-data; name="${f.field}"; filename="${path.basename(f.path).replace(/["\r\n\\]/g, '_')}"\r\nContent-Type: application/octet-stream\r\n\r\n`,
      'utf8',
    );
  const fieldsHead = Buffer.from(fields.map(([k, v]) => `--${boundary}\r\nContent-Disposition: form-data; name="${k}"\r\n\r\n${v}\r\n`).join(''), 'utf8');
  const heads = files.map((f, i) => partHead(f, i === 0));
  const tail = Buffer.from(`${files.length > 0 ? '\r\n' : ''}--${boundary}--\r\n`, 'utf8');
  const size = fieldsHead.length + files.reduce((n, f, i) => n + heads[i].length + fs.statSync(f.path).size, 0) + tail.length;
  return {
    headers: { 'Content-Type': `multipart/form-data; boundary=${boundary}`, 'Content-Length': String(size) },
    size,
    write(req: http.ClientRequest): void {
      req.write(fieldsHead);
      const next = (i: number): void => {
        if (i === files.length) {
          req.end(tail);
          return;
        }
        req.write(heads[i]);
        const input = fs.createReadStream(files[i].path);
        input.on('data', (c) => onBytes(c.length));
        input.on('end', () => next(i + 1));
        input.on('error', (err) => req.destroy(err));
        input.pipe(req, { end: false });
      };
      next(0);
    },
  };
}

/** The file name from Content-Disposition (base name only), else null. */
export function dispositionName(header: string | undefined): string | null {
  if (!header) return null;
  const star = /filename\*=UTF-8''([^;]+)/i.exec(header);
  let name: string | null = null;
  if (star) {
    try {
      name = decodeURIComponent(star[1]);
    } catch {
      name = null;
    }
  }
  name ??= /filename="([^"]*)"/i.exec(header)?.[1] ?? null;
  if (!name) return null;
  const base = path.basename(name.replace(/\\/g, '/'));
  return base && base !== '.' && base !== '..' ? base : null;
}
