// Shared by the gateway-policy-*.test.ts unit tests: a real Express request/response pair with no server (an
// in-memory socket carries the bytes both ways), a call built from it as the gateway builds one, a real SQLite store
// in a temp dir, keys made in it, and a clock the test moves by hand.
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { Duplex } from 'node:stream';
import express, { type Request, type Response } from 'express';
import type { AuthenticatedCall, Call, RoutedCall } from '../../src/gateway/call';
import { limitsFor } from '../../src/gateway/plans';
import { matchRoute, ROUTES } from '../../src/gateway/routes';
import type { EndpointSpec, GatewayContext } from '../../src/gateway/types';
import { clientIpOf } from '../../src/http/ip';
import { loggerToCallback, type Logger } from '../../src/logging';
import { openSqliteStore } from '../../src/store/gateway/sqlite';
import type { GatewayStore, NewToken, PlanId, TokenRecord, Workspace } from '../../src/store/gateway/types';

/** A socket that keeps what the response writes; destroying it is the client going away. */
class MemorySocket extends Duplex {
  readonly written: Buffer[] = [];
  constructor(readonly remoteAddress: string) {
    super();
  }
  override _read(): void {}
  override _write(chunk: Buffer, _encoding: BufferEncoding, done: () => void): void {
    this.written.push(chunk);
    done();
  }
  setTimeout(): this {
    return this;
  }
  setNoDelay(): this {
    return this;
  }
  setKeepAlive(): this {
    return this;
  }
}

/** A response as it went out on the wire. */
export interface Sent {
  status: number;
  /** Header names in lower case. */
  headers: Record<string, string>;
  text: string;
  /** The parsed body when it was JSON. */
  json: any;
}

export interface Exchange {
  call: Call;
  /** Resolves once the response finished ('finish'), with what was written to the socket. */
  response: Promise<Sent>;
  /** The client goes away (the socket closes). */
  abort(): void;
}

export interface ExchangeOptions {
  method?: string;
  path: string;
  headers?: Record<string, string>;
  body?: Buffer | string;
  clientIp?: string;
  now?: () => number;
}

/** A request as Express hands it to the gateway, and the call the gateway would make of it. */
export async function exchange(opts: ExchangeOptions): Promise<Exchange> {
  const socket = new MemorySocket(opts.clientIp ?? '203.0.113.9');
  const rawReq = new http.IncomingMessage(socket as never);
  rawReq.method = opts.method ?? 'GET';
  rawReq.url = opts.path;
  rawReq.headers = { ...opts.headers };
  // Set by the HTTP parser when the whole body arrived; without it the finished request closes its socket.
  rawReq.complete = true;
  if (opts.body !== undefined) rawReq.push(Buffer.from(opts.body));
  rawReq.push(null);
  const rawRes = new http.ServerResponse(rawReq);
  rawRes.assignSocket(socket as never);
  const { req, res } = await new Promise<{ req: Request; res: Response }>((resolve, reject) => {
    const app = express();
    app.use((req, res) => resolve({ req, res }));
    // The app as Node's server would call it: it makes the raw pair into Express's request and response.
    const handle = app as unknown as (req: http.IncomingMessage, res: http.ServerResponse, next: (err?: unknown) => void) => void;
    handle(rawReq, rawRes, (err) => reject(err ?? new Error('the request was passed on')));
  });
  const response = new Promise<Sent>((resolve) => res.once('finish', () => resolve(parse(Buffer.concat(socket.written).toString('utf8')))));
  const now = opts.now ?? Date.now;
  const ctx: GatewayContext = { requestId: '', startedAt: now(), clientIp: clientIpOf(req, 0), creditsCharged: 0, bytesIn: 0, bytesOut: 0 };
  res.locals.gateway = ctx;
  return { call: { req, res, ctx }, response, abort: () => socket.destroy() };
}

function parse(wire: string): Sent {
  const split = wire.indexOf('\r\n\r\n');
  const [statusLine, ...lines] = wire.slice(0, split).split('\r\n');
  const headers: Record<string, string> = {};
  for (const line of lines) {
    const colon = line.indexOf(':');
    headers[line.slice(0, colon).toLowerCase()] = line.slice(colon + 1).trim();
  }
  const text = wire.slice(split + 4);
  let json: unknown;
  if (headers['content-type']?.startsWith('application/json')) json = JSON.parse(text);
  return { status: Number(statusLine.split(' ')[1]), headers, text, json };
}

/** The call once the route policy matched it (the path must be a published endpoint). */
export function routed(call: Call, routes: EndpointSpec[] = ROUTES): RoutedCall {
  const match = matchRoute(call.req.method, call.req.path, routes);
  if (match.kind !== 'ok') throw new Error(`${call.req.method} ${call.req.path} is not a route (${match.kind})`);
  call.ctx.route = match.route;
  call.ctx.params = match.params;
  return Object.assign(call, { match, route: match.route });
}

/** The call once the authentication policy accepted the key. */
export function authenticated(call: RoutedCall, key: Key): AuthenticatedCall {
  call.ctx.tokenId = key.record.id;
  call.ctx.workspaceId = key.workspace.id;
  call.ctx.keyPrefix = key.record.prefix;
  return Object.assign(call, { token: key.record, workspace: key.workspace, limits: limitsFor(key.workspace) });
}

export interface TestStore {
  store: GatewayStore;
  close(): Promise<void>;
}

/** A fresh SQLite gateway store in its own temp directory. */
export function openTestStore(): TestStore {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'gateway-policy-'));
  const store = openSqliteStore({ dataDir });
  return {
    store,
    async close() {
      await store.close();
      fs.rmSync(dataDir, { recursive: true, force: true });
    },
  };
}

export interface Key {
  /** The clear token, as a client presents it. */
  token: string;
  record: TokenRecord;
  workspace: Workspace;
}

export interface KeyOptions extends Partial<Omit<NewToken, 'workspaceId'>> {
  plan?: PlanId;
  custom?: { requestsPerMinute?: number; creditsPerMonth?: number };
}

/** A workspace and a key in it (defaults: enterprise plan, every scope, any address, no expiry). */
export async function newKey(store: GatewayStore, opts: KeyOptions = {}): Promise<Key> {
  const { plan = 'enterprise', custom, ...token } = opts;
  const workspace = await store.createWorkspace(`ws-${Math.random().toString(36).slice(2)}`, plan, custom);
  const made = await store.createToken({ workspaceId: workspace.id, name: 'test', scopes: ['*'], allowedIps: [], expiresAt: null, ...token });
  return { token: made.token, record: made.record, workspace };
}

/** A clock only the test moves. */
export function testClock(start = Date.parse('2026-03-10T12:00:00.000Z')): { now: () => number; advance(ms: number): void } {
  let t = start;
  return {
    now: () => t,
    advance(ms: number) {
      t += ms;
    },
  };
}

/** A logger whose JSON lines the test can read. */
export function testLogger(): { logger: Logger; lines: string[] } {
  const lines: string[] = [];
  return { logger: loggerToCallback((line) => lines.push(line), 'gateway'), lines };
}
