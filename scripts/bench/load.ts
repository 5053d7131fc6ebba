// Server load benchmark (`npm run bench -- --load`): what users get through HTTP. A real server (`node
// dist/src/server.js` with `npm start`'s node flags, gateway + in-process model service) is started on loopback
// with WORKERS=1 and WORKERS=N; a client in this process keeps C requests in flight (C = 1, 2, 4, 8) for a fixed
// time, each POST /denoise of the same 10 s clip, and records requests/s, audio seconds per second, latency
// percentiles, and the server's CPU split:
//   main thread      the server process's main thread (HTTP, gateway, multer, the pipeline's JS),
//   other threads    inference worker threads, ONNX Runtime, V8 / libuv helpers of the server process,
//   ffmpeg           the server's child processes (CPU of children it has waited for).
// Linux only (reads /proc). The client shares the machine: on 2 cores its own CPU is part of the picture.
// runScaling measures 1 → N workers once more, side by side: both servers up, alternating slices, a paired ratio with
// its bootstrap CI (the table's two halves run minutes apart, and this machine's speed drifts more than that).
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { PROJECT_ROOT } from '../../src/config';
import { freePort } from '../lib/free-port';
import { bootstrapRatio } from '../lib/stats';

export interface LoadOptions {
  /** The clip every request sends (any format the API takes). */
  clipPath: string;
  clipSeconds: number;
  /** Multipart fields besides the file. */
  fields: Record<string, string>;
  workers: number[];
  concurrency: number[];
  /** Measured seconds per concurrency level (after a short warm-up). */
  seconds: number;
  /** Extra node options for the server process (e.g. ['--cpu-prof', '--cpu-prof-dir=DIR'] to profile it). */
  serverNodeArgs?: string[];
  log?(line: string): void;
}

export interface LoadRow {
  workers: number;
  concurrency: number;
  requests: number;
  /** 503 answers of admission control (the client then waits the Retry-After, as a well-behaved client does). */
  refused: number;
  /** Any other answer than 200 or 503. */
  errors: number;
  requests_per_s: number;
  audio_s_per_s: number;
  latency_ms: { p50: number; p95: number; p99: number; max: number };
  /** Server CPU per successful request, ms (refusals cost little and are not counted as requests). */
  cpu_ms_per_request: { main_thread: number; other_threads: number; ffmpeg: number; total: number };
  /** The load client's own CPU per successful request, ms (it shares the machine with the server). */
  client_cpu_ms_per_request: number;
}

const CLK_TCK = 100;

/** utime + stime (seconds) of each thread of `pid`, and its waited-for children's total. */
function cpuSnapshot(pid: number): { threads: Map<number, number>; children: number } {
  const threads = new Map<number, number>();
  for (const tid of fs.readdirSync(`/proc/${pid}/task`)) {
    try {
      const f = fs.readFileSync(`/proc/${pid}/task/${tid}/stat`, 'utf8');
      const v = f.slice(f.lastIndexOf(')') + 2).split(' ');
      threads.set(Number(tid), (Number(v[11]) + Number(v[12])) / CLK_TCK);
    } catch {
      // thread exited meanwhile
    }
  }
  const f = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
  const v = f.slice(f.lastIndexOf(')') + 2).split(' ');
  return { threads, children: (Number(v[13]) + Number(v[14])) / CLK_TCK };
}

function cpuDelta(pid: number, a: ReturnType<typeof cpuSnapshot>, b: ReturnType<typeof cpuSnapshot>) {
  let main = 0;
  let other = 0;
  for (const [tid, t] of b.threads) {
    const d = t - (a.threads.get(tid) ?? 0);
    if (tid === pid) main += d;
    else other += d;
  }
  return { main, other, ffmpeg: b.children - a.children };
}

