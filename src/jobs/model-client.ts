// The runner's side of POST /internal/jobs/denoise (see stream-endpoint.ts for the format): streams the input file to
// a model service, reports its progress lines, and writes the audio that follows the result line to a file.
import fs from 'node:fs';
import http from 'node:http';
import https from 'node:https';
import { JOB_STREAM_CONTENT_TYPE, JOB_STREAM_PATH } from '../model-service/job-stream';
import type { JobParams } from './types';

/** The model service refused the input or the parameters (400/413/422): retrying cannot help. */
export class ModelServiceRejected extends Error {
  constructor(
    readonly status: number,
    readonly detail: string,
  ) {
    super(detail);
  }
}

/** The model service already runs its share of job streams: try again later, it is not the job's fault. */
export class ModelServiceBusy extends Error {
  constructor(readonly retryAfterMs: number) {
    super('model service busy');
  }
}

/** Unreachable, 5xx, broken stream, silent for too long: worth another attempt. */
export class ModelServiceFailed extends Error {}

export interface StreamJobOptions {
  baseUrl: string;
  inputPath: string;
  outputPath: string;
  params: JobParams;
  /** Sent as X-Request-Id (the job id), so the model service's logs name the job. */
  requestId: string;
  /** Extra headers for the model service (its bearer token when one is configured). */
  headers?: Record<string, string>;
  signal: AbortSignal;
  /** Silence longer than this (no byte either way) fails the attempt; the service sends a line every 10 s. */
  idleTimeoutMs?: number;
  onProgress?(doneS: number, totalS: number | null): void;
}

export interface StreamJobResult {
  stats: Record<string, unknown>;
  bytes: number;
  contentType: string;
}

const MAX_LINE = 1024 * 1024;

interface Line {
  type: string;
  [key: string]: unknown;
}

