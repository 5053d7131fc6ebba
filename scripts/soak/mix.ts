// Soak: the mix of calls and what each one counts. Every kind is one short story told through the public API, with a
// deadline on every call; its Outcome carries the statuses it saw, the 5xx (or replies that never came), the
// latency of its main call and the successful work it did (what the workspace must be charged for: a 2xx /denoise,
// a batch with at least one file cleaned, a job that succeeded). A client here behaves: a 503 from admission control
// ("busy", with Retry-After) is waited out and sent again, up to 4 times; those 503s are counted, not as faults.
import { craftWav, type EncodedFormat } from '../chaos/corpus';
import type { Tenant } from '../chaos/context';
import { call, multipart, sleep, type CallOptions, type Part, type Reply } from '../chaos/http';
import type { Proc } from '../chaos/procs';

const API = '/v1/noise-suppressor';

export type Kind = 'denoise' | 'batch' | 'job' | 'cancel' | 'hostile' | 'slow' | 'read';

/** Share of the arrivals, and cost relative to one /denoise of the 3 s fixture (for the arrival rate). */
export const KINDS: Array<{ kind: Kind; share: number; cost: number }> = [
  { kind: 'denoise', share: 0.45, cost: 1 },
  { kind: 'batch', share: 0.08, cost: 3 },
  { kind: 'job', share: 0.15, cost: 1.2 },
  { kind: 'cancel', share: 0.06, cost: 0.4 },
  { kind: 'hostile', share: 0.08, cost: 0.1 },
  { kind: 'slow', share: 0.04, cost: 1 },
  { kind: 'read', share: 0.14, cost: 0.05 },
];

export interface MixDeps {
  gw: Proc;
  tenant: Tenant;
  formats: EncodedFormat[];
  /** The loopback webhook receiver. */
  hookUrl: string;
  /** Deliveries received, by job id (the receiver fills it). */
  deliveries: Map<string, number>;
  /** Jobs with a webhook that finished (each must have a delivery). */
  hooked: Set<string>;
}

export interface Outcome {
  kind: Kind | 'error';
  statuses: number[];
  /** 5xx answers (other than admission control's busy 503s) and calls that got no reply, described. */
  fivexx: string[];
  /** Admission control's 503 busy answers, waited out and retried. */
  busy: number;
  /** Latency of the main call, ms. */
  ms: number | null;
  /** Successful work done (credits owed). */
  work: number;
}

export function pickKind(random = Math.random): Kind {
  let r = random();
  for (const k of KINDS) {
    if (r < k.share) return k.kind;
    r -= k.share;
  }
  return 'read';
}

const pick = <T>(xs: T[]): T => xs[Math.floor(Math.random() * xs.length)];

class Story {
  readonly out: Outcome;
  constructor(
    private readonly d: MixDeps,
    kind: Kind,
  ) {
    this.out = { kind, statuses: [], fivexx: [], busy: 0, ms: null, work: 0 };
  }

  async http(path: string, opts: CallOptions & { label: string }): Promise<Reply> {
    for (let attempt = 1; ; attempt++) {
      const r = await call(`${this.d.gw.url}${API}${path}`, {
        deadlineMs: 60_000,
        keepBytes: 64 * 1024,
        ...opts,
        headers: { Authorization: `Bearer ${this.d.tenant.token}`, ...(opts.headers ?? {}) },
      });
      this.out.statuses.push(r.status);
      const after = Number(r.headers['retry-after']);
      if (r.status === 503 && after > 0 && /busy/.test(r.body.toString('utf8')) && attempt < 5) {
        this.out.busy++;
        await sleep(Math.min(5, after) * 1000);
        continue;
      }
      if (r.status >= 500 || (r.status === 0 && opts.stallAfter === undefined)) {
        this.out.fivexx.push(`${opts.label}: ${r.status || r.error} ${r.body.toString('utf8').slice(0, 160)}`);
      }
      return r;
    }
  }

  post(path: string, parts: Part[], label: string, extra: CallOptions = {}): Promise<Reply> {
    const { body, contentType } = multipart(parts);
    return this.http(path, { method: 'POST', headers: { 'Content-Type': contentType, 'Content-Length': body.length }, body, label, ...extra });
  }
}

const fileOf = (f: EncodedFormat, name = 'file'): Part => ({ name, filename: `speech.${f.ext}`, data: f.data, contentType: f.contentType });
const json = (r: Reply): Record<string, unknown> | null => {
  try {
    return JSON.parse(r.body.toString('utf8')) as Record<string, unknown>;
  } catch {
    return null;
  }
};

