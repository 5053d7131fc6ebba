// The model service's live endpoint for the gateway: GET /internal/stream upgraded to a WebSocket runs one live
// stream on this engine (engine.openLive, batched with the other live streams). The gateway keeps the public protocol,
// client auth, limits, credits and the request log (src/streaming); this end only denoises, in order.
//
// Internal protocol (version 1), after the guard (MODEL_SERVICE_TOKEN, draining):
//   query: the public one's settings (live-protocol/query.ts, read by the same parser); refused before the upgrade
//   with {"detail"}: 400 bad query, 422 model not installed, 503 no live stream could be opened (no worker, draining);
//   after it: {"type":"ready","latency_samples":N}; binary audio (whole frames of the encoding: PCM, μ-law or A-law)
//   in → binary audio in the same encoding out, in order; with vad=true, {"type":"speech_start"|"speech_end","at_ms",
//   "decided_ms"} text messages after the output of the tick that decided them;
//   {"type":"end"} → the rest flushed, {"type":"done"}, close 1000. A fault: {"type":"error","message"} then close
//   1011 (1007 for input that is not whole frames). At shutdown open streams get SHUTDOWN_GRACE_MS, then 1012.
//   (The messages and close codes: live-protocol/messages.ts and close.ts; the phases: live-protocol/phases.ts.)
// Bounded buffering: while more than LIVE_HIGH_WATER bytes of a stream are inside this process (received and not yet
// sent back and flushed to the socket), its socket is not read, so TCP pushes back on the gateway.
import express, { type Request, type Response } from 'express';
import WebSocket, { WebSocketServer } from 'ws';
import type { Config } from '../config';
import type { InferenceEngine, LiveOptions, LiveSink, LiveStream } from '../inference/types';
import { CLOSE } from '../live-protocol/close';
import { parseClientText, replicaDone, replicaError, replicaReady, speechMessage, type ReplicaMessage } from '../live-protocol/messages';
import { LivePhases } from '../live-protocol/phases';
import { inputFrameBytes, LiveQueryError, outputFrameBytes, parseLiveQuery } from '../live-protocol/query';
import { badRequest, HttpError, sendDetail, sendHttpError } from './http-error';
import { assertModelInstalled } from './params';
import { assertVadInstalled } from './speech-params';
import { pendingUpgrade } from '../http/upgrades';

export const LIVE_STREAM_PATH = '/internal/stream';
/** Pause reading a stream's socket above this many bytes inside; resume below LIVE_LOW_WATER. */
export const LIVE_HIGH_WATER = 1024 * 1024;
export const LIVE_LOW_WATER = 256 * 1024;

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

/** The stream's settings from the query (the gateway checked them already; this end trusts nothing it did not check). */
function settingsOf(config: Config, query: Record<string, unknown>): LiveOptions {
  let options: LiveOptions;
  try {
    options = parseLiveQuery(query, config.defaultAttenuationLimitDb);
  } catch (err) {
    if (err instanceof LiveQueryError) throw badRequest(err.message);
    throw err;
  }
  assertModelInstalled(config, options.model);
  if (options.vad) assertVadInstalled(config);
  return options;
}

/** One live stream between the gateway's socket and the engine; its phase as the gateway's session's (phases.ts). */
class LiveConnection {
  private readonly phases = new LivePhases();
  private ws: WebSocket | null = null;
  private live: LiveStream | null = null;
  private readonly frame: number;
  private bytesIn = 0;
  private bytesOut = 0;
  /** Output handed to the socket and not yet flushed to it. */
  private unflushed = 0;
  /** The gateway's socket is not being read (LIVE_HIGH_WATER). */
  private paused = false;
  /** A fault that came before the socket was accepted. */
  private early: { message: string; code: number } | null = null;
  private resolveClosed!: () => void;
  readonly closed = new Promise<void>((resolve) => (this.resolveClosed = resolve));
  readonly sink: LiveSink = {
    output: (bytes) => this.output(bytes),
    event: (e) => {
      if (!this.phases.over && this.ws?.readyState === WebSocket.OPEN) this.sendJson(speechMessage(e));
    },
    error: (err) => this.fail(`denoising failed: ${err.message}`, CLOSE.internal),
  };

  constructor(opts: LiveOptions) {
    this.frame = inputFrameBytes(opts);
    this.outFrame = outputFrameBytes(opts);
  }

  /** Bytes of one output frame (less than an input frame's when the input carries an echo reference). */
  private readonly outFrame: number;

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
    this.phases.to('live');
    this.sendJson(replicaReady(live.latencySamples));
  }

  /** Closes the stream with an error message and `code`. */
  fail(message: string, code: number): void {
    if (this.phases.over) return;
    const ws = this.ws;
    if (!ws) {
      this.early ??= { message, code };
      return;
    }
    if (ws.readyState === WebSocket.OPEN) {
      this.sendJson(replicaError(message));
      ws.close(code, message.slice(0, 100));
    }
    this.end(true);
  }

  private sendJson(message: ReplicaMessage): void {
    this.ws!.send(JSON.stringify(message));
  }

  private onMessage(data: Buffer, isBinary: boolean): void {
    if (this.phases.now !== 'live') return;
    if (!isBinary) {
      const read = parseClientText(data.toString('utf8'));
      if ('refused' in read) return this.fail(read.refused, CLOSE.invalidData);
      // `end`: the engine flushes (ending and flushing are one step here: nothing waits for credits).
      this.phases.to('ending');
      this.phases.to('flushing');
      this.live!.end().then(() => {
        if (this.phases.over || this.ws?.readyState !== WebSocket.OPEN) return;
        this.sendJson(replicaDone(this.live!.echo?.()));
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
    if (this.phases.over || !ws || ws.readyState !== WebSocket.OPEN) return;
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
    if (!ws || this.phases.over) return;
    // In input bytes: an echo reference's channel comes in and never goes out.
    const inside = this.bytesIn - ((this.bytesOut - this.unflushed) / this.outFrame) * this.frame;
    if (!this.paused && inside > LIVE_HIGH_WATER) {
      this.paused = true;
      ws.pause();
    } else if (this.paused && inside < LIVE_LOW_WATER) {
      this.paused = false;
      ws.resume();
    }
  }

  /** The socket closed (or is closing, `failed`: after a fault): the engine's side of the stream goes too. */
  private end(failed = false): void {
    if (this.phases.over) return;
    this.phases.to(failed ? 'failed' : 'done');
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
      opts = settingsOf(config, req.query as Record<string, unknown>);
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