function multipart(fields: Record<string, string>, file: Buffer, filename: string): { body: Buffer; type: string } {
  const boundary = `----nsmbench${Math.random().toString(16).slice(2)}`;
  const parts: Buffer[] = [];
  for (const [k, v] of Object.entries(fields)) {
    parts.push(Buffer.from(`--${boundary}\r\nContent-Disposition: form-data; name="${k}"\r\n\r\n${v}\r\n`));
  }
  parts.push(Buffer.from(`--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="${filename}"\r\nContent-Type: application/octet-stream\r\n\r\n`));
  parts.push(file, Buffer.from(`\r\n--${boundary}--\r\n`));
  return { body: Buffer.concat(parts), type: `multipart/form-data; boundary=${boundary}` };
}

export interface Server {
  child: ChildProcess;
  port: number;
  token: string;
  dataDir: string;
}

/** The node flags `npm start` runs the server with (package.json's start script), so the bench measures that. */
export function startScriptFlags(): string[] {
  const pkgFile = path.join(PROJECT_ROOT, 'package.json');
  const pkg = JSON.parse(fs.readFileSync(pkgFile, 'utf8')) as { scripts: Record<string, string> };
  const words = pkg.scripts.start.split(/\s+/);
  return words.slice(1).filter((w) => w.startsWith('--'));
}

