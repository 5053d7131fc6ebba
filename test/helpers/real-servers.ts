// Real PostgreSQL and Redis servers for the tests, from Debian's packages (installed by `npm test`'s prerequisites
// step, scripts/test-prereqs.js, when missing and running as root; located by scripts/server-binaries.js). Each server runs as a child process of the test, in a temporary directory, on a
// loopback port, with throwaway settings (no fsync, no persistence); stop() ends it and removes the directory.
// initdb and postgres refuse to run as root: as root they run as the `postgres` system user the package creates
// (else `nobody`), which owns the temporary directory.
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Client } from 'pg';
import { createClient } from '@redis/client';
import { freePort } from '../../scripts/lib/free-port';

// eslint-disable-next-line @typescript-eslint/no-var-requires
const located = require('../../../scripts/server-binaries.js') as {
  serverBinaries: () => { postgresBin: string; redisServer: string };
};

let binaries: { postgresBin: string; redisServer: string } | null = null;

/** The server binaries (throws one clear line naming the Debian packages when they are missing). */
export function serverBinaries(): { postgresBin: string; redisServer: string } {
  binaries ??= located.serverBinaries();
  return binaries;
}

// freePort: the servers here cannot be told to pick a port themselves.
export { freePort };

const running = new Set<ChildProcess>();
process.once('exit', () => {
  for (const child of running) child.kill('SIGKILL');
});

function userIds(name: string): { uid: number; gid: number } | null {
  const r = spawnSync('id', ['-u', name], { encoding: 'utf8' });
  const g = spawnSync('id', ['-g', name], { encoding: 'utf8' });
  if (r.status !== 0 || g.status !== 0) return null;
  return { uid: Number(r.stdout.trim()), gid: Number(g.stdout.trim()) };
}

/** As root: the unprivileged user PostgreSQL runs as. Otherwise null (run as ourselves). */
function postgresUser(): { uid: number; gid: number } | null {
  if (process.getuid?.() !== 0) return null;
  const ids = userIds('postgres') ?? userIds('nobody');
  if (!ids) throw new Error('running as root and neither a "postgres" nor a "nobody" user exists to run PostgreSQL as');
  return ids;
}

function chownTree(dir: string, ids: { uid: number; gid: number }): void {
  fs.chownSync(dir, ids.uid, ids.gid);
  for (const entry of fs.readdirSync(dir, { withFileTypes: true })) {
    const p = path.join(dir, entry.name);
    if (entry.isDirectory()) chownTree(p, ids);
    else fs.chownSync(p, ids.uid, ids.gid);
  }
}

async function waitFor(what: string, child: ChildProcess, output: () => string, probe: () => Promise<boolean>, ms = 30_000): Promise<void> {
  const end = Date.now() + ms;
  while (Date.now() < end) {
    if (child.exitCode !== null || child.signalCode !== null) {
      throw new Error(`${what} exited (${child.exitCode ?? child.signalCode}) before it was ready:\n${output()}`);
    }
    if (await probe()) return;
    await new Promise((r) => setTimeout(r, 100));
  }
  child.kill('SIGKILL');
  throw new Error(`${what} was not ready within ${ms} ms:\n${output()}`);
}

function stopChild(child: ChildProcess, signal: NodeJS.Signals, graceMs = 10_000): Promise<void> {
  return new Promise((resolve) => {
    if (child.exitCode !== null || child.signalCode !== null) return resolve();
    const force = setTimeout(() => child.kill('SIGKILL'), graceMs);
    child.once('exit', () => {
      clearTimeout(force);
      running.delete(child);
      resolve();
    });
    child.kill(signal);
  });
}

export interface PostgresServer {
  /** postgres://postgres@127.0.0.1:PORT/postgres */
  url: string;
  port: number;
  /** Creates an empty database and returns its URL. */
  createDatabase(name: string): Promise<string>;
  stop(): Promise<void>;
}

