// Soak (`npm run soak -- --minutes N [--window-minutes 5] [--rate-factor 0.8] [--streams 6]`): a real server (`node
// dist/src/server.js`, npm start's flags, WORKERS=2) on loopback, first measured for capacity (the mix below, run
// back to back by 6 clients for 30 s), then driven for N minutes at RATE_FACTOR of it (Poisson arrivals) with a mix:
// /denoise of every input format, batches, jobs with webhooks to a loopback receiver (some cancelled), live streams,
// a few hostile files (junk, empty, truncated) and slow senders; and, beside the mix, live streams of 3 s to a minute
// paced in real time on a workspace of their own (--streams N open on average; a fifth each with speech events, with
// an echo reference as a second channel, and with both), with their underruns as the bench
// counts them and their credits checked exactly (the workspace's charge = the sum of ceil(minutes) of each stream).
// Every window it prints requests by status,
// unexpected 5xx, p50/p99, RSS and open descriptors of the server's node processes (with its file-work process;
// medians of samples every 10 s), the ffmpeg processes below it at that moment, the temp dirs' size, and credits charged against the work that succeeded. Targets
// (issue 27): 0 unexpected 5xx, credits exact, RSS and descriptors flat after warm-up (last window within 10 % of the
// second), temp dirs back to empty. Loopback only; bounded by N.
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import WebSocket from 'ws';
import { PROJECT_ROOT } from '../src/config';
import { openSqliteStore } from '../src/store/gateway/sqlite';
import { hashToken } from '../src/store/gateway/tokens';
import { startServer, stopServer, type Server } from './bench/load';
import { freePort } from './lib/free-port';
import { descendants } from './lib/proc';
import { pacedStream, type PacedResult } from './lib/paced-stream';

const API = '/v1/noise-suppressor';
const FIX = path.join(PROJECT_ROOT, 'fixtures');
const FORMATS = ['wav', 'flac', 'mp3', 'ogg', 'opus', 'm4a', 'webm'].map((e) => `speech-noisy-44k1-stereo.${e}`);

function arg(name: string, dflt: number): number {
  const i = process.argv.indexOf(name);
  return i >= 0 ? Number(process.argv[i + 1]) : dflt;
}

interface Window {
  statuses: Map<string, number>;
  unexpected5xx: number;
  /** 503 with Retry-After: admission control shedding load, as designed (a client retries). */
  shed: number;
  latencies: number[];
}

const newWindow = (): Window => ({ statuses: new Map(), unexpected5xx: 0, shed: 0, latencies: [] });

/** Work that should have been charged: each successful billable call, job, and stream minute. */
const owed = { denoise: 0, batch: 0, jobs: 0, streamMinutes: 0 };

function record(w: Window, kind: string, status: number, ms: number, shed = false): void {
  const key = `${kind} ${status}`;
  w.statuses.set(key, (w.statuses.get(key) ?? 0) + 1);
  if (status >= 500 && shed) w.shed++;
  else if (status >= 500) w.unexpected5xx++;
  if (kind === 'denoise' && status === 200) w.latencies.push(ms);
}

function pct(sorted: number[], p: number): number {
  return sorted.length ? sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)] : NaN;
}

async function post(server: Server, endpoint: string, form: FormData): Promise<{ status: number; ms: number; body: string; headers: Headers }> {
  const t0 = performance.now();
  const res = await fetch(`http://127.0.0.1:${server.port}${API}/${endpoint}`, { method: 'POST', headers: { Authorization: `Bearer ${server.token}` }, body: form });
  const body = await res.text();
  return { status: res.status, ms: performance.now() - t0, body, headers: res.headers };
}

function fileForm(field: string, name: string, data: Buffer, fields: Record<string, string> = {}): FormData {
  const form = new FormData();
  for (const [k, v] of Object.entries(fields)) form.append(k, v);
  form.append(field, new Blob([new Uint8Array(data)]), name);
  return form;
}

