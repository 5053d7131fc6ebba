// `npm run chaos`: the fault suite of docs/reliability.md. It builds a hostile-input corpus at run time, starts real
// gateways and model services on loopback ports with temporary data directories, sends the corpus through /denoise
// and /denoise/batch, runs the concurrency and fault scenarios (credit race, rate-limit burst, kill -9 and SIGSTOP of
// model services, slow clients, admission, SIGTERM under load, …), and prints a table. Everything it starts it stops;
// everything it writes it removes. The scenarios live by subject: inputs.ts, limits.ts, credits.ts, upstream-faults.ts,
// shutdown.ts, jobs-tenancy.ts (with job-calls.ts), ssrf.ts, leftovers.ts; phase 4 runs the rows of issue 27 (27.x)
// that need a gateway with private URLs and one job slot; phase 5 and the rows 35.x are issue 35's outside the live
// path (restarts.ts), phase 6 the live streams (streams.ts).
//   npm run chaos                       the whole suite (a few minutes on 2 cores)
//   npm run chaos -- --json out.json    also write the figures as JSON
//   npm run chaos -- --seed 7 --keep    another corpus; keep the temp directory for inspection
//   npm run chaos -- --phases 6         only the live-stream rows (scripts/chaos/streams.ts)
// Exit status: 0 when every target was met, 1 otherwise.
import crypto from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { loadConfig } from '../../src/config';
import { buildCorpus, craftWav } from './corpus';
import { Ctx } from './context';
import { call, sleep } from './http';
import { allProcs, startGateway, startModelService, stop, type Proc } from './procs';
import * as Credits from './credits';
import { MODELS } from './endpoints';
import * as Inputs from './inputs';
import * as JobsTenancy from './jobs-tenancy';
import * as Leftovers from './leftovers';
import * as Limits from './limits';
import * as Shutdown from './shutdown';
import * as Ssrf from './ssrf';
import * as Upstream from './upstream-faults';
import { runRestartsPhase } from './restarts';
import { runStreamRows } from './streams';

interface Args {
  json: string | null;
  seed: number;
  keep: boolean;
  budgetMs: number;
  phases: Set<number>;
}

function parseArgs(argv: string[]): Args {
  const args: Args = { json: null, seed: 1, keep: false, budgetMs: 15 * 60_000, phases: new Set([1, 2, 3, 4, 5, 6]) };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (a === '--json') args.json = argv[++i] ?? 'chaos.json';
    else if (a === '--seed') args.seed = Number(argv[++i]);
    else if (a === '--keep') args.keep = true;
    else if (a === '--budget-s') args.budgetMs = Number(argv[++i]) * 1000;
    else if (a === '--phases') args.phases = new Set((argv[++i] ?? '').split(',').map(Number));
    else if (a === '--help' || a === '-h') {
      process.stdout.write('npm run chaos [-- --json FILE] [--seed N] [--keep] [--budget-s S] [--phases 1,2,3,4,5,6]\n');
      process.exit(0);
    } else throw new Error(`unknown argument ${a}`);
  }
  return args;
}

/** 16-bit mono WAV of `seconds` of speech-like noise at `rate`. */
function noiseWav(seconds: number, rate = 16000, channels = 1): Buffer {
  const n = Math.round(seconds * rate) * channels;
  const data = Buffer.alloc(n * 2);
  let x = 99991;
  for (let i = 0; i < n; i++) {
    x = (x * 1103515245 + 12345) & 0x7fffffff;
    const env = 0.5 + 0.5 * Math.sin(i / rate * 3);
    data.writeInt16LE(Math.round(env * 4000 * Math.sin(i / 7) + ((x >> 8) % 2000) - 1000), i * 2);
  }
  return craftWav({ rate, channels, data });
}

function tmpLeftovers(dataDirs: string[]): string[] {
  const left: string[] = [];
  for (const d of dataDirs) {
    const tmp = path.join(d, 'tmp');
    if (!fs.existsSync(tmp)) continue;
    for (const name of fs.readdirSync(tmp)) left.push(path.join(tmp, name));
  }
  return left;
}

