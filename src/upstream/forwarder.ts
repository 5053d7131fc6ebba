// The one boundary between the gateway and the model service(s): an HTTP reverse proxy for one call.
//
// - Replicas: MODEL_SERVICE_URL may list several; each call goes to the healthy replica with the fewest calls in
//   flight whose breaker admits it (balancer.ts), and health checks run in the background (health.ts).
// - Nothing of a client's body is sent before the replica said `100 Continue`. A replica that cannot be reached,
//   does not answer in time, is busy, starting or draining (503) or refuses our token answers before that, so the
//   call moves to another replica with the client's body intact; it is never sent twice.
// - Clocks, and whose fault each one is:
//     client too slow sending the upload (less than CLIENT_MIN_BYTES_PER_S over CLIENT_IDLE_TIMEOUT_MS while we
//       wait on it) or not reading the answer → 408 request_timeout / closed connection, refunded, breaker untouched;
//     replica not accepting the upload, or silent mid-response, for UPSTREAM_IDLE_TIMEOUT_MS → failure (504);
//     no response headers within UPSTREAM_TIMEOUT_MS after the upload was handed over → failure (504);
//     no connection / no 100 Continue within UPSTREAM_CONNECT_TIMEOUT_MS → failure, next replica.
// - Each breaker gets exactly one verdict per call sent to it, and success only once the whole response body came
//   through: a response that dies mid-body is a failure, logged with its real status and refunded.
//
// The parts: replicas.ts (the replica set shared with the job runner: balancer, breakers, health checks),
// attempt.ts (one try on one replica: body pumping, relay, the clocks), headers.ts (what travels up and down),
// refusals.ts (what went wrong, as the gateway's error types and statuses). This file runs one call across replicas.
import type { Request, Response } from 'express';
import type { Config } from '../config';
import { sendGatewayError } from '../http/errors';
import { Attempt } from './attempt';
import type { Upstream } from './balancer';
import type { CircuitBreaker } from './circuit-breaker';
import { hasRequestBody } from './headers';
import { CLIENT_GONE_STATUS, failures, noReplicaFailure, type GatewayFailure, type Refusal } from './refusals';
import { ModelServiceReplicas, type ReplicaCall, type UpstreamState } from './replicas';
import type { ForwardCall, ForwardOutcome, UpstreamForwarder } from './types';

export type { UpstreamState } from './replicas';

export type ForwarderConfig = Pick<
  Config,
  | 'upstreamTimeoutMs'
  | 'breakerThreshold'
  | 'breakerCooldownMs'
  | 'upstreamIdleTimeoutMs'
  | 'upstreamConnectTimeoutMs'
  | 'upstreamHealthIntervalMs'
  | 'clientIdleTimeoutMs'
  | 'clientMinBytesPerSecond'
>;

export interface ForwarderDeps {
  config: ForwarderConfig;
  /**
   * The replicas, shared with the job runner (src/app); closed by their owner. Without it the forwarder makes its own
   * from baseUrl, token and now, and close() stops their health checks.
   */
  replicas?: ModelServiceReplicas;
  /** Model service root, e.g. http://127.0.0.1:8081, or a comma-separated list of replicas. */
  baseUrl?: string;
  /** Sent as `Authorization: Bearer <token>` to the model service (MODEL_SERVICE_TOKEN). */
  token?: string | null;
  /** Clock for the breakers (tests). */
  now?: () => number;
}

export type ModelServiceForwarder = UpstreamForwarder & {
  /** The first replica's breaker (the only one with a single MODEL_SERVICE_URL). */
  readonly breaker: CircuitBreaker;
  /** The first replica's URL. */
  readonly baseUrl: string;
  /** The replicas themselves (breaker, in-flight count, health). */
  readonly replicas: readonly Upstream[];
  /** Every upstream with its breaker state, read when asked (a /metrics scrape, /readyz). */
  upstreams(): UpstreamState[];
  /** Calls being forwarded right now. */
  activeCalls(): number;
  /**
   * Shutdown: every call still waiting for its answer gets 503 upstream_unavailable with Retry-After (its upstream
   * request is cancelled, its credit refunded by the gateway); answers already streaming are cut. Returns the count.
   */
  abortAll(retryAfterS: number): number;
  /** Stops the health checks of replicas it made itself. */
  close(): void;
};

