// Connection URLs (DATABASE_URL, REDIS_URL) carry passwords: this is how they appear in logs and messages.

/** A connection URL with its password hidden, for logs and messages. */
export function redactUrl(url: string): string {
  try {
    const u = new URL(url);
    if (u.password) u.password = '***';
    return u.toString();
  } catch {
    return '(unparsable URL)';
  }
}
