// Chaos suite, phase 5: the rows of issue 35 outside the live path. The file-work process killed again and again,
// during its own start-up too (35.4); kill -9 of the server between the two writes of a job's credit, in gateway.db
// and jobs.db (35.12, JOBS_CRASH_AT); a key hammering into 429 and the request-log rows it costs (35.7); the modes
// of what the server wrote in DATA_DIR and of a backup (35.11). Each row states its target and what was measured.
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import Database from 'better-sqlite3';
import { settledCreditsUsed, type Ctx, type Tenant } from './context';
import { call, jsonOf, multipart, pool, sleep, type Part, type Reply } from './http';
import { startGateway, stop, type Proc } from './procs';
import { DENOISE, MODELS } from './endpoints';

const run = promisify(execFile);
const JOBS = '/v1/noise-suppressor/jobs';
const CLI = path.join(__dirname, '../../src/cli');

export interface RestartsOptions {
  dir: string;
  /** The gateway environment of the phase (its own file-work process); JOBS_CRASH_AT is added where needed. */
  env: NodeJS.ProcessEnv;
  adminSecret: string;
  wav: Buffer;
  /** A folder outside `dir` for the backup of 35.11. */
  scratch: string;
}

/** The server's JSON log lines. */
function logLines(p: Proc): Array<Record<string, unknown>> {
  return p
    .output()
    .split('\n')
    .filter((l) => l.startsWith('{'))
    .flatMap((l) => {
      try {
        return [JSON.parse(l) as Record<string, unknown>];
      } catch {
        return [];
      }
    });
}

/** Live child processes of `pid`'s main thread: the file-work process is the server's only one. */
function children(pid: number): number[] {
  try {
    return fs.readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8').trim().split(/\s+/).filter(Boolean).map(Number);
  } catch {
    return [];
  }
}

async function waitFor(check: () => boolean | Promise<boolean>, ms: number, everyMs = 50): Promise<boolean> {
  const end = Date.now() + ms;
  while (Date.now() < end) {
    if (await check()) return true;
    await sleep(everyMs);
  }
  return check();
}

/** The next child of the server not in `seen`, polled every 2 ms (null when none came within `ms`). */
async function nextChild(gw: Proc, seen: Set<number>, ms: number): Promise<number | null> {
  let found: number | null = null;
  await waitFor(() => {
    found = children(gw.child.pid!).find((p) => !seen.has(p)) ?? null;
    return found !== null;
  }, ms, 2);
  if (found !== null) seen.add(found);
  return found;
}

async function submitJob(ctx: Ctx, gw: Proc, t: Tenant, data: Buffer, label: string, expectNoReply = false): Promise<{ reply: Reply; id: string | null }> {
  const parts: Part[] = [
    { name: 'model', value: 'nsm-1' },
    { name: 'file', filename: 'in.wav', data },
  ];
  const { body, contentType } = multipart(parts);
  const reply = await ctx.api(gw, t, JOBS, { method: 'POST', headers: { 'Content-Type': contentType, 'Content-Length': body.length }, body, label, costs: false, expectNoReply });
  return { reply, id: reply.status === 202 ? String(jsonOf(reply)?.id) : null };
}

async function jobStatus(ctx: Ctx, gw: Proc, t: Tenant, id: string): Promise<string | null> {
  const r = await ctx.api(gw, t, `${JOBS}/${id}`, { label: 'poll job' });
  return r.status === 200 ? String(jsonOf(r)?.status) : null;
}

function denoise(ctx: Ctx, gw: Proc, t: Tenant, wav: Buffer, label: string, expect5xx = false): Promise<Reply> {
  const { body, contentType } = multipart([{ name: 'file', filename: 'a.wav', data: wav }]);
  return ctx.api(gw, t, DENOISE, { method: 'POST', headers: { 'Content-Type': contentType, 'Content-Length': body.length }, body, label, expect5xx });
}

// -- 35.4 -----------------------------------------------------------------------------------------------------------

