// Uploads: streamed by multer into the request's temp directory (request-scope.ts), created when first needed. A
// single file (/denoise) up to IN_MEMORY_UPLOAD_BYTES stays in memory instead, and goes to disk once it grows past
// that: the common short clip then costs no temp files at all (their syscalls cost more CPU than the WAV work).
// /denoise also takes the optional echo reference (ECHO_REFERENCE_FIELD), stored the same way; the file and the
// reference count together toward the per-file limit (the request's size), so the gateway's body limit still holds.
import fs from 'node:fs';
import fsp from 'node:fs/promises';
import path from 'node:path';
import type { Request, Response } from 'express';
import multer from 'multer';
import type { Config } from '../config';
import { MemoryFile } from '../audio/memory-file';
import type { SourceInput } from '../pipeline';
import { badRequest, HttpError, tooLarge } from './http-error';
import { ECHO_REFERENCE_FIELD, FILE_FIELD, parseDenoiseParams, type EndpointKind } from './params';
import type { RequestScope } from './request-scope';

export const MAX_FILE_BYTES = 100 * 1024 * 1024;
export const MAX_BATCH_FILES = 25;
export const MAX_BATCH_BYTES = 200 * 1024 * 1024;
const MB = 1024 * 1024;
/**
 * A /denoise upload up to this size is kept in memory (2 minutes of 16 kHz mono 16-bit WAV); its output, when it can
 * stay in memory too, is at most twice as big (8-bit input). Per request in flight, so bounded by admission control.
 */
export const IN_MEMORY_UPLOAD_BYTES = 4 * MB;

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

class TotalSizeExceeded extends Error {
  readonly code = 'LIMIT_TOTAL_SIZE';
}

/** A received file kept in memory: its bytes in the pieces they arrived in, and no `path`. */
interface HeldUpload extends Express.Multer.File {
  held?: Buffer[];
}

/**
 * multer storage engine: keeps a file part in memory while it is at most `memoryBytes` (0: never), otherwise writes
 * it into the request directory; enforces the per-request total. A file kept in memory has `held` and no `path`.
 */
class ScopedStorage implements multer.StorageEngine {
  constructor(
    private readonly scope: RequestScope,
    private readonly maxTotalBytes: number,
    private readonly memoryBytes: number,
  ) {}

  private count = 0;
  private totalBytes = 0;
  /** Files still being written (closed at once when the request is abandoned). */
  private readonly writing = new Set<fs.WriteStream>();

  /** The request was abandoned (shutdown, client gone): close every file still open. */
  abort(): void {
    for (const out of this.writing) out.destroy();
    this.writing.clear();
  }

  _handleFile(
    _req: Request,
    file: Express.Multer.File,
    cb: (error?: unknown, info?: Partial<Express.Multer.File>) => void,
  ): void {
    const index = this.count++;
    let size = 0;
    let failed = false;
    /** The bytes so far while the file is in memory; null once it goes (or went) to disk. */
    let held: Buffer[] | null = this.memoryBytes > 0 ? [] : null;
    let out: fs.WriteStream | null = null;
    let filePath: string | null = null;
    const fail = (err: unknown): void => {
      if (failed) return;
      failed = true;
      held = null;
      if (out) file.stream.unpipe(out);
      file.stream.resume();
      out?.destroy();
      if (filePath) fs.unlink(filePath, () => cb(err));
      else cb(err);
    };
    const toDisk = (): void => {
      // Paused until the file is open; what was held is written first, then the rest is piped.
      file.stream.pause();
      this.scope.dir().then((dir) => {
        if (failed) return;
        const target = path.join(dir, `upload-${index}`);
        filePath = target;
        const stream = fs.createWriteStream(target);
        out = stream;
        this.writing.add(stream);
        stream.once('close', () => this.writing.delete(stream));
        stream.on('error', fail);
        stream.on('finish', () => {
          if (!failed) cb(null, { path: target, size, destination: dir, filename: path.basename(target) });
        });
        for (const chunk of held ?? []) stream.write(chunk);
        held = null;
        file.stream.pipe(stream);
      }, fail);
    };
    file.stream.on('data', (chunk: Buffer) => {
      size += chunk.length;
      this.totalBytes += chunk.length;
      if (this.totalBytes > this.maxTotalBytes) return fail(new TotalSizeExceeded());
      if (held) {
        held.push(chunk);
        if (size > this.memoryBytes) toDisk();
      }
    });
    file.stream.on('error', fail);
    file.stream.on('end', () => {
      if (held && !failed) cb(null, { held, size } as Partial<HeldUpload>);
    });
    if (!held) toDisk();
  }

