// The model service's live endpoint for the gateway: GET /internal/stream upgraded to a WebSocket runs one live
// stream on this engine (engine.openLive, batched with the other live streams). The gateway keeps the public protocol,
// client auth, limits, credits and the request log (src/streaming); this end only denoises, in order.
//
// Internal protocol (version 1), after the guard (MODEL_SERVICE_TOKEN, draining):
//   query: model, sample_rate, encoding, channels, attenuation_limit_db; refused before the upgrade with {"detail"}:
//   400 bad query, 422 model not installed, 503 no live stream could be opened (no worker, draining);
//   after it: {"type":"ready","latency_samples":N}; binary audio (whole frames of the encoding: PCM, μ-law or A-law)
//   in → binary audio in the same encoding out, in order;
//   {"type":"end"} → the rest flushed, {"type":"done"}, close 1000. A fault: {"type":"error","message"} then close
//   1011 (1007 for input that is not whole frames). At shutdown open streams get SHUTDOWN_GRACE_MS, then 1012.
// Bounded buffering: while more than LIVE_HIGH_WATER bytes of a stream are inside this process (received and not yet
// sent back and flushed to the socket), its socket is not read, so TCP pushes back on the gateway.
import express, { type Request, type Response } from 'express';
import WebSocket, { WebSocketServer } from 'ws';
import type { Config } from '../config';
import { LIVE_ENCODINGS, LIVE_SAMPLE_BYTES, MODEL_IDS, type InferenceEngine, type LiveEncoding, type LiveOptions, type LiveSink, type LiveStream, type ModelId } from '../inference/types';
import { badRequest, HttpError, sendDetail, sendHttpError } from './http-error';
import { assertModelInstalled } from './params';
import { pendingUpgrade } from '../http/upgrades';

export const LIVE_STREAM_PATH = '/internal/stream';
/** Pause reading a stream's socket above this many bytes inside; resume below LIVE_LOW_WATER. */
export const LIVE_HIGH_WATER = 1024 * 1024;
export const LIVE_LOW_WATER = 256 * 1024;
const CLOSE = { normal: 1000, invalidData: 1007, internal: 1011, restarting: 1012 } as const;

export interface LiveEndpoint {
  router: express.Router;
  /** Live streams open now. */
  active(): number;
  /** Shutdown began: open streams get `graceMs` to finish, then are closed with 1012 (new ones: the guard's 503). */
  startDraining(graceMs: number): void;
}

export interface LiveEndpointDeps {
  config: Config;
  engine: InferenceEngine;
  log: (line: string) => void;
}

function text(query: Record<string, unknown>, name: string): string | undefined {
  const v = query[name];
  if (v === undefined) return undefined;
  if (typeof v !== 'string') throw badRequest(`"${name}" was given more than once`);
  return v;
}

function integer(value: string, name: string, min: number, max: number): number {
  if (!/^\d+$/.test(value) || Number(value) < min || Number(value) > max) throw badRequest(`"${name}" must be an integer from ${min} to ${max}`);
  return Number(value);
}

/** The stream's settings from the query (the gateway checked them already; this end trusts nothing it did not check). */
export function parseLiveQuery(config: Config, query: Record<string, unknown>): LiveOptions {
  const model = (text(query, 'model') ?? 'nsm-2') as ModelId;
  if (!MODEL_IDS.includes(model)) throw badRequest(`"model" must be one of ${MODEL_IDS.join(', ')}`);
  const encoding = (text(query, 'encoding') ?? 'pcm_s16le') as LiveEncoding;
  if (!LIVE_ENCODINGS.includes(encoding)) throw badRequest(`"encoding" must be one of ${LIVE_ENCODINGS.join(', ')}`);
  const limit = Number(text(query, 'attenuation_limit_db') ?? config.defaultAttenuationLimitDb);
  if (!Number.isFinite(limit) || limit < 0 || limit > 100) throw badRequest('"attenuation_limit_db" must be a number from 0 to 100');
  const options: LiveOptions = {
    model,
    sampleRate: integer(text(query, 'sample_rate') ?? '16000', 'sample_rate', 8000, 48000),
    encoding,
    channels: integer(text(query, 'channels') ?? '1', 'channels', 1, 2),
    attenuationLimitDb: limit,
  };
  assertModelInstalled(config, model);
  return options;
}

/** One live stream between the gateway's socket and the engine. */
class LiveConnection {
  private ws: WebSocket | null = null;
  private live: LiveStream | null = null;
  private readonly frame: number;
  private bytesIn = 0;
  private bytesOut = 0;
  /** Output handed to the socket and not yet flushed to it. */
  private unflushed = 0;
  private paused = false;
  private ending = false;
  private over = false;
  /** A fault that came before the socket was accepted. */
  private early: { message: string; code: number } | null = null;
  private resolveClosed!: () => void;
  readonly closed = new Promise<void>((resolve) => (this.resolveClosed = resolve));
  readonly sink: LiveSink = {
    output: (bytes) => this.output(bytes),
    error: (err) => this.fail(`denoising failed: ${err.message}`, CLOSE.internal),
  };

  constructor(opts: LiveOptions) {
    this.frame = LIVE_SAMPLE_BYTES[opts.encoding] * opts.channels;
  }

  start(ws: WebSocket, live: LiveStream): void {
    this.ws = ws;
    this.live = live;
    ws.on('message', (data: Buffer, isBinary) => {
      try {
        this.onMessage(data, isBinary);
      } catch (err) {
        // A defect ends this stream only (a throw from a socket's listener would end the process).
        this.fail(`the stream failed: ${(err as Error).message}`, CLOSE.internal);
      }
    });
    ws.on('close', () => this.end());
    ws.on('error', () => undefined); // 'close' follows
    if (this.early) return this.fail(this.early.message, this.early.code);
    ws.send(JSON.stringify({ type: 'ready', latency_samples: live.latencySamples }));
  }

