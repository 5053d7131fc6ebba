// The runner's side of POST /internal/jobs/denoise (see model-service/job-stream.ts for the format): streams the
// input file (and after it the echo reference, with `input_bytes`) to a model-service replica, reports its progress lines, and writes the audio that follows the result
// line to a file. Replicas come from the set the forwarder uses (upstream/replicas.ts): one that is down, unhealthy
// or whose breaker is open is skipped, and a replica that cannot take the job (unreachable before the input was
// sent, busy, refusing our token) passes it to the next one.
//
// Breaker verdicts: a job stream lasts minutes, so its replica is judged when the answer's head arrives (a job
// stream that starts is a success; 5xx, a wrong answer or no connection a failure), never held as a half-open
// breaker's single trial for the whole job; a stream that breaks later fails the job's attempt, not the replica.
import fs from 'node:fs';
import { Readable } from 'node:stream';
import { JOB_STREAM_CONTENT_TYPE, JOB_STREAM_PATH } from '../../model-service/job-stream';
import { SPEECH_FIELDS } from '../../model-service/speech-params';
import type { Upstream } from '../../upstream/balancer';
import type { ModelServiceReplicas, ReplicaCall, Verdict } from '../../upstream/replicas';
import type { JobParams } from '../types';

/** The model service refused the input or the parameters (400/413/422): retrying cannot help. */
export class ModelServiceRejected extends Error {
  constructor(
    readonly status: number,
    readonly detail: string,
  ) {
    super(detail);
  }
}

/** No replica can take the job now (they run their share of job streams, or their breakers are open): not the job's fault. */
export class ModelServiceBusy extends Error {
  constructor(
    readonly retryAfterMs: number,
    /** Why, for the runner's log. */
    readonly why = 'the model service runs its share of job streams',
  ) {
    super('model service busy');
  }
}

/** Unreachable, 5xx, broken stream, silent for too long: worth another attempt. */
export class ModelServiceFailed extends Error {}

/** A replica could not be reached and nothing of the job went out: the service is down or restarting, not the job's fault. */
class ModelServiceUnreachable extends ModelServiceFailed {}

/** How long a job waits when no replica could be reached before the next try (not counted as an attempt). */
const UNREACHABLE_RETRY_MS = 2_000;

export interface StreamJobOptions {
  /** The model-service replicas (shared with the forwarder); their token goes with each request. */
  replicas: ModelServiceReplicas;
  inputPath: string;
  /** The echo reference (docs/echo.md), sent after the input in the same body. */
  referencePath?: string | null;
  outputPath: string;
  params: JobParams;
  /** The input's name (output_format=video tells MKV from WebM by it). */
  filename?: string;
  /** Sent as X-Request-Id (the job id), so the model service's logs name the job. */
  requestId: string;
  signal: AbortSignal;
  /** Silence longer than this (no byte either way) fails the attempt; the service sends a line every 10 s. */
  idleTimeoutMs?: number;
  onProgress?(doneS: number, totalS: number | null): void;
}

export interface StreamJobResult {
  stats: Record<string, unknown>;
  /** With speech_segments=true: the segments the model service found (seconds of the input). */
  speechSegments?: Array<{ start_s: number; end_s: number }>;
  bytes: number;
  contentType: string;
}

/** The result line carries speech_segments when asked (~40 bytes a segment: 4 h of audio stays far below this). */
const MAX_LINE = 16 * 1024 * 1024;

interface Line {
  type: string;
  [key: string]: unknown;
}

/** A replica that did not take the job; the next one may. */
class NotTaken {
  constructor(
    readonly upstream: Upstream,
    readonly error: ModelServiceBusy | ModelServiceFailed,
  ) {}
}

function abortError(signal: AbortSignal): Error {
  const reason = signal.reason;
  return reason instanceof Error ? reason : Object.assign(new Error('aborted'), { name: 'AbortError' });
}

export async function streamJob(opts: StreamJobOptions): Promise<StreamJobResult> {
  const p = opts.params;
  const query = new URLSearchParams();
  query.set('model', p.model);
  query.set('attenuation_limit_db', String(p.attenuation_limit_db));
  query.set('output_format', p.output_format);
  query.set('keep_input_sample_rate', String(p.keep_input_sample_rate));
  if (p.loudness_lufs !== undefined && p.loudness_lufs !== null) query.set('loudness_lufs', String(p.loudness_lufs));
  if (p.loudness === 'keep') query.set('loudness', 'keep');
  if (opts.filename) query.set('filename', opts.filename);
  for (const name of SPEECH_FIELDS) {
    const v = (p as unknown as Record<string, unknown>)[name];
    if (v !== undefined && v !== null) query.set(name, String(v));
  }
  let size: number;
  let referenceSize = 0;
  try {
    size = (await fs.promises.stat(opts.inputPath)).size;
    if (opts.referencePath) referenceSize = (await fs.promises.stat(opts.referencePath)).size;
  } catch (err) {
    throw new ModelServiceFailed(
      `the job's input is not in JOBS_DIR (${(err as NodeJS.ErrnoException).code ?? (err as Error).message}); gateways that share a queue must share JOBS_DIR`,
    );
  }
  if (opts.referencePath) query.set('input_bytes', String(size));
  const tried = new Set<Upstream>();
  const notTaken: NotTaken[] = [];
  for (;;) {
    if (opts.signal.aborted) throw abortError(opts.signal);
    const call = opts.replicas.acquire(tried);
    if (!call) throw noneTook(notTaken, opts.replicas);
    const outcome = await streamTo(call, opts, `${JOB_STREAM_PATH}?${query.toString()}`, size + referenceSize);
    if (!(outcome instanceof NotTaken)) return outcome;
    notTaken.push(outcome);
  }
}

