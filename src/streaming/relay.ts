// A live stream denoised by a model-service replica (MODEL_SERVICE_URL set): session.ts keeps the public protocol,
// billing, limits and the request log; this relays PCM to one replica's /internal/stream (model-service/live-stream.ts)
// and its output back, in order. It is opened before the client's upgrade is accepted, so a stream no replica can take
// is refused with an ordinary HTTP answer. The stream stays on its replica; if that replica goes away the stream ends
// with an error (1011, or 1012 when the replica is restarting) and the client reconnects, which picks a replica afresh.
// Buffering is bounded: the session stops reading its client while too much is inside (session.ts, maxInsideBytes),
// and the replica stops reading this socket while too much is inside it.
import WebSocket from 'ws';
import type { EchoReport, LiveSink, LiveStream } from '../inference/types';
import { CLOSE, StreamFault } from '../live-protocol/close';
import { parseReplicaText } from '../live-protocol/messages';
import { liveQuery, type LiveParams } from '../live-protocol/query';
import type { ModelServiceReplicas } from '../upstream/replicas';
import { NoReplicaForStream, openReplicaStream, type ReplicaStream } from '../upstream/stream-socket';

/** Largest message taken from a replica: one tick's output for a client message of up to 1 MiB, plus the flush. */
const MAX_REPLICA_MESSAGE = 4 * 1024 * 1024;

let lastId = 0;

export interface RelayOptions {
  requestId: string;
  /** Connection, upgrade and the replica's `ready`, per replica. */
  connectTimeoutMs: number;
}

/** Opens the stream on a replica and waits for its `ready` (throws NoReplicaForStream / StreamRequestRejected). */
export async function openRelay(replicas: ModelServiceReplicas, params: LiveParams, opts: RelayOptions): Promise<RelayedStream> {
  const query = liveQuery(params);
  const stream = await openReplicaStream(replicas, {
    path: `/internal/stream?${query.toString()}`,
    headers: { 'x-request-id': opts.requestId },
    connectTimeoutMs: opts.connectTimeoutMs,
    maxPayload: MAX_REPLICA_MESSAGE,
  });
  const relay = new RelayedStream(stream);
  const timer = setTimeout(() => relay.abort(), opts.connectTimeoutMs);
  try {
    await relay.ready;
    return relay;
  } catch (err) {
    relay.abort();
    throw new NoReplicaForStream({
      type: 'upstream_unavailable',
      message: `The model service (${stream.upstream}) did not start the stream: ${(err as Error).message}.`,
      status: 502,
    });
  } finally {
    clearTimeout(timer);
  }
}

/** The LiveStream the session drives, backed by a replica's socket. */
export class RelayedStream implements LiveStream {
  readonly id = ++lastId;
  latencySamples = 0;
  readonly ready: Promise<void>;
  private readonly ws: WebSocket;
  private sink: LiveSink | null = null;
  /** A fault that came before a sink was bound. */
  private pending: StreamFault | null = null;
  private lastError: string | null = null;
  private isReady = false;
  private done = false;
  /** The replica's echo canceller figures, with its `done`. */
  private echoReport: EchoReport | null = null;
  private aborted = false;
  private over = false;
  private resolveReady!: () => void;
  private rejectReady!: (err: Error) => void;
  private resolveEnd!: () => void;
  private readonly ended = new Promise<void>((resolve) => (this.resolveEnd = resolve));

  constructor(private readonly stream: ReplicaStream) {
    this.ws = stream.ws;
    this.ready = new Promise<void>((resolve, reject) => {
      this.resolveReady = resolve;
      this.rejectReady = reject;
    });
    this.ready.catch(() => undefined);
    this.ws.on('message', (data: Buffer, isBinary) => this.onMessage(data, isBinary));
    this.ws.on('close', (code) => this.onClose(code));
    this.ws.on('error', () => undefined); // 'close' follows
    this.ws.resume(); // openReplicaStream hands it over paused
  }

  /** Where the output goes from now on (the session's sink). */
  bind(sink: LiveSink): this {
    this.sink = sink;
    const fault = this.pending;
    if (fault) setImmediate(() => sink.error(fault));
    return this;
  }

  push(bytes: Uint8Array): void {
    if (this.over || this.ws.readyState !== WebSocket.OPEN) return;
    this.ws.send(bytes, { binary: true });
  }

  /** Asks the replica to flush; resolves once its last output came (or the stream failed: the sink was told). */
  end(): Promise<void> {
    if (!this.over && this.ws.readyState === WebSocket.OPEN) this.ws.send(JSON.stringify({ type: 'end' }));
    return this.ended;
  }

  /** With echo_reference, after end() resolved: the canceller's figures the replica sent with its `done`. */
  echo(): EchoReport | null {
    return this.echoReport;
  }

  /** Drops the stream at once (a replica that stopped reading must not hold the gateway for a close handshake). */
  abort(): void {
    if (this.over) return;
    this.aborted = true;
    this.ws.terminate();
  }

  private onMessage(data: Buffer, isBinary: boolean): void {
    try {
      this.handleMessage(data, isBinary);
    } catch (err) {
      // A defect here ends this stream only (a throw from a socket's listener would end the process).
      const fault = new StreamFault('internal_error', `relaying the stream failed: ${(err as Error).message}`, CLOSE.internal);
      this.abort();
      this.fail(fault);
    }
  }

  private handleMessage(data: Buffer, isBinary: boolean): void {
    if (this.over) return;
    if (isBinary) {
      this.sink?.output(new Uint8Array(data.buffer, data.byteOffset, data.byteLength));
      return;
    }
    // Whatever the replica sends, nothing here may throw: anything but its protocol's messages is ignored.
    const msg = parseReplicaText(data.toString('utf8'));
    if (msg?.type === 'ready') {
      this.latencySamples = msg.latency_samples;
      this.isReady = true;
      this.resolveReady();
    } else if (msg?.type === 'done') {
      this.done = true;
      this.echoReport = msg.echo ?? null;
    } else if (msg?.type === 'error') {
      this.lastError = msg.message.slice(0, 300);
    } else if (msg?.type === 'speech_start' || msg?.type === 'speech_end') {
      this.sink?.event?.(msg);
    }
  }

  private onClose(code: number): void {
    if (this.over) return;
    this.over = true;
    const lost = !this.done && !this.aborted && code === 1006;
    this.stream.end(lost ? 'a live stream\'s connection broke' : undefined);
    if (!this.isReady) this.rejectReady(new Error(this.lastError ?? `closed with ${code}`));
    if (!this.done && !this.aborted) this.fail(this.faultFor(code));
    this.resolveEnd();
  }

  private faultFor(code: number): StreamFault {
    if (code === CLOSE.restarting) {
      return new StreamFault('upstream_unavailable', 'the model service handling this stream is restarting; reconnect', CLOSE.restarting);
    }
    const why = this.lastError ?? (code === 1006 ? 'its connection broke' : `it closed the stream (${code})`);
    return new StreamFault('internal_error', `the model service handling this stream failed: ${why}`, CLOSE.internal);
  }

  private fail(fault: StreamFault): void {
    if (this.sink) this.sink.error(fault);
    else this.pending = fault;
  }
}
