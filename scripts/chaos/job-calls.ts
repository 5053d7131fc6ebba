// Chaos suite: what the job scenarios share: submitting and polling a job, and loopback servers (one that answers
// slowly, byte by byte) for job URLs and webhooks. Jobs calls are not counted by the tally's credit check (a failed or
// canceled job is refunded later); each row checks its own workspace's credits.
import http from 'node:http';
import type net from 'node:net';
import type { Ctx, Tenant } from './context';
import { JOBS } from './endpoints';
import { jsonOf, multipart, sleep, type Part, type Reply } from './http';
import type { Proc } from './procs';

export const MB = 1024 * 1024;

export interface JobView {
  id: string;
  status: string;
  attempts: number;
  finished_at: string | null;
  error: { type: string; message: string } | null;
}

/** Polls a condition every 50 ms until it holds or `ms` pass; resolves with whether it held. */
export async function waitFor(check: () => boolean | Promise<boolean>, ms: number): Promise<boolean> {
  const end = Date.now() + ms;
  while (Date.now() < end) {
    if (await check()) return true;
    await sleep(50);
  }
  return check();
}

export async function submitJob(ctx: Ctx, gw: Proc, t: Tenant, parts: Part[], label: string): Promise<{ reply: Reply; job: JobView | null }> {
  const { body, contentType } = multipart(parts);
  const reply = await ctx.api(gw, t, JOBS, { method: 'POST', headers: { 'Content-Type': contentType, 'Content-Length': body.length }, body, label, costs: false });
  return { reply, job: reply.status === 202 ? (jsonOf(reply) as unknown as JobView) : null };
}

export async function getJob(ctx: Ctx, gw: Proc, t: Tenant, id: string): Promise<JobView | null> {
  const r = await ctx.api(gw, t, `${JOBS}/${id}`, { label: 'poll job' });
  return r.status === 200 ? (jsonOf(r) as unknown as JobView) : null;
}

export async function jobUntil(ctx: Ctx, gw: Proc, t: Tenant, id: string, statuses: string[], ms: number): Promise<JobView | null> {
  let last: JobView | null = null;
  await waitFor(async () => {
    last = await getJob(ctx, gw, t, id);
    return last !== null && statuses.includes(last.status);
  }, ms);
  return last;
}

/** A loopback server; `handler` gets each request. */
export async function loopback(handler: http.RequestListener): Promise<{ url: string; close(): Promise<void> }> {
  const server = http.createServer(handler);
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  return {
    url: `http://127.0.0.1:${(server.address() as net.AddressInfo).port}`,
    close: () =>
      new Promise<void>((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  };
}

/** Answers the headers (declaring `declared` bytes), then `chunk` bytes every `everyMs`, never finishing. */
export async function trickler(declared: number, chunk: number, everyMs: number) {
  const drips = new Set<NodeJS.Timeout>();
  const state = { requests: 0, open: 0, closedAfterMs: [] as number[] };
  const server = await loopback((req, res) => {
    const started = Date.now();
    state.requests++;
    state.open++;
    req.resume();
    res.writeHead(200, declared > 0 ? { 'Content-Type': 'audio/wav', 'Content-Length': String(declared) } : { 'Content-Type': 'text/plain' });
    const drip = setInterval(() => res.write(Buffer.alloc(chunk, 0x2e)), everyMs);
    drips.add(drip);
    res.on('close', () => {
      state.open--;
      state.closedAfterMs.push(Date.now() - started);
      clearInterval(drip);
      drips.delete(drip);
    });
  });
  return {
    ...server,
    state,
    async close() {
      for (const d of drips) clearInterval(d);
      await server.close();
    },
  };
}