export async function startServer(workers: number, nodeArgs: string[] = [], extraEnv: NodeJS.ProcessEnv = {}): Promise<Server> {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'nsm-load-'));
  const env = { ...process.env, DATA_DIR: dataDir, WORKERS: String(workers), LOG_REQUESTS: 'false', ADMIN_SECRET: 'bench-admin-secret', ...extraEnv };
  const keys = spawn(process.execPath, [
    path.join(PROJECT_ROOT, 'dist/src/cli/keys.js'), 'create', '--workspace', 'bench', '--plan', 'enterprise',
    '--rpm', '1000000', '--credits', '100000000',
  ], { env, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  keys.stdout!.on('data', (d: Buffer) => (out += d));
  const code = await new Promise<number | null>((r) => keys.on('close', r));
  const token = out.trim().split('\n').pop() ?? '';
  if (code !== 0 || !token.startsWith('mw_')) throw new Error(`could not create a bench key: ${out}`);
  const port = await freePort();
  // BENCH_SERVER_NODE_ARGS: extra node flags for the server only, e.g. "--cpu-prof --cpu-prof-dir=/tmp/prof" to see
  // where its time goes (NODE_OPTIONS refuses --cpu-prof, and would profile the bench's clients as well).
  const extra = (process.env.BENCH_SERVER_NODE_ARGS ?? '').split(/\s+/).filter(Boolean);
  const serverArgs = [...startScriptFlags(), ...nodeArgs, ...extra, path.join(PROJECT_ROOT, 'dist/src/server.js')];
  const child = spawn(process.execPath, serverArgs, {
    env: { ...env, PORT: String(port), HOST: '127.0.0.1' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let log = '';
  child.stdout!.on('data', (d: Buffer) => (log += d));
  child.stderr!.on('data', (d: Buffer) => (log += d));
  // BENCH_SERVER_LOG=FILE: the server's output also goes there (with --trace-gc in BENCH_SERVER_NODE_ARGS, its pauses).
  if (process.env.BENCH_SERVER_LOG) {
    const out = fs.createWriteStream(process.env.BENCH_SERVER_LOG);
    child.stdout!.pipe(out);
    child.stderr!.pipe(out);
  }
  const started = Date.now();
  while (!/listening on/.test(log)) {
    if (child.exitCode !== null) throw new Error(`server exited: ${log}`);
    if (Date.now() - started > 60_000) throw new Error(`server did not start: ${log}`);
    await new Promise((r) => setTimeout(r, 50));
  }
  return { child, port, token, dataDir };
}

export async function stopServer(s: Server): Promise<void> {
  s.child.kill('SIGTERM');
  await new Promise((r) => (s.child.exitCode !== null ? r(null) : s.child.once('close', r)));
  fs.rmSync(s.dataDir, { recursive: true, force: true });
}

function post(agent: http.Agent, s: Server, body: Buffer, type: string): Promise<{ status: number; ms: number; retryAfterS: number }> {
  const t0 = performance.now();
  return new Promise((resolve, reject) => {
    const req = http.request(
      {
        host: '127.0.0.1', port: s.port, path: '/v1/noise-suppressor/denoise', method: 'POST', agent,
        headers: { Authorization: `Bearer ${s.token}`, 'Content-Type': type, 'Content-Length': body.length },
      },
      (res) => {
        res.on('data', () => undefined);
        res.on('end', () =>
          resolve({ status: res.statusCode ?? 0, ms: performance.now() - t0, retryAfterS: Number(res.headers['retry-after']) || 1 }),
        );
        res.on('error', reject);
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}

function percentile(sorted: number[], p: number): number {
  if (sorted.length === 0) return NaN;
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))];
}

async function level(s: Server, body: Buffer, type: string, concurrency: number, seconds: number, clipSeconds: number, workers: number): Promise<LoadRow> {
  const agent = new http.Agent({ keepAlive: true, maxSockets: concurrency });
  // Warm-up: every worker has run a request, JIT is warm.
  await Promise.all(Array.from({ length: Math.max(concurrency, workers) }, () => post(agent, s, body, type)));
  const latencies: number[] = [];
  let errors = 0;
  let refused = 0;
  const pid = s.child.pid!;
  const before = cpuSnapshot(pid);
  const clientBefore = process.cpuUsage();
  const t0 = performance.now();
  const end = t0 + seconds * 1000;
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (performance.now() < end) {
        const r = await post(agent, s, body, type);
        if (r.status === 200) latencies.push(r.ms);
        else if (r.status === 503) {
          // Admission control said "busy": wait what it asked (at most until the level ends) before the next call.
          refused++;
          await new Promise((w) => setTimeout(w, Math.max(0, Math.min(r.retryAfterS * 1000, end - performance.now()))));
        } else errors++;
      }
    }),
  );
  const wall = (performance.now() - t0) / 1000;
  const after = cpuSnapshot(pid);
  const client = process.cpuUsage(clientBefore);
  agent.destroy();
  const cpu = cpuDelta(pid, before, after);
  const n = latencies.length;
  latencies.sort((a, b) => a - b);
  const per = (v: number) => Math.round((v / Math.max(1, n)) * 1000 * 10) / 10;
  return {
    workers,
    concurrency,
    requests: latencies.length,
    refused,
    errors,
    requests_per_s: latencies.length / wall,
    audio_s_per_s: (latencies.length * clipSeconds) / wall,
    latency_ms: {
      p50: Math.round(percentile(latencies, 50)),
      p95: Math.round(percentile(latencies, 95)),
      p99: Math.round(percentile(latencies, 99)),
      max: Math.round(latencies[latencies.length - 1] ?? NaN),
    },
    cpu_ms_per_request: { main_thread: per(cpu.main), other_threads: per(cpu.other), ffmpeg: per(cpu.ffmpeg), total: per(cpu.main + cpu.other + cpu.ffmpeg) },
    client_cpu_ms_per_request: per((client.user + client.system) / 1e6),
  };
}

export async function runLoad(opts: LoadOptions): Promise<LoadRow[]> {
  const log = opts.log ?? ((l: string) => console.log(l));
  const { body, type } = multipart(opts.fields, fs.readFileSync(opts.clipPath), path.basename(opts.clipPath));
  const rows: LoadRow[] = [];
  for (const workers of opts.workers) {
    const server = await startServer(workers, opts.serverNodeArgs);
    try {
      for (const c of opts.concurrency) {
        const row = await level(server, body, type, c, opts.seconds, opts.clipSeconds, workers);
        rows.push(row);
        log(formatLoadRow(row));
      }
    } finally {
      await stopServer(server);
    }
  }
  return rows;
}

export interface ScalingOptions {
  clipPath: string;
  clipSeconds: number;
  fields: Record<string, string>;
  /** The two worker counts compared, e.g. [1, 2]. */
  workers: [number, number];
  concurrency: number;
  /** Alternating pairs of slices; the order within a pair alternates too (AB, BA, AB, ...). */
  pairs: number;
  sliceSeconds: number;
  /** Load on each server before the first pair (JIT, caches). */
  warmSeconds: number;
  log?(line: string): void;
}

export interface ScalingResult {
  workers: [number, number];
  concurrency: number;
  slice_seconds: number;
  /** requests/s of each side per pair, in the order measured. */
  pairs: Array<{ requests_per_s: [number, number]; ratio: number }>;
  /** Total requests/s of the second worker count over the first, summed over the pairs, with its 95 % bootstrap CI. */
  ratio: number;
  ratio_ci95: [number, number];
}

/**
 * 1 → N workers measured side by side: both servers run at once (the idle one costs next to nothing) and take the
 * load in alternating slices, so the machine's slow and fast phases (seen here: the same server 25–32 req/s from one
 * 10 s slice to the next) fall on both sides of each pair instead of on one whole table.
 */
export async function runScaling(opts: ScalingOptions): Promise<ScalingResult> {
  const log = opts.log ?? ((l: string) => console.log(l));
  const { body, type } = multipart(opts.fields, fs.readFileSync(opts.clipPath), path.basename(opts.clipPath));
  const servers: Server[] = [];
  try {
    for (const w of opts.workers) servers.push(await startServer(w));
    const slice = (i: 0 | 1, seconds: number) =>
      level(servers[i], body, type, opts.concurrency, seconds, opts.clipSeconds, opts.workers[i]);
    await slice(0, opts.warmSeconds);
    await slice(1, opts.warmSeconds);
    const pairs: ScalingResult['pairs'] = [];
    for (let p = 0; p < opts.pairs; p++) {
      const rate: [number, number] = [0, 0];
      for (const i of p % 2 === 0 ? ([0, 1] as const) : ([1, 0] as const)) {
        const row = await slice(i, opts.sliceSeconds);
        if (row.errors > 0) throw new Error(`scaling slice with ${opts.workers[i]} workers: ${row.errors} failed requests`);
        rate[i] = row.requests_per_s;
      }
      pairs.push({ requests_per_s: rate, ratio: rate[1] / rate[0] });
      log(`  pair ${p + 1}: ${rate[0].toFixed(1)} → ${rate[1].toFixed(1)} req/s, ${(rate[1] / rate[0]).toFixed(2)}×`);
    }
    const r = bootstrapRatio(pairs.map((x) => x.requests_per_s[0]), pairs.map((x) => x.requests_per_s[1]));
    return { workers: opts.workers, concurrency: opts.concurrency, slice_seconds: opts.sliceSeconds, pairs, ratio: r.ratio, ratio_ci95: [r.lo, r.hi] };
  } finally {
    for (const s of servers) await stopServer(s);
  }
}

export const LOAD_HEADER =
  'workers  conc  req/s  audio s/s   p50 ms  p95 ms  p99 ms  503s  errors | server CPU ms/request: main  other threads  ffmpeg  total | client';

export function formatLoadRow(r: LoadRow): string {
  const c = r.cpu_ms_per_request;
  return (
    `${String(r.workers).padStart(7)} ${String(r.concurrency).padStart(5)} ${r.requests_per_s.toFixed(1).padStart(6)} ` +
    `${r.audio_s_per_s.toFixed(0).padStart(10)} ${String(r.latency_ms.p50).padStart(8)} ${String(r.latency_ms.p95).padStart(7)} ` +
    `${String(r.latency_ms.p99).padStart(7)} ${String(r.refused).padStart(5)} ${String(r.errors).padStart(7)} | ${c.main_thread.toFixed(1).padStart(27)} ` +
    `${c.other_threads.toFixed(1).padStart(14)} ${c.ffmpeg.toFixed(1).padStart(7)} ${c.total.toFixed(1).padStart(6)} | ` +
    `${r.client_cpu_ms_per_request.toFixed(1).padStart(6)}`
  );
}
