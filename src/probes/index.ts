// Liveness and readiness probes for load balancers, Docker HEALTHCHECK and Kubernetes, outside /v1 and without a
// token, with tiny bodies:
//
//   GET /healthz  200 {"status":"ok"}                       the process answers (liveness: restart when this fails)
//   GET /readyz   200 {"status":"ready"}                    every check passed (send traffic)
//                 503 {"status":"not_ready","failed":{...},  a check failed or timed out, or the process is draining
//                      "error":{"type":"not_ready","message","request_id"}}
//
// Every answer carries an X-Request-Id (the one the app already gave the request, else a fresh one).
//
// Checks are small async functions (store reachable, engine or model service ready) run in parallel, each bounded
// by a timeout, so a hung dependency makes the probe fail fast instead of hang.
import http from 'node:http';
import https from 'node:https';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { ensureRequestId } from '../http/request-id';

export interface ReadinessCheck {
  name: string;
  /** Resolves when ready; rejects (with a short reason) when not. */
  check(): Promise<void>;
}

export interface ProbeOptions {
  checks: ReadinessCheck[];
  /** True once shutdown began: readiness fails so balancers stop sending new calls while in-flight ones finish. */
  draining?: () => boolean;
  /** Per-check limit (default 2 s). */
  timeoutMs?: number;
}

function send(res: ServerResponse, status: number, body: object, head: boolean): void {
  const text = JSON.stringify(body);
  res.writeHead(status, {
    'Content-Type': 'application/json; charset=utf-8',
    'Content-Length': Buffer.byteLength(text),
    'Cache-Control': 'no-store',
    'X-Request-Id': ensureRequestId(res),
  });
  res.end(head ? undefined : text);
}

/** 503: the failed checks by name, and the error envelope every error answer carries. */
function notReady(res: ServerResponse, failed: Record<string, string>, head: boolean): void {
  const message = `not ready: ${Object.entries(failed).map(([name, why]) => `${name}: ${why}`).join('; ')}`;
  send(res, 503, { status: 'not_ready', failed, error: { type: 'not_ready', message, request_id: ensureRequestId(res) } }, head);
}

function withTimeout(p: Promise<void>, ms: number): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`no answer within ${ms} ms`)), ms);
    timer.unref();
    p.then(
      () => {
        clearTimeout(timer);
        resolve();
      },
      (err: unknown) => {
        clearTimeout(timer);
        reject(err instanceof Error ? err : new Error(String(err)));
      },
    );
  });
}

/** Runs the checks; the names of failed ones map to a one-line reason. */
export async function runChecks(checks: ReadinessCheck[], timeoutMs = 2000): Promise<Record<string, string>> {
  const failed: Record<string, string> = {};
  await Promise.all(
    checks.map(async (c) => {
      try {
        await withTimeout(Promise.resolve().then(() => c.check()), timeoutMs);
      } catch (err) {
        failed[c.name] = (err instanceof Error ? err.message : String(err)).split('\n')[0].slice(0, 200);
      }
    }),
  );
  return failed;
}

export function probeHandlers(opts: ProbeOptions): {
  healthz: (req: IncomingMessage, res: ServerResponse) => void;
  readyz: (req: IncomingMessage, res: ServerResponse) => void;
} {
  return {
    healthz(req, res) {
      send(res, 200, { status: 'ok' }, req.method === 'HEAD');
    },
    readyz(req, res) {
      const head = req.method === 'HEAD';
      if (opts.draining?.()) {
        notReady(res, { server: 'shutting down' }, head);
        return;
      }
      runChecks(opts.checks, opts.timeoutMs).then((failed) => {
        if (Object.keys(failed).length === 0) send(res, 200, { status: 'ready' }, head);
        else notReady(res, failed, head);
      });
    },
  };
}

/** GET {baseUrl}/readyz answered 200 (a model service started with `npm run model-service`). */
export function httpReady(baseUrl: string, timeoutMs = 2000): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    const url = new URL(baseUrl.replace(/\/+$/, '') + '/readyz');
    const client = url.protocol === 'https:' ? https : http;
    const req = client.get(url, { timeout: timeoutMs, agent: false }, (res) => {
      res.resume();
      if (res.statusCode === 200) resolve();
      else reject(new Error(`${url.origin} answered ${res.statusCode}`));
    });
    req.on('timeout', () => req.destroy(new Error(`${url.origin} did not answer within ${timeoutMs} ms`)));
    req.on('error', (err: NodeJS.ErrnoException) => reject(new Error(`${url.origin}: ${err.code ?? err.message}`)));
  });
}