/** The file-work process killed when ready, twice right after its spawn, once 200 ms into its start-up, then again. */
export async function fileWorkRestarts(ctx: Ctx, gw: Proc, t: Tenant, jobs: Tenant, wav: Buffer): Promise<void> {
  const first = children(gw.child.pid!)[0];
  const seen = new Set<number>([first]);
  const killedAt: number[] = [];
  const kill = (pid: number): void => {
    process.kill(pid, 'SIGKILL');
    killedAt.push(Date.now());
  };
  kill(first);
  await waitFor(async () => (await call(`${gw.url}/readyz`)).status === 503, 10_000);
  const job = await submitJob(ctx, gw, jobs, wav, 'job while the file-work process is down');
  let missing = '';
  for (let i = 0; i < 2 && !missing; i++) {
    const pid = await nextChild(gw, seen, 20_000);
    if (pid === null) missing = `no restart after death ${i + 1}`;
    else kill(pid);
  }
  const starting = missing ? null : await nextChild(gw, seen, 20_000);
  if (!missing && starting === null) missing = 'no restart after death 3';
  if (starting !== null) {
    await sleep(200);
    kill(starting);
  }
  const round = async (): Promise<{ back: number | null; readyMs: number; denoise: number }> => {
    const back = missing ? null : await nextChild(gw, seen, 30_000);
    if (back === null) return { back, readyMs: -1, denoise: 0 };
    const since = killedAt[killedAt.length - 1];
    await waitFor(() => logLines(gw).some((l) => l.event === 'file_process_restarted' && l.pid === back), 60_000);
    const ready = await waitFor(async () => (await call(`${gw.url}/readyz`)).status === 200, 30_000, 100);
    const readyMs = ready ? Date.now() - since : -1;
    return { back, readyMs, denoise: (await denoise(ctx, gw, t, wav, '/denoise after the restarts', !ready)).status };
  };
  const a = await round();
  const jobDone = job.id ? await waitFor(async () => (await jobStatus(ctx, gw, jobs, job.id!)) === 'succeeded', 90_000, 500) : false;
  if (a.back !== null) kill(a.back);
  const b = a.back === null ? { back: null, readyMs: -1, denoise: 0 } : await round();
  const delays = logLines(gw)
    .filter((l) => l.event === 'file_process_exited')
    .map((l) => Number(l.restart_in_ms));
  const pass = a.back !== null && b.back !== null && a.readyMs > 0 && b.readyMs > 0 && a.denoise === 200 && b.denoise === 200 && jobDone;
  ctx.add({
    item: '35.4',
    title: 'file-work process killed when ready, twice right after its spawn, 200 ms into its start-up, and when ready again',
    pass,
    detail:
      (missing ? `${missing}; ` : '') +
      `${killedAt.length} kills; each death scheduled a restart, after ${delays.join('/')} ms; /readyz 200 again ${(a.readyMs / 1000).toFixed(1)} s ` +
      `after the 4th kill and ${(b.readyMs / 1000).toFixed(1)} s after the 5th; /denoise then ${a.denoise} and ${b.denoise}; the job submitted while it ` +
      `was down ${jobDone ? 'succeeded' : 'did NOT succeed'} (target: back and ready after every kill, 200s, the job done; before the fix no restart came after a death during start-up)`,
  });
}

// -- 35.12 ----------------------------------------------------------------------------------------------------------

function jobsDb<T>(dir: string, fn: (db: Database.Database) => T): T {
  const db = new Database(path.join(dir, 'jobs.db'), { readonly: true });
  try {
    return fn(db);
  } finally {
    db.close();
  }
}

/** kill -9 (JOBS_CRASH_AT) between the two writes of a refund and of a charge; the restart must make credits exact. */
export async function creditCrashes(ctx: Ctx, o: RestartsOptions): Promise<void> {
  const dir = `${o.dir}-crash`;
  fs.mkdirSync(dir, { recursive: true });
  const t = await ctx.tenant(dir, 'scale');
  const notes: string[] = [];
  let pass = true;

  // A failed job (junk input): refunded in gateway.db, then killed before jobs.db marks it.
  let gw = await startGateway('gw-crash-refund', { ...o.env, DATA_DIR: dir, JOBS_CRASH_AT: 'after-refund' });
  gw.expectExit();
  const served = await denoise(ctx, gw, t, o.wav, '/denoise before the crash');
  const junk = await submitJob(ctx, gw, t, Buffer.from('not audio at all, '.repeat(200)), 'job that fails');
  const exit1 = await Promise.race([gw.exited, sleep(60_000).then(() => null)]);
  const usedAtKill = await t.store.creditsUsed(t.workspaceId, new Date());
  gw = await startGateway('gw-crash-refund-restarted', { ...o.env, DATA_DIR: dir });
  const marked = await waitFor(() => jobsDb(dir, (db) => (db.prepare('SELECT refund FROM jobs WHERE id = ?').get(junk.id) as { refund?: string } | undefined)?.refund === 'done'), 20_000);
  const usedAfter = await settledCreditsUsed(t.store, t.workspaceId);
  const okRefund = served.status === 200 && junk.reply.status === 202 && exit1?.signal === 'SIGKILL' && marked && usedAfter === 1;
  pass &&= okRefund;
  notes.push(
    `refund: killed by ${exit1?.signal ?? 'nothing'} with 1 /denoise + 1 failed job charged; credits ${usedAtKill} at the kill (refund given, jobs.db still pending), ` +
      `${usedAfter} after the restart, refund ${marked ? 'marked done' : 'NOT marked'} (target 1: given once; the old order lost it)`,
  );
  await stop(gw);

  // A job charged (settled) but never created: the restart gives the credit back once.
  gw = await startGateway('gw-crash-charge', { ...o.env, DATA_DIR: dir, JOBS_CRASH_AT: 'after-charge' });
  gw.expectExit();
  const lost = await submitJob(ctx, gw, t, o.wav, 'job whose gateway dies after the charge', true);
  const exit2 = await Promise.race([gw.exited, sleep(60_000).then(() => null)]);
  const usedAtKill2 = await t.store.creditsUsed(t.workspaceId, new Date());
  const jobs = jobsDb(dir, (db) => (db.prepare('SELECT COUNT(*) AS n FROM jobs').get() as { n: number }).n);
  gw = await startGateway('gw-crash-charge-restarted', { ...o.env, DATA_DIR: dir });
  const back = await waitFor(async () => (await t.store.creditsUsed(t.workspaceId, new Date())) === 1, 20_000);
  const okCharge = lost.reply.status === 0 && exit2?.signal === 'SIGKILL' && usedAtKill2 === 2 && back;
  pass &&= okCharge;
  notes.push(
    `charge: POST /jobs got ${lost.reply.status === 0 ? 'no reply' : lost.reply.status} (killed by ${exit2?.signal ?? 'nothing'}), credits ${usedAtKill2} at the kill ` +
      `with ${jobs - 1} new job, ${await t.store.creditsUsed(t.workspaceId, new Date())} after the restart (target 1: given back once)`,
  );
  await stop(gw);
  ctx.add({ item: '35.12', title: 'kill -9 between the two writes of a job refund, and of a job charge (JOBS_CRASH_AT), then restart', pass, detail: notes.join('; ') });
}

