// Webhooks: when a job succeeds or fails, POST {id, type, created_at, data: job} to its webhook_url, signed with the
// workspace's secret (X-NS-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256 of "<t>.<body>">), retried with
// exponential backoff for 24 h. Deliveries are rows in the job store, so they survive restarts and any runner
// process can send them; each attempt is leased so two processes never send the same attempt.
// Attempts run side by side (at most MAX_IN_FLIGHT), at most PER_DESTINATION at once per receiver (scheme, host,
// port), each within a total deadline: a slow receiver delays its own deliveries, never another's.
import crypto from 'node:crypto';
import { randomBase62 } from '../../store/gateway/tokens';
import { postJson, type SafeHttpOptions } from './safe-http';
import { standardWebhookHeaders } from './signing';
import type { DeliveryFactory, DeliveryRecord, JobStore } from '../../store/jobs/types';
import type { JobsLog } from '../log';
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

/** Attempts in flight per process. */
export const MAX_IN_FLIGHT = 16;
/** Attempts in flight per receiver (scheme://host:port). */
export const PER_DESTINATION = 2;
/** How long a claimed attempt stays leased to this process (well over an attempt's deadline). */
const LEASE_MS = 60_000;

/** A delivery's receiver, as the prefix its URL starts with: `https://host:port/`. */
export function destinationOf(url: string): string {
  try {
    return new URL(url).origin + '/';
  } catch {
    return url;
  }
}

/**
 * Sends due deliveries as slots free up: each attempt leased in the store, at most MAX_IN_FLIGHT at once and
 * PER_DESTINATION per receiver; receivers at their bound are skipped when claiming, so their backlog never blocks
 * the others'.
 */
export class WebhookDispatcher {
  private timer: NodeJS.Timeout | null = null;
  private filling = false;
  /** Another fill was asked for while one ran. */
  private again = false;
  private stopped = false;
  private readonly inFlight = new Set<Promise<void>>();
  /** Attempts in flight per destination. */
  private readonly perDestination = new Map<string, number>();
  private readonly now: () => number;

  constructor(private readonly deps: DispatcherDeps) {
    this.now = deps.now ?? Date.now;
  }

  start(): void {
    this.schedule(0);
  }

  /** Look for due deliveries now (a job just finished, or an attempt freed a slot). */
  wake(): void {
    if (this.stopped) return;
    if (this.filling) this.again = true;
    else this.schedule(0);
  }

  /** Attempts in flight now (tests, diagnostics). */
  inFlightCount(): number {
    return this.inFlight.size;
  }

  private schedule(ms: number): void {
    if (this.stopped) return;
    if (this.timer) clearTimeout(this.timer);
    this.timer = setTimeout(() => void this.fill(), ms);
    this.timer.unref();
  }

  /** Claims due deliveries one by one while slots are free, starting each attempt at once. */
  private async fill(): Promise<void> {
    if (this.stopped || this.filling) return;
    this.filling = true;
    try {
      do {
        this.again = false;
        while (!this.stopped && this.inFlight.size < MAX_IN_FLIGHT) {
          const busy = [...this.perDestination].filter(([, n]) => n >= PER_DESTINATION).map(([dest]) => dest);
          const [d] = await this.deps.store.claimDeliveries(this.deps.owner, LEASE_MS, this.now(), 1, busy);
          if (!d) break;
          this.launch(d);
        }
      } while (this.again && !this.stopped);
    } catch (err) {
      this.deps.log(`[jobs] webhook dispatch failed: ${err instanceof Error ? err.message : String(err)}`, 'error');
    } finally {
      this.filling = false;
      this.schedule(this.deps.pollMs ?? 2000);
    }
  }

  private launch(d: DeliveryRecord): void {
    const dest = destinationOf(d.url);
    this.perDestination.set(dest, (this.perDestination.get(dest) ?? 0) + 1);
    const p: Promise<void> = this.attempt(d)
      .catch((err: unknown) => {
        this.deps.log(`[jobs] webhook ${d.id} attempt could not be recorded: ${err instanceof Error ? err.message : String(err)}`, 'error');
      })
      .finally(() => {
        const left = (this.perDestination.get(dest) ?? 1) - 1;
        if (left > 0) this.perDestination.set(dest, left);
        else this.perDestination.delete(dest);
        this.inFlight.delete(p);
        this.wake();
      });
    this.inFlight.add(p);
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
    while (this.filling) await new Promise((r) => setTimeout(r, 10));
    await Promise.all([...this.inFlight]);
  }
}
