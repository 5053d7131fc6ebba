// Real-time streaming (docs/streaming.md): GET /v1/noise-suppressor/stream upgraded to a WebSocket, through the same
// gateway as every other call. The HTTP server's 'upgrade' requests are handed to the Express app as ordinary GETs
// (attach), so request id, auth, IP list, scope, plan, rate limit and the request log apply unchanged; the gateway's
// route target 'stream' then checks what is particular to streams (query, concurrent streams, the first credit)
// and only then accepts the upgrade. Anything refused is an ordinary HTTP answer with the error envelope.
// Browser tickets and each workspace's stream slots are in the shared state (Redis with several gateways).
// The denoising runs on the in-process engine, or (MODEL_SERVICE_URL) on one model-service replica picked before the
// upgrade, where the stream stays for its life (relay.ts); billing, limits and the request log stay here either way.
import http from 'node:http';
import type { Request, Response } from 'express';
import type net from 'node:net';
import { WebSocketServer, type WebSocket } from 'ws';
import type { Config } from '../config';
import type { ForwardOutcome, GatewayContext } from '../gateway/types';
import { limitsFor } from '../gateway/plans';
import { endWithEnvelope } from '../http/client-errors';
import { sendGatewayError } from '../http/errors';
import { pendingUpgrade, routeUpgrades, type PendingUpgrade } from '../http/upgrades';
import type { InferenceEngine } from '../inference/types';
import type { Logger } from '../logging';
import type { Registry } from '../metrics';
import { TICKET_TTL_MS, type StreamSlots, type StreamTickets } from '../shared-state/streams';
import type { GatewayStore } from '../store/gateway/types';
import type { ModelServiceReplicas } from '../upstream/replicas';
import { CLIENT_GONE_STATUS } from '../upstream/refusals';
import { NoReplicaForStream, StreamRequestRejected } from '../upstream/stream-socket';
import { accessCheck } from './access';
import { StreamCredits } from './credits';
import { LiveQueryError, parseLiveQuery, type LiveParams } from '../live-protocol/query';
import { sendStreamRefusal, StreamRefusal } from './errors';
import { createLeaseKeeper } from './leases';
import { createStreamMetrics, type StreamMetrics } from './metrics';
import { openRelay } from './relay';
import { StreamSession, type LiveSource, type SessionLimits } from './session';

const RETRY_AFTER_S = 5;
/** After the drain closed the streams left: how long their clients get to answer the close handshake. */
const DRAIN_FLUSH_MS = 2_000;

/** Where a stream is denoised, chosen before the upgrade. */
interface Denoiser {
  source: LiveSource;
  /** The upgrade did not happen: let a stream opened ahead go. */
  drop(): void;
}
type UpgradeRequest = http.IncomingMessage & { streamRequestId?: string; handshakeError?: string };

/** What ws requires of a handshake (RFC 6455 4.2.1), checked first so that a refusal is the gateway's envelope. */
const WEBSOCKET_KEY = /^[+/0-9A-Za-z]{22}==$/;

export interface StreamingDeps {
  config: Config;
  store: GatewayStore;
  /** The in-process engine; null when the model service is remote (then `replicas` denoise the streams). */
  engine: InferenceEngine | null;
  /** The model-service replicas (MODEL_SERVICE_URL), for streams when there is no in-process engine. */
  replicas?: ModelServiceReplicas | null;
  /** Stream metrics go here (GET /metrics). */
  registry?: Registry;
  /** Browser tickets (SharedState.streamTickets): issued here, redeemed by the gateway's authentication. */
  tickets: StreamTickets;
  /** Concurrent streams per workspace (SharedState.streamSlots), counted across gateways. */
  slots: StreamSlots;
  /** True while the app drains (/readyz failing, shutdown): new streams are refused with 503. */
  draining?: () => boolean;
  logger: Logger;
  now?: () => number;
}

