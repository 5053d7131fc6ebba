// The model service's internal endpoint for jobs: POST /internal/jobs/denoise. The gateway's job runner sends the raw
// input file as the body (no 100 MB cap: up to JOBS_MAX_UPLOAD_MB) and the /denoise parameters in the query; the
// answer streams progress and ends with the cleaned audio, so one HTTP exchange carries the whole job and works the
// same in-process (loopback) and against a remote MODEL_SERVICE_URL.
//
// Answer (200, Content-Type application/x-ns-job-stream): newline-terminated JSON lines, then possibly binary:
//   {"type":"progress","done_s":12.0,"total_s":1200.0}        at least every 10 s while working
//   {"type":"result","stats":{...},"bytes":N,"content_type":"audio/wav"}  followed by exactly N bytes of audio, end
//     (with speech_segments=true the result line also has "speech_segments":[{"start_s":..,"end_s":..},...])
//   {"type":"error","status":422,"detail":"could not decode: ..."}         end
// With an echo reference (docs/echo.md) the body is the input's bytes followed by the reference's, and the query says
// where the input ends: `input_bytes=N` (the first N bytes are the input, the rest the reference). One body keeps one
// exchange per job: the refusal before the body (Expect: 100-continue) and the size limit cover both files.
// Errors found before the work starts are ordinary {"detail"} answers: 400 bad parameters, 413 too large,
// 422 model not installed, 503 {"detail":"busy"} + Retry-After when this service already runs its share of job
// streams (JOBS_CONCURRENCY), so jobs never take more than that share of the engine's workers.
import fs from 'node:fs';
import fsp from 'node:fs/promises';
import path from 'node:path';
import { pipeline } from 'node:stream/promises';
import { Transform, Writable } from 'node:stream';
import express, { type Request, type Response } from 'express';
import type { Config } from '../config';
import type { InferenceEngine } from '../inference/types';
import { AudioAbortedError, AudioInputError, denoiseFile, type DenoiseFileOptions } from '../pipeline';
import { FORMATS } from '../audio/formats';
import type { ModelServiceMetrics } from './metrics';
import { continueIfExpected } from './guard';
import { audioErrorType, badRequest, HttpError, sendDetail, sendHttpError, tooLarge } from './http-error';
import { assertModelInstalled, JOB_DENOISE_FIELDS, parseDenoiseParams, speechOf, type SpeechSegment } from './params';
import { withRequestScope } from './request-scope';
import { InsufficientStorageError, type DiskBudget } from '../storage/disk-budget';
import { DISK_RETRY_AFTER_S } from './disk-floor';
import { CONTAINERS, denoiseVideo, planVideo, VideoRequestError } from '../video';

export const JOB_STREAM_PATH = '/internal/jobs/denoise';
export const JOB_STREAM_CONTENT_TYPE = 'application/x-ns-job-stream';
/** Longest silence on the stream: a progress line is repeated at least this often. */
export const KEEPALIVE_MS = 10_000;
const PROGRESS_INTERVAL_MS = 500;
/** Audio per engine call of a job stream (see docs/jobs.md, fair share). */
export const JOB_CHUNK_SECONDS = 1;

export interface JobStreamDeps {
  config: Config;
  engine: InferenceEngine;
  log?: (line: string) => void;
  /** Audio seconds and RTF of job streams count in the model service's /metrics like /denoise's. */
  metrics?: ModelServiceMetrics;
  /** TMP_DIR's free-disk floor (disk-floor.ts): a job's output and spools take their bytes from it too. */
  disk?: Pick<DiskBudget, 'open'>;
}

