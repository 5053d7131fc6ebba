// Outbound URLs chosen by API users (a job's `url`, its `webhook_url`) must not reach this server's own network:
// http/https only, and every address the host resolves to must be public unicast. The check happens inside the
// connection's DNS lookup, so the socket connects to exactly the address that was checked (no DNS-rebinding gap).
// Address classes come from ipaddr.js (maintained, the same library Express uses for proxy addresses).
import dns from 'node:dns';
import net from 'node:net';
import ipaddr from 'ipaddr.js';

/** A URL the job may not use: bad scheme, credentials, or a non-public address. */
export class UrlNotAllowedError extends Error {
  readonly type = 'url_not_allowed';
}

/** Addresses that are public unicast by class but serve cloud metadata or platform agents. */
const METADATA_ADDRESSES = new Set(['168.63.129.16', '169.254.169.254', '100.100.100.200', 'fd00:ec2::254']);

export const MAX_URL_LENGTH = 2048;

/** Parses and checks the form of a user-supplied URL (scheme, length, no credentials). */
export function parseUserUrl(raw: string, field: string): URL {
  if (raw.length > MAX_URL_LENGTH) throw new UrlNotAllowedError(`${field} is longer than ${MAX_URL_LENGTH} characters`);
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw new UrlNotAllowedError(`${field} is not an absolute URL: "${raw.slice(0, 200)}"`);
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') {
    throw new UrlNotAllowedError(`${field} must be an http or https URL, got "${url.protocol.replace(/:$/, '')}"`);
  }
  if (url.username || url.password) throw new UrlNotAllowedError(`${field} must not contain credentials`);
  if (!url.hostname) throw new UrlNotAllowedError(`${field} has no host`);
  return url;
}

/**
 * Why an address may not be contacted, or null when it is public unicast. IPv4-mapped IPv6 (::ffff:a.b.c.d) is
 * judged as the IPv4 address; NAT64, 6to4 and Teredo forms (which embed an IPv4 address) are refused outright.
 */
export function addressRefusal(address: string): string | null {
  let parsed: ipaddr.IPv4 | ipaddr.IPv6;
  try {
    parsed = ipaddr.parse(address.replace(/^\[|\]$/g, '').replace(/%.*$/, ''));
  } catch {
    return 'not an IP address';
  }
  if (parsed.kind() === 'ipv6' && (parsed as ipaddr.IPv6).isIPv4MappedAddress()) {
    parsed = (parsed as ipaddr.IPv6).toIPv4Address();
  }
  const normal = parsed.toNormalizedString();
  const compact = parsed.kind() === 'ipv6' ? (parsed as ipaddr.IPv6).toString() : normal;
  if (METADATA_ADDRESSES.has(compact) || METADATA_ADDRESSES.has(normal)) return 'a cloud metadata address';
  const range = parsed.range();
  if (range === 'unicast') return null;
  return `a ${range} address`;
}

export interface GuardOptions {
  /** JOBS_ALLOW_PRIVATE_URLS: skip the address checks (tests and closed networks). */
  allowPrivate: boolean;
  /** Why an address is refused (null: allowed); defaults to addressRefusal. Tests narrow it to exercise redirects. */
  policy?: (address: string) => string | null;
}

type LookupCallback = (err: NodeJS.ErrnoException | null, address: string | dns.LookupAddress[], family?: number) => void;

/**
 * A `lookup` for http.request/net.connect: resolves the host, refuses it when ANY of its addresses is not public,
 * and hands the checked addresses to the socket. Works for both callback forms (single address, and `all: true`
 * which Node's happy-eyeballs connect uses).
 */
export function guardedLookup(opts: GuardOptions) {
  return (hostname: string, options: dns.LookupOptions, callback: LookupCallback): void => {
    dns.lookup(hostname, { all: true, verbatim: true, family: options.family ?? 0 }, (err, addresses) => {
      if (err) return callback(err, '', 0);
      if (addresses.length === 0) return callback(Object.assign(new Error(`${hostname} has no address`), { code: 'ENOTFOUND' }), '', 0);
      if (!opts.allowPrivate) {
        for (const a of addresses) {
          const why = (opts.policy ?? addressRefusal)(a.address);
          if (why) return callback(new UrlNotAllowedError(`${hostname} resolves to ${a.address}, ${why}`), '', 0);
        }
      }
      if (options.all) return callback(null, addresses);
      callback(null, addresses[0].address, addresses[0].family);
    });
  };
}

/** Checks a host without connecting (for a clear 400 at submission); the connection is checked again when made. */
export async function assertPublicHost(url: URL, opts: GuardOptions, field: string): Promise<void> {
  if (opts.allowPrivate) return;
  const host = url.hostname.replace(/^\[|\]$/g, '');
  if (net.isIP(host)) {
    const why = (opts.policy ?? addressRefusal)(host);
    if (why) throw new UrlNotAllowedError(`${field} points at ${host}, ${why}; only public addresses are fetched`);
    return;
  }
  let addresses: dns.LookupAddress[];
  try {
    addresses = await dns.promises.lookup(host, { all: true, verbatim: true });
  } catch (err) {
    throw new UrlNotAllowedError(`${field}: cannot resolve ${host} (${(err as NodeJS.ErrnoException).code ?? String(err)})`);
  }
  for (const a of addresses) {
    const why = (opts.policy ?? addressRefusal)(a.address);
    if (why) throw new UrlNotAllowedError(`${field}: ${host} resolves to ${a.address}, ${why}; only public addresses are fetched`);
  }
}

/** Literal IP hosts skip `lookup` in Node, so they are checked before connecting. */
export function assertLiteralHostAllowed(url: URL, opts: GuardOptions): void {
  if (opts.allowPrivate) return;
  const host = url.hostname.replace(/^\[|\]$/g, '');
  if (!net.isIP(host)) return;
  const why = (opts.policy ?? addressRefusal)(host);
  if (why) throw new UrlNotAllowedError(`${host} is ${why}; only public addresses are contacted`);
}
