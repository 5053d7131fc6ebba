// Webhooks: when a job succeeds or fails, POST {id, type, created_at, data: job} to its webhook_url, signed with the
// workspace's secret (X-NS-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256 of "<t>.<body>">), retried with
// exponential backoff for 24 h. Deliveries are rows in the job store, so they survive restarts and any runner
// process can send them; each attempt is leased so two processes never send the same attempt.
import crypto from 'node:crypto';
import { randomBase62 } from '../../store/tokens';
import { postJson, type SafeHttpOptions } from './safe-http';
import { standardWebhookHeaders } from './signing';
import type { DeliveryFactory, DeliveryRecord, JobStore, JobsLog } from '../types';
import { UrlNotAllowedError, parseUserUrl } from './url-guard';
import { jobView } from '../views';
import type { JobMetrics } from '../metrics';

export const SIGNATURE_HEADER = 'X-NS-Signature';
/** How long a delivery keeps being retried. */
export const DELIVERY_WINDOW_MS = 24 * 3600_000;
/** First retry after 30 s, doubling, at most an hour apart. */
export const FIRST_RETRY_MS = 30_000;
export const MAX_RETRY_MS = 3600_000;
/** Finished deliveries stay visible in the console this long. */
export const DELIVERY_HISTORY_MS = 7 * 24 * 3600_000;

export function newWebhookSecret(): string {
  return 'whsec_' + randomBase62(32);
}

export function signatureHeader(secret: string, body: string, unixSeconds: number): string {
  const mac = crypto.createHmac('sha256', secret).update(`${unixSeconds}.${body}`, 'utf8').digest('hex');
  return `t=${unixSeconds},v1=${mac}`;
}

/**
 * What a receiver does: recompute the HMAC over "<t>.<raw body>", compare in constant time, and refuse old
 * timestamps (replays). Exported for the docs' example and the CLI; tests verify with their own code.
 */
export function verifySignature(secret: string, header: string, body: string, toleranceS = 300, nowMs = Date.now()): boolean {
  const parts = new Map<string, string[]>();
  for (const item of header.split(',')) {
    const eq = item.indexOf('=');
    if (eq <= 0) continue;
    const k = item.slice(0, eq).trim();
    parts.set(k, [...(parts.get(k) ?? []), item.slice(eq + 1).trim()]);
  }
  const t = Number(parts.get('t')?.[0]);
  if (!Number.isInteger(t) || Math.abs(nowMs / 1000 - t) > toleranceS) return false;
  const expected = Buffer.from(crypto.createHmac('sha256', secret).update(`${t}.${body}`, 'utf8').digest('hex'), 'utf8');
  return (parts.get('v1') ?? []).some((sig) => {
    const got = Buffer.from(sig, 'utf8');
    return got.length === expected.length && crypto.timingSafeEqual(got, expected);
  });
}

/** Delay before attempt n+1 after n failed attempts: 30 s, 1 min, 2 min, … capped at 1 h, ±10 % jitter. */
export function retryDelayMs(failedAttempts: number, random = Math.random): number {
  const base = Math.min(MAX_RETRY_MS, FIRST_RETRY_MS * 2 ** Math.max(0, failedAttempts - 1));
  return Math.round(base * (0.9 + 0.2 * random()));
}

/** The delivery for a job that just succeeded or failed (null: no webhook_url, or canceled). */
export const deliveryFor: DeliveryFactory = (job) => {
  if (!job.webhookUrl || (job.status !== 'succeeded' && job.status !== 'failed')) return null;
  const id = 'whd_' + randomBase62(20);
  const createdAt = job.finishedAt ?? Date.now();
  const event = job.status === 'succeeded' ? 'job.succeeded' : 'job.failed';
  const payload = JSON.stringify({ id, type: event, created_at: new Date(createdAt).toISOString(), data: jobView(job) });
  return {
    id,
    workspaceId: job.workspaceId,
    jobId: job.id,
    event,
    url: job.webhookUrl,
    payload,
    createdAt,
    giveUpAt: createdAt + DELIVERY_WINDOW_MS,
  };
};

