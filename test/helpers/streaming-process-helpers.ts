// Real server processes for the live-path tests: `node dist/src/server.js` (the gateway, with its in-process engine
// or MODEL_SERVICE_URL) and `node dist/src/model-service-main.js`, on loopback ports with their own data directories,
// so that a test can say "the process is alive" literally, send it SIGTERM and watch it exit. Every process started
// is killed when the test process exits.
import { spawn, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import { PROJECT_ROOT } from '../../src/config';
import { freePort } from '../../scripts/lib/free-port';
import { eventually } from './service-helpers';

const SERVER = path.join(PROJECT_ROOT, 'dist/src/server.js');
const MODEL_SERVICE = path.join(PROJECT_ROOT, 'dist/src/model-service-main.js');

export interface ServerProcess {
  port: number;
  /** http://127.0.0.1:port */
  url: string;
  child: ChildProcess;
  output(): string;
  alive(): boolean;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  /** SIGKILL if still running. */
  kill(): void;
}

const started = new Set<ChildProcess>();
process.once('exit', () => {
  for (const child of started) child.kill('SIGKILL');
});

function launch(script: string, env: Record<string, string>, ready: RegExp, port: number): Promise<ServerProcess> {
  const child = spawn(process.execPath, [script], {
    env: { PATH: process.env.PATH, NODE_ENV: 'test', LOG_REQUESTS: 'false', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  started.add(child);
  let out = '';
  const append = (d: Buffer): void => {
    out += d.toString();
    if (out.length > 400_000) out = out.slice(-200_000);
  };
  child.stdout!.on('data', append);
  child.stderr!.on('data', append);
  let exitInfo: { code: number | null; signal: NodeJS.Signals | null } | null = null;
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.once('exit', (code, signal) => {
      exitInfo = { code, signal };
      started.delete(child);
      resolve(exitInfo);
    }),
  );
  const proc: ServerProcess = {
    port,
    url: `http://127.0.0.1:${port}`,
    child,
    output: () => out,
    alive: () => exitInfo === null,
    exited,
    kill: () => {
      if (exitInfo === null) child.kill('SIGKILL');
    },
  };
  return eventually(() => ready.test(out) || exitInfo !== null, 60_000).then(() => {
    if (exitInfo !== null) throw new Error(`${path.basename(script)} did not start:\n${out.slice(-3000)}`);
    return proc;
  });
}

/** The public server on a free port; `env` adds to (or overrides) DATA_DIR etc. */
export async function startServerProcess(dataDir: string, env: Record<string, string> = {}): Promise<ServerProcess> {
  const port = await freePort();
  return launch(
    SERVER,
    { DATA_DIR: dataDir, HOST: '127.0.0.1', PORT: String(port), WORKERS: '1', ADMIN_SECRET: 'live-path-test-admin-secret-0123', ...env },
    /listening on/,
    port,
  );
}

/** A standalone model service on a free port. */
export async function startModelServiceProcess(dataDir: string, env: Record<string, string> = {}): Promise<ServerProcess> {
  const port = await freePort();
  return launch(MODEL_SERVICE, { DATA_DIR: dataDir, WORKERS: '1', MODEL_SERVICE_PORT: String(port), ...env }, /Model service ready/, port);
}
