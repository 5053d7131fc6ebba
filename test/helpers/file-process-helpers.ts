// `npm start` as a real process for the file-work tests: `node dist/src/server.js` on a loopback port with a temp
// DATA_DIR and JSON logs, a token in its store, its file-work child's pid, /proc reads (children, stat fields).
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { PROJECT_ROOT } from '../../src/config';
import { openSqliteStore } from '../../src/store/gateway/sqlite';
import { createToken, eventually, multipartBody, rawRequest, testConfig } from './service-helpers';

export interface Server {
  child: ChildProcess;
  url: string;
  token: string;
  output: () => string;
  lines: () => Record<string, any>[];
  exited: Promise<number | string | null>;
  dataDir: string;
}

/**
 * Starts the server (an existing `dataDir` is reused, e.g. for a restart) and creates a token in its store. `launcher`:
 * a command that execs the server in its own process (e.g. `taskset -c 0`).
 */
export async function startServer(env: Record<string, string> = {}, dataDir?: string, launcher: string[] = []): Promise<Server> {
  const dir = dataDir ?? testConfig().dataDir;
  const command = [...launcher, process.execPath, path.join(PROJECT_ROOT, 'dist/src/server.js')];
  const child = spawn(command[0], command.slice(1), {
    env: { ...process.env, PORT: '0', HOST: '127.0.0.1', DATA_DIR: dir, WORKERS: '1', NODE_ENV: 'test', ADMIN_SECRET: 'x', LOG_FORMAT: 'json', LOG_REQUESTS: 'false', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  child.stdout!.on('data', (d: Buffer) => (output += d.toString()));
  child.stderr!.on('data', (d: Buffer) => (output += d.toString()));
  const exited = new Promise<number | string | null>((resolve) => child.once('exit', (code, signal) => resolve(code ?? signal)));
  await eventually(() => output.includes('listening on') || child.exitCode !== null, 30_000).catch(() => undefined);
  if (!output.includes('listening on')) {
    // Not left running: its child process would keep jest from exiting after the failure.
    child.kill('SIGKILL');
    await exited;
    throw new Error(`server did not start:\n${output}`);
  }
  const lines = () =>
    output
      .trim()
      .split('\n')
      .filter((l) => l.startsWith('{'))
      .map((l) => JSON.parse(l) as Record<string, any>);
  const started = lines().find((l) => l.event === 'started' && l.service === 'gateway')!;
  const store = openSqliteStore({ dataDir: dir });
  const token = await createToken(store);
  await store.close();
  return { child, url: started.bound_to ? `http://${started.bound_to}` : started.url, token, output: () => output, lines, exited, dataDir: dir };
}

/** SIGKILL when still running; removes its DATA_DIR unless `keep`. */
export async function stop(s: Server, keep = false): Promise<void> {
  if (s.child.exitCode === null && s.child.signalCode === null) s.child.kill('SIGKILL');
  await s.exited;
  if (!keep) fs.rmSync(s.dataDir, { recursive: true, force: true });
}

export async function denoise(s: Server, file: string): Promise<{ status: number; body: Buffer }> {
  const { body, contentType } = multipartBody([
    { name: 'model', value: 'nsm-2' },
    { name: 'file', filename: path.basename(file), data: fs.readFileSync(file) },
  ]);
  const res = await rawRequest(`${s.url}/v1/noise-suppressor/denoise`, {
    method: 'POST',
    headers: { Authorization: `Bearer ${s.token}`, 'Content-Type': contentType, 'Content-Length': body.length },
    body,
  });
  return { status: res.status, body: res.body };
}

/** Field `n` (1-based, as in proc(5)) of /proc/PID/stat. */
export function statField(pid: number, n: number): number {
  const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
  return Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[n - 3]);
}

/** Running (a zombie that no one reaped yet counts as ended). */
export function alive(pid: number): boolean {
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2)[0] !== 'Z';
  } catch {
    return false;
  }
}

/** Live child processes of `pid`'s main thread (the file-work process is the server's only one). */
export function childPids(pid: number): number[] {
  try {
    return fs
      .readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8')
      .trim()
      .split(/\s+/)
      .filter(Boolean)
      .map(Number)
      .filter(alive);
  } catch {
    return [];
  }
}

/** The file-work process's pid as the server's start-up line reported it. */
export const filePid = (s: Server): number => s.lines().find((l) => l.event === 'started' && l.service === 'gateway')!.file_process.pid as number;