/** Largest body accepted when the gateway context carries no route (should not happen). */
const FALLBACK_MAX_BODY = 201 * 1024 * 1024;

/** A call in progress, for shutdown. */
interface ActiveCall {
  shutdown(retryAfterS: number): void;
}

export function createModelServiceForwarder(deps: ForwarderDeps): ModelServiceForwarder {
  const { config } = deps;
  const owned = !deps.replicas;
  const replicas =
    deps.replicas ?? new ModelServiceReplicas({ config, baseUrl: deps.baseUrl ?? '', token: deps.token, now: deps.now });
  const upstreams = replicas.upstreams;
  const token = replicas.token;
  const active = new Set<ActiveCall>();
  const clientMinBytes = Math.max(1, Math.floor((config.clientMinBytesPerSecond * config.clientIdleTimeoutMs) / 1000));

  const forward = (req: Request, res: Response, ctx: ForwardCall): Promise<ForwardOutcome> =>
    new Promise<ForwardOutcome>((resolveCall) => {
      const maxBody = ctx.route ? ctx.route.maxBodyBytes : FALLBACK_MAX_BODY;
      const withBody = hasRequestBody(req);
      let finished = false;
      /** The attempt in progress (cancelled when the client goes away or at shutdown). */
      let current: Attempt | null = null;
      let shuttingDown = false;

      const call: ActiveCall = {
        shutdown(retryAfterS) {
          shuttingDown = true;
          if (finished) return;
          if (res.headersSent) {
            res.destroy(); // the 'close' handler settles it as a client-side end
            return;
          }
          current?.cancel('shutdown');
          fail(failures.restarting(retryAfterS));
        },
      };
      active.add(call);

      const finish = (outcome: ForwardOutcome): void => {
        if (finished) return;
        finished = true;
        active.delete(call);
        resolveCall(outcome);
      };
      const fail = (f: GatewayFailure): void => {
        if (f.retryAfter !== undefined) res.setHeader('Retry-After', f.retryAfter);
        if (f.closeConnection) res.setHeader('Connection', 'close');
        ctx.errorType = f.type;
        sendGatewayError(res, f.type, f.message, f.status);
        finish({ status: f.status, ok: false, upstreamMs: ctx.upstreamMs });
      };

      const declared = Number(req.headers['content-length']);
      if (Number.isFinite(declared) && declared > maxBody) {
        fail(failures.declaredTooLarge(declared, maxBody));
        return;
      }

      // Client went away before the response was complete.
      res.once('close', () => {
        if (res.writableFinished || finished) return;
        current?.cancel('client');
        finish({ status: ctx.logStatus ?? CLIENT_GONE_STATUS, ok: false, upstreamMs: ctx.upstreamMs });
      });

      const tried = new Set<Upstream>();
      const refusals: Refusal[] = [];

      /** The next replica, or the answer that none could take the call. */
      const next = (): void => {
        if (finished || shuttingDown) return;
        const replica = replicas.acquire(tried);
        if (!replica) {
          fail(noReplicaFailure(refusals, upstreams.length, replicas.breakerWaitMs()));
          return;
        }
        run(replica, false);
      };

      /** One attempt on `replica`; `fresh`: on a new connection, after a kept-alive one went stale. */
      const run = (replica: ReplicaCall, fresh: boolean): void => {
        const attempt = new Attempt({ config, req, res, ctx, replica, token, fresh, withBody, maxBody, clientMinBytes, fail });
        current = attempt;
        void attempt.result.then((result) => {
          current = null;
          if (result.kind === 'done') {
            finish(result.outcome);
            return;
          }
          if (result.kind === 'stale') {
            if (finished || shuttingDown) return;
            // The same replica once more, if its breaker still admits a call.
            const again = replicas.admit(replica.upstream);
            if (again) run(again, true);
            else next();
            return;
          }
          refusals.push(result.refusal);
          next();
        });
      };

      next();
    });

  return Object.assign(forward, {
    breaker: upstreams[0].breaker,
    baseUrl: upstreams[0].label,
    replicas: upstreams,
    upstreams: (): UpstreamState[] => replicas.states(),
    activeCalls: () => active.size,
    abortAll(retryAfterS: number): number {
      const calls = [...active];
      for (const c of calls) c.shutdown(retryAfterS);
      return calls.length;
    },
    close(): void {
      if (owned) replicas.close();
    },
  });
}
