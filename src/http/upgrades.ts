// WebSocket upgrades go through the same request handler as ordinary requests, so whatever checks a server's requests
// (the gateway's policies, the model service's guard) applies to them unchanged: the upgrade's socket rides on the
// request, a synthetic response writes any refusal onto that socket, and the endpoint that accepts takes it over.
import http from 'node:http';
import type net from 'node:net';

const UPGRADE = Symbol('upgrade');

/** The raw connection of an upgrade request, until an endpoint accepts it. */
export interface PendingUpgrade {
  socket: net.Socket;
  head: Buffer;
}

type UpgradeRequest = http.IncomingMessage & { [UPGRADE]?: PendingUpgrade };

/** Hands `server`'s upgrade requests to `handler` as ordinary requests with a response bound to their socket. */
export function routeUpgrades(server: http.Server, handler: http.RequestListener): void {
  server.on('upgrade', (req: UpgradeRequest, socket: net.Socket, head: Buffer) => {
    socket.on('error', () => socket.destroy());
    req[UPGRADE] = { socket, head };
    const res = new http.ServerResponse(req);
    res.assignSocket(socket);
    res.shouldKeepAlive = false;
    // A refusal is the whole answer: the connection closes after it.
    res.on('finish', () => socket.end());
    handler(req, res);
  });
}

/** The pending upgrade of a request that came through routeUpgrades (undefined for ordinary requests). */
export function pendingUpgrade(req: http.IncomingMessage): PendingUpgrade | undefined {
  return (req as UpgradeRequest)[UPGRADE];
}