const fixtures = new Map<string, Buffer>(FORMATS.map((f) => [f, fs.readFileSync(path.join(FIX, f))]));
const pick = <T>(xs: T[]): T => xs[Math.floor(Math.random() * xs.length)];

async function denoise(server: Server, w: Window): Promise<void> {
  const name = pick(FORMATS);
  const r = await post(server, 'denoise', fileForm('file', name, fixtures.get(name)!, { model: pick(['nsm-1', 'nsm-2', 'nsm-2', 'nsm-3']) }));
  if (r.status === 200) owed.denoise++;
  record(w, 'denoise', r.status, r.ms, r.status === 503 && r.headers.has('retry-after'));
}

async function batch(server: Server, w: Window): Promise<void> {
  const form = new FormData();
  for (const name of [pick(FORMATS), pick(FORMATS), 'junk.wav']) {
    form.append('files', new Blob([new Uint8Array(name === 'junk.wav' ? Buffer.from('not audio at all') : fixtures.get(name)!)]), name);
  }
  const r = await post(server, 'denoise/batch', form);
  if (r.status === 200) owed.batch++;
  record(w, 'batch', r.status, r.ms, r.status === 503 && r.headers.has('retry-after'));
}

async function hostile(server: Server, w: Window): Promise<void> {
  const kind = pick(['junk', 'empty', 'truncated']);
  const data = kind === 'junk' ? Buffer.from('RIFF....WAVEjunk') : kind === 'empty' ? Buffer.alloc(0) : fs.readFileSync(path.join(FIX, 'truncated.m4a'));
  const r = await post(server, 'denoise', fileForm('file', `${kind}.wav`, data));
  // Rejected input is the client's fault and costs nothing: 4xx expected.
  record(w, `hostile-${kind}`, r.status, r.ms, r.status === 503 && r.headers.has('retry-after'));
}

/** A client that sends its upload slowly (but faster than the idle limit), then reads the answer. */
function slowSender(server: Server, w: Window): Promise<void> {
  return new Promise((resolve) => {
    const form = fileForm('file', 'slow.wav', fixtures.get(FORMATS[0])!);
    const req = new Request('http://x', { method: 'POST', body: form });
    void req.arrayBuffer().then((buf) => {
      const body = Buffer.from(buf);
      const t0 = performance.now();
      const r = http.request(
        {
          host: '127.0.0.1', port: server.port, path: `${API}/denoise`, method: 'POST',
          headers: { Authorization: `Bearer ${server.token}`, 'Content-Type': req.headers.get('content-type')!, 'Content-Length': body.length },
        },
        (res) => {
          res.resume();
          res.on('end', () => {
            if (res.statusCode === 200) owed.denoise++;
            record(w, 'slow-sender', res.statusCode ?? 0, performance.now() - t0, res.statusCode === 503 && !!res.headers['retry-after']);
            resolve();
          });
        },
      );
      r.on('error', () => {
        record(w, 'slow-sender', 0, 0);
        resolve();
      });
      // 8 pieces over ~2 s.
      const piece = Math.ceil(body.length / 8);
      let i = 0;
      const next = (): void => {
        if (i * piece >= body.length) return void r.end();
        r.write(body.subarray(i * piece, (i + 1) * piece));
        i++;
        setTimeout(next, 250);
      };
      next();
    });
  });
}

async function job(server: Server, w: Window, hookUrl: string): Promise<void> {
  const name = pick(FORMATS);
  const r = await post(server, 'jobs', fileForm('file', name, fixtures.get(name)!, { webhook_url: hookUrl }));
  record(w, 'job-submit', r.status, r.ms, r.status === 503 && r.headers.has('retry-after'));
  if (r.status !== 202) return;
  if (Math.random() < 0.2) {
    const id = (JSON.parse(r.body) as { id: string }).id;
    const c = await fetch(`http://127.0.0.1:${server.port}${API}/jobs/${id}`, { method: 'DELETE', headers: { Authorization: `Bearer ${server.token}` } });
    await c.text();
    record(w, 'job-cancel', c.status, 0);
  }
}

