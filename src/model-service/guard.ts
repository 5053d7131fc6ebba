// The model service's front door, run before any endpoint and before any byte of an upload is read:
//   1. authentication: every request must carry `Authorization: Bearer <MODEL_SERVICE_TOKEN>` (the gateway's);
//   2. draining: once shutdown began, new requests get 503 + Retry-After;
//   3. admission control: at most `workers × MODEL_QUEUE_PER_WORKER` denoise requests are admitted at once
//      (a batch weighs as much as the engine has workers, since it keeps them all busy); beyond that the answer is
//      503 {"detail"} with Retry-After at once, so an overload neither queues unbounded work nor reads uploads;
//   4. `Expect: 100-continue`: only a request that passed 1–3 is told to send its body. The gateway always asks,
//      so a refused request has sent nothing and can be retried on another replica. Under /internal/ the endpoint
//      sends it after its own admission (the job stream's share of the engine).
// createModelServiceServer wires the HTTP server so that 100-continue requests and WebSocket upgrades (live streams)
// come through this guard.
import crypto from 'node:crypto';
import http from 'node:http';
import type { NextFunction, Request, RequestHandler, Response } from 'express';
import { sendDetail } from './http-error';
import { routeUpgrades } from '../http/upgrades';
import { lingerBeforeClose } from '../http/lingering-close';

export interface AdmissionState {
  /** Units admitted now (a /denoise is 1, a batch is `workers`). */
  inUse: number;
  capacity: number;
  /** Requests turned away with 503 since start. */
  rejected: number;
  /** Requests admitted since start. */
  admitted: number;
}

/** Counts admitted work; `tryAcquire` never waits. */
export class AdmissionGate {
  private inUse = 0;
  private rejected = 0;
  private admitted = 0;
  /** Exponentially weighted mean time an admitted request held its units (for Retry-After). */
  private meanHoldMs = 2_000;

  constructor(readonly capacity: number) {}

  /** Units granted (call the returned release once), or null when they do not fit. */
  tryAcquire(units: number): (() => void) | null {
    const want = Math.max(1, Math.min(units, this.capacity));
    if (this.inUse + want > this.capacity) {
      this.rejected++;
      return null;
    }
    this.inUse += want;
    this.admitted++;
    const started = Date.now();
    let released = false;
    return () => {
      if (released) return;
      released = true;
      this.inUse -= want;
      this.meanHoldMs = 0.8 * this.meanHoldMs + 0.2 * (Date.now() - started);
    };
  }

  /** Seconds a turned-away client should wait: about one request's time, 1–60 s. */
  retryAfterSeconds(): number {
    return Math.min(60, Math.max(1, Math.ceil(this.meanHoldMs / 1000)));
  }

  state(): AdmissionState {
    return { inUse: this.inUse, capacity: this.capacity, rejected: this.rejected, admitted: this.admitted };
  }
}

function tokenMatches(header: string | undefined, expected: Buffer): boolean {
  const presented = header === undefined ? undefined : /^Bearer[ \t]+(\S+)\s*$/i.exec(header)?.[1];
  if (!presented) return false;
  // Compare digests so the comparison takes the same time whatever the length.
  const a = crypto.createHash('sha256').update(presented).digest();
  const b = crypto.createHash('sha256').update(expected).digest();
  return crypto.timingSafeEqual(a, b);
}

/** Refuses without reading the body; closes the connection when a body may follow. */
function refuse(req: Request, res: Response, status: 401 | 503, detail: string, retryAfterS?: number): void {
  if (retryAfterS !== undefined) res.setHeader('Retry-After', String(retryAfterS));
  const bodyFollows = req.headers['content-length'] !== undefined && req.headers['content-length'] !== '0';
  if (bodyFollows || req.headers['transfer-encoding'] !== undefined) res.setHeader('Connection', 'close');
  sendDetail(res, status, detail, status === 401 ? 'unauthorized' : 'unavailable');
}

export interface GuardOptions {
  token: string;
  gate: AdmissionGate;
  /** Units a batch takes (the engine's worker count). */
  batchUnits: () => number;
  draining: () => boolean;
}

export function createGuard(opts: GuardOptions): RequestHandler {
  if (!opts.token) throw new Error('the model service needs a token (MODEL_SERVICE_TOKEN)');
  const expected = Buffer.from(opts.token, 'utf8');
  return (req: Request, res: Response, next: NextFunction) => {
    if (!tokenMatches(req.headers.authorization, expected)) {
      res.setHeader('WWW-Authenticate', 'Bearer realm="model-service"');
      refuse(req, res, 401, 'the model service only answers the gateway: send Authorization: Bearer <MODEL_SERVICE_TOKEN>');
      return;
    }
    if (opts.draining()) {
      refuse(req, res, 503, 'the model service is shutting down; retry shortly', 2);
      return;
    }
    if (req.method === 'POST' && (req.path === '/denoise' || req.path === '/denoise/batch')) {
      const units = req.path === '/denoise' ? 1 : opts.batchUnits();
      const release = opts.gate.tryAcquire(units);
      if (!release) {
        const { inUse, capacity } = opts.gate.state();
        refuse(
          req,
          res,
          503,
          `busy: ${inUse} of ${capacity} request slots are in use; retry after the Retry-After delay`,
          opts.gate.retryAfterSeconds(),
        );
        return;
      }
      res.once('close', release);
    }
    // Endpoints under /internal/ admit their own work (the job stream's share of the engine) and send 100 Continue
    // themselves once they take it: a refusal then reaches the sender before any of its body is on the wire.
    if (!req.path.startsWith('/internal/')) continueIfExpected(req);
    next();
  };
}

/** Tells a client that sent `Expect: 100-continue` to send its body (once the request is admitted). */
export function continueIfExpected(req: Request): void {
  if (/100-continue/i.test(String(req.headers.expect ?? ''))) req.res?.writeContinue();
}

/**
 * The model service's HTTP server: requests with `Expect: 100-continue` reach the app (and so the guard, which
 * decides between 100 Continue and a final answer) instead of Node answering 100 on its own; so do upgrades.
 */
export function createModelServiceServer(handler: http.RequestListener): http.Server {
  const server = http.createServer(handler);
  server.on('checkContinue', (req, res) => handler(req, res));
  lingerBeforeClose(server);
  // GET /internal/stream (live-stream.ts): the upgrade is answered by the same handler, guard first.
  routeUpgrades(server, handler);
  // The gateway bounds upload and processing time; no second clock here.
  server.requestTimeout = 0;
  return server;
}
