// Uploads: streamed by multer into a per-request temp directory under config.tmpDir, never buffered whole in memory.
import fs from 'node:fs';
import fsp from 'node:fs/promises';
import path from 'node:path';
import type { Request, Response } from 'express';
import multer from 'multer';
import type { Config } from '../config';
import { badRequest, HttpError, sendDetail, tooLarge } from './http-error';
import { FILE_FIELD, parseDenoiseParams, type EndpointKind } from './params';

export const MAX_FILE_BYTES = 100 * 1024 * 1024;
export const MAX_BATCH_FILES = 25;
export const MAX_BATCH_BYTES = 200 * 1024 * 1024;
const MB = 1024 * 1024;

/** Upload limits (spec part 8); overridable so tests can exercise them with small files. */
export interface UploadLimits {
  maxFileBytes: number;
  maxBatchFiles: number;
  maxBatchBytes: number;
}

export const DEFAULT_UPLOAD_LIMITS: UploadLimits = {
  maxFileBytes: MAX_FILE_BYTES,
  maxBatchFiles: MAX_BATCH_FILES,
  maxBatchBytes: MAX_BATCH_BYTES,
};

/** "100 MB" for whole megabytes, else bytes. */
function size(bytes: number): string {
  return bytes % MB === 0 ? `${bytes / MB} MB` : `${bytes} bytes`;
}

/** Where one request keeps its uploads and outputs; the whole directory is removed when the request is over. */
export interface RequestScope {
  dir: string;
  /** Aborted when the client goes away before the response is complete. */
  signal: AbortSignal;
}

const REQUEST_DIR_PREFIX = 'req-';

/** Request scopes still running or removing their directory; shutdown waits for them. */
const activeScopes = new Set<Promise<void>>();

/** Resolves once every request scope has removed its temp directory (bounded by `timeoutMs`). */
export async function requestScopesSettled(timeoutMs: number): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<void>((resolve) => {
    timer = setTimeout(resolve, timeoutMs);
    timer.unref();
  });
  await Promise.race([Promise.all([...activeScopes]), timeout]);
  clearTimeout(timer);
}

/**
 * Runs `handler` with a fresh temp directory. The directory is removed once BOTH the handler has settled (no
 * ffmpeg or worker still writing into it) and the response is closed (outputs fully streamed, or client gone),
 * whatever happened: success, validation error, crash or client abort.
 */
export function withRequestScope(
  config: Config,
  res: Response,
  handler: (scope: RequestScope) => Promise<void>,
  onError: (err: unknown) => void,
): Promise<void> {
  const scope = runRequestScope(config, res, handler, onError);
  activeScopes.add(scope);
  void scope.finally(() => activeScopes.delete(scope));
  return scope;
}

async function runRequestScope(
  config: Config,
  res: Response,
  handler: (scope: RequestScope) => Promise<void>,
  onError: (err: unknown) => void,
): Promise<void> {
  const abort = new AbortController();
  const responseClosed = new Promise<void>((resolve) => {
    res.once('close', () => {
      if (!res.writableFinished) abort.abort(new Error('client closed the connection'));
      resolve();
    });
  });
  let dir: string | null = null;
  try {
    await fsp.mkdir(config.tmpDir, { recursive: true });
    dir = await fsp.mkdtemp(path.join(config.tmpDir, REQUEST_DIR_PREFIX));
    await handler({ dir, signal: abort.signal });
  } catch (err) {
    if (!abort.signal.aborted) onError(err);
  } finally {
    if (!res.headersSent && !res.destroyed) {
      // The handler must always answer; this is a guard so the directory wait below cannot hang.
      sendDetail(res, 500, 'internal error: no response produced');
    }
    await responseClosed;
    if (dir) await fsp.rm(dir, { recursive: true, force: true }).catch(() => undefined);
  }
}

/** Removes request directories left behind by a crashed process (older than maxAgeMs). */
export async function sweepStaleRequestDirs(tmpDir: string, maxAgeMs: number): Promise<void> {
  let names: string[];
  try {
    names = await fsp.readdir(tmpDir);
  } catch {
    return;
  }
  const cutoff = Date.now() - maxAgeMs;
  for (const name of names) {
    if (!name.startsWith(REQUEST_DIR_PREFIX)) continue;
    const full = path.join(tmpDir, name);
    try {
      const st = await fsp.stat(full);
      if (st.mtimeMs < cutoff) await fsp.rm(full, { recursive: true, force: true });
    } catch {
      // Another process may be removing it at the same time.
    }
  }
}

class TotalSizeExceeded extends Error {
  readonly code = 'LIMIT_TOTAL_SIZE';
}

/** multer storage engine: writes each file part into the request directory and enforces the per-request total. */
class ScopedDiskStorage implements multer.StorageEngine {
  constructor(
    private readonly dir: string,
    private readonly maxTotalBytes: number,
  ) {}

