// Receiving a job upload: the multipart body streamed by multer, the one `file` part written to disk with every chunk
// taken from the disk budget first (→ 507 insufficient_storage at the floor), text fields to req.body, under the
// client clock of /denoise (less than CLIENT_MIN_BYTES_PER_S over CLIENT_IDLE_TIMEOUT_MS → 408 request_timeout).
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

/**
 * multer storage writing the one `file` part to a given path, counting bytes, each chunk taken from the disk budget
 * before it is written; removes the file on failure.
 */
class SingleFileStorage implements multer.StorageEngine {
  constructor(
    private readonly dest: string,
    private readonly claim: SpaceClaim,
  ) {}

  _handleFile(_req: Request, file: Express.Multer.File, cb: (error?: unknown, info?: Partial<Express.Multer.File>) => void): void {
    const out = fs.createWriteStream(this.dest, { mode: PRIVATE_FILE_MODE });
    let size = 0;
    let failed = false;
    const claim = this.claim;
    const fail = (err: unknown): void => {
      if (failed) return;
      failed = true;
      file.stream.unpipe(gate);
      gate.unpipe(out);
      file.stream.resume();
      void removeFailedWrite(out, this.dest).then(
        () => cb(err),
        () => cb(err),
      );
    };
    const gate = new Transform({
      transform(chunk: Buffer, _enc, done) {
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
      if (!failed) cb(null, { path: this.dest, size });
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
          err.field === 'file' ? 'send one "file" per job' : `unexpected file field "${err.field ?? ''}"; send the audio as "file"`,
        );
      default:
        return new JobApiError('invalid_request', `malformed form data: ${err.message}`);
    }
  }
  return new JobApiError('invalid_request', `malformed multipart/form-data body: ${err instanceof Error ? err.message : String(err)}`);
}

/** Receives one job upload into `dest`; see the file header. */
export function uploadReceiver(config: Config): (req: Request, res: Response, dest: string, claim: SpaceClaim) => Promise<Express.Multer.File | undefined> {
  const clientMinBytes = Math.max(1, Math.floor((config.clientMinBytesPerSecond * config.clientIdleTimeoutMs) / 1000));
  /**
   * Streams the multipart body: the file to `dest` (its bytes taken from `claim`), text fields to req.body. Resolves
   * with the file, if any; rejects with 408 request_timeout when the client sends too slowly.
   */
  return function receive(req: Request, res: Response, dest: string, claim: SpaceClaim): Promise<Express.Multer.File | undefined> {
    const upload = multer({
      storage: new SingleFileStorage(dest, claim),
      defParamCharset: 'utf8',
      preservePath: true,
      limits: { fileSize: config.jobs.maxUploadBytes, files: 1, fields: 20, parts: 24, fieldSize: 64 * 1024 },
      fileFilter: (fileReq, file, cb) => {
        try {
          if (file.fieldname !== 'file') {
            throw new JobApiError('invalid_request', `unexpected file field "${file.fieldname}"; send the audio as "file"`);
          }
          const form = parseJobForm(config, fileReq.body as Record<string, unknown>);
          if (form.url) throw new JobApiError('invalid_request', 'send either a file or a url, not both');
          cb(null, true);
        } catch (err) {
          cb(err as Error);
        }
      },
    }).single('file');
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
        else resolve(req.file);
      });
    });
  };
}
