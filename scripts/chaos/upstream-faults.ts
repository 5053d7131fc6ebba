// Chaos suite, upstream faults: the model service without its token, kill -9 and SIGSTOP of one of two replicas under
// load, kill -9 of the only one with work in flight, and a model service stopped or killed while its answer streams.
import fs from 'node:fs';
import path from 'node:path';
import { settledCreditsUsed, type Ctx, type Tenant } from './context';
import { DENOISE } from './endpoints';
import { call, errorType, jsonOf, multipart, sleep, type Reply } from './http';
import { kill9, startModelService, type Proc } from './procs';

export async function openModelService(ctx: Ctx, ms: Proc, wav: Buffer): Promise<void> {
  const { body, contentType } = multipart([{ name: 'file', filename: 'a.wav', data: wav }]);
  const r = await call(`${ms.url}/denoise`, { method: 'POST', headers: { 'Content-Type': contentType, 'Content-Length': body.length }, body });
  const h = await call(`${ms.url}/health`, {});
  ctx.add({
    item: '9.4',
    title: 'model service without its token',
    pass: r.status === 401 && h.status === 401,
    detail: `POST /denoise → ${r.status}, GET /health → ${h.status} (target 401, no work done)`,
  });
}

/** Load of `clients` callers, each calling back to back until `stop()`; returns the replies with timestamps. */
export function steadyLoad(ctx: Ctx, gw: Proc, t: Tenant, body: { body: Buffer; contentType: string }, clients: number, label: string) {
  let stopped = false;
  const replies: Array<{ reply: Reply; startedAt: number; endedAt: number }> = [];
  const run = Promise.all(
    Array.from({ length: clients }, async () => {
      while (!stopped) {
        const startedAt = Date.now();
        const reply = await ctx.api(gw, t, DENOISE, {
          method: 'POST',
          headers: { 'Content-Type': body.contentType, 'Content-Length': body.body.length },
          body: body.body,
          deadlineMs: 60_000,
          label,
          expect5xx: true,
          expectNoReply: true,
        });
        replies.push({ reply, startedAt, endedAt: Date.now() });
        if (reply.status === 503 || reply.status === 502) await sleep(200);
      }
    }),
  );
  return {
    replies,
    async stop() {
      stopped = true;
      await run;
    },
  };
}

/** Issue 12 part 3 / 9: kill -9 one of two replicas under load, then restart it. */
export async function killReplica(ctx: Ctx, gw: Proc, replicas: Proc[], dataDir: string, wav: Buffer, restart: () => Promise<Proc>): Promise<Proc> {
  const t = await ctx.tenant(dataDir, 'enterprise', { credits: 100_000, rpm: 100_000 });
  const body = multipart([{ name: 'file', filename: 'a.wav', data: wav }]);
  const load = steadyLoad(ctx, gw, t, body, 4, 'replica load');
  await sleep(2000);
  const killedAt = Date.now();
  const doneBeforeKill = load.replies.length;
  await kill9(replicas[0]);
  await sleep(3000);
  const replacement = await restart();
  await sleep(3000);
  await load.stop();
  const after = load.replies.filter((r) => r.endedAt >= killedAt);
  const failed = after.filter((r) => r.reply.status !== 200);
  const straddling = after.filter((r) => r.startedAt < killedAt).length;
  const used = await settledCreditsUsed(t.store, t.workspaceId);
  const ok = load.replies.filter((r) => r.reply.status === 200 && r.reply.complete).length;
  // Traffic returns to the restarted replica.
  const h = await call(`${replacement.url}/health`, { headers: { Authorization: `Bearer ${replacement.env.MODEL_SERVICE_TOKEN}` } });
  const admitted = (jsonOf(h) as { admission?: { admitted?: number } } | null)?.admission?.admitted ?? 0;
  ctx.add({
    item: '12.3',
    title: 'kill -9 of one of two model services under load (4 clients)',
    pass: failed.length <= straddling && failed.every((r) => r.reply.status === 502) && used === ok && admitted > 0,
    detail: `${load.replies.length} calls (${doneBeforeKill} before the kill); after it ${failed.length} failed (${failed.map((r) => r.reply.status).join('/') || 'none'}) of ${straddling} in flight at that moment (target: only those, refunded); credits ${used} = 2xx ${ok}; restarted replica served ${admitted} calls within 3 s`,
  });
  return replacement;
}

