// WebSocket upgrades go through the same request handler as ordinary requests, so whatever checks a server's requests
// (the gateway's policies, the model service's guard) applies to them unchanged: the upgrade's socket rides on the
// request, a synthetic response writes any refusal onto that socket, and the endpoint that accepts takes it over.
// Node hands an upgrade request over raw after its headers: a body would never reach the request object, so an
// upgrade request that declares one is refused at once (400), before any handler holds a slot for it. While an
// upgrade is pending its socket is read (bytes kept for the WebSocket, bounded), so a client that leaves is noticed
// at once; and the sockets are tracked, because Node's closeAllConnections() does not see them (shutdown).
import http from 'node:http';
import type net from 'node:net';
import { endWithEnvelope } from './client-errors';
import { newRequestId } from './request-id';

const UPGRADE = Symbol('upgrade');
/** Bytes a client may send after an upgrade request before the upgrade is decided; beyond, the connection is dropped. */
const MAX_EARLY_BYTES = 64 * 1024;
/** After a plain answer on an upgrade's socket: how long the client gets to close its side before it is dropped. */
const LINGER_MS = 2_000;

/** The raw connection of an upgrade request, until an endpoint accepts it. */
export interface PendingUpgrade {
  socket: net.Socket;
  /** Bytes that came after the request's headers (so far). */
  head: Buffer;
  /**
   * Stops watching the socket and pauses it; returns everything it sent after the headers. Call right before
   * handing the socket to `ws.handleUpgrade`, and `socket.resume()` in its callback.
   */
  claim(): Buffer;
}

type UpgradeRequest = http.IncomingMessage & { [UPGRADE]?: PendingUpgrade };

const tracked = new WeakMap<http.Server, Set<net.Socket>>();

/** Whether the request declares a body (Content-Length other than 0, or Transfer-Encoding). */
function declaresBody(req: http.IncomingMessage): boolean {
  const length = req.headers['content-length'];
  return (length !== undefined && length.trim() !== '0') || req.headers['transfer-encoding'] !== undefined;
}

/** Hands `server`'s upgrade requests to `handler` as ordinary requests with a response bound to their socket. */
export function routeUpgrades(server: http.Server, handler: http.RequestListener): void {
  const sockets = new Set<net.Socket>();
  tracked.set(server, sockets);
  server.on('upgrade', (req: UpgradeRequest, socket: net.Socket, head: Buffer) => {
    sockets.add(socket);
    socket.once('close', () => sockets.delete(socket));
    socket.on('error', () => socket.destroy());
    if (declaresBody(req)) {
      endWithEnvelope(
        socket,
        { status: 400, reason: 'Bad Request', type: 'invalid_request', message: upgradeWithBodyMessage() },
        newRequestId(),
      );
      socket.resume(); // read (and drop) the body it may be sending, so that it gets to read the answer
      return;
    }
    const pending: PendingUpgrade = {
      socket,
      head,
      claim() {
        socket.off('data', onData);
        socket.off('end', onEnd);
        socket.pause();
        return pending.head;
      },
    };
    // A client that leaves (FIN) while its upgrade is decided: the socket closes, and with it the response ('close').
    const onData = (chunk: Buffer): void => {
      pending.head = pending.head.length === 0 ? chunk : Buffer.concat([pending.head, chunk]);
      if (pending.head.length > MAX_EARLY_BYTES) socket.destroy();
    };
    const onEnd = (): void => void socket.destroy();
    socket.on('data', onData);
    socket.on('end', onEnd);
    req[UPGRADE] = pending;
    const res = new http.ServerResponse(req);
    res.assignSocket(socket);
    res.shouldKeepAlive = false;
    // A refusal (or a plain answer) is the whole answer: the connection closes after it.
    res.on('finish', () => {
      pending.claim();
      socket.end();
      socket.resume(); // read (and drop) until the client's FIN, so that the close completes
      const linger = setTimeout(() => socket.destroy(), LINGER_MS);
      linger.unref();
      socket.once('close', () => clearTimeout(linger));
    });
    handler(req, res);
  });
}

/** Why an upgrade request with a body is refused (also in docs/api.md). */
function upgradeWithBodyMessage(): string {
  return (
    'A request with "Connection: Upgrade" cannot carry a body here: only GET /v1/noise-suppressor/stream is upgraded ' +
    '(to a WebSocket). Send this request without the Upgrade header (curl: --http1.1 instead of --http2 on http://).'
  );
}

/** The pending upgrade of a request that came through routeUpgrades (undefined for ordinary requests). */
export function pendingUpgrade(req: http.IncomingMessage): PendingUpgrade | undefined {
  return (req as UpgradeRequest)[UPGRADE];
}

/**
 * server.closeAllConnections() and the sockets taken through 'upgrade' (pending upgrades and WebSockets), which Node
 * no longer counts as its connections but which keep server.close() from completing.
 */
export function closeEveryConnection(server: http.Server): void {
  server.closeAllConnections();
  for (const socket of tracked.get(server) ?? []) socket.destroy();
}
