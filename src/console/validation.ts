// Input checks for the console's JSON endpoints.
import { parseIpRule } from '../http/ip';
import { DEFAULT_KEY_SCOPES } from '../gateway/routes';
import type { PlanId } from '../store/gateway/types';

/** The scope table of the public spec (part 5), in display order. */
export const CONSOLE_SCOPES: Array<{ scope: string; allows: string }> = [
  { scope: '*', allows: 'Every published API' },
  { scope: 'noise-suppressor:*', allows: 'Every noise-suppressor endpoint' },
  { scope: 'noise-suppressor:denoise', allows: 'POST /denoise only' },
  { scope: 'noise-suppressor:denoise-batch', allows: 'POST /denoise/batch only' },
  { scope: 'noise-suppressor:models', allows: 'GET /models' },
  { scope: 'noise-suppressor:sample', allows: 'GET /sample' },
  { scope: 'noise-suppressor:health', allows: 'GET /health' },
  { scope: 'noise-suppressor:jobs', allows: 'Asynchronous jobs: POST/GET /jobs, GET/DELETE /jobs/{id}, GET /jobs/{id}/result' },
  { scope: 'noise-suppressor:stream', allows: 'Live streams: GET /stream (WebSocket), POST /stream/tickets' },
];

export const PLAN_IDS: PlanId[] = ['free', 'starter', 'scale', 'enterprise'];

export class InputError extends Error {}

/** Longest workspace or key name, in the console and the keys CLI alike. */
export const NAME_MAX = 80;

export function requireString(value: unknown, field: string, maxLength = 100): string {
  if (typeof value !== 'string') throw new InputError(`${field} is required`);
  const trimmed = value.trim();
  if (!trimmed) throw new InputError(`${field} is required`);
  if (trimmed.length > maxLength) throw new InputError(`${field} is longer than ${maxLength} characters`);
  if (/[\u0000-\u001f\u007f]/.test(trimmed)) throw new InputError(`${field} contains control characters`);
  return trimmed;
}

/** The scopes of a new key; none named (missing or an empty list) means the keys CLI's default, noise-suppressor:*. */
export function parseScopes(value: unknown): string[] {
  if (value === undefined || value === null || (Array.isArray(value) && value.length === 0)) return [...DEFAULT_KEY_SCOPES];
  if (!Array.isArray(value)) throw new InputError('scopes must be a list');
  const known = new Set(CONSOLE_SCOPES.map((s) => s.scope));
  const scopes: string[] = [];
  for (const s of value) {
    if (typeof s !== 'string' || !known.has(s)) throw new InputError(`unknown scope: ${String(s)}`);
    if (!scopes.includes(s)) scopes.push(s);
  }
  return scopes;
}

/** One IPv4/IPv6 address or CIDR range, e.g. 203.0.113.7, 10.0.0.0/8, 2001:db8::/32. */
export function isIpOrCidr(entry: string): boolean {
  // The gateway's own parser, so whatever the console accepts the gateway can match.
  try {
    parseIpRule(entry);
    return true;
  } catch {
    return false;
  }
}

/** Accepts an array or a comma/whitespace/newline separated string. */
export function parseAllowedIps(value: unknown): string[] {
  if (value === undefined || value === null || value === '') return [];
  const entries = Array.isArray(value) ? value : typeof value === 'string' ? value.split(/[\s,]+/) : null;
  if (!entries) throw new InputError('allowed_ips must be a list');
  const out: string[] = [];
  for (const raw of entries) {
    if (typeof raw !== 'string') throw new InputError('allowed_ips must be a list of strings');
    const entry = raw.trim();
    if (!entry) continue;
    if (!isIpOrCidr(entry)) throw new InputError(`not an IP address or CIDR range: ${entry}`);
    if (!out.includes(entry)) out.push(entry);
  }
  if (out.length > 100) throw new InputError('at most 100 allowed_ips entries');
  return out;
}

/** null/'' = never expires; otherwise an ISO date or datetime in the future. A bare date means the end of that day (UTC). */
export function parseExpiry(value: unknown, now = new Date()): string | null {
  if (value === undefined || value === null || value === '') return null;
  if (typeof value !== 'string') throw new InputError('expires_at must be an ISO date');
  const text = /^\d{4}-\d{2}-\d{2}$/.test(value) ? `${value}T23:59:59.999Z` : value;
  const when = new Date(text);
  if (Number.isNaN(when.getTime())) throw new InputError('expires_at must be an ISO date');
  if (when.getTime() <= now.getTime()) throw new InputError('expires_at must be in the future');
  return when.toISOString();
}

export function parsePlan(value: unknown): PlanId {
  if (value === undefined || value === null || value === '') return 'free';
  if (typeof value !== 'string' || !PLAN_IDS.includes(value as PlanId)) {
    throw new InputError(`plan must be one of ${PLAN_IDS.join(', ')}`);
  }
  return value as PlanId;
}

/** Bounds of an enterprise workspace's custom limits: far above any plan, and whole numbers every store column holds. */
export const CUSTOM_LIMITS = {
  requests_per_minute: { min: 1, max: 1_000_000 },
  credits_per_month: { min: 1, max: 1_000_000_000 },
} as const;

/**
 * An optional custom limit: absent → undefined; otherwise a whole number within CUSTOM_LIMITS[field], sent as a JSON
 * number or a string of digits (1e300, 1e20, 1.5, -3, "0x10", "1e3" → 400: they would be stored as floats).
 */
export function optionalCustomLimit(value: unknown, field: keyof typeof CUSTOM_LIMITS): number | undefined {
  if (value === undefined || value === null || value === '') return undefined;
  const { min, max } = CUSTOM_LIMITS[field];
  const n = typeof value === 'number' ? value : typeof value === 'string' && /^\d{1,10}$/.test(value.trim()) ? Number(value) : NaN;
  if (!Number.isSafeInteger(n) || n < min || n > max) {
    throw new InputError(`${field} must be a whole number from ${min} to ${max}`);
  }
  return n;
}

/** Largest request-log offset accepted (far beyond any real log; keeps the value a safe SQL integer). */
export const MAX_OFFSET = 1_000_000_000;

/** Paging offset: absent → 0; otherwise an integer 0…MAX_OFFSET (1e308, Infinity, -1, 1.5, "abc" → 400). */
export function optionalOffset(value: unknown): number {
  if (value === undefined || value === '') return 0;
  const text = typeof value === 'string' ? value.trim() : '';
  if (!/^\d{1,10}$/.test(text) || Number(text) > MAX_OFFSET) {
    throw new InputError(`offset must be a whole number from 0 to ${MAX_OFFSET}`);
  }
  return Number(text);
}
