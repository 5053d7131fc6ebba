// Receiving a job upload: the multipart body streamed by multer, the `file` part (and the optional `echo_reference`
// part: docs/echo.md) written to disk with every chunk taken from the disk budget first (→ 507 insufficient_storage at
// the floor), the two together at most JOBS_MAX_UPLOAD_MB, text fields to req.body, under the client clock of
// /denoise (less than CLIENT_MIN_BYTES_PER_S over CLIENT_IDLE_TIMEOUT_MS → 408 request_timeout).
import fs from 'node:fs';
import { Transform } from 'node:stream';
import type { Request, Response } from 'express';
import multer from 'multer';
import type { Config } from '../../config';
import { PRIVATE_FILE_MODE } from '../../startup/private-files';
import { ProgressWatch } from '../../upstream/watchdogs';
import { InsufficientStorageError, type SpaceClaim } from '../../storage/disk-budget';
import { removeFailedWrite } from '../failed-write';
import { JobApiError, UploadStalledError } from './errors';
import { parseJobForm } from './params';

/** The file parts of a job upload and where each one is written. */
export interface JobUploadPaths {
  file: string;
  echo_reference: string;
}

/** What a job upload brought: the audio and, optionally, its echo reference. */
export interface JobUpload {
  file: Express.Multer.File | undefined;
  reference: Express.Multer.File | undefined;
}

/**
 * multer storage writing each file part to its path, counting bytes (all parts together at most `maxTotal`), each
 * chunk taken from the disk budget before it is written; removes the file on failure.
 */
class JobFileStorage implements multer.StorageEngine {
  private total = 0;

  constructor(
    private readonly dests: JobUploadPaths,
    private readonly claim: SpaceClaim,
    private readonly maxTotal: number,
  ) {}

  _handleFile(_req: Request, file: Express.Multer.File, cb: (error?: unknown, info?: Partial<Express.Multer.File>) => void): void {
    const dest = this.dests[file.fieldname as keyof JobUploadPaths];
    const out = fs.createWriteStream(dest, { mode: PRIVATE_FILE_MODE });
    let size = 0;
    let failed = false;
    const claim = this.claim;
    const storage = this;
    const fail = (err: unknown): void => {
      if (failed) return;
      failed = true;
      file.stream.unpipe(gate);
      gate.unpipe(out);
      file.stream.resume();
      void removeFailedWrite(out, dest).then(
        () => cb(err),
        () => cb(err),
      );
    };
    const gate = new Transform({
      transform(chunk: Buffer, _enc, done) {
        storage.total += chunk.length;
        if (storage.total > storage.maxTotal) {
          return done(new JobApiError('payload_too_large', `file and echo_reference together are larger than ${storage.maxTotal} bytes (JOBS_MAX_UPLOAD_MB)`));
        }
        claim.take(chunk.length).then(
          (ok) => {
            if (!ok) return done(new JobApiError('insufficient_storage', 'The server ran short of disk space during the upload; nothing was charged. Retry later.'));
            size += chunk.length;
            done(null, chunk);
          },
          (err: unknown) => done(err as Error),
        );
      },
    });
    file.stream.on('error', fail);
    gate.on('error', fail);
    out.on('error', fail);
    out.on('finish', () => {
      if (!failed) cb(null, { path: dest, size });
    });
    file.stream.pipe(gate).pipe(out);
  }

  _removeFile(_req: Request, file: Express.Multer.File, cb: (error: Error | null) => void): void {
    fs.rm(file.path, { force: true }, () => cb(null));
  }
}