/** A 3 s live stream of the 16 kHz fixture in 20 ms messages (as fast as the server takes it). */
function stream(server: Server, w: Window): Promise<void> {
  const pcm = fs.readFileSync(path.join(FIX, 'speech-noisy-16k-mono.wav')).subarray(44);
  return new Promise((resolve) => {
    const t0 = performance.now();
    const ws = new WebSocket(`ws://127.0.0.1:${server.port}${API}/stream`, { headers: { Authorization: `Bearer ${server.token}` } });
    let done = false;
    ws.on('unexpected-response', (_q, res) => {
      record(w, 'stream', res.statusCode ?? 0, 0, res.statusCode === 503 && !!res.headers['retry-after']);
      resolve();
    });
    ws.on('message', (data, isBinary) => {
      if (isBinary) return;
      const msg = JSON.parse(String(data)) as { type: string; stats?: { credits_charged: number } };
      if (msg.type === 'ready') {
        for (let o = 0; o < pcm.length; o += 640) ws.send(pcm.subarray(o, o + 640));
        ws.send(JSON.stringify({ type: 'end' }));
      } else if (msg.type === 'done') {
        done = true;
        owed.streamMinutes += 1;
      }
    });
    ws.on('close', (code) => {
      record(w, 'stream', done && code === 1000 ? 101 : 1000 + code, performance.now() - t0, code === 1012);
      resolve();
    });
    ws.on('error', () => undefined);
  });
}

/** The paced live streams: each 3 s to a minute of 16 kHz speech at real-time pace (scripts/lib/paced-stream.ts). */
const LIVE_SECONDS = [3, 5, 10, 20, 40, 60];

interface LiveWindow {
  started: number;
  done: number;
  failed: Map<string, number>;
  underruns: number;
  frames: number;
  maxLateMs: number;
  speechEvents: number;
}

const newLiveWindow = (): LiveWindow => ({ started: 0, done: 0, failed: new Map(), underruns: 0, frames: 0, maxLateMs: 0, speechEvents: 0 });

/** Over the whole run: what the paced streams sent, and what their workspace should have been charged. */
const live = { all: newLiveWindow(), seconds: 0, owed: 0, doneStatsMismatch: 0 };

function recordLive(w: LiveWindow, r: PacedResult): void {
  for (const x of [w, live.all]) {
    x.underruns += r.underruns;
    x.frames += r.outFrames;
    x.maxLateMs = Math.max(x.maxLateMs, r.maxLateMs);
    x.speechEvents += r.speechEvents;
    if (!r.refused && r.code === 1000 && r.done) x.done++;
    else {
      const why = r.refused ? `HTTP ${r.code}` : `${r.code}${r.errors.length ? ` ${r.errors[0]}` : ''}`;
      x.failed.set(why, (x.failed.get(why) ?? 0) + 1);
    }
  }
  if (r.refused) return;
  // 1 credit per started minute of what was streamed (a stream that failed is billed for what it sent too).
  const minutes = Math.ceil(r.sentSeconds / 60 - 1e-9);
  live.seconds += r.sentSeconds;
  live.owed += minutes;
  if (r.done && r.done.credits_charged !== minutes) live.doneStatsMismatch++;
}

function liveText(w: LiveWindow): string {
  const failed = [...w.failed].map(([k, v]) => `${k}: ${v}`).join(', ') || 'none';
  return `live streams: ${w.started} started, ${w.done} done, failed ${failed}; underruns ${w.underruns} of ${Math.round(w.frames)} output frames (max added latency ${Math.round(w.maxLateMs)} ms); speech events ${w.speechEvents}`;
}

/** A workspace (and key) of the paced streams' own, so that their credits can be checked exactly. */
async function liveToken(server: Server): Promise<{ token: string; workspaceId: string }> {
  const store = openSqliteStore({ dataDir: server.dataDir });
  try {
    const ws = await store.createWorkspace('soak-live', 'enterprise', { creditsPerMonth: 100_000_000, requestsPerMinute: 1_000_000 });
    const { token } = await store.createToken({ workspaceId: ws.id, name: 'soak-live', scopes: ['*'], allowedIps: [], expiresAt: null });
    return { token, workspaceId: ws.id };
  } finally {
    await store.close();
  }
}

