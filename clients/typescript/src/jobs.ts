// Asynchronous jobs (docs/jobs.md): submit a file or URL, poll, wait, list, cancel, and download the result with
// Range resumes: a download whose connection breaks continues from the bytes it has (If-Range on the result's
// strong ETag, so a changed result restarts from zero instead of splicing two files).
import { ConnectionError, NsmError } from './errors.js';
import { buildForm, prepareFile, withEchoReference, type FileInput } from './files.js';
import { describe, sleep, type Transport } from './http.js';
import type { Job, JobList, JobOptions, ListJobsOptions } from './types.js';

const JOBS = '/v1/noise-suppressor/jobs';
const FINAL = new Set(['succeeded', 'failed', 'canceled']);

export interface WaitOptions {
  /** Poll interval. Default 2000 ms (polls count against the rate limit). */
  intervalMs?: number;
  /** Give up after this long (throws an NsmError of type `wait_timeout`). Default: no limit. */
  timeoutMs?: number;
  /** Called with each polled job. */
  onProgress?: (job: Job) => void;
  signal?: AbortSignal;
}

export interface DownloadOptions {
  /** Write to this file (Node). Without it the result is returned as bytes. */
  to?: string;
  /** Resumes after broken connections, at most. Default 5. */
  maxResumes?: number;
  /** Called as bytes arrive: (received, total). */
  onProgress?: (received: number, total: number | null) => void;
  signal?: AbortSignal;
}

export interface DownloadResult {
  /** Bytes of the result. */
  bytes: number;
  /** The result, when no `to` was given. */
  data?: Uint8Array;
  /** The file written, when `to` was given. */
  path?: string;
  /** How many times the download resumed after a broken connection. */
  resumes: number;
  /** The server's file name (Content-Disposition), e.g. podcast_denoised.wav. */
  filename: string | null;
  contentType: string | null;
}

/** A file name from a Content-Disposition header (RFC 5987 filename* first). */
export function dispositionName(header: string | null): string | null {
  if (!header) return null;
  const star = /filename\*=UTF-8''([^;]+)/i.exec(header);
  if (star) {
    try {
      return decodeURIComponent(star[1]);
    } catch {
      // fall through to the plain name
    }
  }
  const plain = /filename="([^"]*)"/i.exec(header) ?? /filename=([^;]+)/i.exec(header);
  return plain ? plain[1].trim() : null;
}

interface Sink {
  write(b: Uint8Array): Promise<void>;
  truncate(): Promise<void>;
  close(): Promise<void>;
  result(): { data?: Uint8Array; path?: string };
}

async function fileSink(path: string): Promise<Sink> {
  const fs = (await import('node:fs')) as typeof import('node:fs');
  const fh = await fs.promises.open(path, 'w');
  let position = 0; // written at explicit positions, so a restart from zero needs no reopening
  return {
    async write(b) {
      await fh.write(b, 0, b.length, position);
      position += b.length;
    },
    async truncate() {
      await fh.truncate(0);
      position = 0;
    },
    close: () => fh.close(),
    result: () => ({ path }),
  };
}

function memorySink(): Sink {
  let chunks: Uint8Array[] = [];
  return {
    async write(b) {
      chunks.push(b);
    },
    async truncate() {
      chunks = [];
    },
    async close() {},
    result() {
      const total = chunks.reduce((n, c) => n + c.length, 0);
      const data = new Uint8Array(total);
      let off = 0;
      for (const c of chunks) {
        data.set(c, off);
        off += c.length;
      }
      return { data };
    },
  };
}

export class Jobs {
  constructor(private readonly http: Transport) {}

  /**
   * POST /jobs: a file (path, Blob, bytes) or `{url}` for the server to fetch. 1 credit, refunded if it fails.
   * `options.echoReference` uploads what the loudspeaker played (its echo removed first: docs/echo.md); or give
   * `echo_reference_url`.
   */
  async submit(input: FileInput | { url: string }, options: JobOptions = {}, init: { signal?: AbortSignal } = {}): Promise<Job> {
    const isUrl = typeof input === 'object' && input !== null && 'url' in input && !('data' in input) && !(input instanceof Blob);
    const file = isUrl ? null : await prepareFile(input as FileInput);
    const { fields: rest, more } = await withEchoReference(options);
    const fields = isUrl ? { ...rest, url: (input as { url: string }).url } : rest;
    const res = await this.http.request({
      method: 'POST',
      path: JOBS,
      body: () => buildForm('file', file ? [file] : [], fields, more),
      charged: true,
      signal: init.signal,
    });
    return (await res.json()) as Job;
  }

