// Uploads: streamed by multer into a per-request temp directory under config.tmpDir, created when first needed. A
// single file (/denoise) up to IN_MEMORY_UPLOAD_BYTES stays in memory instead, and goes to disk once it grows past
// that: the common short clip then costs no temp files at all (their syscalls cost more CPU than the WAV work).
import crypto from 'node:crypto';
import fs from 'node:fs';
import fsp from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import type { Request, Response } from 'express';
import multer from 'multer';
import type { Config } from '../config';
import { MemoryFile } from '../audio/memory-file';
import type { SourceInput } from '../pipeline';
import { badRequest, HttpError, sendDetail, tooLarge } from './http-error';
import { FILE_FIELD, parseDenoiseParams, type EndpointKind } from './params';

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

/** Where one request keeps its uploads and outputs; the whole directory is removed when the request is over. */
export interface RequestScope {
  /** The request's temp directory, created at the first call (many requests never need one). */
  dir(): Promise<string>;
  /** Aborted when the client goes away before the response is complete. */
  signal: AbortSignal;
}

const REQUEST_DIR_PREFIX = 'req-';

// Request directories carry their owner in their name, `req-<host>.<pid>.<instance>-XXXXXX`, so that a process
// starting on a TMP_DIR shared with others (several model services on one volume) can tell a directory left by a
// dead process (kill -9) from one a live process is still using:
//   - same host, same instance id: ours (alive);
//   - same host, pid not running, or pid is our own but another instance (a restarted container reuses pid 1): dead;
//   - otherwise (another host, or a running pid that may be a reused one): alive while its heartbeat is fresh. A
//     scope touches its directory every HEARTBEAT_MS; one untouched for STALE_MS belongs to nobody.
// Directories in the old unowned form `req-XXXXXX` are only removed after LEGACY_MAX_AGE_MS.
const HOST_TAG = crypto.createHash('sha256').update(os.hostname()).digest('hex').slice(0, 8);
const INSTANCE = crypto.randomBytes(4).toString('hex');
const OWNER = `${HOST_TAG}.${process.pid}.${INSTANCE}`;
/** This process's owner tag in request directory names (for tests and diagnostics). */
export const REQUEST_DIR_OWNER = { host: HOST_TAG, pid: process.pid, instance: INSTANCE } as const;
const OWNED_DIR = /^req-([0-9a-f]{8})\.(\d+)\.([0-9a-f]{8})-/;
export const HEARTBEAT_MS = 60_000;
export const STALE_MS = 10 * 60_000;
export const LEGACY_MAX_AGE_MS = 6 * 60 * 60_000;

/** One request in progress: its scope's promise (settles once its directory is gone) and a way to stop it. */
interface ActiveScope {
  done: Promise<void>;
  /** Answers 503 + Retry-After if no response has started, then aborts the work. */
  shutdown(retryAfterS: number): void;
}

/** Request scopes still running or removing their directory; shutdown waits for them. */
const activeScopes = new Set<ActiveScope>();

/** Resolves once every request scope has removed its temp directory (bounded by `timeoutMs`). */
export async function requestScopesSettled(timeoutMs: number): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<void>((resolve) => {
    timer = setTimeout(resolve, timeoutMs);
    timer.unref();
  });
  await Promise.race([Promise.all([...activeScopes].map((s) => s.done)), timeout]);
  clearTimeout(timer);
}

/** Number of request scopes in progress (requests being received, processed or sent). */
export function activeRequestCount(): number {
  return activeScopes.size;
}

/**
 * Shutdown: every request that has not started its response gets `503 {"detail"}` with Retry-After (and the
 * connection closed); its work is aborted. Responses already streaming are left to finish.
 */
export function shutdownActiveScopes(retryAfterS: number): number {
  let n = 0;
  for (const scope of activeScopes) {
    scope.shutdown(retryAfterS);
    n++;
  }
  return n;
}

/** Error a scope's work is aborted with at shutdown. */
export class ShuttingDownError extends Error {
  constructor() {
    super('the model service is shutting down');
  }
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
  const abort = new AbortController();
  const entry: ActiveScope = {
    done: Promise.resolve(),
    shutdown(retryAfterS) {
      // A response already on its way is left to finish; everything else is answered now and its work stopped.
      if (res.headersSent || res.destroyed) return;
      res.setHeader('Retry-After', String(retryAfterS));
      res.setHeader('Connection', 'close');
      sendDetail(res, 503, 'the model service is shutting down; retry shortly', 'unavailable');
      if (!abort.signal.aborted) abort.abort(new ShuttingDownError());
    },
  };
  const scope = runRequestScope(config, res, abort, handler, onError);
  entry.done = scope;
  activeScopes.add(entry);
  void scope.finally(() => activeScopes.delete(entry));
  return scope;
}

