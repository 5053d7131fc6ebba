// Chaos suite, credits: parallel calls racing for the last credits, and 402 only once settled usage reached the limit
// (holds of calls in flight answer 429).
import { settledCreditsUsed, type Ctx, type Tenant } from './context';
import { DENOISE } from './endpoints';
import { errorType, multipart, sleep, type Reply } from './http';
import type { Proc } from './procs';

/** Calls until each one gets a final answer, honouring Retry-After on 429/503 as a client should. */
async function untilFinal(ctx: Ctx, gw: Proc, t: Tenant, body: { body: Buffer; contentType: string }, label: string): Promise<Reply> {
  for (let attempt = 0; ; attempt++) {
    const r = await ctx.api(gw, t, DENOISE, {
      method: 'POST',
      headers: { 'Content-Type': body.contentType, 'Content-Length': body.body.length },
      body: body.body,
      label,
      expect5xx: true,
    });
    if ((r.status !== 429 && r.status !== 503) || attempt >= 20) return r;
    await sleep(Math.min(2000, 1000 * Math.max(0.2, Number(r.headers['retry-after']) || 1)) * (0.5 + Math.random()));
  }
}

export async function creditRace(ctx: Ctx, gw: Proc, dataDir: string, wav: Buffer): Promise<void> {
  const t = await ctx.tenant(dataDir, 'enterprise', { credits: 10, rpm: 100_000 });
  const body = multipart([{ name: 'file', filename: 'a.wav', data: wav }]);
  const replies = await Promise.all(Array.from({ length: 40 }, () => untilFinal(ctx, gw, t, body, 'credit race')));
  const ok = replies.filter((r) => r.status === 200).length;
  const quota = replies.filter((r) => r.status === 402).length;
  const used = await settledCreditsUsed(t.store, t.workspaceId);
  ctx.add({
    item: 'cr',
    title: 'credit race: 40 parallel calls, 10 credits',
    pass: ok === 10 && quota === 30 && used === 10,
    detail: `${ok} × 200, ${quota} × 402, other ${40 - ok - quota}; credits used ${used} (target 10 / 30 / 10)`,
  });
}

export async function quotaVsReservations(ctx: Ctx, gw: Proc, dataDir: string, longWav: Buffer, wav: Buffer): Promise<void> {
  const t = await ctx.tenant(dataDir, 'enterprise', { credits: 3, rpm: 100_000 });
  const long = multipart([{ name: 'model', value: 'nsm-4' }, { name: 'file', filename: 'long.wav', data: longWav }]);
  const short = multipart([{ name: 'file', filename: 'a.wav', data: wav }]);
  const holders = Array.from({ length: 3 }, () =>
    ctx.api(gw, t, DENOISE, { method: 'POST', headers: { 'Content-Type': long.contentType, 'Content-Length': long.body.length }, body: long.body, label: 'holder', deadlineMs: 120_000 }),
  );
  await sleep(400);
  const during = await ctx.api(gw, t, DENOISE, { method: 'POST', headers: { 'Content-Type': short.contentType, 'Content-Length': short.body.length }, body: short.body, label: 'while held' });
  const held = await Promise.all(holders);
  const after = await ctx.api(gw, t, DENOISE, { method: 'POST', headers: { 'Content-Type': short.contentType, 'Content-Length': short.body.length }, body: short.body, label: 'after' });
  const heldOk = held.filter((r) => r.status === 200).length;
  ctx.add({
    item: '9.10',
    title: '402 only when settled usage reached the limit',
    pass: during.status === 429 && Number(during.headers['retry-after']) >= 1 && (heldOk < 3 || after.status === 402),
    detail: `3 calls holding the last 3 credits; a 4th meanwhile → ${during.status} ${errorType(during) ?? ''} (target 429 + Retry-After); holders ${held.map((r) => r.status).join('/')}; afterwards → ${after.status} (target 402 when all 3 were charged)`,
  });
}