/** SIGSTOP one of two replicas under load: calls move to the other one. */
export async function stopReplica(ctx: Ctx, gw: Proc, replica: Proc, dataDir: string, wav: Buffer): Promise<void> {
  const t = await ctx.tenant(dataDir, 'enterprise', { credits: 100_000, rpm: 100_000 });
  const body = multipart([{ name: 'file', filename: 'a.wav', data: wav }]);
  const load = steadyLoad(ctx, gw, t, body, 4, 'sigstop load');
  await sleep(1500);
  const stoppedAt = Date.now();
  replica.child.kill('SIGSTOP');
  await sleep(6000);
  replica.child.kill('SIGCONT');
  await sleep(1500);
  await load.stop();
  const during = load.replies.filter((r) => r.endedAt >= stoppedAt);
  const failed = during.filter((r) => r.reply.status !== 200);
  const straddling = during.filter((r) => r.startedAt < stoppedAt).length;
  const longest = Math.max(...during.map((r) => r.endedAt - r.startedAt));
  const used = await settledCreditsUsed(t.store, t.workspaceId);
  const ok = load.replies.filter((r) => r.reply.status === 200 && r.reply.complete).length;
  ctx.add({
    item: '9.5',
    title: 'SIGSTOP of one of two model services for 6 s under load',
    pass: failed.length <= straddling && used === ok && longest < 15_000,
    detail: `${during.length} calls during/after; ${failed.length} failed (${[...new Set(failed.map((r) => r.reply.status))].join('/') || 'none'}), ${straddling} were in flight on entry; longest call ${(longest / 1000).toFixed(1)} s; credits ${used} = 2xx ${ok}`,
  });
}

/** Issue 9: kill -9 of the only (standalone) model service; breaker, refunds, temp sweep on restart. */
export async function killSingle(ctx: Ctx, gw: Proc, ms: Proc, dataDir: string, msEnv: NodeJS.ProcessEnv, wav: Buffer, longWav: Buffer): Promise<Proc> {
  const t = await ctx.tenant(dataDir, 'enterprise', { credits: 100_000, rpm: 100_000 });
  const long = multipart([{ name: 'model', value: 'nsm-4' }, { name: 'file', filename: 'long.wav', data: longWav }]);
  const short = multipart([{ name: 'file', filename: 'a.wav', data: wav }]);
  const inflight = Array.from({ length: 3 }, () =>
    ctx.api(gw, t, DENOISE, { method: 'POST', headers: { 'Content-Type': long.contentType, 'Content-Length': long.body.length }, body: long.body, label: 'in flight at kill', expect5xx: true, deadlineMs: 60_000 }),
  );
  // One upload still arriving: the model service holds a temp directory for it.
  const stalled = ctx.api(gw, t, DENOISE, {
    method: 'POST',
    headers: { 'Content-Type': long.contentType, 'Content-Length': long.body.length },
    body: long.body,
    stallAfter: long.body.length >> 1,
    label: 'stalled upload at kill',
    expect5xx: true,
    deadlineMs: 30_000,
  });
  await sleep(1500);
  const tmp = path.join(dataDir, 'tmp');
  const orphans = fs.existsSync(tmp) ? fs.readdirSync(tmp).filter((n) => n.startsWith('req-')) : [];
  await kill9(ms);
  const replies = [...(await Promise.all(inflight)), await stalled];
  const afterKill: Reply[] = [];
  for (let i = 0; i < 7; i++) afterKill.push(await ctx.api(gw, t, DENOISE, { method: 'POST', headers: { 'Content-Type': short.contentType, 'Content-Length': short.body.length }, body: short.body, label: 'while down', expect5xx: true }));
  const leftBefore = fs.existsSync(tmp) ? fs.readdirSync(tmp).filter((n) => orphans.includes(n)).length : 0;
  const restarted = await startModelService('ms-single', msEnv, ms.port);
  await sleep(300);
  const leftAfter = fs.existsSync(tmp) ? fs.readdirSync(tmp).filter((n) => orphans.includes(n)).length : 0;
  // After the cool-down a trial call closes the breaker.
  let recovered: Reply | null = null;
  const end = Date.now() + 10_000;
  while (Date.now() < end) {
    recovered = await ctx.api(gw, t, DENOISE, { method: 'POST', headers: { 'Content-Type': short.contentType, 'Content-Length': short.body.length }, body: short.body, label: 'recovery', expect5xx: true });
    if (recovered.status === 200) break;
    await sleep(500);
  }
  const used = await settledCreditsUsed(t.store, t.workspaceId);
  const types = afterKill.map((r) => `${r.status}${errorType(r) ? ' ' + errorType(r) : ''}`);
  ctx.add({
    item: '9.kill',
    title: 'kill -9 of the standalone model service with 3 jobs and an upload in flight',
    pass:
      replies.every((r) => r.status === 502 || r.status === 408) &&
      afterKill.some((r) => errorType(r) === 'circuit_open') &&
      recovered?.status === 200 &&
      used === 1 &&
      leftAfter === 0,
    detail: `in flight → ${replies.map((r) => r.status || r.error).join('/')}; next calls → ${[...new Set(types)].join(', ')}; req dirs of the dead process: ${orphans.length} → still ${leftBefore} before restart → ${leftAfter} after it (sweep at start); recovered → ${recovered?.status}; credits ${used} (target 1: the recovery call)`,
  });
  return restarted;
}