/**
 * RSS and open descriptors of the server's node processes: the server and, under npm start's default
 * (FILE_WORK_PROCESS), its file-work process; ffmpeg children are counted apart.
 */
function procStats(pid: number): { rssMb: number; fds: number } {
  let rss = 0;
  let fds = 0;
  for (const p of [pid, ...descendants(pid).filter((d) => d.comm === 'node').map((d) => d.pid)]) {
    try {
      rss += Number(/VmRSS:\s+(\d+)/.exec(fs.readFileSync(`/proc/${p}/status`, 'utf8'))?.[1] ?? 0);
      fds += fs.readdirSync(`/proc/${p}/fd`).length;
    } catch {
      // ended meanwhile
    }
  }
  return { rssMb: Math.round(rss / 1024), fds };
}

function dirBytes(dir: string): number {
  if (!fs.existsSync(dir)) return 0;
  let n = 0;
  for (const e of fs.readdirSync(dir, { withFileTypes: true })) {
    const p = path.join(dir, e.name);
    try {
      n += e.isDirectory() ? dirBytes(p) : fs.statSync(p).size;
    } catch {
      // removed meanwhile
    }
  }
  return n;
}

/** Credits the workspace used this month, as the store counts them (refunds of failed or cancelled jobs included). */
async function creditsCharged(server: Server, workspaceId?: string): Promise<number> {
  const store = openSqliteStore({ dataDir: server.dataDir });
  try {
    const id = workspaceId ?? (await store.findTokenByHash(hashToken(server.token)))!.workspaceId;
    return await store.creditsUsed(id, new Date());
  } finally {
    await store.close();
  }
}

/**
 * Capacity in mix arrivals per second: CAPACITY_CLIENTS clients each running the mix's items back to back for
 * CAPACITY_S seconds (a closed loop saturates the server); completions per second. Measuring with the mix itself, not
 * one kind of call, makes "80 %" mean 80 % of what this mix really costs. Slow senders and streams take wall time
 * without CPU, so the figure errs low.
 */
async function capacity(pickItem: () => () => Promise<void>): Promise<number> {
  const CAPACITY_CLIENTS = 6;
  const CAPACITY_S = 30;
  let done = 0;
  const until = performance.now() + CAPACITY_S * 1000;
  await Promise.all(
    Array.from({ length: CAPACITY_CLIENTS }, async () => {
      while (performance.now() < until) {
        await pickItem()().catch(() => undefined);
        done++;
      }
    }),
  );
  return done / CAPACITY_S;
}

/** RSS and descriptors sampled every SAMPLE_MS through a window; the window reports their medians (not one instant). */
const SAMPLE_MS = 10_000;