export function createJobStreamRouter(deps: JobStreamDeps): express.Router {
  const { config, engine } = deps;
  const log = deps.log ?? ((line: string) => process.stderr.write(line + '\n'));
  const router = express.Router();
  let active = 0;

  router.post(JOB_STREAM_PATH, (req: Request, res: Response) => {
    if (active >= config.jobs.concurrency) {
      // Not reading a body of up to 2 GB just to refuse it: answer and close the connection.
      res.setHeader('Retry-After', '5');
      res.setHeader('Connection', 'close');
      sendDetail(res, 503, `busy: this model service already runs ${config.jobs.concurrency} job streams`, 'unavailable');
      return;
    }
    active++;
    let released = false;
    const release = (): void => {
      if (!released) {
        released = true;
        active--;
      }
    };
    res.once('close', release);
    // Admitted: now the runner may send the input (it asked with Expect: 100-continue and waits for this).
    continueIfExpected(req);
    void withRequestScope(
      config,
      res,
      async (scope) => {
        const q = req.query as Record<string, unknown>;
        const fields: Record<string, unknown> = {};
        for (const name of JOB_DENOISE_FIELDS) {
          if (q[name] !== undefined) fields[name] = q[name];
        }
        const params = parseDenoiseParams(config, 'single', fields);
        assertModelInstalled(config, params.model, params.speech);
        const declared = Number(req.headers['content-length']);
        const max = config.jobs.maxUploadBytes;
        if (Number.isFinite(declared) && declared > max) throw tooLarge(`the input is larger than ${max} bytes`);
        const inputBytes = inputBytesOf(q.input_bytes, max);

        const inputPath = path.join(await scope.dir(), 'input');
        const referencePath = inputBytes === null ? null : path.join(await scope.dir(), 'echo-reference');
        // The input's copy (up to JOBS_MAX_UPLOAD_BYTES) is written to TMP_DIR: it takes its bytes from the free-disk
        // floor like the output does, refused (503, the runner retries later) before or while it would cross it.
        const shortOfDisk = (): InsufficientStorageError =>
          new InsufficientStorageError('the model service is short of disk space for this job\'s input (TMP_DIR is near TMP_MIN_FREE_DISK_MB); retry later');
        const claim = deps.disk ? await deps.disk.open(Number.isFinite(declared) ? declared : undefined) : null;
        if (deps.disk && !claim) throw shortOfDisk();
        let received = 0;
        const counter = new Transform({
          transform(chunk: Buffer, _enc, cb) {
            received += chunk.length;
            if (received > max) return cb(tooLarge(`the input is larger than ${max} bytes`));
            if (!claim) return cb(null, chunk);
            claim.take(chunk.length).then(
              (ok) => (ok ? cb(null, chunk) : cb(shortOfDisk())),
              (err: Error) => cb(err),
            );
          },
        });
        const sink = referencePath && inputBytes !== null ? splitWriter(inputPath, inputBytes, referencePath) : fs.createWriteStream(inputPath);
        try {
          await pipeline(req, counter, sink, { signal: scope.signal });
        } finally {
          claim?.release();
        }
        if (received === 0) throw new HttpError(422, 'could not decode: the input is empty');
        if (inputBytes !== null && received <= inputBytes) {
          throw new HttpError(422, received < inputBytes ? `the body ended after ${received} of the input's ${inputBytes} bytes` : 'echo_reference: file is empty');
        }

        res.status(200);
        res.setHeader('Content-Type', JOB_STREAM_CONTENT_TYPE);
        res.setHeader('Cache-Control', 'no-store');
        res.flushHeaders();
        let last = { done_s: 0, total_s: null as number | null };
        let lastSent = 0;
        const line = (obj: unknown): void => {
          if (!res.writableEnded && !res.destroyed) res.write(JSON.stringify(obj) + '\n');
        };
        const sendProgress = (): void => {
          lastSent = Date.now();
          line({ type: 'progress', ...last });
        };
        sendProgress();
        const keepalive = setInterval(() => {
          if (Date.now() - lastSent >= KEEPALIVE_MS - 100) sendProgress();
        }, 1000);
        let segments: SpeechSegment[] | undefined;
        try {
          // output_format=video: the input's container back (the job's input name comes as `filename`).
          const plan = params.video ? await planVideo({ config }, inputPath, String(q.filename ?? '')) : null;
          const ext = plan ? CONTAINERS[plan.container].extension : params.outputFormat;
          const contentType = plan ? CONTAINERS[plan.container].contentType : FORMATS[params.outputFormat].contentType;
          const out = path.join(await scope.dir(), `output.${ext}`);
          const options: DenoiseFileOptions = {
            model: params.model,
            attenuationLimitDb: params.attenuationLimitDb,
            outputFormat: params.outputFormat,
            keepInputSampleRate: params.keepInputSampleRate,
            loudnessLufs: params.loudnessLufs,
            disk: deps.disk,
            speech: params.speech,
            onSpeechSegments: (s) => (segments = s),
            echoReference: referencePath,
            signal: scope.signal,
            // 1 s chunks (not the file pipeline's 8 s): a synchronous call that shares this job's worker waits for
            // at most one second of the job's audio, whatever the model.
            chunkSeconds: JOB_CHUNK_SECONDS,
            onProgress(doneS, totalS) {
              last = { done_s: Math.round(doneS * 1000) / 1000, total_s: totalS === null ? null : Math.round(totalS * 1000) / 1000 };
              if (Date.now() - lastSent >= PROGRESS_INTERVAL_MS) sendProgress();
            },
          };
          const run = () => (plan ? denoiseVideo({ config, engine }, inputPath, out, plan, options) : denoiseFile({ config, engine }, inputPath, out, options));
          const stats = await run();
          deps.metrics?.fileDone(stats);
          // The inputs are no longer needed; free the disk before the output streams out.
          await fsp.rm(inputPath, { force: true });
          if (referencePath) await fsp.rm(referencePath, { force: true });
          const { size } = await fsp.stat(out);
          clearInterval(keepalive);
          line({ type: 'result', stats, ...speechOf(segments), bytes: size, content_type: contentType });
          await pipeline(fs.createReadStream(out), res, { signal: scope.signal });
        } catch (err) {
          clearInterval(keepalive);
          if (err instanceof AudioAbortedError || scope.signal.aborted) throw err;
          const status =
            err instanceof HttpError ? err.status
            : err instanceof AudioInputError || err instanceof VideoRequestError ? err.status
            : err instanceof InsufficientStorageError ? 503 // the runner tries again later
            : 500;
          const detail = err instanceof HttpError ? err.detail : err instanceof Error ? err.message : String(err);
          if (status === 500) log(`[model-service] job stream failed: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}`);
          line({ type: 'error', status, detail });
          res.end();
        }
      },
      (err) => {
        if (err instanceof HttpError) return sendHttpError(res, err);
        if (err instanceof AudioInputError) return sendDetail(res, err.status, err.message, audioErrorType(err));
        if (err instanceof InsufficientStorageError) {
          res.setHeader('Retry-After', String(DISK_RETRY_AFTER_S));
          res.setHeader('Connection', 'close'); // the rest of the body is not read
          return sendDetail(res, 503, err.message, 'unavailable');
        }
        if (err instanceof AudioAbortedError) return;
        log(`[model-service] job stream error: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}`);
        sendDetail(res, 500, `internal error: ${err instanceof Error ? err.message : String(err)}`);
      },
    ).finally(release);
  });

  return router;
}