export async function startPostgres(): Promise<PostgresServer> {
  const { postgresBin } = serverBinaries();
  const owner = postgresUser();
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'pg-test-'));
  const dataDir = path.join(dir, 'data');
  fs.mkdirSync(dataDir, { mode: 0o700 });
  if (owner) chownTree(dir, owner);
  const asOwner = owner ? { uid: owner.uid, gid: owner.gid } : {};
  const init = spawnSync(
    path.join(postgresBin, 'initdb'),
    ['-D', dataDir, '-U', 'postgres', '--auth=trust', '-E', 'UTF8', '--locale=C', '--no-sync'],
    { encoding: 'utf8', cwd: dir, ...asOwner },
  );
  if (init.status !== 0) {
    fs.rmSync(dir, { recursive: true, force: true });
    throw new Error(`initdb failed (${init.status}): ${init.stderr || init.stdout}`);
  }
  const port = await freePort();
  let out = '';
  const child = spawn(
    path.join(postgresBin, 'postgres'),
    [
      '-D', dataDir,
      '-p', String(port),
      '-c', 'listen_addresses=127.0.0.1',
      '-c', `unix_socket_directories=${dir}`,
      '-c', 'fsync=off',
      '-c', 'synchronous_commit=off',
      '-c', 'full_page_writes=off',
      '-c', 'max_connections=200',
      '-c', 'shared_buffers=32MB',
    ],
    { cwd: dir, stdio: ['ignore', 'pipe', 'pipe'], ...asOwner },
  );
  running.add(child);
  child.stdout!.on('data', (d: Buffer) => (out += d.toString()));
  child.stderr!.on('data', (d: Buffer) => (out = (out + d.toString()).slice(-20_000)));
  const url = `postgres://postgres@127.0.0.1:${port}/postgres`;
  await waitFor('postgres', child, () => out, async () => {
    const c = new Client({ connectionString: url });
    try {
      await c.connect();
      await c.query('SELECT 1');
      return true;
    } catch {
      return false;
    } finally {
      await c.end().catch(() => undefined);
    }
  });
  return {
    url,
    port,
    async createDatabase(name) {
      if (!/^[a-z_][a-z0-9_]*$/.test(name)) throw new Error(`bad database name ${name}`);
      const c = new Client({ connectionString: url });
      await c.connect();
      try {
        await c.query(`CREATE DATABASE ${name}`);
      } finally {
        await c.end();
      }
      return `postgres://postgres@127.0.0.1:${port}/${name}`;
    },
    async stop() {
      await stopChild(child, 'SIGINT'); // fast shutdown
      fs.rmSync(dir, { recursive: true, force: true });
    },
  };
}

export interface RedisServer {
  /** redis://127.0.0.1:PORT */
  url: string;
  port: number;
  stop(): Promise<void>;
}

/** Starts redis-server; `port` restarts one on the address an earlier one had. */
export async function startRedis(port?: number): Promise<RedisServer> {
  const { redisServer } = serverBinaries();
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'redis-test-'));
  port ??= await freePort();
  let out = '';
  const child = spawn(
    redisServer,
    ['--port', String(port), '--bind', '127.0.0.1', '--dir', dir, '--save', '', '--appendonly', 'no', '--daemonize', 'no'],
    { cwd: dir, stdio: ['ignore', 'pipe', 'pipe'] },
  );
  running.add(child);
  child.stdout!.on('data', (d: Buffer) => (out = (out + d.toString()).slice(-20_000)));
  child.stderr!.on('data', (d: Buffer) => (out = (out + d.toString()).slice(-20_000)));
  const url = `redis://127.0.0.1:${port}`;
  await waitFor('redis-server', child, () => out, async () => {
    const c = createClient({ url, socket: { reconnectStrategy: false } });
    c.on('error', () => undefined);
    try {
      await c.connect();
      return (await c.ping()) === 'PONG';
    } catch {
      return false;
    } finally {
      if (c.isOpen) await c.close().catch(() => undefined);
    }
  });
  return {
    url,
    port,
    async stop() {
      await stopChild(child, 'SIGTERM');
      fs.rmSync(dir, { recursive: true, force: true });
    },
  };
}
