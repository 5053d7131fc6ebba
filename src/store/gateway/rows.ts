// Rows of the SQLite gateway store as stored (JSON in TEXT, times as ISO text) and their mapping to the contract's
// records, plus the request-log filter as a WHERE clause.
import type { PlanId, RequestLogEntry, RequestLogFilter, TokenRecord, Workspace } from './types';

export interface WorkspaceRow {
  id: string;
  name: string;
  plan: PlanId;
  custom_rpm: number | null;
  custom_credits: number | null;
  excluded_services: string;
  created_at: string;
}

export interface TokenRow {
  id: string;
  workspace_id: string;
  name: string;
  prefix: string;
  scopes: string;
  allowed_ips: string;
  expires_at: string | null;
  revoked_at: string | null;
  last_used_at: string | null;
  created_at: string;
}

export interface LogRow {
  request_id: string;
  client_request_id: string | null;
  time: string;
  token_id: string | null;
  workspace_id: string | null;
  method: string;
  service: string | null;
  endpoint: string | null;
  status: number;
  error_type: string | null;
  error_message: string | null;
  credits_charged: number;
  bytes_in: number;
  bytes_out: number;
  upstream_ms: number | null;
  total_ms: number;
  client_ip: string;
  calls: number;
}

export function toWorkspace(row: WorkspaceRow): Workspace {
  return {
    id: row.id,
    name: row.name,
    plan: row.plan,
    customRequestsPerMinute: row.custom_rpm,
    customCreditsPerMonth: row.custom_credits,
    excludedServices: JSON.parse(row.excluded_services) as string[],
    createdAt: row.created_at,
  };
}

export function toToken(row: TokenRow): TokenRecord {
  return {
    id: row.id,
    workspaceId: row.workspace_id,
    name: row.name,
    prefix: row.prefix,
    scopes: JSON.parse(row.scopes) as string[],
    allowedIps: JSON.parse(row.allowed_ips) as string[],
    expiresAt: row.expires_at,
    revokedAt: row.revoked_at,
    lastUsedAt: row.last_used_at,
    createdAt: row.created_at,
  };
}

export function toLogEntry(row: LogRow): RequestLogEntry {
  return {
    requestId: row.request_id,
    clientRequestId: row.client_request_id,
    time: row.time,
    tokenId: row.token_id,
    workspaceId: row.workspace_id,
    method: row.method,
    service: row.service,
    endpoint: row.endpoint,
    status: row.status,
    errorType: row.error_type,
    creditsCharged: row.credits_charged,
    bytesIn: row.bytes_in,
    bytesOut: row.bytes_out,
    upstreamMs: row.upstream_ms,
    totalMs: row.total_ms,
    clientIp: row.client_ip,
    errorMessage: row.error_message,
    calls: Number(row.calls),
  };
}

export function whereClause(filter: RequestLogFilter): { sql: string; params: unknown[] } {
  const parts: string[] = [];
  const params: unknown[] = [];
  if (filter.workspaceId !== undefined) (parts.push('workspace_id = ?'), params.push(filter.workspaceId));
  if (filter.tokenId !== undefined) (parts.push('token_id = ?'), params.push(filter.tokenId));
  if (filter.status !== undefined) (parts.push('status = ?'), params.push(filter.status));
  if (filter.errorType !== undefined) (parts.push('error_type = ?'), params.push(filter.errorType));
  if (filter.endpoint !== undefined) (parts.push('endpoint = ?'), params.push(filter.endpoint));
  if (filter.since !== undefined) (parts.push('time >= ?'), params.push(filter.since));
  return { sql: parts.length ? `WHERE ${parts.join(' AND ')}` : '', params };
}