export interface Streaming {
  /** Gateway route target 'stream': the upgrade itself. */
  handler(req: Request, res: Response, ctx: GatewayContext): Promise<ForwardOutcome>;
  /** Gateway route target 'stream-tickets': POST /stream/tickets. */
  tickets(req: Request, res: Response, ctx: GatewayContext): Promise<ForwardOutcome>;
  /** Sends the server's upgrade requests through `app` (the gateway). */
  attach(server: http.Server, app: (req: http.IncomingMessage, res: http.ServerResponse) => void): void;
  /** The key a ticket stands for (once), for the gateway's authentication. */
  redeemTicket(ticket: string): Promise<string | null>;
  /** Streams open now. */
  active(): number;
  /** No new streams; open ones may finish until `graceMs`, then are closed with 1012. Resolves with how many were. */
  drain(graceMs: number): Promise<number>;
  /** Stops renewing slot leases (the app closes). */
  close(): void;
}

/** The stream's settings from its query (live-protocol/query.ts); a bad one is a 400 before the upgrade. */
function settingsOf(query: Record<string, unknown>, defaultAttenuationLimitDb: number): LiveParams {
  try {
    return parseLiveQuery(query, defaultAttenuationLimitDb);
  } catch (err) {
    if (err instanceof LiveQueryError) throw new StreamRefusal('invalid_request', err.message);
    throw err;
  }
}

