// Chaos suite, SSRF: job URLs and webhook URLs spelling loopback and link-local addresses as IPv4-compatible IPv6
// (27.6), and a job URL redirecting to a cloud metadata address (27.7). (Playlists in uploads that point at a bait URL
// are phase 1's corpus, counted in index.ts.)
import { settledCreditsUsed, type Ctx } from './context';
import { errorType, type Part } from './http';
import { jobUntil, loopback, submitJob } from './job-calls';
import type { Proc } from './procs';

/**
 * 27.6 (default URL policy, no runner: a job accepted by mistake is never fetched, its webhook never sent):
 * IPv4-compatible IPv6 spellings of loopback and link-local addresses.
 */
export async function ipv6Spellings(ctx: Ctx, gw: Proc, dataDir: string, wav: Buffer): Promise<void> {
  const t = await ctx.tenant(dataDir);
  const hosts = ['[::7f00:1]', '[::127.0.0.1]', '[::a9fe:a9fe]', '[0:0:0:0:0:0:7f00:1]', '[::0.0.0.1]'];
  const results: string[] = [];
  let pass = true;
  for (const host of hosts) {
    for (const field of ['url', 'webhook_url']) {
      const parts: Part[] = [{ name: field, value: `http://${host}/a.wav` }];
      if (field === 'webhook_url') parts.push({ name: 'file', filename: 'a.wav', data: wav });
      const { reply } = await submitJob(ctx, gw, t, parts, `ipv6 ${field} ${host}`);
      const ok = reply.status === 400 && errorType(reply) === 'url_not_allowed';
      pass &&= ok;
      if (!ok) results.push(`${field}=${host} → ${reply.status} ${errorType(reply) ?? ''}`);
    }
  }
  const used = await settledCreditsUsed(t.store, t.workspaceId);
  ctx.add({
    item: '27.6',
    title: `IPv4-compatible IPv6 spellings in url / webhook_url (${hosts.length * 2} submissions)`,
    pass: pass && used === 0,
    detail: (results.length ? results.join('; ') : 'every one 400 url_not_allowed') + `; credits ${used} (target 400 url_not_allowed, 0 credits)`,
  });
}

/**
 * 27.7 (JOBS_ALLOW_PRIVATE_URLS=true): a job URL that redirects to a cloud metadata address. The row uses EC2's
 * IPv6 one (fd00:ec2::254, in the same always-refused list as 169.254.169.254): a server that wrongly follows the
 * redirect must not reach a real metadata service from the machine the suite runs on (on the development machine
 * something answers on 169.254.169.254, on any port).
 */
export async function metadataRedirect(ctx: Ctx, gw: Proc, dataDir: string): Promise<void> {
  const t = await ctx.tenant(dataDir);
  const server = await loopback((_req, res) => {
    res.writeHead(302, { Location: 'http://[fd00:ec2::254]/latest/meta-data/' });
    res.end();
  });
  try {
    const { reply, job } = await submitJob(ctx, gw, t, [{ name: 'url', value: `${server.url}/a.wav` }], 'metadata redirect');
    const end = job ? await jobUntil(ctx, gw, t, job.id, ['failed', 'succeeded'], 40_000) : null;
    ctx.add({
      item: '27.7',
      title: 'job URL redirecting to a metadata address (fd00:ec2::254) with JOBS_ALLOW_PRIVATE_URLS=true',
      pass: (reply.status === 400 && errorType(reply) === 'url_not_allowed') || (end?.status === 'failed' && end.error?.type === 'url_not_allowed'),
      detail: `submit → ${reply.status}; job ${end?.status ?? '—'} ${end?.error ? `${end.error.type}: ${end.error.message.slice(0, 100)}` : ''} (target url_not_allowed: metadata addresses are refused always)`,
    });
  } finally {
    await server.close();
  }
}
