// Chaos suite: what every phase shares: the tally of calls (statuses, 5xx, no-reply, credits owed), workspaces and
// tokens created in a gateway's store, and the results of the scenarios.
import { loadConfig } from '../../src/config';
import { openStore } from '../../src/store';
import type { GatewayStore, PlanId } from '../../src/store/gateway/types';
import { call, type CallOptions, type Reply } from './http';
import type { Proc } from './procs';

export interface ScenarioResult {
  /** Issue item(s) it exercises, e.g. "9.3" or "12.3". */
  item: string;
  title: string;
  /** true: target met; false: missed; null: could not run. */
  pass: boolean | null;
  detail: string;
}

export interface Tenant {
  workspaceId: string;
  token: string;
  store: GatewayStore;
}

/** Counts every call made through a gateway and what it cost. */
export class Tally {
  readonly statuses = new Map<number, number>();
  readonly unexpected5xx: string[] = [];
  readonly noReply: string[] = [];
  requests = 0;
  /** 2xx answers of credit-costing calls, per workspace (what should have been charged). */
  readonly owed = new Map<string, { store: GatewayStore; n: number }>();

  record(label: string, reply: Reply, opts: { tenant?: Tenant; costs?: boolean; expect5xx?: boolean; expectNoReply?: boolean } = {}): void {
    this.requests++;
    this.statuses.set(reply.status, (this.statuses.get(reply.status) ?? 0) + 1);
    if (reply.status >= 500 && !opts.expect5xx) this.unexpected5xx.push(`${label}: ${reply.status} ${reply.body.toString('utf8').slice(0, 200)}`);
    if (reply.status === 0 && !opts.expectNoReply) this.noReply.push(`${label}: ${reply.error ?? 'no reply'}`);
    if (opts.tenant && opts.costs !== false) {
      const key = opts.tenant.workspaceId;
      const entry = this.owed.get(key) ?? { store: opts.tenant.store, n: 0 };
      // A batch in which every file failed is answered 200 but not charged (issue 27, item 10).
      if (reply.status >= 200 && reply.status < 300 && reply.complete && !batchDeliveredNothing(reply)) entry.n++;
      this.owed.set(key, entry);
    }
  }

  /** Credits charged vs 2xx over every workspace used: [charged, owed, mismatching workspaces]. */
  async credits(): Promise<{ charged: number; owed: number; mismatches: string[] }> {
    let charged = 0;
    let owed = 0;
    const mismatches: string[] = [];
    for (const [ws, { store, n }] of this.owed) {
      const used = await settledCreditsUsed(store, ws);
      charged += used;
      owed += n;
      if (used !== n) mismatches.push(`${ws}: charged ${used}, 2xx ${n}`);
    }
    return { charged, owed, mismatches };
  }
}

/** The answer is a batch summary (X-NS-Batch) with no file succeeded. */
export function batchDeliveredNothing(reply: Reply): boolean {
  const raw = reply.headers['x-ns-batch'];
  if (typeof raw !== 'string') return false;
  try {
    return (JSON.parse(raw) as { succeeded?: unknown }).succeeded === 0;
  } catch {
    return false;
  }
}

/**
 * Credits used by a workspace once its calls' holds have ended. The gateway settles a hold just after the response
 * went out, so a count read the moment the client has its answer can be one short; wait (up to 5 s) for no hold.
 */
export async function settledCreditsUsed(store: GatewayStore, workspaceId: string): Promise<number> {
  const end = Date.now() + 5000;
  while (Date.now() < end && (await store.creditsHeld(workspaceId, new Date())) > 0) await new Promise((r) => setTimeout(r, 25));
  return store.creditsUsed(workspaceId, new Date());
}

export class Ctx {
  readonly results: ScenarioResult[] = [];
  readonly tally = new Tally();
  private readonly stores = new Map<string, GatewayStore>();
  private counter = 0;

  constructor(readonly deadline: number) {}

  async storeOf(dataDir: string): Promise<GatewayStore> {
    let s = this.stores.get(dataDir);
    if (!s) {
      s = await openStore(loadConfig({ DATA_DIR: dataDir }));
      this.stores.set(dataDir, s);
    }
    return s;
  }

  async tenant(dataDir: string, plan: PlanId = 'scale', opts: { credits?: number; rpm?: number; allowedIps?: string[] } = {}): Promise<Tenant> {
    const store = await this.storeOf(dataDir);
    const custom = plan === 'enterprise' ? { creditsPerMonth: opts.credits, requestsPerMinute: opts.rpm } : undefined;
    const ws = await store.createWorkspace(`chaos-${process.pid}-${++this.counter}`, plan, custom);
    const { token } = await store.createToken({
      workspaceId: ws.id,
      name: 'chaos',
      scopes: ['*'],
      allowedIps: opts.allowedIps ?? [],
      expiresAt: null,
    });
    return { workspaceId: ws.id, token, store };
  }

  /**
   * A call through a gateway as `tenant`, recorded in the tally. `costs`: whether a 2xx is owed a credit (default:
   * POSTs); jobs scenarios pass false and check their workspace's credits themselves (a failed job is refunded).
   */
  async api(
    gw: Proc,
    tenant: Tenant | null,
    path: string,
    opts: CallOptions & { label?: string; expect5xx?: boolean; expectNoReply?: boolean; costs?: boolean } = {},
  ): Promise<Reply> {
    const headers: Record<string, string | number | string[]> = { ...(opts.headers ?? {}) };
    if (tenant) headers.Authorization = `Bearer ${tenant.token}`;
    const reply = await call(`${gw.url}${path}`, { ...opts, headers });
    const costs = opts.costs ?? (opts.method ?? 'GET') === 'POST';
    this.tally.record(opts.label ?? path, reply, { tenant: tenant ?? undefined, costs, expect5xx: opts.expect5xx, expectNoReply: opts.expectNoReply });
    return reply;
  }

  add(result: ScenarioResult): void {
    this.results.push(result);
    const mark = result.pass === null ? 'SKIP' : result.pass ? 'ok  ' : 'MISS';
    process.stdout.write(`  [${mark}] ${result.item.padEnd(5)} ${result.title}: ${result.detail}\n`);
  }

  timeLeft(): number {
    return this.deadline - Date.now();
  }

  async close(): Promise<void> {
    for (const s of this.stores.values()) await s.close().catch(() => undefined);
  }
}