/** Why no replica took the job: busy somewhere (wait, not counted), every breaker open (the same), or failures. */
function noneTook(notTaken: NotTaken[], replicas: ModelServiceReplicas): Error {
  const busy = notTaken.map((n) => n.error).filter((e): e is ModelServiceBusy => e instanceof ModelServiceBusy);
  if (busy.length > 0) return new ModelServiceBusy(Math.min(...busy.map((b) => b.retryAfterMs)));
  if (notTaken.length === 0) {
    return new ModelServiceBusy(Math.max(1000, replicas.breakerWaitMs()), 'every model-service circuit breaker is open');
  }
  // Nobody could be reached (a file-work process restarting, every replica down): wait for them without spending the
  // job's attempts, as for busy replicas; a job must not fail because the service was down for a minute.
  if (notTaken.every((n) => n.error instanceof ModelServiceUnreachable)) {
    const why = notTaken.map((n) => `${n.upstream.label}: ${n.error.message}`).join('; ');
    return new ModelServiceBusy(Math.max(UNREACHABLE_RETRY_MS, replicas.breakerWaitMs()), `no model service reachable (${why})`);
  }
  if (notTaken.length === 1) return notTaken[0].error;
  return new ModelServiceFailed(notTaken.map((n) => `${n.upstream.label}: ${n.error.message}`).join('; '));
}

/** One try on one replica: the job's result, a refusal to pass on (nothing was started), or an error. */
function streamTo(call: ReplicaCall, opts: StreamJobOptions, path: string, size: number): Promise<StreamJobResult | NotTaken> {
  return new Promise<StreamJobResult | NotTaken>((resolve, reject) => {
    let settled = false;
    let out: fs.WriteStream | null = null;
    const input = opts.referencePath ? Readable.from(filesInOrder([opts.inputPath, opts.referencePath])) : fs.createReadStream(opts.inputPath);
    /** Ends the try; `verdict` is the replica's, unless the answer's head already gave one. */
    const done = (err: Error | null, result?: StreamJobResult | NotTaken, verdict: Verdict = 'release'): void => {
      if (settled) return;
      settled = true;
      call.judge(verdict);
      call.end();
      opts.signal.removeEventListener('abort', onAbort);
      input.destroy();
      if (err || result instanceof NotTaken) {
        req.destroy();
        if (out) {
          const o = out;
          o.destroy();
          fs.promises.rm(opts.outputPath, { force: true }).catch(() => undefined);
        }
      }
      if (err) reject(err);
      else resolve(result!);
    };
    const notTaken = (error: ModelServiceBusy | ModelServiceFailed, verdict: Verdict): void =>
      done(null, new NotTaken(call.upstream, error), verdict);
    const onAbort = (): void => done(abortError(opts.signal));

    const headers: Record<string, string> = {};
    if (opts.replicas.token) headers.authorization = `Bearer ${opts.replicas.token}`;
    const req = call.request({
      path,
      method: 'POST',
      headers: {
        ...headers,
        'content-type': 'application/octet-stream',
        'content-length': String(size),
        'x-request-id': opts.requestId,
        // The body (up to JOBS_MAX_UPLOAD_MB) is sent only once the model service said it will take it: a refusal
        // (busy, wrong token, shutting down) costs nothing and the job goes to another replica or is tried later.
        expect: '100-continue',
      },
      fresh: true, // one connection per job stream, never a kept-alive one that may have gone stale
    });
    if (opts.signal.aborted) return onAbort();
    opts.signal.addEventListener('abort', onAbort, { once: true });
    req.setTimeout(opts.idleTimeoutMs ?? 60_000, () => done(new ModelServiceFailed('the model service went silent'), undefined, 'failure'));
    req.on('error', (err: NodeJS.ErrnoException) => {
      // After a response started (e.g. 503 busy sent before the body was read), the response decides.
      if (responded) return;
      const code = err.code ?? err.message;
      if (sending) return done(new ModelServiceFailed(`model service unreachable (${code})`), undefined, 'failure');
      const failed = new ModelServiceUnreachable(`model service unreachable (${code})`);
      // Nothing of the input went out: another replica can take the job.
      call.upstream.markUnhealthy(code);
      notTaken(failed, 'failure');
    });
    input.on('error', (err: Error) => done(new ModelServiceFailed(`cannot read the job input: ${err.message}`)));
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
          const answered = new ModelServiceFailed(`model service answered ${status}: ${detail}`);
          if (status === 503 && /^busy/.test(detail)) {
            const after = Number(res.headers['retry-after']);
            notTaken(new ModelServiceBusy(Number.isFinite(after) && after > 0 ? after * 1000 : 5000), 'release');
          } else if (status === 503) {
            notTaken(answered, 'release'); // starting or draining: not failing
          } else if (status === 401 || status === 403) {
            call.upstream.markUnhealthy(`refused the gateway's token (HTTP ${status})`);
            notTaken(answered, 'failure');
          } else if (status === 400 || status === 413 || status === 422) {
            call.upstream.markHealthy();
            done(new ModelServiceRejected(status, detail), undefined, 'success');
          } else {
            done(answered, undefined, 'failure');
          }
        };
        res.on('end', finish);
        res.on('error', finish);
        res.on('aborted', finish);
        return;
      }
      // A job stream started: the replica works (see the header for why it is judged here).
      call.judge('success');
      call.upstream.markHealthy();

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
          if (Array.isArray(msg.speech_segments)) result.speechSegments = msg.speech_segments as StreamJobResult['speechSegments'];
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

/** The bytes of `paths`, one file after the other (the job stream's body with an echo reference). */
async function* filesInOrder(paths: string[]): AsyncGenerator<Buffer> {
  for (const p of paths) for await (const chunk of fs.createReadStream(p)) yield chunk as Buffer;
}
