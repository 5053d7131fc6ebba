// Rows of the PostgreSQL gateway store as pg returns them (jsonb parsed, timestamptz as Date, bigint as text) and
// their mapping to the contract's records, plus the request-log filter as a WHERE clause with $n parameters.
import type { PlanId, RequestLogEntry, RequestLogFilter, TokenRecord, Workspace } from './types';

export interface WorkspaceRow {
  id: string;
  name: string;
  plan: PlanId;
  custom_rpm: number | null;
  custom_credits: string | null;
  excluded_services: string[];
  created_at: Date;
}

export interface TokenRow {
  id: string;
  workspace_id: string;
  name: string;
  prefix: string;
  scopes: string[];
  allowed_ips: string[];
  expires_at: Date | null;
  revoked_at: Date | null;
  last_used_at: Date | null;
  created_at: Date;
}

export interface LogRow {
  request_id: string;
  client_request_id: string | null;
  time: Date;
  token_id: string | null;
  workspace_id: string | null;
  method: string;
  service: string | null;
  endpoint: string | null;
  status: number;
  error_type: string | null;
  error_message: string | null;
  credits_charged: number;
  bytes_in: string;
  bytes_out: string;
  upstream_ms: number | null;
  total_ms: number;
  client_ip: string;
  calls: number;
}

const iso = (d: Date | null): string | null => (d === null ? null : d.toISOString());

export function toWorkspace(row: WorkspaceRow): Workspace {
  return {
    id: row.id,
    name: row.name,
    plan: row.plan,
    customRequestsPerMinute: row.custom_rpm,
    customCreditsPerMonth: row.custom_credits === null ? null : Number(row.custom_credits),
    excludedServices: row.excluded_services,
    createdAt: row.created_at.toISOString(),
  };
}

export function toToken(row: TokenRow): TokenRecord {
  return {
    id: row.id,
    workspaceId: row.workspace_id,
    name: row.name,
    prefix: row.prefix,
    scopes: row.scopes,
    allowedIps: row.allowed_ips,
    expiresAt: iso(row.expires_at),
    revokedAt: iso(row.revoked_at),
    lastUsedAt: iso(row.last_used_at),
    createdAt: row.created_at.toISOString(),
  };
}

export function toLogEntry(row: LogRow): RequestLogEntry {
  return {
    requestId: row.request_id,
    clientRequestId: row.client_request_id,
    time: row.time.toISOString(),
    tokenId: row.token_id,
    workspaceId: row.workspace_id,
    method: row.method,
    service: row.service,
    endpoint: row.endpoint,
    status: row.status,
    errorType: row.error_type,
    creditsCharged: row.credits_charged,
    bytesIn: Number(row.bytes_in),
    bytesOut: Number(row.bytes_out),
    upstreamMs: row.upstream_ms,
    totalMs: row.total_ms,
    clientIp: row.client_ip,
    errorMessage: row.error_message,
    calls: Number(row.calls),
  };
}

export function whereClause(filter: RequestLogFilter, params: unknown[]): string {
  const parts: string[] = [];
  const add = (sql: string, value: unknown) => {
    params.push(value);
    parts.push(sql.replace('?', `$${params.length}`));
  };
  if (filter.workspaceId !== undefined) add('workspace_id = ?', filter.workspaceId);
  if (filter.tokenId !== undefined) add('token_id = ?', filter.tokenId);
  if (filter.status !== undefined) add('status = ?', filter.status);
  if (filter.errorType !== undefined) add('error_type = ?', filter.errorType);
  if (filter.endpoint !== undefined) add('endpoint = ?', filter.endpoint);
  if (filter.since !== undefined) add('time >= ?::timestamptz', filter.since);
  return parts.length ? `WHERE ${parts.join(' AND ')}` : '';
}
