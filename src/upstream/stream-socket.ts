// A live stream's connection to one model-service replica: its /internal/stream upgraded to a WebSocket. The replica
// is picked as a call's is (replicas.ts: healthy first, breaker admitting, fewest in flight) and the stream stays on it
// for its life, counting as one call in flight there. A replica that cannot be reached, or answers 503 (busy,
// starting, draining), fails (5xx) or refuses the token, is skipped for the next one; a 4xx is the replicas' verdict
// on the stream's settings and ends the search. All of this happens before the client's own upgrade is accepted.
import WebSocket from 'ws';
import type { Upstream } from './balancer';
import { errorBodyOf, noReplicaFailure, readSmall, refusalBeforeBody, type GatewayFailure, type Refusal } from './refusals';
import type { ModelServiceReplicas, ReplicaCall } from './replicas';

/** No replica could take the stream: the answer for the client (503 with Retry-After, or 502). */
export class NoReplicaForStream extends Error {
  constructor(readonly failure: GatewayFailure) {
    super(failure.message);
  }
}

/** A replica answered the upgrade with a verdict on the request itself (400 bad settings, 422 model not installed). */
export class StreamRequestRejected extends Error {
  constructor(
    readonly status: number,
    readonly detail: string,
  ) {
    super(detail);
  }
}

/** An open stream on one replica, its socket paused until the user has listened (ws.resume()); end() once over. */
export class ReplicaStream {
  private ended = false;

  constructor(
    readonly ws: WebSocket,
    private readonly call: ReplicaCall,
  ) {}

  /** The replica, e.g. http://127.0.0.1:8081 */
  get upstream(): string {
    return this.call.upstream.label;
  }

  /** The stream no longer occupies its replica; `lost`: its connection broke, so new streams avoid the replica until its next health check. */
  end(lost?: string): void {
    if (this.ended) return;
    this.ended = true;
    if (lost) this.call.upstream.markUnhealthy(lost);
    this.call.end();
  }
}

export interface StreamSocketOptions {
  /** Path and query under the replica's base URL. */
  path: string;
  headers: Record<string, string>;
  /** Connection and upgrade answer, else the next replica. */
  connectTimeoutMs: number;
  /** Largest message accepted from the replica. */
  maxPayload: number;
}

type Attempt = { ok: WebSocket } | { refused: Omit<Refusal, 'upstream'> } | { rejected: StreamRequestRejected };

/** Opens the stream on the first replica that takes it (throws NoReplicaForStream or StreamRequestRejected). */
export async function openReplicaStream(replicas: ModelServiceReplicas, opts: StreamSocketOptions): Promise<ReplicaStream> {
  const tried = new Set<Upstream>();
  const refusals: Refusal[] = [];
  const headers = { ...opts.headers, ...(replicas.token ? { authorization: `Bearer ${replicas.token}` } : {}) };
  for (let call = replicas.acquire(tried); call; call = replicas.acquire(tried)) {
    const attempt = await connect(call, { ...opts, headers });
    if ('ok' in attempt) return new ReplicaStream(attempt.ok, call);
    call.end();
    if ('rejected' in attempt) throw attempt.rejected;
    refusals.push({ upstream: call.upstream, ...attempt.refused });
  }
  throw new NoReplicaForStream(noReplicaFailure(refusals, replicas.upstreams.length, replicas.breakerWaitMs()));
}

function connect(call: ReplicaCall, opts: StreamSocketOptions): Promise<Attempt> {
  const up = call.upstream;
  const url = `${up.url.protocol === 'https:' ? 'wss:' : 'ws:'}//${up.url.host}${up.basePath}${opts.path}`;
  return new Promise<Attempt>((resolve) => {
    let settled = false;
    const settle = (a: Attempt): void => {
      if (settled) return;
      settled = true;
      resolve(a);
    };
    const ws = new WebSocket(url, {
      headers: opts.headers,
      handshakeTimeout: opts.connectTimeoutMs,
      perMessageDeflate: false,
      maxPayload: opts.maxPayload,
    });
    ws.once('open', () => {
      // Paused until the caller listens: the replica's first message may have come with the upgrade's answer, and
      // would otherwise be emitted before the awaiting caller is back.
      ws.pause();
      call.judge('success');
      settle({ ok: ws });
    });
    ws.once('unexpected-response', (req, res) => {
      const status = res.statusCode ?? 502;
      readSmall(res, (body) => {
        req.destroy();
        if (status === 503 || status === 401 || status === 403) {
          const refused = refusalBeforeBody(status, body, res.headers['retry-after']);
          call.judge(refused.verdict);
          if (refused.unhealthy) up.markUnhealthy(refused.unhealthy);
          return settle({ refused: refused.refusal });
        }
        const detail = errorBodyOf(body).detail ?? `HTTP ${status}`;
        if (status >= 500) {
          call.judge('failure');
          return settle({ refused: { kind: 'unreachable', reason: `HTTP ${status}: ${detail}` } });
        }
        // The replica works; what it said is about the stream's settings, and another replica would say the same.
        call.judge('success');
        settle({ rejected: new StreamRequestRejected(status, detail) });
      });
    });
    ws.on('error', (err: NodeJS.ErrnoException) => {
      if (settled) return;
      const reason = err.code ?? err.message;
      call.judge('failure');
      up.markUnhealthy(`stream: ${reason}`);
      settle({ refused: { kind: 'unreachable', reason } });
    });
  });
}