function uploadError(config: Config, err: unknown): JobApiError {
  if (err instanceof JobApiError) return err;
  if (err instanceof multer.MulterError) {
    switch (err.code) {
      case 'LIMIT_FILE_SIZE':
        return new JobApiError('payload_too_large', `the file is larger than ${config.jobs.maxUploadBytes} bytes (JOBS_MAX_UPLOAD_MB)`);
      case 'LIMIT_UNEXPECTED_FILE':
        return new JobApiError(
          'invalid_request',
          err.field === 'file' || err.field === 'echo_reference' ? `send one "${err.field}" per job` : `unexpected file field "${err.field ?? ''}"; send the audio as "file"`,
        );
      default:
        return new JobApiError('invalid_request', `malformed form data: ${err.message}`);
    }
  }
  return new JobApiError('invalid_request', `malformed multipart/form-data body: ${err instanceof Error ? err.message : String(err)}`);
}

/** Receives one job upload into `dests`; see the file header. */
export function uploadReceiver(config: Config): (req: Request, res: Response, dests: JobUploadPaths, claim: SpaceClaim) => Promise<JobUpload> {
  const clientMinBytes = Math.max(1, Math.floor((config.clientMinBytesPerSecond * config.clientIdleTimeoutMs) / 1000));
  /**
   * Streams the multipart body: the file parts to `dests` (their bytes taken from `claim`), text fields to req.body.
   * Resolves with the files, if any; rejects with 408 request_timeout when the client sends too slowly.
   */
  return function receive(req: Request, res: Response, dests: JobUploadPaths, claim: SpaceClaim): Promise<JobUpload> {
    const upload = multer({
      storage: new JobFileStorage(dests, claim, config.jobs.maxUploadBytes),
      defParamCharset: 'utf8',
      preservePath: true,
      limits: { fileSize: config.jobs.maxUploadBytes, files: 2, fields: 20, parts: 24, fieldSize: 64 * 1024 },
      fileFilter: (fileReq, file, cb) => {
        try {
          if (file.fieldname !== 'file' && file.fieldname !== 'echo_reference') {
            throw new JobApiError('invalid_request', `unexpected file field "${file.fieldname}"; send the audio as "file" (and the echo reference as "echo_reference")`);
          }
          const form = parseJobForm(config, fileReq.body as Record<string, unknown>);
          if (file.fieldname === 'file' && form.url) throw new JobApiError('invalid_request', 'send either a file or a url, not both');
          if (file.fieldname === 'echo_reference' && form.referenceUrl) {
            throw new JobApiError('invalid_request', 'send either an echo_reference file or an echo_reference_url, not both');
          }
          cb(null, true);
        } catch (err) {
          cb(err as Error);
        }
      },
    }).fields([
      { name: 'file', maxCount: 1 },
      { name: 'echo_reference', maxCount: 1 },
    ]);
    return new Promise((resolve, reject) => {
      // The same progress clock as the forwarder's for /denoise: a stalled or trickling upload is the client's fault.
      const watch = new ProgressWatch(config.clientIdleTimeoutMs, clientMinBytes, () => {
        cleanup();
        reject(new UploadStalledError(`The upload stalled: less than ${clientMinBytes} bytes arrived in ${config.clientIdleTimeoutMs} ms. Nothing was charged.`));
      });
      let unfollow = (): void => undefined;
      // A client that goes away mid-upload: busboy may never report it, the closed response does.
      const onClose = (): void => {
        cleanup();
        reject(new JobApiError('invalid_request', 'the client closed the connection during the upload'));
      };
      const cleanup = (): void => {
        unfollow();
        res.off('close', onClose);
      };
      res.once('close', onClose);
      // The clock stops while the upload is held back by this side (the file write behind it is full: a disk stall),
      // as the forwarder's does: only a client that sends too slowly is answered 408.
      if (!req.complete) unfollow = watch.follow(req);
      upload(req, res, (err?: unknown) => {
        cleanup();
        if (err) reject(err instanceof InsufficientStorageError ? new JobApiError('insufficient_storage', err.message) : uploadError(config, err));
        else {
          const byField = (req.files ?? {}) as Record<string, Express.Multer.File[] | undefined>;
          resolve({ file: byField.file?.[0], reference: byField.echo_reference?.[0] });
        }
      });
    });
  };
}