async function runRequestScope(
  config: Config,
  res: Response,
  abort: AbortController,
  handler: (scope: RequestScope) => Promise<void>,
  onError: (err: unknown) => void,
): Promise<void> {
  const responseClosed = new Promise<void>((resolve) => {
    res.once('close', () => {
      if (!res.writableFinished && !abort.signal.aborted) abort.abort(new Error('client closed the connection'));
      resolve();
    });
  });
  let creating: Promise<string> | null = null;
  let heartbeat: NodeJS.Timeout | undefined;
  const dir = (): Promise<string> =>
    (creating ??= (async () => {
      await fsp.mkdir(config.tmpDir, { recursive: true });
      const owned = await fsp.mkdtemp(path.join(config.tmpDir, `${REQUEST_DIR_PREFIX}${OWNER}-`));
      // The heartbeat tells other processes sharing TMP_DIR that this directory is in use.
      heartbeat = setInterval(() => {
        const now = new Date();
        fs.utimes(owned, now, now, () => undefined);
      }, HEARTBEAT_MS);
      heartbeat.unref();
      return owned;
    })());
  try {
    await handler({ dir, signal: abort.signal });
  } catch (err) {
    if (!abort.signal.aborted) onError(err);
  } finally {
    clearInterval(heartbeat);
    if (!res.headersSent && !res.destroyed) {
      // The handler must always answer; this is a guard so the directory wait below cannot hang.
      sendDetail(res, 500, 'internal error: no response produced');
    }
    await responseClosed;
    const created = creating ? await (creating as Promise<string>).catch(() => null) : null;
    clearInterval(heartbeat);
    if (created) await fsp.rm(created, { recursive: true, force: true }).catch(() => undefined);
  }
}

function processRunning(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    // EPERM: it exists but belongs to someone else.
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** Whether a request directory (by name and mtime) can be removed by this process: see the naming rules above. */
export function isAbandonedRequestDir(name: string, mtimeMs: number, now = Date.now()): boolean {
  if (!name.startsWith(REQUEST_DIR_PREFIX)) return false;
  const owned = OWNED_DIR.exec(name);
  if (!owned) return now - mtimeMs > LEGACY_MAX_AGE_MS;
  const [, host, pidText, instance] = owned;
  const pid = Number(pidText);
  if (host === HOST_TAG) {
    if (instance === INSTANCE) return false; // ours
    if (pid === process.pid || !processRunning(pid)) return true; // an earlier life of this pid, or a dead process
  }
  return now - mtimeMs > STALE_MS;
}

/**
 * Removes request directories left behind by crashed processes (kill -9, OOM, power loss). Safe on a TMP_DIR
 * shared with other live processes: their directories are recognised by owner and heartbeat and kept.
 * Resolves with the number of directories removed.
 */
export async function sweepStaleRequestDirs(tmpDir: string): Promise<number> {
  let names: string[];
  try {
    names = await fsp.readdir(tmpDir);
  } catch {
    return 0;
  }
  let removed = 0;
  for (const name of names) {
    if (!name.startsWith(REQUEST_DIR_PREFIX)) continue;
    const full = path.join(tmpDir, name);
    try {
      const st = await fsp.stat(full);
      if (!st.isDirectory() || !isAbandonedRequestDir(name, st.mtimeMs)) continue;
      await fsp.rm(full, { recursive: true, force: true });
      removed++;
    } catch {
      // Another process may be removing it at the same time.
    }
  }
  return removed;
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
 * Receives the multipart body: a /denoise file up to IN_MEMORY_UPLOAD_BYTES into memory (`held`), anything else into
 * the scope's directory (`path`). Resolves with the stored files (in upload order); text fields end up in req.body.
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
  // The per-file limit is multer's fileSize; the storage enforces the batch's total on top.
  const storage =
    kind === 'single'
      ? new ScopedStorage(scope, Infinity, IN_MEMORY_UPLOAD_BYTES)
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
      if (kind === 'single') resolve(req.file ? [req.file] : []);
      else resolve(Array.isArray(req.files) ? req.files : []);
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
      const target = path.join(await scope.dir(), 'upload-0');
      await fsp.writeFile(target, memory.contents());
      return target;
    })());
  return { file: memory, spill };
}
