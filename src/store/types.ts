// The gateway's persistent state behind one interface, so a shared store (Postgres, Redis)
// can replace the embedded SQLite default without touching the policies.

export type PlanId = 'free' | 'starter' | 'scale' | 'enterprise';

export interface PlanLimits {
  requestsPerMinute: number;
  creditsPerMonth: number;
  /** Services the plan includes; '*' means all. */
  services: string[];
}

export interface Workspace {
  id: string;
  name: string;
  plan: PlanId;
  /** Enterprise custom limits (null: plan defaults). */
  customRequestsPerMinute: number | null;
  customCreditsPerMonth: number | null;
  /** Services the plan excludes (for plan_forbids_service); empty = all allowed. */
  excludedServices?: string[];
  createdAt: string; // ISO
}

export interface TokenRecord {
  id: string;
  workspaceId: string;
  name: string;
  /** First characters of the token for display, e.g. 'mw_live_AbCd'. */
  prefix: string;
  scopes: string[];
  /** IPs and CIDR ranges (v4 or v6); empty = any address. */
  allowedIps: string[];
  expiresAt: string | null; // ISO
  revokedAt: string | null; // ISO
  lastUsedAt: string | null; // ISO
  createdAt: string; // ISO
}

export interface NewToken {
  workspaceId: string;
  name: string;
  scopes: string[];
  allowedIps: string[];
  expiresAt: string | null;
}

export interface RequestLogEntry {
  requestId: string;
  time: string; // ISO
  tokenId: string | null;
  workspaceId: string | null;
  method: string;
  service: string | null;
  endpoint: string | null;
  status: number;
  errorType: string | null;
  creditsCharged: number;
  bytesIn: number;
  bytesOut: number;
  upstreamMs: number | null;
  totalMs: number;
  clientIp: string;
  /** Why the call failed in words: the gateway's error message, or the model service's `detail` for its 4xx. */
  errorMessage?: string | null;
}

export interface RequestLogFilter {
  workspaceId?: string;
  tokenId?: string;
  status?: number;
  errorType?: string;
  endpoint?: string;
  since?: string;
  limit?: number;
  offset?: number;
}

export interface CreditCharge {
  ok: boolean;
  used: number;
  limit: number;
}

/**
 * The contract every engine implements (SQLite embedded by default; PostgreSQL when configured). Every member is
 * asynchronous so that a networked engine fits the same interface; the SQLite engine answers synchronously inside.
 */
export interface GatewayStore {
  // workspaces
  createWorkspace(name: string, plan: PlanId, custom?: { requestsPerMinute?: number; creditsPerMonth?: number }): Promise<Workspace>;
  getWorkspace(id: string): Promise<Workspace | null>;
  getWorkspaceByName(name: string): Promise<Workspace | null>;
  listWorkspaces(): Promise<Workspace[]>;
  setPlan(workspaceId: string, plan: PlanId, custom?: { requestsPerMinute?: number; creditsPerMonth?: number }): Promise<Workspace>;

  // tokens: create returns the clear token once; only its sha256 is stored
  createToken(input: NewToken): Promise<{ token: string; record: TokenRecord }>;
  findTokenByHash(sha256Hex: string): Promise<TokenRecord | null>;
  getToken(id: string): Promise<TokenRecord | null>;
  listTokens(workspaceId?: string): Promise<TokenRecord[]>;
  revokeToken(idOrPrefix: string): Promise<TokenRecord | null>;
  touchToken(id: string, when: string): Promise<void>;

  // credits: atomic check-and-charge for the calendar month (UTC) of `when`
  chargeCredits(workspaceId: string, amount: number, limit: number, when: Date): Promise<CreditCharge>;
  refundCredits(workspaceId: string, amount: number, when: Date): Promise<void>;
  creditsUsed(workspaceId: string, when: Date): Promise<number>;

  // request log
  logRequest(entry: RequestLogEntry): Promise<void>;
  queryRequests(filter: RequestLogFilter): Promise<RequestLogEntry[]>;
  requestsPerDay(workspaceId: string, days: number): Promise<Array<{ day: string; count: number; errors: number }>>;

  // console admin secret (hash), generated on first start when ADMIN_SECRET is unset
  getSetting(key: string): Promise<string | null>;
  setSetting(key: string, value: string): Promise<void>;

  close(): Promise<void>;

  // extensions (added by the gateway owner; existing members above are unchanged)
  /** Services this workspace may not call even though its plan includes them (→ 403 plan_forbids_service). */
  setExcludedServices(workspaceId: string, services: string[]): Promise<Workspace>;
  /** Number of logged requests matching the filter (ignores limit/offset). */
  countRequests(filter: RequestLogFilter): Promise<number>;
}

/** 'YYYY-MM' of a date in UTC: the credit period. */
export function creditPeriod(when: Date): string {
  return when.toISOString().slice(0, 7);
}