  private count = 0;
  private totalBytes = 0;

  _handleFile(
    _req: Request,
    file: Express.Multer.File,
    cb: (error?: unknown, info?: Partial<Express.Multer.File>) => void,
  ): void {
    const filePath = path.join(this.dir, `upload-${this.count++}`);
    const out = fs.createWriteStream(filePath);
    let size = 0;
    let failed = false;
    const fail = (err: unknown): void => {
      if (failed) return;
      failed = true;
      file.stream.unpipe(out);
      file.stream.resume();
      out.destroy();
      fs.unlink(filePath, () => cb(err));
    };
    file.stream.on('data', (chunk: Buffer) => {
      size += chunk.length;
      this.totalBytes += chunk.length;
      if (this.totalBytes > this.maxTotalBytes) fail(new TotalSizeExceeded());
    });
    file.stream.on('error', fail);
    out.on('error', fail);
    out.on('finish', () => {
      if (!failed) cb(null, { path: filePath, size, destination: this.dir, filename: path.basename(filePath) });
    });
    file.stream.pipe(out);
  }

  _removeFile(_req: Request, file: Express.Multer.File, cb: (error: Error | null) => void): void {
    fs.unlink(file.path, () => cb(null));
  }
}

/** Translates multer/busboy failures into the {detail} errors of the API. */
function uploadError(kind: EndpointKind, limits: UploadLimits, err: unknown): unknown {
  if (err instanceof HttpError) return err;
  if (err instanceof TotalSizeExceeded) {
    return tooLarge(`the request's files exceed ${size(limits.maxBatchBytes)} in total`);
  }
  if (err instanceof multer.MulterError) {
    const expected = FILE_FIELD[kind];
    switch (err.code) {
      case 'LIMIT_FILE_SIZE': {
        const name = (err as { filename?: string }).filename;
        return tooLarge(`${name ? `file "${name}"` : 'a file'} is larger than ${size(limits.maxFileBytes)}`);
      }
      case 'LIMIT_FILE_COUNT':
        return tooLarge(`too many files: at most ${limits.maxBatchFiles} per batch`);
      case 'LIMIT_UNEXPECTED_FILE':
        if (err.field === expected) {
          return badRequest(`only one "file" per call; send several files to /denoise/batch as repeated "files"`);
        }
        return badRequest(`unexpected file field "${err.field ?? ''}"; send the audio as "${expected}"`);
      default:
        return badRequest(`malformed form data: ${err.message}`);
    }
  }
  const message = err instanceof Error ? err.message : String(err);
  // busboy: "Unexpected end of form", "Malformed part header", "Multipart: Boundary not found", ...
  return badRequest(`malformed multipart/form-data body: ${message}`);
}

/**
 * Receives the multipart body into `scope.dir`. Resolves with the stored files (in upload order);
 * text fields end up in req.body.
 */
export function receiveUpload(
  config: Config,
  kind: EndpointKind,
  scope: RequestScope,
  req: Request,
  res: Response,
  limits: UploadLimits = DEFAULT_UPLOAD_LIMITS,
): Promise<Express.Multer.File[]> {
  const expected = FILE_FIELD[kind];
  const upload = multer({
    // The per-file limit is multer's fileSize; the storage enforces the batch's total on top.
    storage: new ScopedDiskStorage(scope.dir, kind === 'single' ? Infinity : limits.maxBatchBytes),
    // Browsers and curl send UTF-8 file names without declaring a charset.
    defParamCharset: 'utf8',
    // Keep the raw client name: names.ts strips directories itself, and busboy's stripping turns a name like
    // ".." into "", which multer would then silently skip instead of reporting the file in the manifest.
    preservePath: true,
    limits: {
      fileSize: limits.maxFileBytes,
      ...(kind === 'batch' ? { files: limits.maxBatchFiles } : {}),
      fields: 20,
      parts: limits.maxBatchFiles + 20,
      fieldSize: 64 * 1024,
    },
    fileFilter: (fileReq, file, cb) => {
      try {
        if (file.fieldname !== expected) {
          throw badRequest(`unexpected file field "${file.fieldname}"; send the audio as "${expected}"`);
        }
        parseDenoiseParams(config, kind, fileReq.body as Record<string, unknown>);
        cb(null, true);
      } catch (err) {
        cb(err as Error);
      }
    },
  });
  const middleware = kind === 'single' ? upload.single(expected) : upload.array(expected, limits.maxBatchFiles);
  return new Promise((resolve, reject) => {
    middleware(req, res, (err?: unknown) => {
      if (err) return reject(uploadError(kind, limits, err));
      if (kind === 'single') resolve(req.file ? [req.file] : []);
      else resolve(Array.isArray(req.files) ? req.files : []);
    });
  });
}
