// TRUST_PROXY: how many reverse proxies (or which addresses) stand in front of the gateway, parsed at start-up.
// The client-IP walk that uses it is in http/ip.ts.
import proxyaddr from 'proxy-addr';

/**
 * TRUST_PROXY as configured: a hop count (0 = no proxy: the socket peer is the client; 1 = one proxy in front, so
 * the right-most X-Forwarded-For entry is the client; …) or a list of trusted proxy addresses/CIDRs (and the names
 * `loopback`, `linklocal`, `uniquelocal`).
 */
export type TrustProxySetting = number | string[];

/**
 * Parses TRUST_PROXY. Unset, `false`, `0` → 0 hops (X-Forwarded-For ignored). `true` → 1 hop: exactly one reverse
 * proxy you run sits in front (NOT Express's "trust everything", which would let a client pick its own address).
 * An integer N → N hops. Anything else → a comma-separated list of proxy addresses/CIDRs/names. Throws when invalid.
 */
export function parseTrustProxy(raw: string | undefined): TrustProxySetting {
  const text = (raw ?? '').trim();
  if (text === '' || /^(false|no|off)$/i.test(text)) return 0;
  if (/^(true|yes|on)$/i.test(text)) return 1;
  if (/^\d+$/.test(text)) {
    const hops = Number(text);
    if (hops > 32) throw new Error(`TRUST_PROXY hop count ${hops} is implausible (at most 32)`);
    return hops;
  }
  const list = text
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);
  try {
    proxyaddr.compile(list);
  } catch (err) {
    throw new Error(`TRUST_PROXY must be true/false, a hop count or a list of proxy IPs/CIDRs: ${(err as Error).message}`);
  }
  return list;
}