/** Polls a job until it is finished (or 180 s pass); resolves with its last view. */
async function settle(s: Story, id: string): Promise<{ status: string } | null> {
  const end = Date.now() + 180_000;
  for (;;) {
    const r = await s.http(`/jobs/${id}`, { label: 'poll job' });
    const job = r.status === 200 ? (json(r) as { status: string } | null) : null;
    if (job && !['queued', 'running'].includes(job.status)) return job;
    if (Date.now() > end) return job;
    await sleep(500);
  }
}

export async function runOne(d: MixDeps, kind: Kind): Promise<Outcome> {
  const s = new Story(d, kind);
  const ok = (r: Reply): boolean => r.status >= 200 && r.status < 300 && r.complete;
  switch (kind) {
    case 'denoise': {
      const r = await s.post('/denoise', [fileOf(pick(d.formats))], 'denoise', { keepBytes: 0 });
      s.out.ms = r.ms;
      if (ok(r)) s.out.work = 1;
      break;
    }
    case 'batch': {
      const parts = [fileOf(pick(d.formats), 'files'), fileOf(pick(d.formats), 'files'), fileOf(pick(d.formats), 'files')];
      if (Math.random() < 0.25) parts.push({ name: 'files', filename: 'junk.wav', data: Buffer.from('not audio') });
      const r = await s.post('/denoise/batch', parts, 'batch', { keepBytes: 0, deadlineMs: 120_000 });
      s.out.ms = r.ms;
      const summary = JSON.parse(String(r.headers['x-ns-batch'] ?? '{}')) as { succeeded?: number };
      if (ok(r) && (summary.succeeded ?? 0) > 0) s.out.work = 1;
      break;
    }
    case 'job': {
      const r = await s.post('/jobs', [{ name: 'webhook_url', value: d.hookUrl }, fileOf(pick(d.formats))], 'job');
      s.out.ms = r.ms;
      const id = r.status === 202 ? (json(r) as { id: string }).id : null;
      if (!id) break;
      const job = await settle(s, id);
      if (job?.status === 'succeeded' || job?.status === 'failed') d.hooked.add(id);
      if (job?.status === 'succeeded') {
        const res = await s.http(`/jobs/${id}/result`, { label: 'job result', keepBytes: 0 });
        if (ok(res)) s.out.work = 1;
        await s.http(`/jobs/${id}`, { method: 'DELETE', label: 'delete result' });
      }
      break;
    }
    case 'cancel': {
      const r = await s.post('/jobs', [fileOf(pick(d.formats))], 'job to cancel');
      s.out.ms = r.ms;
      const id = r.status === 202 ? (json(r) as { id: string }).id : null;
      if (!id) break;
      await sleep(Math.random() * 1000);
      const del = await s.http(`/jobs/${id}`, { method: 'DELETE', label: 'cancel' });
      // Finished before the cancel came: it did the work (the DELETE removed its result) and keeps its credit.
      if ((json(del) as { status?: string } | null)?.status === 'succeeded') s.out.work = 1;
      break;
    }
    case 'hostile': {
      const data = pick([
        Buffer.alloc(4096, 0x5a),
        Buffer.alloc(0),
        Buffer.from('<html><body>not audio</body></html>'),
        craftWav({ rate: 0, data: Buffer.alloc(3200) }),
        craftWav({ channels: 0, data: Buffer.alloc(3200) }),
      ]);
      const r = await s.post('/denoise', [{ name: 'file', filename: pick(['a.wav', 'a.mp3', 'a.flac']), data }], 'hostile');
      s.out.ms = r.ms;
      if (ok(r)) s.out.work = 1;
      break;
    }
    case 'slow': {
      const f = d.formats.find((x) => x.name === 'wav-s16') ?? d.formats[0];
      const { body, contentType } = multipart([fileOf(f)]);
      const headers = { 'Content-Type': contentType, 'Content-Length': body.length };
      if (Math.random() < 0.5) {
        // Stalls after 2 KB: 408 at CLIENT_IDLE_TIMEOUT_MS, nothing charged.
        const r = await s.http('/denoise', { method: 'POST', headers, body, stallAfter: 2048, deadlineMs: 20_000, label: 'stalled upload' });
        if (r.status !== 408) s.out.fivexx.push(`stalled upload: ${r.status || r.error} (expected 408)`);
      } else {
        // Slow but steady (about 160 KB/s): served.
        const pieces: Buffer[] = [];
        for (let i = 0; i < body.length; i += 16 * 1024) pieces.push(body.subarray(i, i + 16 * 1024));
        const r = await s.http('/denoise', { method: 'POST', headers, body: pieces, chunkDelayMs: 100, keepBytes: 0, label: 'steady slow upload' });
        s.out.ms = r.ms;
        if (ok(r)) s.out.work = 1;
      }
      break;
    }
    case 'read': {
      const r = await s.http(pick(['/models', '/jobs?limit=5']), { label: 'read' });
      s.out.ms = r.ms;
      break;
    }
  }
  return s.out;
}