// -- 35.7 -----------------------------------------------------------------------------------------------------------

async function consoleGet(gw: Proc, cookie: string, p: string): Promise<Record<string, unknown> | null> {
  return jsonOf(await call(`${gw.url}/console/api/${p}`, { headers: { Cookie: cookie }, deadlineMs: 30_000 }));
}

/** A free-plan key (60/min) calling as fast as 16 clients can: rows written vs calls, and the figures shown. */
export async function refusalStorm(ctx: Ctx, gw: Proc, o: RestartsOptions, calls = 3000): Promise<void> {
  const t = await ctx.tenant(o.dir, 'free');
  const started = Date.now();
  const replies = await pool(Array.from({ length: calls }, (_, i) => i), 16, () => ctx.api(gw, t, MODELS, { label: '429 storm' }));
  const seconds = (Date.now() - started) / 1000;
  const served = replies.filter((r) => r.status === 200).length;
  const refused = replies.filter((r) => r.status === 429).length;
  // A call's row is written just after its answer went out: wait (a few seconds at most) for the last ones.
  const readRows = (): Array<{ status: number; calls: number }> => {
    const db = new Database(path.join(o.dir, 'gateway.db'), { readonly: true });
    try {
      return db.prepare('SELECT status, calls FROM request_log WHERE workspace_id = ?').all(t.workspaceId) as Array<{ status: number; calls: number }>;
    } finally {
      db.close();
    }
  };
  let rows = readRows();
  await waitFor(() => (rows = readRows()).reduce((n, r) => n + r.calls, 0) >= calls, 5_000, 100);
  const refusalRows = rows.filter((r) => r.status === 429);
  const sumCalls = rows.reduce((n, r) => n + r.calls, 0);

  const body = Buffer.from(JSON.stringify({ secret: o.adminSecret }));
  const login = await call(`${gw.url}/console/api/login`, { method: 'POST', headers: { 'Content-Type': 'application/json', 'Content-Length': body.length }, body });
  const cookie = ([] as string[]).concat(login.headers['set-cookie'] ?? []).find((c) => c.startsWith('ns_console_session='))?.split(';')[0] ?? '';
  let listed = 0;
  for (let offset = 0; ; ) {
    const page = (await consoleGet(gw, cookie, `requests?workspace=${t.workspaceId}&limit=200&offset=${offset}`)) as { requests?: Array<{ calls: number }>; has_more?: boolean } | null;
    if (!page?.requests) break;
    listed += page.requests.reduce((n, r) => n + r.calls, 0);
    offset += page.requests.length;
    if (!page.has_more) break;
  }
  const usage = (await consoleGet(gw, cookie, `workspaces/${t.workspaceId}/usage?days=2`)) as { days?: Array<{ count: number; errors: number }> } | null;
  const chart = (usage?.days ?? []).reduce((a, d) => ({ count: a.count + d.count, errors: a.errors + d.errors }), { count: 0, errors: 0 });
  // keys usage: WORKSPACE PLAN PERIOD USED LEFT LIMIT REQUESTS ERRORS RPM
  const name = (await t.store.getWorkspace(t.workspaceId))!.name;
  const cli = await run(process.execPath, [path.join(CLI, 'keys.js'), 'usage', '--workspace', name], { env: { ...process.env, DATA_DIR: o.dir } });
  const cols = cli.stdout.split('\n').find((l) => l.startsWith(`${name} `))?.trim().split(/\s+/) ?? [];
  const cliRequests = Number(cols[6]);
  const cliErrors = Number(cols[7]);
  const exact = served + refused === calls && sumCalls === calls && listed === calls && chart.count === calls && chart.errors === refused && cliRequests === calls && cliErrors === refused;
  ctx.add({
    item: '35.7',
    title: `a free-plan key (60/min) hammering GET /models: ${calls} calls from 16 clients`,
    pass: exact && refusalRows.length <= Math.ceil(seconds / 60) + 1,
    detail:
      `${served} × 200, ${refused} × 429 in ${seconds.toFixed(1)} s; request-log rows ${rows.length} (${served} served + ${refusalRows.length} for the refusals, ` +
      `calls ${refusalRows.map((r) => r.calls).join('+')}); target: one refusal row per minute (before the fix: a row per call, ${calls} rows). ` +
      `Counts: rows' calls ${sumCalls}, console log ${listed}, usage chart ${chart.count} (errors ${chart.errors}), keys usage ${cliRequests} (errors ${cliErrors}) (target ${calls} / ${refused} everywhere)`,
  });
}

