// The JSON shapes the console API answers with: keys, workspaces (with this month's credits) and request-log rows,
// in the snake_case the pages read. One place, so every route shows a key or a workspace the same way.
import type { GatewayStore, RequestLogEntry, TokenRecord, Workspace } from '../../store/gateway/types';
import { displayLimits } from '../plans';

export function tokenStatus(t: TokenRecord, now = Date.now()): 'active' | 'revoked' | 'expired' {
  if (t.revokedAt) return 'revoked';
  if (t.expiresAt && Date.parse(t.expiresAt) <= now) return 'expired';
  return 'active';
}

export function tokenView(t: TokenRecord, workspaces: Map<string, Workspace>) {
  return {
    id: t.id,
    name: t.name,
    prefix: t.prefix,
    workspace_id: t.workspaceId,
    workspace_name: workspaces.get(t.workspaceId)?.name ?? t.workspaceId,
    scopes: t.scopes,
    allowed_ips: t.allowedIps,
    created_at: t.createdAt,
    last_used_at: t.lastUsedAt,
    expires_at: t.expiresAt,
    revoked_at: t.revokedAt,
    status: tokenStatus(t),
  };
}

export async function workspaceView(store: GatewayStore, ws: Workspace, now: Date) {
  const limits = displayLimits(ws);
  const used = await store.creditsUsed(ws.id, now);
  const tokens = await store.listTokens(ws.id);
  return {
    id: ws.id,
    name: ws.name,
    plan: ws.plan,
    plan_label: limits.planLabel,
    requests_per_minute: limits.requestsPerMinute,
    credits_per_month: limits.creditsPerMonth,
    credits_used: used,
    credits_left: Math.max(0, limits.creditsPerMonth - used),
    period: now.toISOString().slice(0, 7),
    active_keys: tokens.filter((t) => tokenStatus(t, now.getTime()) === 'active').length,
    created_at: ws.createdAt,
  };
}

export function requestView(e: RequestLogEntry, tokens: Map<string, TokenRecord>) {
  const token = e.tokenId ? tokens.get(e.tokenId) : undefined;
  return {
    request_id: e.requestId,
    client_request_id: e.clientRequestId ?? null,
    time: e.time,
    method: e.method,
    service: e.service,
    endpoint: e.endpoint,
    status: e.status,
    /** Calls the row stands for: 1, or a key's refusals of one minute counted in one row. */
    calls: e.calls ?? 1,
    error_type: e.errorType,
    /** Why a call failed, in words (the model service's detail for its 400/422, else the gateway's message). */
    error_message: e.errorMessage ?? null,
    credits: e.creditsCharged,
    bytes_in: e.bytesIn,
    bytes_out: e.bytesOut,
    upstream_ms: e.upstreamMs,
    total_ms: e.totalMs,
    client_ip: e.clientIp,
    workspace_id: e.workspaceId,
    token_id: e.tokenId,
    key_prefix: token?.prefix ?? null,
    key_name: token?.name ?? null,
  };
}
