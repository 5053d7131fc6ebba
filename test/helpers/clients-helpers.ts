// Helpers for the client-library tests (clients/typescript, clients/python, docs/examples/twilio-bridge): the real
// server as a process (dist/src/server.js) in a temporary DATA_DIR on a loopback port, keys made in its store, the
// TypeScript client built with its own tsconfig, a folder where driver scripts import `nsm-client` as an installed
// package would be, driver processes (node, python3) and a loopback proxy that can cut or refuse answers.
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { WebSocketServer, type WebSocket } from 'ws';
import { PROJECT_ROOT, type Config } from '../../src/config';
import { openSqliteStore } from '../../src/store/gateway/sqlite';
import { freePort } from '../../scripts/lib/free-port';
import { eventually, testConfig } from './service-helpers';
import { makeTmpDir } from './audio-helpers';

export const TS_CLIENT = path.join(PROJECT_ROOT, 'clients/typescript');
export const PY_CLIENT = path.join(PROJECT_ROOT, 'clients/python');
export const BRIDGE = path.join(PROJECT_ROOT, 'docs/examples/twilio-bridge');
/** Debian's python3 (where python3-websockets is installed); another python3 on the PATH otherwise. */
export const PYTHON = fs.existsSync('/usr/bin/python3') ? '/usr/bin/python3' : 'python3';

export interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
  /** The last stdout line, parsed as JSON (drivers print their report there). */
  report: any;
}

