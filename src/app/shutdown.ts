// The one shutdown sequence of both entry points (server.ts, model-service-main.ts): stop accepting, drain within the
// grace, answer what is left 503 + Retry-After, flush, close the sockets (upgraded ones included), release, exit.
// Each entry point says what its steps mean for it (ShutdownPlan); the order and the clocks live here.
import type http from 'node:http';
import { closeEveryConnection } from '../http/upgrades';
import type { InferenceEngine } from '../inference/types';
import { exitWhenStopped, type Logger } from '../logging';

/** Seconds a client is told to wait when the service is restarting. */
export const RESTART_RETRY_AFTER_S = 5;

/** Polls `check` every `stepMs` until it holds or `maxMs` have passed (shutdown waits). */
export async function until(check: () => boolean, maxMs: number, stepMs = 50): Promise<void> {
  const end = Date.now() + maxMs;
  while (!check() && Date.now() < end) await new Promise((r) => setTimeout(r, stepMs));
}

/**
 * Waits until no engine job is running or queued: a stream aborted by a client may still have one chunk in a
 * worker, and terminating a worker in the middle of an ONNX Runtime call can abort the whole process.
 */
export async function waitForIdle(engine: InferenceEngine, maxMs: number): Promise<void> {
  await until(() => {
    const s = engine.state();
    return s.busy === 0 && s.queued === 0;
  }, maxMs, 20);
}

/** Stops `server` accepting, lets idle connections go, and cuts every connection left after `graceMs`. */
export function closeServer(server: http.Server, graceMs = 10_000): Promise<void> {
  return new Promise<void>((resolve) => {
    const force = setTimeout(() => closeEveryConnection(server), graceMs);
    force.unref();
    server.close(() => {
      clearTimeout(force);
      resolve();
    });
    server.closeIdleConnections();
  });
}

/** When the connections still open after the flush are cut. */
export type SocketCut =
  /** `lingerMs` after the flush, all of them, upgraded sockets included (the gateway: its 503s reach the clients). */
  | { lingerMs: number }
  /**
   * HTTP connections at once after the flush (every request is answered by then); upgraded sockets, whose live
   * streams finish their own 1012 close handshake, at the latest `deadlineMs` after shutdown began.
   */
  | { deadlineMs: number };

export interface ShutdownPlan {
  server: http.Server;
  logger: Logger;
  /** SHUTDOWN_GRACE_MS: how long in-flight calls (and live streams) get to finish. */
  graceMs: number;
  /** What the shutdown line says is being finished ("finishing in-flight requests"). */
  finishing: string;
  /** Step 1: /readyz fails and requests still arriving on open connections get 503 + Retry-After. */
  stopAccepting(): void;
  /** Calls still being answered. */
  inFlight(): number;
  /** Live streams of this process: drained within the grace; resolves to how many had to be closed with 1012. */
  streams?: { active(): number; drain(graceMs: number): Promise<number> };
  /** The grace is over: every call still waiting gets 503 + Retry-After; returns how many. */
  cut(retryAfterS: number): number;
  /** After the cut: until those answers are out (or a bound has passed). */
  flush(): Promise<void>;
  sockets: SocketCut;
  /** Last: close what the process opened (engine, stores, child processes). */
  release(): Promise<void>;
}

/** Runs the shutdown sequence once; the process exits when it is over (0, or 1 when a step failed). */
export function runShutdown(signal: string, plan: ShutdownPlan): void {
  const { server, logger, graceMs } = plan;
  const began = Date.now();
  plan.stopAccepting();
  logger.info(
    { event: 'shutdown', signal, grace_ms: graceMs, ...(plan.streams ? { streams: plan.streams.active() } : {}) },
    `${signal}: ${plan.finishing}`,
  );
  const sockets = plan.sockets;
  // A backstop from the start where one is asked for: unref'd, so it never holds the process up by itself.
  const deadline = 'deadlineMs' in sockets ? setTimeout(() => closeEveryConnection(server), sockets.deadlineMs) : null;
  deadline?.unref();
  const closed = new Promise<void>((resolve) =>
    server.close(() => {
      if (deadline) clearTimeout(deadline);
      resolve();
    }),
  );
  server.closeIdleConnections();
  exitWhenStopped(logger, signal, began, (async () => {
    const streamsDrained = plan.streams ? plan.streams.drain(graceMs) : Promise.resolve(0);
    await until(() => plan.inFlight() === 0, graceMs);
    // What could not finish within the grace gets 503 + Retry-After instead of a cut connection.
    const cut = plan.cut(RESTART_RETRY_AFTER_S);
    if (cut > 0) logger.warn({ event: 'shutdown_cut', requests: cut }, `grace over: ${cut} request(s) answered 503 with Retry-After: ${RESTART_RETRY_AFTER_S}`);
    await plan.flush();
    const streamsLeft = await streamsDrained;
    if (streamsLeft > 0) logger.warn({ event: 'shutdown_cut', streams: streamsLeft }, `grace over: ${streamsLeft} stream(s) closed with 1012`);
    if ('lingerMs' in sockets) {
      // Sockets taken through 'upgrade' included: Node's closeAllConnections() does not see them.
      const forced = setTimeout(() => closeEveryConnection(server), sockets.lingerMs);
      server.closeIdleConnections();
      await closed;
      clearTimeout(forced);
    } else {
      // Not the upgraded sockets: their close handshake is under way (the deadline drops them at the latest).
      server.closeAllConnections();
      await closed;
    }
    await plan.release();
  })());
}
