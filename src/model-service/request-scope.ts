// A request's temp directory (RequestScope): created on first use, removed with everything in it when the response
// is over, heartbeated so that other processes sharing TMP_DIR can tell it from one a dead process left; the sweep
// of abandoned directories at start and on a timer; the count of active scopes for shutdown.
import crypto from 'node:crypto';
import fs from 'node:fs';
import fsp from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import type { Response } from 'express';
import type { Config } from '../config';
import { sendDetail } from './http-error';
import { processAlive } from '../startup/process-alive';

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


/** Whether a request directory (by name and mtime) can be removed by this process: see the naming rules above. */
export function isAbandonedRequestDir(name: string, mtimeMs: number, now = Date.now()): boolean {
  if (!name.startsWith(REQUEST_DIR_PREFIX)) return false;
  const owned = OWNED_DIR.exec(name);
  if (!owned) return now - mtimeMs > LEGACY_MAX_AGE_MS;
  const [, host, pidText, instance] = owned;
  const pid = Number(pidText);
  if (host === HOST_TAG) {
    if (instance === INSTANCE) return false; // ours
    if (pid === process.pid || !processAlive(pid)) return true; // an earlier life of this pid, or a dead process
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