// -- 35.11 ----------------------------------------------------------------------------------------------------------

function looseEntries(root: string): string[] {
  const out: string[] = [];
  const visit = (p: string): void => {
    const st = fs.lstatSync(p);
    const mode = st.mode & 0o777;
    if (mode !== (st.isDirectory() ? 0o700 : 0o600)) out.push(`${path.relative(root, p) || '.'} ${mode.toString(8)}`);
    if (st.isDirectory()) for (const n of fs.readdirSync(p)) visit(path.join(p, n));
  };
  visit(root);
  return out;
}

/** Modes of everything this phase's servers wrote in their DATA_DIRs (databases, job files, temp), and of a backup. */
export async function fileModes(ctx: Ctx, dirs: string[], scratch: string): Promise<void> {
  fs.mkdirSync(scratch, { recursive: true, mode: 0o755 });
  const target = path.join(scratch, 'nsm-chaos.db');
  await run(process.execPath, [path.join(CLI, 'db.js'), 'backup', target], { env: { ...process.env, DATA_DIR: dirs[0] } });
  const backups = [target, target.replace(/\.db$/, '.jobs.db')].map((f) => `${path.basename(f)} ${(fs.statSync(f).mode & 0o777).toString(8)}`);
  let entries = 0;
  const loose: string[] = [];
  const missing: string[] = [];
  for (const dir of dirs) {
    const count = (p: string): void => {
      entries++;
      if (fs.lstatSync(p).isDirectory()) for (const n of fs.readdirSync(p)) count(path.join(p, n));
    };
    count(dir);
    loose.push(...looseEntries(dir).map((e) => `${path.basename(dir)}/${e}`));
    for (const n of ['gateway.db', 'jobs.db', 'jobs/results', 'tmp']) if (!fs.existsSync(path.join(dir, n))) missing.push(`${path.basename(dir)}/${n}`);
  }
  ctx.add({
    item: '35.11',
    title: "modes of the DATA_DIRs after this phase's calls, jobs and crashes (the suite's umask: 022), and of a `db backup`",
    pass: loose.length === 0 && missing.length === 0 && backups.every((b) => b.endsWith(' 600')),
    detail:
      `${entries} entries in ${dirs.length} DATA_DIRs, ${loose.length} not 0700/0600${loose.length ? ` (${loose.slice(0, 6).join(', ')})` : ''}` +
      `${missing.length ? `; missing ${missing.join(', ')}` : ''}; backup ${backups.join(', ')} (target: every folder 0700, every file 0600)`,
  });
}

/** Phase 5: a gateway with its own file-work process for 35.4, 35.7 and 35.11; crash gateways beside it for 35.12. */
export async function runRestartsPhase(ctx: Ctx, o: RestartsOptions): Promise<void> {
  const gw = await startGateway('gw-restarts', { ...o.env, DATA_DIR: o.dir });
  // Jobs in a workspace of their own: the suite's credit check counts 2xx of synchronous calls per workspace.
  await fileWorkRestarts(ctx, gw, await ctx.tenant(o.dir, 'scale'), await ctx.tenant(o.dir, 'scale'), o.wav);
  await refusalStorm(ctx, gw, o);
  await creditCrashes(ctx, o);
  await fileModes(ctx, [o.dir, `${o.dir}-crash`], o.scratch);
  const code = await stop(gw);
  ctx.add({ item: 'stop', title: 'phase 5 processes stop on SIGTERM', pass: code === 0, detail: `exit code ${code}` });
}