  _removeFile(_req: Request, file: Express.Multer.File, cb: (error: Error | null) => void): void {
    if (!file.path) return cb(null);
    fs.unlink(file.path, () => cb(null));
  }
}

/** Translates multer/busboy failures into the {detail} errors of the API. */
function uploadError(kind: EndpointKind, limits: UploadLimits, err: unknown): unknown {
  if (err instanceof HttpError) return err;
  if (err instanceof TotalSizeExceeded) {
    if (kind === 'single') return tooLarge(`file and ${ECHO_REFERENCE_FIELD} together are larger than ${size(limits.maxFileBytes)}, the most one call accepts`);
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
        if (err.field === ECHO_REFERENCE_FIELD) {
          return badRequest(
            kind === 'single'
              ? `only one "${ECHO_REFERENCE_FIELD}" per call`
              : `"${ECHO_REFERENCE_FIELD}" is not taken by /denoise/batch: send each file with its reference to /denoise, or as a job`,
          );
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

/** What a request uploaded: its files (in upload order) and, on /denoise, the echo reference. */
export interface ReceivedUpload {
  files: Express.Multer.File[];
  reference: Express.Multer.File | null;
}

/**
 * Receives the multipart body: a /denoise file (and echo reference) up to IN_MEMORY_UPLOAD_BYTES each into memory
 * (`held`), anything else into the scope's directory (`path`). Text fields end up in req.body.
 */
export function receiveUpload(
  config: Config,
  kind: EndpointKind,
  scope: RequestScope,
  req: Request,
  res: Response,
  limits: UploadLimits = DEFAULT_UPLOAD_LIMITS,
): Promise<ReceivedUpload> {
  const expected = FILE_FIELD[kind];
  // The per-file limit is multer's fileSize; the storage enforces the request's total on top (a batch's, or a call's
  // file and echo reference together).
  const storage =
    kind === 'single'
      ? new ScopedStorage(scope, limits.maxFileBytes, IN_MEMORY_UPLOAD_BYTES)
      : new ScopedStorage(scope, limits.maxBatchBytes, 0);
  const upload = multer({
    storage,
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
        if (file.fieldname !== expected && !(kind === 'single' && file.fieldname === ECHO_REFERENCE_FIELD)) {
          throw badRequest(`unexpected file field "${file.fieldname}"; send the audio as "${expected}"${kind === 'single' ? ` (and the echo reference as "${ECHO_REFERENCE_FIELD}")` : ''}`);
        }
        parseDenoiseParams(config, kind, fileReq.body as Record<string, unknown>);
        cb(null, true);
      } catch (err) {
        cb(err as Error);
      }
    },
  });
  const middleware =
    kind === 'single'
      ? upload.fields([{ name: expected, maxCount: 1 }, { name: ECHO_REFERENCE_FIELD, maxCount: 1 }])
      : upload.array(expected, limits.maxBatchFiles);
  return new Promise((resolve, reject) => {
    // Abandoned while still receiving (shutdown answered 503; the request stream may then never end or close):
    // stop reading, close the files, and let the scope clean up.
    const onAbort = (): void => {
      req.unpipe();
      req.resume();
      storage.abort();
      reject(scope.signal.reason instanceof Error ? scope.signal.reason : new Error('request abandoned'));
    };
    if (scope.signal.aborted) return onAbort();
    scope.signal.addEventListener('abort', onAbort, { once: true });
    middleware(req, res, (err?: unknown) => {
      scope.signal.removeEventListener('abort', onAbort);
      if (err) return reject(uploadError(kind, limits, err));
      if (kind === 'batch') return resolve({ files: Array.isArray(req.files) ? req.files : [], reference: null });
      const byField = (req.files ?? {}) as Record<string, Express.Multer.File[] | undefined>;
      resolve({ files: byField[expected] ?? [], reference: byField[ECHO_REFERENCE_FIELD]?.[0] ?? null });
    });
  });
}

/**
 * The pipeline's input for a received file: its path, or (kept in memory) the bytes, written to the request's
 * directory only if a decoder child needs a file.
 */
export function uploadInput(file: Express.Multer.File, scope: RequestScope): SourceInput {
  const held = (file as HeldUpload).held;
  if (!held) return file.path;
  const memory = new MemoryFile(held);
  let spilled: Promise<string> | null = null;
  const spill = (): Promise<string> =>
    (spilled ??= (async () => {
      // (Named by field: files stored on disk are upload-<n>.)
      const target = path.join(await scope.dir(), `${file.fieldname}.spill`);
      await fsp.writeFile(target, memory.contents());
      return target;
    })());
  return { file: memory, spill };
}
