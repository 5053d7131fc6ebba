// Chaos suite: the processes under test (real `node dist/src/server.js` gateways and
// `node dist/src/model-service-main.js` model services), on loopback ports, each with its own environment.
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { PROJECT_ROOT } from '../../src/config';
import { freePort } from '../lib/free-port';

const SERVER = path.join(PROJECT_ROOT, 'dist/src/server.js');
const MODEL_SERVICE = path.join(PROJECT_ROOT, 'dist/src/model-service-main.js');
const MAX_OUTPUT = 200_000;

export interface Proc {
  name: string;
  kind: 'gateway' | 'model-service';
  port: number;
  url: string;
  env: NodeJS.ProcessEnv;
  child: ChildProcess;
  /** Everything it printed (bounded). */
  output(): string;
  /** Resolves when it exits. */
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  /** True once it exited in a way the suite did not ask for (a crash). */
  crashed(): boolean;
  /** Marks the next exit as intended (kill -9, SIGTERM). */
  expectExit(): void;
  rssKb(): number | null;
  alive(): boolean;
}

/** Every process started, for the final crash count and cleanup. */
export const allProcs: Proc[] = [];

function launch(name: string, kind: Proc['kind'], script: string, port: number, env: NodeJS.ProcessEnv): Proc {
  const child = spawn(process.execPath, [script], {
    env: { PATH: process.env.PATH, HOME: process.env.HOME, NODE_ENV: 'production', LOG_REQUESTS: 'false', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  const append = (d: Buffer) => {
    out += d.toString();
    if (out.length > MAX_OUTPUT) out = out.slice(-MAX_OUTPUT / 2);
  };
  child.stdout!.on('data', append);
  child.stderr!.on('data', append);
  let intended = false;
  let exitInfo: { code: number | null; signal: NodeJS.Signals | null } | null = null;
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => {
    child.once('exit', (code, signal) => {
      exitInfo = { code, signal };
      resolve(exitInfo);
    });
  });
  const proc: Proc = {
    name,
    kind,
    port,
    url: `http://127.0.0.1:${port}`,
    env,
    child,
    output: () => out,
    exited,
    crashed: () => exitInfo !== null && !intended,
    expectExit: () => {
      intended = true;
    },
    rssKb: () => {
      try {
        const status = fs.readFileSync(`/proc/${child.pid}/status`, 'utf8');
        const m = /VmRSS:\s+(\d+) kB/.exec(status);
        return m ? Number(m[1]) : null;
      } catch {
        return null;
      }
    },
    alive: () => exitInfo === null,
  };
  allProcs.push(proc);
  return proc;
}

async function waitFor(proc: Proc, pattern: RegExp, timeoutMs: number): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (!pattern.test(proc.output())) {
    if (!proc.alive()) throw new Error(`${proc.name} exited during start:\n${proc.output().slice(-2000)}`);
    if (Date.now() > end) throw new Error(`${proc.name} did not start in ${timeoutMs} ms:\n${proc.output().slice(-2000)}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

export async function startModelService(name: string, env: NodeJS.ProcessEnv, port?: number): Promise<Proc> {
  const p = port ?? (await freePort());
  const proc = launch(name, 'model-service', MODEL_SERVICE, p, { ...env, MODEL_SERVICE_PORT: String(p) });
  await waitFor(proc, /Model service ready/, 60_000);
  return proc;
}

export async function startGateway(name: string, env: NodeJS.ProcessEnv, port?: number): Promise<Proc> {
  const p = port ?? (await freePort());
  const proc = launch(name, 'gateway', SERVER, p, { HOST: '127.0.0.1', ...env, PORT: String(p) });
  await waitFor(proc, /listening on/, 60_000);
  return proc;
}

/** kill -9 and wait for the exit. */
export async function kill9(proc: Proc): Promise<void> {
  if (!proc.alive()) return;
  proc.expectExit();
  proc.child.kill('SIGKILL');
  await proc.exited;
}

/** SIGTERM and wait (bounded) for a clean exit; SIGKILL after `timeoutMs`. Resolves with the exit code. */
export async function stop(proc: Proc, timeoutMs = 30_000): Promise<number | null> {
  if (!proc.alive()) return (await proc.exited).code;
  proc.expectExit();
  proc.child.kill('SIGTERM');
  const timer = setTimeout(() => proc.child.kill('SIGKILL'), timeoutMs);
  const { code } = await proc.exited;
  clearTimeout(timer);
  return code;
}

/** Child processes (pid, command) of `pid`, from /proc: ffmpeg processes of a model service, say. */
export function childrenOf(pid: number): Array<{ pid: number; comm: string }> {
  const out: Array<{ pid: number; comm: string }> = [];
  for (const entry of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = fs.readFileSync(`/proc/${entry}/stat`, 'utf8');
      const close = stat.lastIndexOf(')');
      const comm = stat.slice(stat.indexOf('(') + 1, close);
      const [state, ppid] = stat.slice(close + 2).split(' ');
      if (Number(ppid) === pid && state !== 'Z') out.push({ pid: Number(entry), comm });
    } catch {
      // gone meanwhile
    }
  }
  return out;
}