export function streamJob(opts: StreamJobOptions): Promise<StreamJobResult> {
  return new Promise<StreamJobResult>((resolve, reject) => {
    const base = new URL(opts.baseUrl.replace(/\/+$/, '') + '/');
    const url = new URL(JOB_STREAM_PATH.slice(1), base);
    const p = opts.params;
    url.searchParams.set('model', p.model);
    url.searchParams.set('attenuation_limit_db', String(p.attenuation_limit_db));
    url.searchParams.set('output_format', p.output_format);
    url.searchParams.set('keep_input_sample_rate', String(p.keep_input_sample_rate));
    if (p.loudness_lufs !== undefined && p.loudness_lufs !== null) url.searchParams.set('loudness_lufs', String(p.loudness_lufs));
    let size: number;
    try {
      size = fs.statSync(opts.inputPath).size;
    } catch (err) {
      reject(
        new ModelServiceFailed(
          `the job's input is not in JOBS_DIR (${(err as NodeJS.ErrnoException).code ?? (err as Error).message}); gateways that share a queue must share JOBS_DIR`,
        ),
      );
      return;
    }
    const client = url.protocol === 'https:' ? https : http;
    let settled = false;
    let out: fs.WriteStream | null = null;
    const input = fs.createReadStream(opts.inputPath);
    const done = (err: Error | null, result?: StreamJobResult): void => {
      if (settled) return;
      settled = true;
      opts.signal.removeEventListener('abort', onAbort);
      input.destroy();
      if (err) {
        req.destroy();
        if (out) {
          const o = out;
          o.destroy();
          fs.promises.rm(opts.outputPath, { force: true }).catch(() => undefined);
        }
        reject(err);
      } else {
        resolve(result!);
      }
    };
    const onAbort = (): void => {
      const reason = opts.signal.reason;
      done(reason instanceof Error ? reason : Object.assign(new Error('aborted'), { name: 'AbortError' }));
    };
    if (opts.signal.aborted) return onAbort();
    opts.signal.addEventListener('abort', onAbort, { once: true });

    const req = client.request(url, {
      method: 'POST',
      headers: {
        ...opts.headers,
        'content-type': 'application/octet-stream',
        'content-length': String(size),
        'x-request-id': opts.requestId,
        // The body (up to JOBS_MAX_UPLOAD_MB) is sent only once the model service said it will take it: a refusal
        // (busy, wrong token, shutting down) costs nothing and the job is simply tried again later.
        expect: '100-continue',
      },
      agent: false,
    });
    req.setTimeout(opts.idleTimeoutMs ?? 60_000, () => done(new ModelServiceFailed('the model service went silent')));
    req.on('error', (err: NodeJS.ErrnoException) => {
      // After a response started (e.g. 503 busy sent before the body was read), the response decides.
      if (!responded) done(new ModelServiceFailed(`model service unreachable (${err.code ?? err.message})`));
    });
    input.on('error', (err) => done(new ModelServiceFailed(`cannot read the job input: ${err.message}`)));
    let sending = false;
    const send = (): void => {
      if (sending || settled || responded) return;
      sending = true;
      clearTimeout(continueTimer);
      input.pipe(req);
    };
    req.on('continue', send);
    // A server (or proxy) that ignores Expect gets the body anyway after a short wait (RFC 9110 §10.1.1).
    const continueTimer = setTimeout(send, 3000);
    continueTimer.unref();
    req.flushHeaders();

    let responded = false;
    req.on('response', (res) => {
      responded = true;
      clearTimeout(continueTimer);
      const status = res.statusCode ?? 0;
      if (status !== 200 || !String(res.headers['content-type'] ?? '').startsWith(JOB_STREAM_CONTENT_TYPE)) {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => {
          if (chunks.length < 64) chunks.push(c);
        });
        const finish = (): void => {
          let detail = `HTTP ${status}`;
          try {
            const parsed = JSON.parse(Buffer.concat(chunks).toString('utf8')) as { detail?: unknown };
            if (typeof parsed.detail === 'string') detail = parsed.detail;
          } catch {
            // not JSON
          }
          if (status === 503 && /^busy/.test(detail)) {
            const after = Number(res.headers['retry-after']);
            done(new ModelServiceBusy(Number.isFinite(after) && after > 0 ? after * 1000 : 5000));
          } else if (status === 400 || status === 413 || status === 422) {
            done(new ModelServiceRejected(status, detail));
          } else {
            done(new ModelServiceFailed(`model service answered ${status}: ${detail}`));
          }
        };
        res.on('end', finish);
        res.on('error', finish);
        res.on('aborted', finish);
        return;
      }

      // Lines until the result line; after it, exactly `bytes` bytes of audio.
      let pending: Buffer = Buffer.alloc(0);
      let expect = -1;
      let written = 0;
      let result: StreamJobResult | null = null;
      const handleLine = (text: string): void => {
        let msg: Line;
        try {
          msg = JSON.parse(text) as Line;
        } catch {
          return done(new ModelServiceFailed('model service sent a malformed progress line'));
        }
        if (msg.type === 'progress') {
          opts.onProgress?.(Number(msg.done_s) || 0, typeof msg.total_s === 'number' ? msg.total_s : null);
        } else if (msg.type === 'error') {
          const st = Number(msg.status);
          const detail = String(msg.detail ?? 'processing failed');
          if (st === 400 || st === 413 || st === 422) done(new ModelServiceRejected(st, detail));
          else done(new ModelServiceFailed(`model service failed: ${detail}`));
        } else if (msg.type === 'result') {
          expect = Number(msg.bytes);
          result = { stats: msg.stats as Record<string, unknown>, bytes: expect, contentType: String(msg.content_type ?? 'application/octet-stream') };
          out = fs.createWriteStream(opts.outputPath);
          out.on('error', (err) => done(new ModelServiceFailed(`cannot write the result: ${err.message}`)));
          out.on('drain', () => res.resume());
        }
      };
      const writeAudio = (chunk: Buffer): void => {
        if (chunk.length === 0) return;
        written += chunk.length;
        if (written > expect) return done(new ModelServiceFailed('model service sent more audio than announced'));
        if (!out!.write(chunk)) res.pause();
      };
      res.on('data', (chunk: Buffer) => {
        if (settled) return;
        if (expect >= 0) return writeAudio(chunk);
        pending = pending.length ? Buffer.concat([pending, chunk]) : chunk;
        let nl: number;
        while (expect < 0 && !settled && (nl = pending.indexOf(10)) >= 0) {
          const text = pending.subarray(0, nl).toString('utf8');
          pending = pending.subarray(nl + 1);
          if (text.trim()) handleLine(text);
        }
        if (settled) return;
        if (expect >= 0) {
          const rest = pending;
          pending = Buffer.alloc(0);
          writeAudio(rest);
        } else if (pending.length > MAX_LINE) {
          done(new ModelServiceFailed('model service sent an over-long line'));
        }
      });
      const ended = (): void => {
        if (settled) return;
        if (!result) return done(new ModelServiceFailed('the model service stream ended without a result'));
        if (written !== expect) return done(new ModelServiceFailed(`the result broke off after ${written} of ${expect} bytes`));
        const r = result;
        out!.end(() => done(null, r));
      };
      res.on('end', ended);
      res.on('aborted', () => done(new ModelServiceFailed('the model service connection broke off')));
      res.on('error', () => done(new ModelServiceFailed('the model service connection broke off')));
    });
  });
}