/** 9.5 and 9.11: the model service stops (SIGSTOP) or dies (kill -9) while the response body streams. */
export async function midBody(ctx: Ctx, gw: Proc, ms: Proc, dataDir: string, msEnv: NodeJS.ProcessEnv, bigWav: Buffer): Promise<Proc> {
  const t = await ctx.tenant(dataDir, 'enterprise', { credits: 100_000, rpm: 100_000 });
  const store = t.store;
  const form = multipart([{ name: 'model', value: 'nsm-1' }, { name: 'file', filename: 'big.wav', data: bigWav }]);
  const post = (label: string, onHeaders: () => void) =>
    call(`${gw.url}${DENOISE}`, {
      method: 'POST',
      headers: { Authorization: `Bearer ${t.token}`, 'Content-Type': form.contentType, 'Content-Length': form.body.length },
      body: form.body,
      readRate: 4 * 1024 * 1024, // a client on a slowish link: the model service stays mid-body for many seconds
      onResponse: onHeaders,
      deadlineMs: 60_000,
      keepBytes: 1024,
    }).then((r) => {
      ctx.tally.record(label, r, { tenant: t, expect5xx: true, expectNoReply: true });
      return r;
    });
  const rowOf = async (id: string | undefined) => {
    for (let i = 0; i < 100; i++) {
      const row = (await store.queryRequests({ workspaceId: t.workspaceId, limit: 20 })).find((e) => e.requestId === id);
      if (row) return row;
      await sleep(100);
    }
    return null;
  };
  // SIGSTOP while the answer streams to a client reading at 1 MB/s.
  const headersOf = (): { promise: Promise<void>; arrived: () => void } => {
    let arrived!: () => void;
    const promise = new Promise<void>((r) => (arrived = r));
    return { promise, arrived };
  };
  const h1 = headersOf();
  const stopped = post('sigstop mid-body', h1.arrived);
  await Promise.race([h1.promise, sleep(30_000)]);
  await sleep(500);
  ms.child.kill('SIGSTOP');
  const r1 = await stopped;
  ms.child.kill('SIGCONT');
  const row1 = await rowOf(r1.headers['x-request-id'] as string);
  // kill -9 while the answer streams.
  const h2 = headersOf();
  const killed = post('kill mid-body', h2.arrived);
  await Promise.race([h2.promise, sleep(30_000)]);
  await sleep(500);
  await kill9(ms);
  const r2 = await killed;
  const row2 = await rowOf(r2.headers['x-request-id'] as string);
  const restarted = await startModelService('ms-single', msEnv, ms.port);
  const used = await settledCreditsUsed(store, t.workspaceId);
  ctx.add({
    item: '9.5/11',
    title: 'model service stopped / killed while its answer streams',
    pass: !!row1 && !!row2 && row1.status >= 500 && row2.status >= 500 && used === 0 && !r1.complete && !r2.complete,
    detail: `SIGSTOP: client got ${r1.status} then ${r1.error ?? 'end'} after ${(r1.ms / 1000).toFixed(1)} s, logged ${row1?.status} ${row1?.errorType}; kill -9: client got ${r2.status} then ${r2.error ?? 'end'}, logged ${row2?.status} ${row2?.errorType}; credits ${used} (target: logged as failures, refunded, no hang)`,
  });
  return restarted;
}
