// The file-work process (FILE_WORK_PROCESS, single box): `npm start` runs the model service's file work (uploads,
// batches, jobs) in a child process of its own, `node dist/src/model-service-main.js`, niced, and under SCHED_IDLE
// (util-linux chrt) from the moment it is ready, while live streams stay in the server's process. The file calls'
// decoding, multipart parsing and worker traffic then never share an event loop with the streams' WebSocket messages,
// and the kernel gives that process only CPU time the live path leaves. The gateway reaches it over loopback HTTP as
// any model service. This module starts it, restarts it on the same port whenever it dies (during its own start-up
// too), with a doubling backoff, for as long as the server runs, and stops it last at shutdown.
import { spawn, type ChildProcess } from 'node:child_process';
import crypto from 'node:crypto';
import os from 'node:os';
import path from 'node:path';
import type { Config } from '../config';
import { CHRT_PATH } from '../config/system-tools';
import { idleProcess } from '../inference/runtime/thread-priority';
import type { Logger } from '../logging';
import type { FromFileProcess, MetricsJson, ToFileProcess } from './protocol';

export type { MetricsJson } from './protocol';

/** `node dist/src/model-service-main.js`, next to this folder in dist/. */
const MODEL_SERVICE_MAIN = path.join(__dirname, '..', 'model-service-main.js');
/**
 * Restarts after a death wait FILE_WORK_RESTART_SECONDS (0.5 s), then twice as long after each further death in a row,
 * at most 10 s (or 20 times the first wait), for as long as the server runs. A child that stayed up (ready) this long
 * counts as healthy: the next death starts at the first wait again.
 */
const HEALTHY_MS = 60_000;
const MAX_RESTART_DELAY_MS = 10_000;
/** How long /metrics waits for the child's part before answering without it. */
const METRICS_WAIT_MS = 2_000;

export interface FileProcess {
  /** Loopback URL of its model service, and the secret it wants (fresh per start of the server). */
  readonly url: string;
  readonly token: string;
  /** What it reported when it became ready (the last start): file workers, request slots, start-up time. */
  facts(): FileProcessFacts;
  /** Its pid while it runs, else null. */
  pid(): number | null;
  /** Its engine is loaded and it answers. */
  ready(): boolean;
  /** Times it was restarted after dying. */
  restarts(): number;
  /** Its metrics registry (JSON), for the server's /metrics; empty when it does not answer in time. */
  metrics(): Promise<MetricsJson>;
  /** SIGTERM, then SIGKILL after `graceMs`; no restart after this. */
  close(graceMs?: number): Promise<void>;
}

export type FileProcessFacts = Omit<Extract<FromFileProcess, { type: 'ready' }>, 'type'>;

export interface FileProcessOptions {
  config: Config;
  /** The environment the child's config is read from (the server's own). */
  env: NodeJS.ProcessEnv;
  logger: Logger;
  /** Node flags for the child (default: this process's, as `npm start` set them). */
  execArgv?: string[];
}