async function main(): Promise<void> {
  const minutes = arg('--minutes', 30);
  const windowMin = arg('--window-minutes', 5);
  const factor = arg('--rate-factor', 0.8);
  const liveOpen = arg('--streams', 6);
  const hookPort = await freePort();
  let hooks = 0;
  const receiver = http.createServer((req, res) => {
    let body = '';
    req.on('data', (c: Buffer) => (body += c));
    req.on('end', () => {
      hooks++;
      if (body.includes('"job.succeeded"')) owed.jobs++;
      res.writeHead(204).end();
    });
  });
  await new Promise<void>((r) => receiver.listen(hookPort, '127.0.0.1', r));
  const server = await startServer(2, [], { JOBS_ALLOW_PRIVATE_URLS: 'true', JOBS_CONCURRENCY: '1' });
  const hookUrl = `http://127.0.0.1:${hookPort}/hook`;
  const dataDir = server.dataDir;
  try {
    const mix: Array<[number, () => Promise<void>]> = [];
    let w = newWindow();
    const add = (weight: number, fn: () => Promise<void>): void => void mix.push([weight, fn]);
    add(55, () => denoise(server, w));
    add(8, () => batch(server, w));
    add(8, () => job(server, w, hookUrl));
    add(8, () => stream(server, w));
    add(5, () => hostile(server, w));
    add(4, () => slowSender(server, w));
    const weights = mix.reduce((s, [x]) => s + x, 0);
    const pickItem = (): (() => Promise<void>) => {
      let x = Math.random() * weights;
      return mix.find(([weight]) => (x -= weight) < 0)?.[1] ?? mix[0][1];
    };
    const cap = await capacity(pickItem);
    // The capacity run's calls count like the others (credits owed; their window is not reported).
    w = newWindow();
    const rate = cap * factor;
    console.log(`Soak: ${os.cpus().length} cores, capacity ${cap.toFixed(2)} mix arrivals per s (6 clients back to back, 30 s); driving ${rate.toFixed(2)} arrivals/s (${Math.round(factor * 100)} %) for ${minutes} min, windows of ${windowMin} min; RSS and fds are medians of samples every ${SAMPLE_MS / 1000} s.`);
    // Paced live streams beside the mix: Poisson arrivals keeping `liveOpen` open on average.
    const liveKey = await liveToken(server);
    const livePcm = fs.readFileSync(path.join(FIX, 'speech-noisy-16k-mono.wav')).subarray(44);
    const liveRate = liveOpen / (LIVE_SECONDS.reduce((a, b) => a + b, 0) / LIVE_SECONDS.length);
    let lw = newLiveWindow();
    const liveInFlight = new Set<Promise<void>>();
    console.log(`live: ${liveOpen} paced streams open on average (${liveRate.toFixed(2)} arrivals/s), ${LIVE_SECONDS.join('/')} s each, nsm-1 or nsm-2, on a workspace of their own`);
    console.log('window  requests  by status                                                        5xx  shed  p50 ms  p99 ms  RSS MB  fds  ffmpeg  tmp KB  credits charged / owed');
    const samples: Array<{ rssMb: number; fds: number }> = [];
    const sampler = setInterval(() => samples.push(procStats(server.child.pid!)), SAMPLE_MS);
    const inFlight = new Set<Promise<void>>();
    const end = performance.now() + minutes * 60_000;
    let windowEnd = performance.now() + windowMin * 60_000;
    const liveDrive = (async () => {
      while (performance.now() < end) {
        await new Promise((r) => setTimeout(r, (-Math.log(1 - Math.random()) / liveRate) * 1000));
        if (performance.now() >= end) break;
        lw.started++;
        live.all.started++;
        const p = pacedStream(server.port, liveKey.token, livePcm, pick(LIVE_SECONDS), pick(['nsm-1', 'nsm-2']), pick(['plain', 'plain', 'vad', 'echo', 'echo-vad'] as const)).then((r) => recordLive(lw, r));
        liveInFlight.add(p);
        void p.finally(() => liveInFlight.delete(p));
      }
    })();
    let index = 1;
    const rows: string[] = [];
    while (performance.now() < end) {
      // Poisson arrivals at `rate` per second.
      await new Promise((r) => setTimeout(r, (-Math.log(1 - Math.random()) / rate) * 1000));
      const p = pickItem()().catch((err: Error) => record(w, `client-error ${err.message.slice(0, 30)}`, 0, 0));
      inFlight.add(p);
      void p.finally(() => inFlight.delete(p));
      if (performance.now() >= windowEnd) {
        rows.push(await report(index++, w, server, dataDir, inFlight.size, samples.splice(0)));
        console.log(rows[rows.length - 1]);
        console.log(`        ${liveText(lw)}`);
        w = newWindow();
        lw = newLiveWindow();
        windowEnd += windowMin * 60_000;
      }
    }
    await Promise.all(inFlight);
    await liveDrive;
    await Promise.all(liveInFlight);
    clearInterval(sampler);
    rows.push(await report(index, w, server, dataDir, 0, samples.splice(0)));
    console.log(rows[rows.length - 1]);
    console.log(`        ${liveText(lw)}`);
    // Jobs finish and webhooks arrive; then temp dirs must be empty.
    const settleUntil = Date.now() + 120_000;
    let jobsLeft = -1;
    while (Date.now() < settleUntil) {
      const r = await fetch(`http://127.0.0.1:${server.port}${API}/jobs?status=queued&limit=1`, { headers: { Authorization: `Bearer ${server.token}` } });
      const q = (await r.json()) as { data?: unknown[] };
      const r2 = await fetch(`http://127.0.0.1:${server.port}${API}/jobs?status=running&limit=1`, { headers: { Authorization: `Bearer ${server.token}` } });
      const q2 = (await r2.json()) as { data?: unknown[] };
      jobsLeft = (q.data?.length ?? 0) + (q2.data?.length ?? 0);
      if (jobsLeft === 0) break;
      await new Promise((r) => setTimeout(r, 1000));
    }
    await new Promise((r) => setTimeout(r, 5000));
    const charged = await creditsCharged(server);
    const owedTotal = owed.denoise + owed.batch + owed.jobs + owed.streamMinutes;
    const tmp = dirBytes(path.join(dataDir, 'tmp')) + dirBytes(path.join(dataDir, 'jobs', 'incoming'));
    const liveCharged = await creditsCharged(server, liveKey.workspaceId);
    console.log(`${liveText(live.all)}; ${(live.seconds / 60).toFixed(1)} min of audio streamed`);
    console.log(`credits for the live streams: charged ${liveCharged}, sum of ceil(minutes) of each stream ${live.owed} → ${liveCharged === live.owed ? 'exact' : 'MISMATCH'}${live.doneStatsMismatch ? ` (${live.doneStatsMismatch} done messages disagree)` : ''}`);
    console.log(`after the drive: jobs queued or running ${jobsLeft}, webhooks received ${hooks}, temp dirs ${Math.round(tmp / 1024)} KB, credits charged ${charged}, owed ${owedTotal} (denoise ${owed.denoise}, batch ${owed.batch}, jobs ${owed.jobs}, stream minutes ${owed.streamMinutes}) → ${charged === owedTotal ? 'exact' : 'MISMATCH'}`);
  } finally {
    await stopServer(server);
    receiver.close();
  }
}

