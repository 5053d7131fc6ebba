// `npm run soak -- --minutes N`: a long run of a realistic mix against real processes on loopback (a gateway in
// front of a standalone model service, temporary data directories), at about 80 % of the capacity it measures
// first, printing per window what drifts when something leaks: requests by status, 5xx, p50/p99, RSS and open file
// descriptors of every process, temp-dir size, credits charged vs successful work (docs/reliability.md, "Soak").
//   npm run soak -- --minutes 30                 the lead's run: 30 minutes, 5-minute windows
//   npm run soak -- --minutes 5 --window-min 1   shorter, with 1-minute windows
//   --load 0.8 (share of the measured capacity), --workers N (model service WORKERS, default 2), --keep
// The mix (mix.ts): /denoise of every input format ffmpeg can make from the speech fixture, batches, jobs with
// webhooks to a loopback receiver (polled, downloaded, deleted), canceled jobs, hostile files, slow clients.
// Bounded: every call has a deadline, at most MAX_IN_FLIGHT calls at once, and the drain at the end is capped.
// Exit status 0 when the targets were met: 0 unexpected 5xx, credits exact, RSS and descriptors of the last window
// within 10 % of the second's, temp dirs empty at the end.
import crypto from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { loadConfig } from '../../src/config';
import { encodeFixture } from '../chaos/corpus';
import { Ctx, settledCreditsUsed } from '../chaos/context';
import { call, multipart, percentile, sleep } from '../chaos/http';
import { allProcs, startGateway, startModelService, stop, type Proc } from '../chaos/procs';
import { KINDS, pickKind, runOne, type MixDeps, type Outcome } from './mix';
import { dirStats, procStats, type ProcStats } from './probes';

interface Args {
  minutes: number;
  windowMin: number;
  load: number;
  workers: number;
  keep: boolean;
}

function parseArgs(argv: string[]): Args {
  const a: Args = { minutes: 30, windowMin: 5, load: 0.8, workers: 2, keep: false };
  for (let i = 0; i < argv.length; i++) {
    const k = argv[i];
    const num = (): number => {
      const v = Number(argv[++i]);
      if (!Number.isFinite(v) || v <= 0) throw new Error(`${k} needs a positive number`);
      return v;
    };
    if (k === '--minutes') a.minutes = num();
    else if (k === '--window-min') a.windowMin = num();
    else if (k === '--load') a.load = num();
    else if (k === '--workers') a.workers = Math.floor(num());
    else if (k === '--keep') a.keep = true;
    else if (k === '--help' || k === '-h') {
      process.stdout.write('npm run soak -- [--minutes 30] [--window-min 5] [--load 0.8] [--workers 2] [--keep]\n');
      process.exit(0);
    } else throw new Error(`unknown argument ${k}`);
  }
  return a;
}

/** Calls in flight at most; an arrival beyond it is counted as shed by the client (a sign the load is too high). */
const MAX_IN_FLIGHT = 24;

interface Window {
  label: string;
  statuses: Map<number, number>;
  fivexx: string[];
  busy: number;
  denoiseMs: number[];
  allMs: number[];
  shed: number;
  charged: number;
  work: number;
  procs: Record<string, ProcStats>;
  temp: { entries: number; bytes: number };
}

function newWindow(label: string): Window {
  return { label, statuses: new Map(), fivexx: [], busy: 0, denoiseMs: [], allMs: [], shed: 0, charged: 0, work: 0, procs: {}, temp: { entries: 0, bytes: 0 } };
}

function log(line: string): void {
  process.stdout.write(line + '\n');
}