export interface DispatcherDeps {
  store: JobStore;
  /** Address guard and timeouts for the receivers. */
  http: Omit<SafeHttpOptions, 'signal'>;
  owner: string;
  log: JobsLog;
  metrics?: JobMetrics;
  /** Poll interval for due deliveries. */
  pollMs?: number;
  now?: () => number;
}

/** Sends due deliveries: a few at a time, each attempt leased in the store. */
export class WebhookDispatcher {
  private timer: NodeJS.Timeout | null = null;
  private running = false;
  private stopped = false;
  private readonly inFlight = new Set<Promise<void>>();
  private readonly now: () => number;

  constructor(private readonly deps: DispatcherDeps) {
    this.now = deps.now ?? Date.now;
  }

  start(): void {
    this.schedule(0);
  }

  /** Look for due deliveries now (a job just finished). */
  wake(): void {
    if (!this.stopped && !this.running) this.schedule(0);
  }

  private schedule(ms: number): void {
    if (this.stopped) return;
    if (this.timer) clearTimeout(this.timer);
    this.timer = setTimeout(() => void this.tick(), ms);
    this.timer.unref();
  }

  private async tick(): Promise<void> {
    if (this.stopped || this.running) return;
    this.running = true;
    try {
      const due = await this.deps.store.claimDeliveries(this.deps.owner, 60_000, this.now(), 8);
      await Promise.all(due.map((d) => this.track(this.attempt(d))));
    } catch (err) {
      this.deps.log(`[jobs] webhook dispatch failed: ${err instanceof Error ? err.message : String(err)}`, 'error');
    } finally {
      this.running = false;
      this.schedule(this.deps.pollMs ?? 2000);
    }
  }

  private track(p: Promise<void>): Promise<void> {
    this.inFlight.add(p);
    return p.finally(() => this.inFlight.delete(p));
  }

  private async attempt(d: DeliveryRecord): Promise<void> {
    const { store } = this.deps;
    const secret = await store.ensureWebhookSecret(d.workspaceId, newWebhookSecret);
    const at = this.now();
    let status: number | null = null;
    let error: string | null = null;
    let permanent = false;
    try {
      const url = parseUserUrl(d.url, 'webhook_url');
      const res = await postJson(
        url,
        d.payload,
        {
          [SIGNATURE_HEADER]: signatureHeader(secret, d.payload, Math.floor(at / 1000)),
          ...standardWebhookHeaders(secret, d.id, d.payload, Math.floor(at / 1000)),
          'X-NS-Event': d.event,
          'X-NS-Delivery': d.id,
        },
        this.deps.http,
      );
      status = res.status;
      if (status < 200 || status > 299) error = `HTTP ${status}${res.snippet ? `: ${res.snippet}` : ''}`;
    } catch (err) {
      error = err instanceof Error ? err.message : String(err);
      // A receiver on a forbidden address stays forbidden.
      permanent = err instanceof UrlNotAllowedError;
    }
    const ok = error === null;
    const next = at + retryDelayMs(d.attempts + 1);
    const nextAttemptAt = ok || permanent || next > d.giveUpAt ? null : next;
    await store.recordDeliveryAttempt(d.id, this.deps.owner, {
      at,
      ok,
      status,
      error: error === null ? null : error.slice(0, 500),
      nextAttemptAt,
    });
    this.deps.metrics?.webhook(ok ? 'delivered' : nextAttemptAt === null ? 'failed' : 'retry');
    if (!ok) {
      this.deps.log(`[jobs] webhook ${d.id} for ${d.jobId} attempt ${d.attempts + 1} failed: ${error}`, 'warn');
    }
  }

  async stop(): Promise<void> {
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
    await Promise.all([...this.inFlight]);
  }
}
