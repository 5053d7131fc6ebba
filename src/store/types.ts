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

export interface GatewayStore {
  // workspaces
  createWorkspace(name: string, plan: PlanId, custom?: { requestsPerMinute?: number; creditsPerMonth?: number }): Workspace;
  getWorkspace(id: string): Workspace | null;
  getWorkspaceByName(name: string): Workspace | null;
  listWorkspaces(): Workspace[];
  setPlan(workspaceId: string, plan: PlanId, custom?: { requestsPerMinute?: number; creditsPerMonth?: number }): Workspace;

  // tokens: create returns the clear token once; only its sha256 is stored
  createToken(input: NewToken): { token: string; record: TokenRecord };
  findTokenByHash(sha256Hex: string): TokenRecord | null;
  getToken(id: string): TokenRecord | null;
  listTokens(workspaceId?: string): TokenRecord[];
  revokeToken(idOrPrefix: string): TokenRecord | null;
  touchToken(id: string, when: string): void;

  // credits: atomic check-and-charge for the calendar month (UTC) of `when`
  chargeCredits(workspaceId: string, amount: number, limit: number, when: Date): CreditCharge;
  refundCredits(workspaceId: string, amount: number, when: Date): void;
  creditsUsed(workspaceId: string, when: Date): number;

  // request log
  logRequest(entry: RequestLogEntry): void;
  queryRequests(filter: RequestLogFilter): RequestLogEntry[];
  requestsPerDay(workspaceId: string, days: number): Array<{ day: string; count: number; errors: number }>;

  // console admin secret (hash), generated on first start when ADMIN_SECRET is unset
  getSetting(key: string): string | null;
  setSetting(key: string, value: string): void;

  close(): void;

  // extensions (added by the gateway owner; existing members above are unchanged)
  /** Services this workspace may not call even though its plan includes them (→ 403 plan_forbids_service). */
  setExcludedServices(workspaceId: string, services: string[]): Workspace;
  /** Number of logged requests matching the filter (ignores limit/offset). */
  countRequests(filter: RequestLogFilter): number;
}

/** 'YYYY-MM' of a date in UTC: the credit period. */
export function creditPeriod(when: Date): string {
  return when.toISOString().slice(0, 7);
}