async function main(): Promise<void> {
  const args = parseArgs(process.argv.slice(2));
  const started = Date.now();
  const root = fs.mkdtempSync(path.join(os.tmpdir(), 'nsm-soak-'));
  const gwDir = path.join(root, 'gateway');
  const msDir = path.join(root, 'model-service');
  const token = crypto.randomBytes(24).toString('base64url');
  const config = loadConfig({ DATA_DIR: root });
  const ctx = new Ctx(Number.POSITIVE_INFINITY);
  const deliveries = new Map<string, number>();
  const receiver = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      try {
        const id = (JSON.parse(Buffer.concat(chunks).toString('utf8')) as { data?: { id?: string } }).data?.id;
        if (id) deliveries.set(id, (deliveries.get(id) ?? 0) + 1);
      } catch {
        // not a webhook body
      }
      res.statusCode = 204;
      res.end();
    });
  });
  await new Promise<void>((r) => receiver.listen(0, '127.0.0.1', () => r()));
  const hookUrl = `http://127.0.0.1:${(receiver.address() as { port: number }).port}/hooks`;
  let exitCode = 1;
  try {
    log(`soak: ${args.minutes} min, ${args.windowMin}-min windows, ${Math.round(args.load * 100)} % of measured capacity; temp root ${root}; ${os.cpus().length} cores, load average ${os.loadavg().map((l) => l.toFixed(1)).join(' ')}`);
    const formats = await encodeFixture(config.ffmpegPath, path.join(root, 'formats'));
    log(`  ${formats.length} input formats: ${formats.map((f) => f.name).join(', ')}`);
    const ms = await startModelService('model-service', { DATA_DIR: msDir, MODEL_SERVICE_TOKEN: token, WORKERS: String(args.workers) });
    const gw = await startGateway('gateway', {
      DATA_DIR: gwDir,
      MODEL_SERVICE_URL: ms.url,
      MODEL_SERVICE_TOKEN: token,
      ADMIN_SECRET: crypto.randomBytes(12).toString('hex'),
      CLIENT_IDLE_TIMEOUT_MS: '3000',
      JOBS_CONCURRENCY: '1',
      JOBS_ALLOW_PRIVATE_URLS: 'true',
      UPSTREAM_TIMEOUT_MS: '60000',
    });
    const tenant = await ctx.tenant(gwDir, 'enterprise', { credits: 10_000_000, rpm: 1_000_000 });
    const procs: Proc[] = [gw, ms];
    const wav = formats.find((f) => f.name === 'wav-s16')!;
    const hooked = new Set<string>();
    const deps: MixDeps = { gw, tenant, formats, hookUrl, deliveries, hooked };

    // Capacity: /denoise of the 3 s WAV back to back, as many at once as the model service admits per worker x 2.
    const one = multipart([{ name: 'file', filename: 'speech.wav', data: wav.data, contentType: wav.contentType }]);
    const denoise = () =>
      call(`${gw.url}/v1/noise-suppressor/denoise`, {
        method: 'POST',
        headers: { Authorization: `Bearer ${tenant.token}`, 'Content-Type': one.contentType, 'Content-Length': one.body.length },
        body: one.body,
        deadlineMs: 60_000,
        keepBytes: 0,
      });
    let warmOk = 0;
    for (let i = 0; i < 4; i++) if ((await denoise()).status === 200) warmOk++;
    const capMs = 20_000;
    const capEnd = Date.now() + capMs;
    let capDone = 0;
    const capLat: number[] = [];
    await Promise.all(
      Array.from({ length: args.workers * 2 }, async () => {
        while (Date.now() < capEnd) {
          const r = await denoise();
          if (r.status === 200) {
            capDone++;
            capLat.push(r.ms);
          }
        }
      }),
    );
    const capacity = capDone / (capMs / 1000); // 3 s /denoise calls per second
    const meanCost = KINDS.reduce((n, k) => n + k.share * k.cost, 0);
    const rate = (capacity * args.load) / meanCost;
    log(`  capacity: ${capacity.toFixed(2)} /denoise of 3 s per second (p50 ${percentile(capLat, 50)} ms, ${warmOk + capDone} calls charged); mix at ${rate.toFixed(2)} calls/s`);
    let creditsBefore = await settledCreditsUsed(tenant.store, tenant.workspaceId);

    // The mix, open loop: arrivals every 1/rate s whatever the answers, at most MAX_IN_FLIGHT at once.
    const windows: Window[] = [];
    let win = newWindow('w1');
    let inFlight = 0;
    let totalWork = 0;
    const pending = new Set<Promise<void>>();
    const record = (o: Outcome): void => {
      for (const s of o.statuses) win.statuses.set(s, (win.statuses.get(s) ?? 0) + 1);
      win.fivexx.push(...o.fivexx);
      win.busy += o.busy;
      if (o.kind === 'denoise' && o.ms !== null) win.denoiseMs.push(o.ms);
      if (o.ms !== null) win.allMs.push(o.ms);
      win.work += o.work;
      totalWork += o.work;
    };
    const closeWindow = async (label: string): Promise<void> => {
      const used = await settledCreditsUsed(tenant.store, tenant.workspaceId);
      win.charged = used - creditsBefore;
      creditsBefore = used;
      for (const p of procs) win.procs[p.name] = procStats(p.child.pid!);
      win.temp = dirStats([path.join(gwDir, 'tmp'), path.join(msDir, 'tmp'), path.join(gwDir, 'jobs', 'incoming')]);
      win.label = label;
      windows.push(win);
      log(windowLine(win));
      win = newWindow(`w${windows.length + 1}`);
    };
    const runEnd = Date.now() + args.minutes * 60_000;
    const windowMs = args.windowMin * 60_000;
    let nextWindow = Date.now() + windowMs;
    let nextArrival = Date.now();
    while (Date.now() < runEnd) {
      const now = Date.now();
      if (now >= nextWindow) {
        await closeWindow(`${windows.length * args.windowMin}–${(windows.length + 1) * args.windowMin} min`);
        nextWindow += windowMs;
      }
      if (now < nextArrival) {
        await sleep(Math.min(50, nextArrival - now));
        continue;
      }
      nextArrival += 1000 / rate;
      if (inFlight >= MAX_IN_FLIGHT) {
        win.shed++;
        continue;
      }
      inFlight++;
      const p = runOne(deps, pickKind())
        .then(record)
        .catch((err: unknown) => record({ kind: 'error', statuses: [0], fivexx: [`soak client error: ${(err as Error).message}`], busy: 0, ms: null, work: 0 }))
        .finally(() => {
          inFlight--;
          pending.delete(p);
        });
      pending.add(p);
    }
    // Drain: calls and jobs in progress finish (each is bounded by its own deadline).
    await Promise.race([Promise.all([...pending]), sleep(180_000)]);
    await sleep(6000); // refunds of canceled jobs are settled by the next housekeeping pass (every 5 s)
    await closeWindow(`${windows.length * args.windowMin}–${args.minutes} min + drain`);
    const used = (await settledCreditsUsed(tenant.store, tenant.workspaceId)) - (warmOk + capDone);
    const temp = dirStats([path.join(gwDir, 'tmp'), path.join(msDir, 'tmp'), path.join(gwDir, 'jobs', 'incoming')]);
    const fivexx = windows.flatMap((w) => w.fivexx);
    const second = windows[1] ?? windows[0];
    const last = windows[windows.length - 1];
    const drift = (pick: (s: ProcStats) => number): Array<[string, number]> =>
      procs.map((p) => [p.name, pick(last.procs[p.name]) / Math.max(1, pick(second.procs[p.name])) - 1]);
    const rssDrift = drift((s) => s.rssKb);
    const fdDrift = drift((s) => s.fds);
    const flat = [...rssDrift, ...fdDrift].every(([, d]) => d <= 0.1);
    const creditsExact = used === totalWork;
    // Webhooks are sent right after a job finishes; give the last ones a moment.
    await sleep(3000);
    const lost = [...hooked].filter((id) => !deliveries.has(id)).length;
    const stops = await Promise.all(procs.map((p) => stop(p)));
    const lines: string[] = [];
    lines.push(`\n## npm run soak -- --minutes ${args.minutes} --window-min ${args.windowMin} — ${new Date().toISOString().slice(0, 16).replace('T', ' ')} UTC, ${os.cpus().length} cores`);
    lines.push(`\ncapacity ${capacity.toFixed(2)} /denoise (3 s) per second; mix at ${Math.round(args.load * 100)} % (${rate.toFixed(2)} calls/s); model service WORKERS=${args.workers}\n`);
    lines.push('| window | requests by status | 5xx (busy 503s retried) | /denoise p50 / p99 ms | all p50 / p99 ms | ' + procs.map((p) => `${p.name} RSS MB / fds`).join(' | ') + ' | temp dirs | credits charged / successful work |');
    lines.push('|---|---|---|---|---|' + procs.map(() => '---|').join('') + '---|---|');
    for (const w of windows) lines.push(tableRow(w, procs));
    lines.push('');
    lines.push(`- 5xx and calls without a reply: ${fivexx.length} (target 0)${fivexx.length ? ': ' + fivexx.slice(0, 5).join('; ') : ''}; admission control's busy 503s (Retry-After honoured, sent again): ${windows.reduce((n, w) => n + w.busy, 0)}`);
    lines.push(`- credits: ${used} charged for ${totalWork} successful calls and jobs (target equal)`);
    lines.push(`- RSS last vs second window: ${rssDrift.map(([n, d]) => `${n} ${(d * 100).toFixed(1)} %`).join(', ')}; descriptors: ${fdDrift.map(([n, d]) => `${n} ${(d * 100).toFixed(1)} %`).join(', ')} (target ≤ +10 %)`);
    lines.push(`- temp dirs at the end: ${temp.entries} entries, ${temp.bytes} bytes (target empty); webhooks received for ${deliveries.size} of ${hooked.size} finished jobs with a webhook_url (${lost} missing; target 0); processes stopped with ${stops.join('/')}`);
    lines.push(`- arrivals shed by the client (over ${MAX_IN_FLIGHT} in flight): ${windows.reduce((n, w) => n + w.shed, 0)}; ${((Date.now() - started) / 60_000).toFixed(1)} min in all`);
    log(lines.join('\n'));
    exitCode = fivexx.length === 0 && creditsExact && flat && temp.entries === 0 && lost === 0 && stops.every((c) => c === 0) ? 0 : 1;
  } finally {
    for (const p of allProcs) if (p.alive()) await stop(p, 15_000);
    await new Promise<void>((r) => receiver.close(() => r()));
    await ctx.close();
    if (!args.keep) fs.rmSync(root, { recursive: true, force: true });
  }
  process.exit(exitCode);
}