  /** Closes the stream with an error message and `code`. */
  fail(message: string, code: number): void {
    if (this.over) return;
    const ws = this.ws;
    if (!ws) {
      this.early ??= { message, code };
      return;
    }
    if (ws.readyState === WebSocket.OPEN) {
      ws.send(JSON.stringify({ type: 'error', message }));
      ws.close(code, message.slice(0, 100));
    }
    this.end();
  }

  private onMessage(data: Buffer, isBinary: boolean): void {
    if (this.over || this.ending) return;
    if (!isBinary) {
      let type: unknown;
      try {
        type = (JSON.parse(data.toString('utf8')) as { type?: unknown }).type;
      } catch {
        type = undefined;
      }
      if (type !== 'end') return this.fail('a text message must be {"type":"end"}', CLOSE.invalidData);
      this.ending = true;
      this.live!.end().then(() => {
        if (this.over || this.ws?.readyState !== WebSocket.OPEN) return;
        this.ws.send(JSON.stringify({ type: 'done' }));
        this.ws.close(CLOSE.normal, 'done');
      }, () => undefined);
      return;
    }
    if (data.length % this.frame !== 0) return this.fail(`a binary message must hold whole ${this.frame}-byte frames`, CLOSE.invalidData);
    this.bytesIn += data.length;
    this.live!.push(new Uint8Array(data.buffer, data.byteOffset, data.byteLength));
    this.flow();
  }

  private output(bytes: Uint8Array): void {
    const ws = this.ws;
    if (this.over || !ws || ws.readyState !== WebSocket.OPEN) return;
    const n = bytes.byteLength;
    this.bytesOut += n;
    this.unflushed += n;
    ws.send(bytes, { binary: true }, () => {
      this.unflushed -= n;
      this.flow();
    });
    this.flow();
  }

  /** Stops reading the socket while too much of this stream is inside; reads again once most of it went out. */
  private flow(): void {
    const ws = this.ws;
    if (!ws || this.over) return;
    const inside = this.bytesIn - this.bytesOut + this.unflushed;
    if (!this.paused && inside > LIVE_HIGH_WATER) {
      this.paused = true;
      ws.pause();
    } else if (this.paused && inside < LIVE_LOW_WATER) {
      this.paused = false;
      ws.resume();
    }
  }

  /** The socket closed (or is closing): the engine's side of the stream goes too. */
  private end(): void {
    if (this.over) return;
    this.over = true;
    if (this.paused) this.ws?.resume();
    this.live?.abort();
    this.resolveClosed();
  }
}

export function createLiveStreamEndpoint(deps: LiveEndpointDeps): LiveEndpoint {
  const { config, engine, log } = deps;
  // Frames of up to 1 MiB: the gateway relays its client's messages, which it caps at the same size.
  const wss = new WebSocketServer({ noServer: true, maxPayload: 1024 * 1024, perMessageDeflate: false });
  const open = new Set<LiveConnection>();
  let draining = false;
  const router = express.Router();

  router.get(LIVE_STREAM_PATH, (req: Request, res: Response) => {
    const upgrade = pendingUpgrade(req);
    if (!upgrade || String(req.headers.upgrade ?? '').toLowerCase() !== 'websocket') {
      sendDetail(res, 426, `${LIVE_STREAM_PATH} is a WebSocket: send "Connection: Upgrade" and "Upgrade: websocket"`, 'invalid_request');
      return;
    }
    let opts: LiveOptions;
    try {
      opts = parseLiveQuery(config, req.query as Record<string, unknown>);
    } catch (err) {
      if (err instanceof HttpError) return sendHttpError(res, err);
      throw err;
    }
    if (!engine.openLive || draining) {
      res.setHeader('Retry-After', '2');
      sendDetail(res, 503, draining ? 'the model service is shutting down' : 'this engine has no live streams', 'unavailable');
      return;
    }
    const conn = new LiveConnection(opts);
    const { socket } = upgrade;
    engine.openLive(opts, conn.sink).then(
      (live) => {
        // Gone while the stream opened, or a handshake ws refuses (it then calls back never): the stream goes too.
        const drop = (): void => live.abort();
        if (!socket.readable || !socket.writable || draining) {
          drop();
          socket.destroy();
          return;
        }
        res.detachSocket(socket);
        socket.once('close', drop);
        try {
          wss.handleUpgrade(req, socket, upgrade.claim(), (ws) => {
            socket.off('close', drop);
            socket.resume();
            open.add(conn);
            void conn.closed.then(() => open.delete(conn));
            conn.start(ws, live);
          });
        } catch (err) {
          log(`[model-service] a live stream's upgrade failed: ${(err as Error).message}`);
          socket.destroy();
        }
      },
      (err: Error) => {
        log(`[model-service] could not open a live stream: ${err.message}`);
        res.setHeader('Retry-After', '2');
        sendDetail(res, 503, `could not open a live stream: ${err.message}`, 'unavailable');
      },
    );
  });

  return {
    router,
    active: () => open.size,
    startDraining(graceMs: number) {
      if (draining) return;
      draining = true;
      const closeAll = (): void => {
        for (const conn of open) conn.fail('the model service is restarting', CLOSE.restarting);
      };
      if (open.size === 0) return;
      setTimeout(closeAll, graceMs).unref();
    },
  };
}
