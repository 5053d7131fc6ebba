// Rules every store engine applies the same way: plan ids, custom-limit validation, the request-log page bounds,
// the per-day series, and id formats. Engines differ in how they keep the data, never in what they accept.
import type { PlanId, TokenRecord } from './types';
import { DISPLAY_PREFIX_LENGTH, hashToken, randomBase62, TOKEN_PATTERN, TOKEN_PREFIX } from './tokens';

export const PLAN_IDS: readonly PlanId[] = ['free', 'starter', 'scale', 'enterprise'];

export function isPlanId(value: string): value is PlanId {
  return (PLAN_IDS as readonly string[]).includes(value);
}

export function checkPlan(plan: string): void {
  if (!isPlanId(plan)) throw new Error(`unknown plan "${plan}" (free, starter, scale, enterprise)`);
}

export function checkCustomLimit(name: string, value: number | undefined): void {
  if (value === undefined) return;
  if (!Number.isInteger(value) || value < 0) throw new Error(`${name} must be a non-negative integer, got ${value}`);
}

export function checkNewToken(scopes: string[], expiresAt: string | null): void {
  if (scopes.length === 0) throw new Error('a token needs at least one scope');
  if (expiresAt !== null && Number.isNaN(Date.parse(expiresAt))) throw new Error(`expiresAt is not a date: ${expiresAt}`);
}

export const newWorkspaceId = (): string => 'ws_' + randomBase62(16);
export const newTokenId = (): string => 'key_' + randomBase62(16);
export const newReservationId = (): string => 'res_' + randomBase62(20);

const KEY_ID_PREFIX = 'key_';
/** Characters a prefix must give after `mw_live_` or `key_`: fewer would name keys by accident. */
const MIN_PREFIX_CHARS = 4;

/**
 * The key a `keys revoke` target names: a key id, a start of one, the whole token (checked by its hash), or a start
 * of the token. Only a token's first 12 characters are stored, so a longer start is matched on those (what follows
 * cannot be checked without the token). Null when nothing matches; throws when the target is too short or names
 * more than one key.
 */
export async function findKeyTarget(
  target: string,
  lookup: { byId(id: string): Promise<TokenRecord | null>; byHash(hash: string): Promise<TokenRecord | null>; all(): Promise<TokenRecord[]> },
): Promise<TokenRecord | null> {
  const exact = await lookup.byId(target);
  if (exact) return exact;
  if (TOKEN_PATTERN.test(target)) return lookup.byHash(hashToken(target));
  const fixed = target.startsWith(TOKEN_PREFIX) ? TOKEN_PREFIX : target.startsWith(KEY_ID_PREFIX) ? KEY_ID_PREFIX : null;
  if (fixed === null) return null;
  if (target.length < fixed.length + MIN_PREFIX_CHARS) {
    throw new Error(`"${target}" is too short: give at least ${MIN_PREFIX_CHARS} characters after ${fixed}, or the key id`);
  }
  const matches = (await lookup.all()).filter((t) =>
    fixed === KEY_ID_PREFIX ? t.id.startsWith(target) : target.length <= DISPLAY_PREFIX_LENGTH ? t.prefix.startsWith(target) : t.prefix === target.slice(0, DISPLAY_PREFIX_LENGTH),
  );
  if (matches.length > 1) {
    throw new Error(`"${target}" matches ${matches.length} keys (${matches.map((t) => t.id).join(', ')}); give more characters or the key id`);
  }
  return matches[0] ?? null;
}

/** Page size and offset of a request-log query: 1..1000 rows (default 100), offset ≥ 0. */
export function pageOf(filter: { limit?: number; offset?: number }): { limit: number; offset: number } {
  const limit = Math.min(Math.max(Math.trunc(filter.limit ?? 100), 1), 1000);
  const offset = Math.max(Math.trunc(filter.offset ?? 0), 0);
  return { limit: Number.isFinite(limit) ? limit : 100, offset: Number.isFinite(offset) ? offset : 0 };
}

/** Start of the per-day series: 00:00 UTC, `days - 1` days before today. */
export function seriesStart(days: number, today = new Date()): { start: Date; n: number } {
  const n = Math.max(1, Math.trunc(days));
  return { start: new Date(Date.UTC(today.getUTCFullYear(), today.getUTCMonth(), today.getUTCDate() - (n - 1))), n };
}

/** Every day of the range, zeros included, oldest first (ready for a chart). */
export function fillDays(
  start: Date,
  n: number,
  rows: Array<{ day: string; count: number; errors: number }>,
): Array<{ day: string; count: number; errors: number }> {
  const byDay = new Map(rows.map((r) => [r.day, r]));
  const out: Array<{ day: string; count: number; errors: number }> = [];
  for (let i = 0; i < n; i++) {
    const day = new Date(start.getTime() + i * 86_400_000).toISOString().slice(0, 10);
    const r = byDay.get(day);
    out.push({ day, count: Number(r?.count ?? 0), errors: Number(r?.errors ?? 0) });
  }
  return out;
}
