// Rows of the gateway tables as either engine returns them (SQLite: JSON in TEXT, times as ISO text as written;
// PostgreSQL: jsonb parsed, timestamptz as Date, bigint as text), read through the dialect into the contract's
// records, plus the request-log filter as a WHERE clause with `@name` parameters.
import { readIsoOrNull, type Dialect, type Params, type Row } from '../../db/dialect';
import type { PlanId, RequestLogEntry, RequestLogFilter, TokenRecord, Workspace } from './types';

const numberOrNull = (value: unknown): number | null => (value === null ? null : Number(value));

export function toWorkspace(d: Dialect, row: Row): Workspace {
  return {
    id: row.id as string,
    name: row.name as string,
    plan: row.plan as PlanId,
    customRequestsPerMinute: numberOrNull(row.custom_rpm),
    customCreditsPerMonth: numberOrNull(row.custom_credits),
    excludedServices: d.readJson(row.excluded_services) as string[],
    createdAt: d.readIso(row.created_at),
  };
}

export function toToken(d: Dialect, row: Row): TokenRecord {
  return {
    id: row.id as string,
    workspaceId: row.workspace_id as string,
    name: row.name as string,
    prefix: row.prefix as string,
    scopes: d.readJson(row.scopes) as string[],
    allowedIps: d.readJson(row.allowed_ips) as string[],
    expiresAt: readIsoOrNull(d, row.expires_at),
    revokedAt: readIsoOrNull(d, row.revoked_at),
    lastUsedAt: readIsoOrNull(d, row.last_used_at),
    createdAt: d.readIso(row.created_at),
  };
}

export function toLogEntry(d: Dialect, row: Row): RequestLogEntry {
  return {
    requestId: row.request_id as string,
    clientRequestId: row.client_request_id as string | null,
    time: d.readIso(row.time),
    tokenId: row.token_id as string | null,
    workspaceId: row.workspace_id as string | null,
    method: row.method as string,
    service: row.service as string | null,
    endpoint: row.endpoint as string | null,
    status: row.status as number,
    errorType: row.error_type as string | null,
    creditsCharged: row.credits_charged as number,
    bytesIn: Number(row.bytes_in),
    bytesOut: Number(row.bytes_out),
    upstreamMs: row.upstream_ms as number | null,
    totalMs: row.total_ms as number,
    clientIp: row.client_ip as string,
    errorMessage: row.error_message as string | null,
    calls: Number(row.calls),
  };
}

/** The filter's conditions on request_log; `since` is compared as given (ISO text on SQLite, a timestamptz on PostgreSQL). */
export function whereClause(filter: RequestLogFilter): { sql: string; params: Params } {
  const parts: string[] = [];
  const params: Params = {};
  const add = (column: string, name: keyof RequestLogFilter, op = '='): void => {
    if (filter[name] === undefined) return;
    parts.push(`${column} ${op} @${name}`);
    params[name] = filter[name];
  };
  add('workspace_id', 'workspaceId');
  add('token_id', 'tokenId');
  add('status', 'status');
  add('error_type', 'errorType');
  add('endpoint', 'endpoint');
  add('time', 'since', '>=');
  return { sql: parts.length ? `WHERE ${parts.join(' AND ')}` : '', params };
}