async function report(index: number, w: Window, server: Server, dataDir: string, inFlight: number, samples: Array<{ rssMb: number; fds: number }>): Promise<string> {
  const requests = [...w.statuses.values()].reduce((a, b) => a + b, 0);
  const statuses = [...w.statuses.entries()].sort().map(([k, v]) => `${k}:${v}`).join(' ');
  const lat = [...w.latencies].sort((a, b) => a - b);
  if (samples.length === 0) samples.push(procStats(server.child.pid!));
  const median = (xs: number[]): number => pct([...xs].sort((a, b) => a - b), 50);
  const main = { rssMb: median(samples.map((x) => x.rssMb)), fds: median(samples.map((x) => x.fds)) };
  const ffmpeg = descendants(server.child.pid!).filter((d) => d.comm === 'ffmpeg').length;
  const tmp = dirBytes(path.join(dataDir, 'tmp')) + dirBytes(path.join(dataDir, 'jobs', 'incoming'));
  let charged = NaN;
  try {
    charged = await creditsCharged(server);
  } catch {
    // busy
  }
  const owedTotal = owed.denoise + owed.batch + owed.jobs + owed.streamMinutes;
  return `${String(index).padStart(6)}  ${String(requests).padStart(8)}  ${statuses.slice(0, 64).padEnd(64)} ${String(w.unexpected5xx).padStart(4)} ${String(w.shed).padStart(5)} ${pct(lat, 50).toFixed(0).padStart(7)} ${pct(lat, 99).toFixed(0).padStart(7)} ${String(main.rssMb).padStart(7)} ${String(main.fds).padStart(4)} ${String(ffmpeg).padStart(7)} ${String(Math.round(tmp / 1024)).padStart(7)}  ${charged} / ${owedTotal} (in flight ${inFlight})\n        statuses: ${statuses}`;
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