function statusText(m: Map<number, number>): string {
  return [...m].sort((a, b) => a[0] - b[0]).map(([s, n]) => `${s === 0 ? 'none' : s}: ${n}`).join(', ');
}

function windowLine(w: Window): string {
  const p = Object.entries(w.procs).map(([n, s]) => `${n} ${Math.round(s.rssKb / 1024)} MB/${s.fds} fds`).join(', ');
  return `  [${w.label}] ${statusText(w.statuses)}; 5xx ${w.fivexx.length} (+ ${w.busy} busy 503s retried); /denoise p50 ${percentile(w.denoiseMs, 50)} p99 ${percentile(w.denoiseMs, 99)} ms; ${p}; temp ${w.temp.entries} entries; credits ${w.charged} / work ${w.work}; shed ${w.shed}`;
}

function tableRow(w: Window, procs: Proc[]): string {
  const cells = [
    w.label,
    statusText(w.statuses),
    `${w.fivexx.length} (${w.busy})`,
    `${percentile(w.denoiseMs, 50)} / ${percentile(w.denoiseMs, 99)}`,
    `${percentile(w.allMs, 50)} / ${percentile(w.allMs, 99)}`,
    ...procs.map((p) => `${Math.round(w.procs[p.name].rssKb / 1024)} / ${w.procs[p.name].fds}`),
    `${w.temp.entries} entries, ${(w.temp.bytes / 1024).toFixed(0)} KB`,
    `${w.charged} / ${w.work}`,
  ];
  return `| ${cells.join(' | ')} |`;
}

main().catch((err: unknown) => {
  process.stderr.write(`soak: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
  for (const p of allProcs) if (p.alive()) p.child.kill('SIGKILL');
  process.exit(2);
});