  /** GET /jobs/{id}. */
  async get(id: string, init: { signal?: AbortSignal } = {}): Promise<Job> {
    const res = await this.http.request({ path: `${JOBS}/${encodeURIComponent(id)}`, signal: init.signal });
    return (await res.json()) as Job;
  }

  /** GET /jobs: one page, newest first. */
  async list(options: ListJobsOptions = {}, init: { signal?: AbortSignal } = {}): Promise<JobList> {
    const res = await this.http.request({ path: JOBS, query: options as Record<string, string | number>, signal: init.signal });
    return (await res.json()) as JobList;
  }

  /** Every job matching `options`, page after page. */
  async *listAll(options: Omit<ListJobsOptions, 'cursor'> = {}): AsyncGenerator<Job> {
    let cursor: string | undefined;
    do {
      const page = await this.list({ ...options, cursor });
      yield* page.jobs;
      cursor = page.has_more && page.next_cursor ? page.next_cursor : undefined;
    } while (cursor);
  }

  /** DELETE /jobs/{id}: cancels a queued or running job (refunded), or deletes a finished job's result. */
  async cancel(id: string, init: { signal?: AbortSignal } = {}): Promise<Job> {
    const res = await this.http.request({ method: 'DELETE', path: `${JOBS}/${encodeURIComponent(id)}`, signal: init.signal });
    return (await res.json()) as Job;
  }

  /** Polls until the job is succeeded, failed or canceled, and returns it (a failed job is returned, not thrown). */
  async wait(id: string, options: WaitOptions = {}): Promise<Job> {
    const interval = options.intervalMs ?? 2000;
    const deadline = options.timeoutMs === undefined ? Infinity : Date.now() + options.timeoutMs;
    for (;;) {
      const job = await this.get(id, { signal: options.signal });
      options.onProgress?.(job);
      if (FINAL.has(job.status)) return job;
      if (Date.now() + interval > deadline) {
        throw new NsmError({ type: 'wait_timeout', message: `job ${id} still ${job.status} after ${options.timeoutMs} ms` });
      }
      await sleep(interval, options.signal);
    }
  }

  /** GET /jobs/{id}/result, resuming with Range after a broken connection. */
  async download(id: string, options: DownloadOptions = {}): Promise<DownloadResult> {
    const path = `${JOBS}/${encodeURIComponent(id)}/result`;
    const sink = options.to ? await fileSink(options.to) : memorySink();
    const maxResumes = options.maxResumes ?? 5;
    let received = 0;
    let total: number | null = null;
    let etag: string | null = null;
    let filename: string | null = null;
    let contentType: string | null = null;
    let resumes = 0;
    try {
      for (;;) {
        const headers: Record<string, string> = {};
        if (received > 0) {
          headers.Range = `bytes=${received}-`;
          if (etag) headers['If-Range'] = etag;
        }
        const res = await this.http.request({ path, headers, accept: [206], signal: options.signal });
        if (received > 0 && res.status === 200) {
          // The server sent the whole file (the result changed, or it ignored Range): start again.
          received = 0;
          await sink.truncate();
        }
        if (res.status === 200) {
          const len = res.headers.get('content-length');
          total = len === null ? null : Number(len);
        } else {
          const range = /\/(\d+)\s*$/.exec(res.headers.get('content-range') ?? '');
          if (range) total = Number(range[1]);
        }
        etag = res.headers.get('etag') ?? etag;
        filename = dispositionName(res.headers.get('content-disposition')) ?? filename;
        contentType = res.headers.get('content-type') ?? contentType;
        try {
          const reader = res.body!.getReader();
          for (;;) {
            const { done, value } = await reader.read();
            if (done) break;
            await sink.write(value);
            received += value.length;
            options.onProgress?.(received, total);
          }
        } catch (err) {
          if (options.signal?.aborted) throw err;
          if (resumes >= maxResumes) {
            throw new ConnectionError({ type: 'download_interrupted', message: `download of ${id} broke at ${received} bytes ${resumes} times: ${describe(err)}` });
          }
          resumes++;
          await sleep(Math.min(5000, 250 * 2 ** (resumes - 1)), options.signal);
          continue;
        }
        if (total !== null && received < total) {
          // the body ended early without an error (a proxy that closed cleanly): resume as well
          if (resumes >= maxResumes) throw new ConnectionError({ type: 'download_interrupted', message: `download of ${id} ended at ${received} of ${total} bytes` });
          resumes++;
          continue;
        }
        break;
      }
    } finally {
      await sink.close().catch(() => undefined);
    }
    return { bytes: received, resumes, filename, contentType, ...sink.result() };
  }
}