function log(line: string): void {
  process.stdout.write(line + '\n');
}

async function main(): Promise<void> {
  const args = parseArgs(process.argv.slice(2));
  const startedAt = Date.now();
  const ctx = new Ctx(startedAt + args.budgetMs);
  const root = fs.mkdtempSync(path.join(os.tmpdir(), 'nsm-chaos-'));
  const config = loadConfig({ DATA_DIR: root });
  const token = crypto.randomBytes(24).toString('base64url');
  const adminSecret = crypto.randomBytes(18).toString('base64url');
  const dirs = {
    replicas: path.join(root, 'replicas'),
    single: path.join(root, 'single'),
    inproc: path.join(root, 'inproc'),
    round3: path.join(root, 'round3'),
    floor: path.join(root, 'floor'),
    restarts: path.join(root, 'restarts'),
    streams: path.join(root, 'streams'),
  };
  for (const d of Object.values(dirs)) fs.mkdirSync(d, { recursive: true });
  const tmpBefore = new Set(fs.readdirSync(os.tmpdir()).filter((n) => n.startsWith('mat-debug-')));

  // A loopback listener the corpus's playlists point at: any hit means ffmpeg fetched a URL from an upload.
  let baitHits = 0;
  const bait = http.createServer((_req, res) => {
    baitHits++;
    res.end();
  });
  await new Promise<void>((r) => bait.listen(0, '127.0.0.1', () => r()));
  const baitUrl = `http://127.0.0.1:${(bait.address() as { port: number }).port}`;

  const gatewayEnv = (dataDir: string, extra: NodeJS.ProcessEnv = {}): NodeJS.ProcessEnv => ({
    DATA_DIR: dataDir,
    ADMIN_SECRET: adminSecret,
    MODEL_SERVICE_TOKEN: token,
    TRUST_PROXY: '1',
    WORKERS: '1',
    CLIENT_IDLE_TIMEOUT_MS: '3000',
    UPSTREAM_TIMEOUT_MS: '60000',
    UPSTREAM_IDLE_TIMEOUT_MS: '3000',
    UPSTREAM_CONNECT_TIMEOUT_MS: '1500',
    UPSTREAM_HEALTH_INTERVAL_MS: '500',
    BREAKER_THRESHOLD: '5',
    BREAKER_COOLDOWN_MS: '2000',
    SHUTDOWN_GRACE_MS: '3000',
    ...extra,
  });
  const msEnv = (dataDir: string): NodeJS.ProcessEnv => ({ DATA_DIR: dataDir, MODEL_SERVICE_TOKEN: token, WORKERS: '1' });

  const rss: Record<string, { start: number | null; end: number | null }> = {};
  let corpusCount = 0;
  let singles: Inputs.CorpusOutcome[] = [];
  let batches = { calls: 0, items: 0, failedItems: 0, notes: [] as string[] };
  let hostile: Array<{ name: string; status: number; ok: boolean }> = [];
  let leftovers: string[] = [];
  let matDebug: string[] = [];
  let credits = { charged: 0, owed: 0, mismatches: [] as string[] };

  try {
    log(`chaos: temp root ${root}, seed ${args.seed}`);
    const wav = noiseWav(1);
    const longWav = noiseWav(180);
    const clip90 = noiseWav(90);
    const bigWav = noiseWav(300, 48000, 2); // 58 MB in, 58 MB out: more than the socket buffers on the way hold
    if (args.phases.has(1)) {
      log('building the hostile corpus...');
      const corpus = await buildCorpus({ dir: path.join(root, 'corpus'), ffmpegPath: config.ffmpegPath, seed: args.seed, baitUrl });
      corpusCount = corpus.length;
      const byCategory = new Map<string, number>();
      for (const c of corpus) byCategory.set(c.category, (byCategory.get(c.category) ?? 0) + 1);
      log(`  ${corpus.length} files: ${[...byCategory].map(([k, v]) => `${k} ${v}`).join(', ')}`);

      // -- phase 1: a gateway in front of two model-service replicas ------------------------------------------------
      log('phase 1: gateway + 2 model-service replicas');
      let m1 = await startModelService('ms-1', msEnv(dirs.replicas));
      let m2 = await startModelService('ms-2', msEnv(dirs.replicas));
      const g1 = await startGateway('gw-replicas', gatewayEnv(dirs.replicas, { MODEL_SERVICE_URL: `${m1.url},${m2.url}` }));
      const tCorpus = await ctx.tenant(dirs.replicas, 'enterprise', { credits: 1_000_000, rpm: 100_000 });
      await ctx.api(g1, tCorpus, MODELS, { label: 'warm-up' });
      for (const p of [g1, m1, m2]) rss[p.name] = { start: p.rssKb(), end: null };
      const window = Limits.slidingWindow(ctx, g1, dirs.replicas); // waits for the next minute boundary in the background

      log('  corpus through /denoise ...');
      singles = await Inputs.corpusSingles(ctx, g1, tCorpus, corpus);
      log('  corpus through /denoise/batch ...');
      batches = await Inputs.corpusBatches(ctx, g1, tCorpus, corpus);
      log('  hostile requests ...');
      hostile = await Inputs.hostileRequests(ctx, g1, tCorpus, wav);
      const hostileMiss = hostile.filter((h) => !h.ok);
      ctx.add({
        item: 'in',
        title: `${hostile.length} hostile requests (headers, forms, framing)`,
        pass: hostileMiss.length === 0,
        detail: hostileMiss.length ? hostileMiss.map((h) => `${h.name} → ${h.status}`).join('; ') : 'each answered as expected',
      });
      const notes = singles.filter((o) => o.note);
      ctx.add({
        item: 'in',
        title: `${corpus.length} hostile files through /denoise`,
        pass: notes.length === 0,
        detail: notes.length ? `${notes.length} problems: ` + notes.slice(0, 12).map((o) => `${o.item.name}: ${o.note}`).join('; ') : 'every file answered 200 or a clear 4xx; no full-scale output',
      });
      ctx.add({
        item: 'in',
        title: `the same files through /denoise/batch (${batches.calls} calls)`,
        pass: batches.notes.length === 0,
        detail: batches.notes.length ? batches.notes.join('; ') : `${batches.items} items in manifests, ${batches.failedItems} reported as failed items`,
      });
      ctx.add({ item: 'ssrf', title: 'playlists in uploads', pass: baitHits === 0, detail: `${baitHits} fetches of the bait URL (target 0)` });

      log('  security and limits ...');
      await Limits.ipAllowList(ctx, g1, dirs.replicas);
      await Upstream.openModelService(ctx, m1, wav);
      await Inputs.bidiNames(ctx, g1, tCorpus, wav);
      await Inputs.consoleChecks(ctx, g1, adminSecret, tCorpus);
      await Limits.loginUnderLoad(ctx, g1, tCorpus);
      await Limits.unauthenticatedFlood(ctx, g1, dirs.replicas);
      await Limits.rateLimitBurst(ctx, g1, dirs.replicas);
      await Credits.creditRace(ctx, g1, dirs.replicas, wav);
      await Credits.quotaVsReservations(ctx, g1, dirs.replicas, noiseWav(120), wav);
      await Limits.durationCaps(ctx, g1, tCorpus);
      log('  slow clients, admission ...');
      await Limits.slowClients(ctx, g1, dirs.replicas, noiseWav(60));
      await Limits.admission(ctx, g1, [m1, m2], dirs.replicas, clip90);
      log('  kill -9 and SIGSTOP of a replica ...');
      m1 = await Upstream.killReplica(ctx, g1, [m1, m2], dirs.replicas, wav, () => startModelService('ms-1', msEnv(dirs.replicas), m1.port));
      await Upstream.stopReplica(ctx, g1, m2, dirs.replicas, wav);
      log('  issue 27 rows on the default policy (request ids, 429 headers, all-failed batch) ...');
      await Inputs.requestIdsOutsideV1(ctx, g1);
      await JobsTenancy.tooManyJobsHeaders(ctx, g1, dirs.replicas, wav);
      await Inputs.allFailedBatch(ctx, g1, dirs.replicas);
      await window;
      for (const p of [g1, m1, m2]) if (rss[p.name]) rss[p.name].end = p.rssKb();
      const stops = await Promise.all([stop(g1), stop(m1), stop(m2)]);
      ctx.add({ item: 'stop', title: 'phase 1 processes stop on SIGTERM', pass: stops.every((c) => c === 0), detail: `exit codes ${stops.join('/')}` });
    }

    // -- phase 2: a gateway in front of one standalone model service ----------------------------------------------
    if (args.phases.has(2)) {
      log('phase 2: gateway + one standalone model service');
      let m3 = await startModelService('ms-single', msEnv(dirs.single));
      const g2 = await startGateway('gw-single', gatewayEnv(dirs.single, { MODEL_SERVICE_URL: m3.url }));
      m3 = await Upstream.killSingle(ctx, g2, m3, dirs.single, msEnv(dirs.single), wav, longWav);
      m3 = await Upstream.midBody(ctx, g2, m3, dirs.single, msEnv(dirs.single), bigWav);
      const stops2 = await Promise.all([stop(g2), stop(m3)]);
      ctx.add({ item: 'stop', title: 'phase 2 processes stop on SIGTERM', pass: stops2.every((c) => c === 0), detail: `exit codes ${stops2.join('/')}` });
    }

    // -- phase 3: SIGTERM of a gateway with its own model service (the file-work process) ---------------------------
    if (args.phases.has(3)) {
      log('phase 3: SIGTERM under load (its own model service, the file-work process)');
      const g3 = await startGateway('gw-inproc', gatewayEnv(dirs.inproc, { MODEL_SERVICE_TOKEN: '', SHUTDOWN_GRACE_MS: '2000', MODEL_QUEUE_PER_WORKER: '8' }));
      await Shutdown.sigtermUnderLoad(ctx, g3, dirs.inproc, wav, longWav);
    }

    // -- phase 4: issue 27, one tenant against the others (npm start's own model service, one job slot) -------------
    if (args.phases.has(4)) {
      log('phase 4: issue 27 (slow senders and receivers, stalled uploads, header-less audio, kill -9 leftovers)');
      const env4 = gatewayEnv(dirs.round3, { MODEL_SERVICE_TOKEN: '', JOBS_CONCURRENCY: '1', JOBS_ALLOW_PRIVATE_URLS: 'true', MAX_AUDIO_SECONDS: '1800' });
      const g4 = await startGateway('gw-round3', env4);
      await JobsTenancy.stalledJobUpload(ctx, g4, dirs.round3, Number(env4.CLIENT_IDLE_TIMEOUT_MS));
      await Limits.headerlessLongAudio(ctx, g4, dirs.round3, path.join(root, 'headerless'), config.ffmpegPath, 7200);
      await Ssrf.metadataRedirect(ctx, g4, dirs.round3);
      await JobsTenancy.slowWebhookReceiver(ctx, g4, dirs.round3, wav);
      await JobsTenancy.slowUrlSender(ctx, g4, dirs.round3, wav);
      const g4b = await Leftovers.killLeftovers(ctx, g4, dirs.round3, () => startGateway('gw-round3-restarted', env4, g4.port));
      log('  IPv6 spellings; concurrent uploads against the disk floor (a gateway without runner) ...');
      const floorBytes = (Math.floor(JobsTenancy.freeBytes(root) / (1024 * 1024)) - 150) * 1024 * 1024;
      const g5 = await startGateway('gw-floor', gatewayEnv(dirs.floor, { MODEL_SERVICE_TOKEN: '', JOBS_RUNNER: 'false', JOBS_MIN_FREE_DISK_MB: String(floorBytes / (1024 * 1024)) }));
      await Ssrf.ipv6Spellings(ctx, g5, dirs.floor, wav);
      await JobsTenancy.diskFloor(ctx, g5, dirs.floor, floorBytes);
      const stops4 = await Promise.all([stop(g4b), stop(g5)]);
      ctx.add({ item: 'stop', title: 'phase 4 processes stop on SIGTERM', pass: stops4.every((c) => c === 0), detail: `exit codes ${stops4.join('/')}` });
    }

    // -- phase 5: issue 35 outside the live path (scripts/chaos/restarts.ts) ------------------------------------------
    if (args.phases.has(5)) {
      log('phase 5: issue 35 (file-work restarts, job credits across kill -9, refusal rows, file modes)');
      const env5 = gatewayEnv(dirs.restarts, { MODEL_SERVICE_TOKEN: '', UPSTREAM_HEALTH_INTERVAL_MS: '200', BREAKER_COOLDOWN_MS: '500' });
      await runRestartsPhase(ctx, { dir: dirs.restarts, env: env5, adminSecret, wav, scratch: path.join(root, 'backups') });
    }

    // -- phase 6: live streams (issue 35) ----------------------------------------------------------------------------
    if (args.phases.has(6)) {
      log('phase 6: live streams (protocol abuse, credits, revocation, slow readers, kill -9 of the file-work process, SIGTERM)');
      await runStreamRows(ctx, gatewayEnv(dirs.streams, { MODEL_SERVICE_TOKEN: '' }), dirs.streams);
    }

    if (args.phases.has(1)) await Shutdown.keysEpipe(ctx, dirs.replicas); // on phase 1's store
  } catch (err) {
    ctx.add({ item: 'run', title: 'suite aborted', pass: false, detail: err instanceof Error ? (err.stack ?? err.message) : String(err) });
  } finally {
    for (const p of allProcs) if (p.alive()) await stop(p, 15_000);
    await new Promise<void>((r) => bait.close(() => r()));
    await sleep(200);
    leftovers = tmpLeftovers(Object.values(dirs));
    matDebug = fs
      .readdirSync(os.tmpdir())
      .filter((n) => n.startsWith('mat-debug-') && !tmpBefore.has(n) && allProcs.some((p) => n === `mat-debug-${p.child.pid}.log`));
    credits = await ctx.tally.credits().catch(() => credits);
    await ctx.close();
    if (!args.keep) fs.rmSync(root, { recursive: true, force: true });
    for (const n of matDebug) fs.rmSync(path.join(os.tmpdir(), n), { force: true });
  }

  const crashes = allProcs.filter((p) => p.crashed());
  const t = ctx.tally;
  const statusText = [...t.statuses].sort((a, b) => a[0] - b[0]).map(([s, n]) => `${s === 0 ? 'no reply' : s}: ${n}`).join(', ');
  const fivexx = [...t.statuses].filter(([s]) => s >= 500).reduce((a, [, n]) => a + n, 0);
  const rssText = Object.entries(rss)
    .map(([name, v]) => `${name} ${v.start ? Math.round(v.start / 1024) : '?'} → ${v.end ? Math.round(v.end / 1024) : '?'} MB`)
    .join('; ');
  ctx.add({ item: 'mat', title: 'ONNX Runtime mat-debug log files', pass: matDebug.length === 0, detail: `${matDebug.length} /tmp/mat-debug-<pid>.log of this run's processes (target 0)` });

  const summary: Array<[string, string, string, boolean | null]> = [
    ['inputs tried', `${corpusCount} files (each via /denoise and /denoise/batch) + ${hostile.length} hostile requests; ${t.requests} calls in all`, '≥ 300 files', args.phases.has(1) ? corpusCount >= 300 : null],
    ['statuses', statusText, '', null],
    ['5xx', `${fivexx} in all, ${t.unexpected5xx.length} unexpected`, '0 unexpected', t.unexpected5xx.length === 0],
    ['crashes', `${crashes.length} process exits not caused by the suite; ${t.noReply.length} unexpected empty replies`, '0', crashes.length === 0 && t.noReply.length === 0],
    ['leftover temp files', `${leftovers.length}`, '0', leftovers.length === 0],
    ['RSS start → end (phase 1)', rssText, '', null],
    ['credits charged vs 2xx', `${credits.charged} charged, ${credits.owed} successful calls (${credits.mismatches.length} workspaces differ)`, 'equal', credits.mismatches.length === 0 && credits.charged === credits.owed],
    ['breaker after client-side faults', ctx.results.find((r) => r.item === '9.3')?.pass ? 'closed (other workspace served)' : 'see 9.3', 'closed', ctx.results.find((r) => r.item === '9.3')?.pass ?? null],
    ['scenarios', `${ctx.results.filter((r) => r.pass).length} met, ${ctx.results.filter((r) => r.pass === false).length} missed, ${ctx.results.filter((r) => r.pass === null).length} not run`, 'all met', ctx.results.every((r) => r.pass !== false)],
  ];

  const when = new Date().toISOString().slice(0, 16).replace('T', ' ');
  const lines: string[] = [];
  lines.push(`\n## npm run chaos — ${when} UTC, ${((Date.now() - startedAt) / 1000).toFixed(0)} s, seed ${args.seed}, ${os.cpus().length} cores\n`);
  lines.push('| measure | value | target | met |');
  lines.push('|---|---|---|---|');
  for (const [k, v, target, ok] of summary) lines.push(`| ${k} | ${v} | ${target} | ${ok === null ? '' : ok ? 'yes' : '**no**'} |`);
  lines.push('');
  lines.push('| item | scenario | result | met |');
  lines.push('|---|---|---|---|');
  for (const r of ctx.results) lines.push(`| ${r.item} | ${r.title} | ${r.detail.replace(/\|/g, '\\|').replace(/\n/g, ' ')} | ${r.pass === null ? 'not run' : r.pass ? 'yes' : '**no**'} |`);
  if (t.unexpected5xx.length) lines.push('', 'Unexpected 5xx:', ...t.unexpected5xx.slice(0, 20).map((s) => `- ${s}`));
  if (t.noReply.length) lines.push('', 'Unexpected empty replies:', ...t.noReply.slice(0, 20).map((s) => `- ${s}`));
  if (crashes.length) lines.push('', 'Crashed processes:', ...crashes.map((p) => `- ${p.name}: ${p.output().slice(-800).replace(/\n/g, ' ⏎ ')}`));
  if (leftovers.length) lines.push('', 'Leftover temp files:', ...leftovers.slice(0, 20).map((s) => `- ${s}`));
  if (credits.mismatches.length) lines.push('', 'Credit mismatches:', ...credits.mismatches.map((s) => `- ${s}`));
  log(lines.join('\n'));

  if (args.json) {
    fs.writeFileSync(
      args.json,
      JSON.stringify(
        {
          when,
          seed: args.seed,
          seconds: (Date.now() - startedAt) / 1000,
          corpus: corpusCount,
          requests: t.requests,
          statuses: Object.fromEntries(t.statuses),
          unexpected5xx: t.unexpected5xx,
          noReply: t.noReply,
          crashes: crashes.map((p) => p.name),
          leftovers,
          rss,
          credits,
          scenarios: ctx.results,
          corpusProblems: singles.filter((o) => o.note).map((o) => ({ input: o.item.name, status: o.status, note: o.note })),
          hostile,
        },
        null,
        2,
      ),
    );
  }
  const allMet = summary.every(([, , , ok]) => ok !== false) && ctx.results.every((r) => r.pass !== false);
  process.exit(allMet ? 0 : 1);
}

main().catch((err: unknown) => {
  process.stderr.write(`chaos: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
  for (const p of allProcs) if (p.alive()) p.child.kill('SIGKILL');
  process.exit(2);
});

