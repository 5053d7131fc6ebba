// The gateway's persistent state behind one interface, so a shared store (Postgres, Redis)
// can replace the embedded SQLite default without touching the policies.

export type PlanId = 'free' | 'starter' | 'scale' | 'enterprise';

export interface PlanLimits {
  requestsPerMinute: number;
  creditsPerMonth: number;
  /** Live streams open at once per workspace (GET /stream). */
  concurrentStreams: number;
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
  /** The gateway's own id (always minted by the gateway, unique per call). */
  requestId: string;
  /** The X-Request-Id the client sent, when it looked like an id; kept for correlation only. */
  clientRequestId?: string | null;
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
  /** Calls this row stands for (read back; 1 unless the row aggregates refusals, see aggregateKey). */
  calls?: number;
  /**
   * Written only. Entries with the same key share one row: the first one's id, time, IP and message stay, `calls`
   * counts them and their bytes add up. The gateway gives one to refusals of a key (docs/gateway.md, request log):
   * token, status, error type, endpoint and minute. Null or absent: a row of its own.
   */
  aggregateKey?: string | null;
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

/** Credits held for one call in flight: settled when the call delivered, released otherwise. */
export interface CreditReservation {
  id: string;
  workspaceId: string;
  /** 'YYYY-MM': the month the credits count against (the month the call started). */
  period: string;
  amount: number;
}

export interface CreditReserveResult {
  ok: boolean;
  /** Settled credits of the period (calls that delivered). */
  used: number;
  /** Credits held by calls in flight (unexpired reservations), this one included when ok. */
  reserved: number;
  limit: number;
  /** The reservation made (null when !ok). */
  reservation: CreditReservation | null;
}

/**
 * A job's credit settled before its job exists (POST /jobs: gateway.db and the job queue are two databases), kept
 * until the job is created (confirmCharge) or the credit given back (refundOnce). A gateway killed between the two
 * writes leaves it behind, and the job runners' housekeeping replays it.
 */
export interface PendingCharge {
  /** The job's id. */
  key: string;
  /** Who settled it, `<host>-<pid>-<instance>`: a replay leaves those of live processes alone. */
  owner: string;
}

export interface PendingChargeRecord extends PendingCharge {
  workspaceId: string;
  /** 'YYYY-MM' of the credit. */
  period: string;
  amount: number;
  /** Epoch ms. */
  createdAt: number;
}

/**
 * The contract every engine implements (SQLite embedded by default; PostgreSQL when configured). Every member is
 * asynchronous so that a networked engine fits the same interface; one implementation (store.ts) runs on both.
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

  // credits: atomic check-and-charge for the calendar month (UTC) of `when` (counts reservations in flight as held)
  chargeCredits(workspaceId: string, amount: number, limit: number, when: Date): Promise<CreditCharge>;
  refundCredits(workspaceId: string, amount: number, when: Date): Promise<void>;
  creditsUsed(workspaceId: string, when: Date): Promise<number>;

  // credit reservations (the gateway's path): a call holds its credits while in flight. Reserving is atomic
  // across processes: used + reserved + amount <= limit. A reservation not renewed before it expires belongs to a
  // gateway that died mid-call: it is reclaimed (given back) by reserveCredits and reclaimExpiredReservations.
  reserveCredits(workspaceId: string, amount: number, limit: number, when: Date, ttlMs: number): Promise<CreditReserveResult>;
  /** Pushes the expiry of a reservation still in flight; false when it was already reclaimed or ended. */
  renewReservation(reservation: CreditReservation, expiresAt: Date): Promise<boolean>;
  /**
   * The call delivered: its credits become used (also when the reservation had already been reclaimed). With
   * `pending`, a pending charge is recorded in the same transaction (the job it pays for is created next).
   */
  settleReservation(reservation: CreditReservation, pending?: PendingCharge): Promise<void>;
  /** The call did not deliver: its credits are given back (no-op when already reclaimed). */
  releaseReservation(reservation: CreditReservation): Promise<void>;
  /** Gives back every reservation whose expiry is at or before `now`; returns how many. */
  reclaimExpiredReservations(now: Date): Promise<number>;
  /** Credits of the month of `when` held by reservations not yet settled, released or reclaimed. */
  creditsHeld(workspaceId: string, when: Date): Promise<number>;

  // credits across the job queue (issue 35, item 12): idempotent, so a replay after a crash is exact
  /** The job of a pending charge exists: the pending charge goes (no-op when there is none). */
  confirmCharge(key: string): Promise<void>;
  /** Pending charges, oldest first. */
  pendingCharges(limit: number): Promise<PendingChargeRecord[]>;
  /**
   * Gives `amount` credits back to `period` once per `key` (a job id), and ends a pending charge of that key, in one
   * transaction. True when given back now; false when that key was refunded before (nothing changes then).
   */
  refundOnce(key: string, workspaceId: string, amount: number, period: string): Promise<boolean>;
  /** Forgets refunds given before `before` (their jobs are long gone); returns how many. */
  pruneRefunds(before: Date): Promise<number>;

  // request log
  logRequest(entry: RequestLogEntry): Promise<void>;
  queryRequests(filter: RequestLogFilter): Promise<RequestLogEntry[]>;
  /** Requests (and those with a status >= 400) per UTC day, aggregated rows counted by their `calls`. */
  requestsPerDay(workspaceId: string, days: number): Promise<Array<{ day: string; count: number; errors: number }>>;

  // console admin secret (hash), generated on first start when ADMIN_SECRET is unset
  getSetting(key: string): Promise<string | null>;
  setSetting(key: string, value: string): Promise<void>;

  close(): Promise<void>;

  // extensions (added by the gateway owner; existing members above are unchanged)
  /** Services this workspace may not call even though its plan includes them (→ 403 plan_forbids_service). */
  setExcludedServices(workspaceId: string, services: string[]): Promise<Workspace>;
  /** Number of logged requests matching the filter (ignores limit/offset): the sum of the rows' `calls`. */
  countRequests(filter: RequestLogFilter): Promise<number>;
  /** Deletes at most `maxRows` request-log rows older than `before` (ISO); returns how many were deleted. */
  pruneRequests(before: string, maxRows: number): Promise<number>;
  /** Schema versions applied, in order (numbered migrations recorded in schema_migrations). */
  schemaVersions(): Promise<number[]>;
  /**
   * A new secret for an existing key (the console playground's one key per workspace): a new token and display
   * prefix, the given scopes and expiry, not revoked. The old secret stops working at once; the id, name and the
   * request log's history stay. The clear token is returned once, as by createToken; null when no such id.
   */
  reissueToken(id: string, input: { scopes: string[]; expiresAt: string | null }): Promise<{ token: string; record: TokenRecord } | null>;
}

/** 'YYYY-MM' of a date in UTC: the credit period. */
export function creditPeriod(when: Date): string {
  return when.toISOString().slice(0, 7);
}
