// Access-token generation and hashing. Only the sha256 of a token is ever stored.
import crypto from 'node:crypto';

export const TOKEN_PREFIX = 'mw_live_';
export const TOKEN_BODY_LENGTH = 32;
/** Characters of the token kept for display (e.g. 'mw_live_AbCd'). */
export const DISPLAY_PREFIX_LENGTH = 12;
export const TOKEN_PATTERN = /^mw_live_[A-Za-z0-9]{32}$/;

const BASE62 = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789';
// Largest multiple of 62 that fits in a byte: bytes at or above it are discarded so every
// character is equally likely (no modulo bias).
const UNBIASED_LIMIT = 256 - (256 % BASE62.length); // 248

/** `length` characters drawn uniformly from the base62 alphabet with a CSPRNG. */
export function randomBase62(length: number): string {
  let out = '';
  while (out.length < length) {
    const bytes = crypto.randomBytes(Math.ceil((length - out.length) * 1.1) + 4);
    for (const b of bytes) {
      if (b >= UNBIASED_LIMIT) continue;
      out += BASE62[b % BASE62.length];
      if (out.length === length) break;
    }
  }
  return out;
}

export function generateToken(): string {
  return TOKEN_PREFIX + randomBase62(TOKEN_BODY_LENGTH);
}

export function hashToken(token: string): string {
  return crypto.createHash('sha256').update(token, 'utf8').digest('hex');
}

export function displayPrefix(token: string): string {
  return token.slice(0, DISPLAY_PREFIX_LENGTH);
}