/** `input_bytes`: where the input ends and the echo reference begins in the body; null without a reference. */
function inputBytesOf(raw: unknown, max: number): number | null {
  if (raw === undefined) return null;
  const n = typeof raw === 'string' && /^\d{1,16}$/.test(raw) ? Number(raw) : NaN;
  if (!(n >= 1 && n < max)) throw badRequest(`input_bytes must be a whole number from 1 to ${max - 1}, got "${String(raw).slice(0, 40)}"`);
  return n;
}

/** Writes the first `firstBytes` bytes of what it gets to `first`, the rest to `second` (both files, with backpressure). */
function splitWriter(first: string, firstBytes: number, second: string): Writable {
  const a = fs.createWriteStream(first);
  const b = fs.createWriteStream(second);
  let written = 0;
  const writer = new Writable({
    write(chunk: Buffer, _enc, cb) {
      const head = chunk.subarray(0, Math.max(0, Math.min(chunk.length, firstBytes - written)));
      const tail = chunk.subarray(head.length);
      written += chunk.length;
      const toSecond = (err?: Error | null): void => {
        if (err) return cb(err);
        if (tail.length === 0) return cb();
        b.write(tail, cb);
      };
      if (head.length > 0) a.write(head, toSecond);
      else toSecond();
    },
    final(cb) {
      let open = 2;
      const closed = (): void => {
        if (--open === 0) cb();
      };
      a.end(closed);
      b.end(closed);
    },
    destroy(err, cb) {
      a.destroy();
      b.destroy();
      cb(err);
    },
  });
  a.on('error', (err) => writer.destroy(err));
  b.on('error', (err) => writer.destroy(err));
  return writer;
}