/** Starts the child and resolves once its engine is ready (rejects if it exits first). */
export async function startFileProcess(opts: FileProcessOptions): Promise<FileProcess> {
  const { config, logger } = opts;
  const token = crypto.randomBytes(32).toString('base64url');
  const execArgv = opts.execArgv ?? process.execArgv;
  const idle = config.fileWorkIdle && CHRT_PATH !== null;
  let child: ChildProcess | null = null;
  let port = 0;
  let url = '';
  let isReady = false;
  let facts: FileProcessFacts = { workers: 0, slots: 0, startup_ms: 0, swept_dirs: 0 };
  let closing = false;
  let restarts = 0;
  /** Deaths in a row since the last child that stayed up HEALTHY_MS: the backoff's exponent. */
  let failures = 0;
  /** The first child got ready (startFileProcess resolved): from then on every death is followed by a restart. */
  let started = false;
  let restartTimer: NodeJS.Timeout | null = null;
  let metricsId = 0;
  const pendingMetrics = new Map<number, (m: MetricsJson) => void>();

  /**
   * After a child died, whether it had got ready or not (killed again during its start-up, or its spawn failed):
   * the next start, after the backoff delay. Called once per death; a timer already waiting covers it.
   */
  const scheduleRestart = (pid: number | undefined, how: string, upMs: number | null, exit?: { code: number | null; signal: string | null }): void => {
    if (closing || restartTimer) return;
    failures = upMs !== null && upMs >= HEALTHY_MS ? 1 : failures + 1;
    const first = config.fileWorkRestartMs;
    const delay = Math.min(Math.max(MAX_RESTART_DELAY_MS, 20 * first), first * 2 ** Math.min(failures - 1, 20));
    logger.error(
      { event: 'file_process_exited', pid, ...exit, how, ready: upMs !== null, failures_in_a_row: failures, restart_in_ms: delay },
      `the file-work process (pid ${pid ?? 'none'}) ${how}${upMs === null ? ' before it was ready' : ''}; file calls answer upstream_unavailable until it is back (restart in ${delay} ms)`,
    );
    restartTimer = setTimeout(() => {
      restartTimer = null;
      if (closing) return;
      restarts++;
      launch().then(
        () => logger.warn({ event: 'file_process_restarted', pid: child?.pid, url, restarts }, `the file-work process is back (pid ${child?.pid})`),
        (err: unknown) => {
          // Its death already scheduled the next try; this covers a spawn that threw before any child existed.
          if (child === null) scheduleRestart(undefined, `could not be started (${err instanceof Error ? err.message : String(err)})`, null);
        },
      );
    }, delay);
  };

  const launch = (): Promise<void> =>
    new Promise<void>((resolve, reject) => {
      const env: NodeJS.ProcessEnv = {
        ...opts.env,
        MODEL_SERVICE_TOKEN: token,
        MODEL_SERVICE_HOST: '127.0.0.1',
        // A restart binds the port the first one got: the gateway's replica URL stays valid.
        MODEL_SERVICE_PORT: String(port),
      };
      delete env.MODEL_SERVICE_URL;
      const nodeArgs = [...execArgv, MODEL_SERVICE_MAIN];
      // chrt execs node (same pid); the IPC channel's descriptor survives the exec. Not detached: with the kernel's
      // autogroups (sched_autogroup_enabled), a new session is a scheduling group of its own that competes with the
      // server's at full weight, SCHED_IDLE inside it or not; measured, live latency p99 went from ~20 to 101–189 ms
      // at 300 nsm-1 streams. In the same session a terminal's Ctrl-C reaches it too: it ignores SIGINT and is stopped by
      // the server (SIGTERM, last at shutdown) or by the server's exit (IPC disconnect).
      // Started at normal policy and lowered to SCHED_IDLE once ready (below): started under it, its start-up got no
      // CPU while other programs kept the box's cores busy, and the server listens only once it is ready (measured:
      // 41.6 s beside two 40 s busy loops, 1.6 s after they ended).
      const c = spawn(process.execPath, nodeArgs, { env, stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
      child = c;
      if (config.fileWorkNice > 0 && c.pid) {
        try {
          // The main thread; its workers set their own niceness (FILE_WORK_NICE) when they start.
          os.setPriority(c.pid, config.fileWorkNice);
        } catch {
          // not permitted: it runs at the server's priority
        }
      }
      let settled = false;
      let readyAt: number | null = null;
      let ended = false;
      /** This child is gone (exit, or a spawn that failed): once, whichever event says so first. */
      const end = (how: string, exit?: { code: number | null; signal: string | null }): void => {
        if (ended) return;
        ended = true;
        isReady = false;
        if (child === c) child = null;
        for (const done of pendingMetrics.values()) done([]);
        pendingMetrics.clear();
        if (!settled) {
          settled = true;
          reject(new Error(`the file-work process ${how} before it was ready; its log is above`));
        }
        // The first start failing stops the server's start (startFileProcess rejects); after it, always a restart.
        if (started) scheduleRestart(c.pid, how, readyAt === null ? null : Date.now() - readyAt, exit);
      };
      c.on('message', (msg: FromFileProcess) => {
        if (msg.type === 'listening') {
          url = msg.url;
          port = Number(new URL(msg.url).port);
        } else if (msg.type === 'ready') {
          const { type: _type, ...rest } = msg;
          // Every thread of the child to SCHED_IDLE before it counts as ready (its workers lowered themselves already).
          void (idle && c.pid ? idleProcess(c.pid) : Promise.resolve(false)).then(() => {
            if (ended) return;
            facts = rest;
            isReady = true;
            readyAt = Date.now();
            if (!settled) {
              settled = true;
              resolve();
            }
          });
        } else if (msg.type === 'metrics') {
          pendingMetrics.get(msg.id)?.(msg.metrics ?? []);
          pendingMetrics.delete(msg.id);
        }
      });
      c.on('error', (err) => {
        // Without a pid it never started (no 'exit' follows for sure); otherwise a failed kill or send: it runs on.
        if (c.pid === undefined) end(`could not be started (${err.message})`);
      });
      c.on('exit', (code, signal) => end(`exited (${signal ?? `exit code ${code}`})`, { code, signal }));
    });

  await launch();
  started = true;
  return {
    url,
    token,
    facts: () => facts,
    pid: () => child?.pid ?? null,
    ready: () => isReady,
    restarts: () => restarts,
    metrics() {
      const c = child;
      if (!c || !c.connected) return Promise.resolve([]);
      const id = ++metricsId;
      return new Promise<MetricsJson>((resolve) => {
        const timer = setTimeout(() => {
          pendingMetrics.delete(id);
          resolve([]);
        }, METRICS_WAIT_MS);
        pendingMetrics.set(id, (m) => {
          clearTimeout(timer);
          resolve(m);
        });
        c.send({ type: 'metrics', id } satisfies ToFileProcess);
      });
    },
    async close(graceMs = 15_000) {
      closing = true;
      if (restartTimer) clearTimeout(restartTimer);
      const c = child;
      if (!c || c.exitCode !== null || c.signalCode !== null) return;
      const exited = new Promise<void>((r) => c.once('exit', () => r()));
      c.kill('SIGTERM');
      const force = setTimeout(() => c.kill('SIGKILL'), graceMs);
      await exited;
      clearTimeout(force);
    },
  };
}