/** Runs a program to its end (asynchronously: the server may live in this process's event loop). */
export function run(cmd: string, args: string[], opts: { cwd?: string; env?: Record<string, string>; timeoutMs?: number; onStdout?: (text: string) => void } = {}): Promise<Run> {
  return new Promise((resolve, reject) => {
    const child = spawn(cmd, args, { cwd: opts.cwd, env: { ...process.env, ...opts.env }, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    const timer = setTimeout(() => child.kill('SIGKILL'), opts.timeoutMs ?? 100_000);
    child.stdout!.on('data', (d: Buffer) => {
      stdout += d.toString();
      opts.onStdout?.(stdout);
    });
    child.stderr!.on('data', (d: Buffer) => (stderr += d.toString()));
    child.on('error', reject);
    child.on('close', (code) => {
      clearTimeout(timer);
      const last = stdout.trim().split('\n').pop() ?? '';
      let report: any = null;
      try {
        report = JSON.parse(last);
      } catch {
        // no report: the assertions on `code` and `stderr` say why
      }
      resolve({ code, stdout, stderr, report });
    });
  });
}

let built: Promise<void> | null = null;

/** Compiles clients/typescript with its own tsconfig (ESM + .d.ts into clients/typescript/dist), once per process. */
export function buildTsClient(): Promise<void> {
  built ??= run(process.execPath, [path.join(PROJECT_ROOT, 'node_modules/typescript/bin/tsc'), '-p', path.join(TS_CLIENT, 'tsconfig.json')], { timeoutMs: 120_000 }).then((r) => {
    if (r.code !== 0) throw new Error(`tsc -p clients/typescript failed:\n${r.stdout}${r.stderr}`);
  });
  return built;
}

/**
 * A folder laid out as after `npm install nsm-client ws alawmulaw` (links, nothing downloaded), where driver
 * scripts import the client by its package name.
 */
export function installDir(prefix: string): string {
  const dir = makeTmpDir(prefix);
  const nm = path.join(dir, 'node_modules');
  fs.mkdirSync(nm);
  fs.symlinkSync(TS_CLIENT, path.join(nm, 'nsm-client'));
  for (const pkg of ['ws', 'alawmulaw']) fs.symlinkSync(path.join(PROJECT_ROOT, 'node_modules', pkg), path.join(nm, pkg));
  return dir;
}

export interface ServerProcess {
  url: string;
  config: Config;
  /** A key of a new workspace; `rpm` makes it an enterprise workspace with that many requests per minute. */
  token(opts?: { rpm?: number; scopes?: string[] }): Promise<string>;
  /** Credits used this month by the workspace of a key made here. */
  creditsUsed(token: string): Promise<number>;
  /** The stored id of a key made here (what the gateway's rate-limit window is kept under). */
  keyId(token: string): string;
  stop(): Promise<void>;
}

/** `npm start`'s server (dist/src/server.js) as a process, in a temporary DATA_DIR, on a loopback port. */
export async function startServer(env: Record<string, string> = {}): Promise<ServerProcess> {
  const config = testConfig();
  const port = await freePort();
  const child: ChildProcess = spawn(process.execPath, [path.join(PROJECT_ROOT, 'dist/src/server.js')], {
    env: { ...process.env, PORT: String(port), HOST: '127.0.0.1', DATA_DIR: config.dataDir, WORKERS: '1', NODE_ENV: 'test', ADMIN_SECRET: 'x', LOG_REQUESTS: 'false', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  child.stdout!.on('data', (d: Buffer) => (output = (output + d.toString()).slice(-20_000)));
  child.stderr!.on('data', (d: Buffer) => (output = (output + d.toString()).slice(-20_000)));
  await eventually(() => output.includes('listening on') || child.exitCode !== null, 60_000).catch(() => undefined);
  if (!output.includes('listening on')) {
    child.kill('SIGKILL');
    throw new Error(`server did not start:\n${output}`);
  }
  // A server that dies under a test shows up as refused connections in the drivers: say why, with its last output.
  let stopping = false;
  child.once('exit', (code, signal) => {
    if (!stopping) console.error(`the server (pid ${child.pid}) exited during the test: code ${code}, signal ${signal}; its last output:\n${output}`);
  });
  const store = openSqliteStore(config);
  const workspaces = new Map<string, string>();
  const keyIds = new Map<string, string>();
  return {
    url: `http://127.0.0.1:${port}`,
    config,
    async token(opts = {}) {
      const ws = await store.createWorkspace(`clients-${Math.random().toString(36).slice(2)}`, opts.rpm ? 'enterprise' : 'scale', opts.rpm ? { requestsPerMinute: opts.rpm } : undefined);
      const { token, record } = await store.createToken({ workspaceId: ws.id, name: 'clients', scopes: opts.scopes ?? ['*'], allowedIps: [], expiresAt: null });
      workspaces.set(token, ws.id);
      keyIds.set(token, record.id);
      return token;
    },
    keyId(token) {
      return keyIds.get(token)!;
    },
    async creditsUsed(token) {
      return store.creditsUsed(workspaces.get(token)!, new Date());
    },
    async stop() {
      stopping = true;
      await store.close();
      if (child.exitCode === null) {
        const exited = new Promise((r) => child.once('exit', r));
        child.kill('SIGTERM');
        const force = setTimeout(() => child.kill('SIGKILL'), 15_000);
        await exited;
        clearTimeout(force);
      }
      fs.rmSync(config.dataDir, { recursive: true, force: true });
    },
  };
}

export interface ProxyRequest {
  method: string;
  url: string;
  range: string | null;
  status: number;
  /** What the proxy did: 'passed', 'cut' (after `cutAfter` body bytes) or 'refused' (answered itself). */
  action: 'passed' | 'cut' | 'refused';
}

export interface ProxyRules {
  /** Cut the body of the answers to the first `times` (1) requests whose URL matches and that carry no Range (fresh
   * downloads, not resumes), after `after` bytes. */
  cut?: { match: RegExp; after: number; times?: number };
  /** Answer requests matching `match` (method and path, e.g. "POST /v1/...") itself, `times` times, as a proxy in
   * front of the gateway would: a bare 502 page, or any status and body. */
  refuse?: Array<{ match: RegExp; times: number; status: number; body: string; headers?: Record<string, string> }>;
}

/** A loopback HTTP proxy in front of `target` that logs requests and applies `rules`. */
export async function startProxy(target: string, rules: ProxyRules): Promise<{ url: string; requests: ProxyRequest[]; close(): Promise<void> }> {
  const requests: ProxyRequest[] = [];
  let cuts = 0;
  const refusals = (rules.refuse ?? []).map((r) => ({ ...r, left: r.times }));
  const server = http.createServer((req, res) => {
    const entry: ProxyRequest = { method: req.method!, url: req.url!, range: (req.headers.range as string) ?? null, status: 0, action: 'passed' };
    requests.push(entry);
    const refusal = refusals.find((r) => r.left > 0 && r.match.test(`${req.method} ${req.url}`));
    if (refusal) {
      refusal.left--;
      entry.status = refusal.status;
      entry.action = 'refused';
      req.resume();
      req.on('end', () => {
        res.writeHead(refusal.status, { 'Content-Type': 'text/html', ...refusal.headers });
        res.end(refusal.body);
      });
      return;
    }
    const up = http.request(target + req.url, { method: req.method, headers: req.headers }, (ur) => {
      entry.status = ur.statusCode!;
      res.writeHead(ur.statusCode!, ur.headers);
      const cut = rules.cut && cuts < (rules.cut.times ?? 1) && !req.headers.range && rules.cut.match.test(req.url!) ? rules.cut.after : null;
      if (cut === null) {
        ur.pipe(res);
        return;
      }
      cuts++;
      entry.action = 'cut';
      let sent = 0;
      ur.on('data', (chunk: Buffer) => {
        if (sent >= cut) return;
        const part = chunk.subarray(0, cut - sent);
        sent += part.length;
        res.write(part);
        if (sent >= cut) {
          ur.destroy();
          // let the bytes out, then break the connection (as a dropped link would)
          setTimeout(() => res.socket?.destroy(), 50);
        }
      });
    });
    up.on('error', () => res.destroy());
    req.pipe(up);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    requests,
    close: () =>
      new Promise((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/** A loopback HTTP server that accepts requests and never answers (a URL job that stays active while it waits). */
export async function startStallingServer(): Promise<{ url: string; close(): Promise<void> }> {
  const server = http.createServer(() => undefined);
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/slow.wav`,
    close: () =>
      new Promise((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/** A loopback WebSocket server standing in for a peer the clients talk to (a fake agent, a server misbehaving on
 * demand): `onConnection` gets each socket and its upgrade request. `path` limits the upgrades it accepts. */
export async function startWsStandIn(
  onConnection: (ws: WebSocket, req: http.IncomingMessage) => void,
  path?: string,
): Promise<{ url: string; close(): Promise<void> }> {
  const server = http.createServer();
  const wss = new WebSocketServer({ server, ...(path ? { path } : {}) });
  wss.on('connection', onConnection);
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    close: () =>
      new Promise((resolve) => {
        for (const c of wss.clients) c.terminate();
        wss.close();
        server.close(() => resolve());
      }),
  };
}