export function createStreaming(deps: StreamingDeps): Streaming {
  const { config, store, engine, logger } = deps;
  const replicas = deps.replicas ?? null;
  const now = deps.now ?? Date.now;
  const wss = new WebSocketServer({ noServer: true, maxPayload: 1024 * 1024, perMessageDeflate: false });
  // The 101 carries the call's X-Request-Id like every other answer.
  wss.on('headers', (headers: string[], req: UpgradeRequest) => {
    if (req.streamRequestId) headers.push(`X-Request-Id: ${req.streamRequestId}`);
  });
  // A handshake ws refuses after our own checks passed (a malformed Sec-WebSocket-Protocol, say): the envelope too.
  wss.on('wsClientError', (err: Error, socket: net.Socket, req: UpgradeRequest) => {
    req.handshakeError = err.message;
    endWithEnvelope(socket, { status: 400, reason: 'Bad Request', type: 'invalid_request', message: err.message }, req.streamRequestId ?? '');
  });
  const sessions = new Set<StreamSession>();
  const leases = createLeaseKeeper(deps.slots, logger);
  let draining = false;
  /** The drain's grace is over: streams still open are being closed. */
  let closing = false;
  const limits: SessionLimits = {
    idleMs: config.clientIdleTimeoutMs,
    maxBufferedBytes: 4 * 1024 * 1024,
    maxAudioSeconds: config.maxAudioSeconds,
    maxInsideBytes: 1024 * 1024,
    accessCheckMs: Math.max(250, Math.floor(config.creditReservationTtlMs / 3)),
  };
  const metrics: StreamMetrics | null = deps.registry ? createStreamMetrics(deps.registry, { active: () => sessions.size }) : null;

  async function handler(req: Request, res: Response, ctx: GatewayContext): Promise<ForwardOutcome> {
    const upgrade = pendingUpgrade(req);
    try {
      if (!upgrade || String(req.headers.upgrade ?? '').toLowerCase() !== 'websocket') {
        throw new StreamRefusal('upgrade_required', 'GET /stream is a WebSocket: send "Connection: Upgrade" and "Upgrade: websocket"');
      }
      if (!WEBSOCKET_KEY.test(String(req.headers['sec-websocket-key'] ?? ''))) {
        throw new StreamRefusal('invalid_request', 'missing or invalid Sec-WebSocket-Key header (16 random bytes in base64)');
      }
      if (!['13', '8'].includes(String(req.headers['sec-websocket-version'] ?? '').trim())) {
        res.setHeader('Sec-WebSocket-Version', '13');
        throw new StreamRefusal('invalid_request', 'missing or unsupported Sec-WebSocket-Version header (13 is supported)');
      }
      const params = settingsOf(req.query as Record<string, unknown>, config.defaultAttenuationLimitDb);
      if (draining || deps.draining?.()) throw new StreamRefusal('upstream_unavailable', 'the server is restarting; reconnect shortly', RETRY_AFTER_S);
      if (!engine?.openLive && !replicas) throw new StreamRefusal('upstream_unavailable', 'no model service can run live streams', RETRY_AFTER_S);
      const workspace = ctx.workspaceId ? await store.getWorkspace(ctx.workspaceId) : null;
      if (!workspace) throw new Error('stream without a workspace');
      const limits = limitsFor(workspace);
      const maxStreams = workspace.plan === 'enterprise' ? config.streamsEnterpriseMax : limits.concurrentStreams;
      // The slot is taken first, atomically across gateways; every way out below gives it back.
      const grant = await leases.acquire(workspace.id, maxStreams);
      if (!grant.lease) {
        throw new StreamRefusal('too_many_streams', `the ${workspace.plan} plan allows ${maxStreams} concurrent streams; ${grant.open} are open`, RETRY_AFTER_S);
      }
      try {
        const credits = new StreamCredits(store, workspace.id, limits.creditsPerMonth, config.creditReservationTtlMs, now, logger);
        const first = await credits.hold();
        if (!first.ok) {
          await credits.settle(0);
          if (first.exhausted) {
            ctx.errorType = 'quota_exhausted';
            sendGatewayError(res, 'quota_exhausted', `The workspace has used ${first.used} of its ${first.limit} credits this month; a stream needs 1 credit per started minute.`);
            return { status: 402, ok: false };
          }
          ctx.errorType = 'rate_limited';
          res.setHeader('Retry-After', '2');
          sendGatewayError(res, 'rate_limited', `The workspace's remaining credits are held by calls in flight; retry in 2 s.`);
          return { status: 429, ok: false };
        }
        try {
          const denoiser = await denoiserFor(params, ctx, res);
          if (!denoiser) {
            await credits.settle(0);
            return { status: res.statusCode, ok: false };
          }
          return await run(req, res, ctx, upgrade, params, credits, denoiser);
        } catch (err) {
          // Nothing may stay held (the holds would be renewed for as long as the process lives).
          await credits.settle(0).catch(() => undefined);
          throw err;
        }
      } finally {
        await leases.release(grant.lease);
      }
    } catch (err) {
      if (!(err instanceof StreamRefusal)) throw err;
      const status = sendStreamRefusal(res, err);
      return { status, ok: false };
    }
  }

  /**
   * The denoising side: the in-process engine, or a stream opened on a replica now, before the upgrade (`drop` lets
   * it go if the upgrade does not happen). null when no replica could take it (the refusal was sent).
   */
  async function denoiserFor(params: LiveParams, ctx: GatewayContext, res: Response): Promise<Denoiser | null> {
    if (engine?.openLive) {
      const open = engine.openLive.bind(engine);
      const { model, channels, sampleRate, encoding, attenuationLimitDb, vad, echoReference } = params;
      const opts = { model, channels, sampleRate, encoding, attenuationLimitDb, ...(vad ? { vad } : {}), ...(echoReference ? { echoReference } : {}) };
      return { source: (sink) => open(opts, sink), drop: () => undefined };
    }
    try {
      const relay = await openRelay(replicas!, params, { requestId: ctx.requestId, connectTimeoutMs: config.upstreamConnectTimeoutMs });
      return { source: (sink) => Promise.resolve(relay.bind(sink)), drop: () => relay.abort() };
    } catch (err) {
      if (err instanceof StreamRequestRejected) {
        // The replicas' verdict on the settings (400), or the model is not installed there (422).
        sendStreamRefusal(res, new StreamRefusal(err.status === 422 ? 'model_not_installed' : 'invalid_request', err.detail));
        return null;
      }
      if (!(err instanceof NoReplicaForStream)) throw err;
      const f = err.failure;
      ctx.errorType = f.type;
      ctx.errorDetail = f.message;
      if (f.retryAfter) res.setHeader('Retry-After', f.retryAfter);
      sendGatewayError(res, f.type, f.message, f.status);
      return null;
    }
  }

  async function run(
    req: Request,
    res: Response,
    ctx: GatewayContext,
    upgrade: PendingUpgrade,
    params: LiveParams,
    credits: StreamCredits,
    denoiser: Denoiser,
  ): Promise<ForwardOutcome> {
    /** No stream after all: the client left while it was set up, or ws refused the handshake (`handshakeError`). */
    const notAccepted = async (): Promise<ForwardOutcome> => {
      upgrade.socket.destroy();
      denoiser.drop();
      await credits.settle(0);
      const refused = (req as unknown as UpgradeRequest).handshakeError;
      ctx.logStatus = refused ? 400 : CLIENT_GONE_STATUS;
      if (refused) ctx.errorType = 'invalid_request';
      ctx.errorDetail = refused;
      res.emit('close');
      return { status: ctx.logStatus, ok: false };
    };
    const { socket } = upgrade;
    if (!socket.readable || !socket.writable) return notAccepted();
    // From here the socket is the WebSocket's: the synthetic response must never write to it.
    res.detachSocket(socket);
    (req as unknown as UpgradeRequest).streamRequestId = ctx.requestId;
    const ws = await accept(req, upgrade);
    if (!ws) return notAccepted();
    const meterFor = metrics ? (latency: number) => metrics.meter(params.model, params.sampleRate, latency) : undefined;
    const access = accessCheck(store, { tokenId: ctx.tokenId!, clientIp: ctx.clientIp, route: ctx.route! }, now);
    const session = new StreamSession(ws, params, ctx.requestId, denoiser.source, credits, limits, logger, meterFor, access);
    sessions.add(session);
    session.start();
    // Accepted while the drain was closing the others: closed the same way.
    if (closing) void session.shutdown();
    const result = await session.done;
    sessions.delete(session);
    ctx.logStatus = 101;
    ctx.creditsCharged = result.creditsCharged;
    ctx.bytesIn = result.bytesIn;
    ctx.bytesOut = result.bytesOut;
    if (result.errorType) {
      ctx.errorType = result.errorType;
      ctx.errorDetail = result.errorMessage;
    }
    // For the request observers (metrics): the model and the seconds of audio, as /denoise reports them.
    res.setHeader('X-NS-Stats', JSON.stringify({ model: params.model, duration_s: Math.round(result.inputSeconds * 1000) / 1000 }));
    // The gateway's end hooks (request log) run on the response's 'close'; this response never went out.
    res.emit('close');
    return { status: 101, ok: result.creditsCharged > 0 || !result.errorType };
  }

  /**
   * Completes the handshake on the pending upgrade's socket: the WebSocket, or null when there is none (the client
   * left, or ws refused the handshake: `handshakeError`). ws calls back only on success, so the socket's close decides
   * the other cases.
   */
  function accept(req: Request, upgrade: PendingUpgrade): Promise<WebSocket | null> {
    return new Promise((resolve) => {
      const { socket } = upgrade;
      const gone = (): void => resolve(null);
      socket.once('close', gone);
      try {
        wss.handleUpgrade(req, socket, upgrade.claim(), (ws) => {
          socket.off('close', gone);
          socket.resume();
          resolve(ws);
        });
      } catch (err) {
        logger.error({ err }, 'a stream upgrade failed');
        socket.destroy();
      }
    });
  }

  async function ticketsHandler(_req: Request, res: Response, ctx: GatewayContext): Promise<ForwardOutcome> {
    const issued = await deps.tickets.issue(ctx.tokenId!);
    res.status(201).json({ ticket: issued.ticket, expires_at: new Date(issued.expiresAt).toISOString(), ttl_s: TICKET_TTL_MS / 1000 });
    return { status: 201, ok: true };
  }

  function attach(server: http.Server, app: (req: http.IncomingMessage, res: http.ServerResponse) => void): void {
    // The gateway answers as it would a GET; a refusal goes out on the upgrade's socket and the connection closes.
    routeUpgrades(server, app);
  }


  return {
    handler,
    tickets: ticketsHandler,
    attach,
    redeemTicket: (ticket) => deps.tickets.redeem(ticket),
    active: () => sessions.size,
    async drain(graceMs: number): Promise<number> {
      draining = true;
      const until = now() + graceMs;
      while (sessions.size > 0 && now() < until) await new Promise((r) => setTimeout(r, 50));
      closing = true;
      const left = [...sessions];
      await Promise.all(left.map((s) => s.shutdown()));
      // Clients get a moment to answer the close handshake; a socket still open after it is dropped.
      const flushUntil = now() + DRAIN_FLUSH_MS;
      while (wss.clients.size > 0 && now() < flushUntil) await new Promise((r) => setTimeout(r, 50));
      for (const ws of wss.clients) ws.terminate();
      wss.close();
      leases.stop();
      return left.length;
    },
    close: () => leases.stop(),
  };
}
