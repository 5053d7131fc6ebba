// Outbound URLs chosen by API users (a job's `url`, its `webhook_url`) must not reach this server's own network:
// http/https only, and every address the host resolves to must be public unicast. The check happens inside the
// connection's DNS lookup, so the socket connects to exactly the address that was checked (no DNS-rebinding gap).
// Address classes come from ipaddr.js (maintained, the same library Express uses for proxy addresses). Cloud metadata
// addresses are refused always, JOBS_ALLOW_PRIVATE_URLS or not, in every IPv6 spelling that carries them.
import dns from 'node:dns';
import net from 'node:net';
import ipaddr from 'ipaddr.js';

/** A URL the job may not use: bad scheme, credentials, or a non-public address. */
export class UrlNotAllowedError extends Error {
  readonly type = 'url_not_allowed';
}

/** The host could not be resolved (no such name, no address, DNS failing): a fetch failure, not a policy refusal. */
export class UrlUnresolvableError extends Error {
  readonly type = 'url_fetch_failed';
}

/** What a DNS or connection error code means, for people: "ENOTFOUND: no such host". */
export function networkReason(code: string | undefined, fallback: string): string {
  const words: Record<string, string> = {
    ENOTFOUND: 'no such host',
    ENODATA: 'the host has no address',
    EAI_AGAIN: 'DNS lookup failed for now, retry later',
    ESERVFAIL: 'DNS server failure',
    ECONNREFUSED: 'connection refused',
    ECONNRESET: 'connection reset',
    EHOSTUNREACH: 'host unreachable',
    ENETUNREACH: 'network unreachable',
    ETIMEDOUT: 'connection timed out',
  };
  if (!code) return fallback;
  return words[code] ? `${code}: ${words[code]}` : code;
}
/** Addresses that serve cloud metadata or platform agents (some are public unicast by class). */
const METADATA_ADDRESSES = new Set(['168.63.129.16', '169.254.169.254', '100.100.100.200', 'fd00:ec2::254']);

/**
 * IPv4-compatible IPv6 (::a.b.c.d, deprecated by RFC 4291): ipaddr.js has no range name for it and calls it unicast,
 * yet some stacks route it to the IPv4 address it carries. (:: and ::1 inside it keep their own range names.)
 */
const IPV4_COMPATIBLE = ipaddr.parseCIDR('::/96') as [ipaddr.IPv6, number];

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

/** Parses an address as the guard sees it: brackets and zone id dropped; null when it is not an IP address. */
function parseAddress(address: string): ipaddr.IPv4 | ipaddr.IPv6 | null {
  try {
    return ipaddr.parse(address.replace(/^\[|\]$/g, '').replace(/%.*$/, ''));
  } catch {
    return null;
  }
}

/**
 * The IPv4 address an IPv6 address carries: mapped (::ffff:0:0/96), SIIT (::ffff:0:0:0/96), IPv4-compatible (::/96),
 * NAT64 (the last 32 bits: the 64:ff9b::/96 form, also used inside the local-use 64:ff9b:1::/48), 6to4
 * (2002:AABB:CCDD::) or Teredo (the client address, inverted, in the last 32 bits); null for any other address.
 */
function embeddedIPv4(v6: ipaddr.IPv6): ipaddr.IPv4 | null {
  const p = v6.parts;
  const v4 = (hi: number, lo: number): ipaddr.IPv4 => new ipaddr.IPv4([hi >> 8, hi & 0xff, lo >> 8, lo & 0xff]);
  switch (v6.range()) {
    case 'ipv4Mapped':
    case 'rfc6145':
    case 'rfc6052':
      return v4(p[6], p[7]);
    case '6to4':
      return v4(p[1], p[2]);
    case 'teredo':
      return v4(p[6] ^ 0xffff, p[7] ^ 0xffff);
  }
  return v6.match(IPV4_COMPATIBLE) ? v4(p[6], p[7]) : null;
}

/** 'a cloud metadata address' when the address is one, in any spelling (IPv6 forms carrying it included), else null. */
export function metadataRefusal(address: string): string | null {
  const parsed = parseAddress(address);
  if (!parsed) return null;
  const candidates = [parsed.toNormalizedString(), parsed.toString()];
  if (parsed.kind() === 'ipv6') {
    const inner = embeddedIPv4(parsed as ipaddr.IPv6);
    if (inner) candidates.push(inner.toString());
  }
  return candidates.some((a) => METADATA_ADDRESSES.has(a)) ? 'a cloud metadata address' : null;
}

/**
 * Why an address may not be contacted, or null when it is public unicast. IPv4-mapped IPv6 (::ffff:a.b.c.d) is
 * judged as the IPv4 address; NAT64, 6to4, Teredo and IPv4-compatible forms (which embed an IPv4 address) are
 * refused outright.
 */
export function addressRefusal(address: string): string | null {
  let parsed = parseAddress(address);
  if (!parsed) return 'not an IP address';
  const metadata = metadataRefusal(address);
  if (metadata) return metadata;
  if (parsed.kind() === 'ipv6' && (parsed as ipaddr.IPv6).isIPv4MappedAddress()) {
    parsed = (parsed as ipaddr.IPv6).toIPv4Address();
  }
  const range = parsed.range();
  if (range === 'unicast' && parsed.kind() === 'ipv6' && (parsed as ipaddr.IPv6).match(IPV4_COMPATIBLE)) {
    return 'an IPv4-compatible IPv6 address (::/96)';
  }
  if (range === 'unicast') return null;
  // ipaddr.js's range names, as they are (linkLocal, uniqueLocal …); those said with a vowel take "an".
  return `${AN_RANGES.has(range) ? 'an' : 'a'} ${range} address`;
}

const AN_RANGES = new Set(['unspecified', 'ipv4Mapped', 'amt', 'as112', 'orchid2']);

export interface GuardOptions {
  /** JOBS_ALLOW_PRIVATE_URLS: skip the address checks (tests and closed networks), all but the metadata one. */
  allowPrivate: boolean;
  /** Why an address is refused (null: allowed); defaults to addressRefusal. Tests narrow it to exercise redirects. */
  policy?: (address: string) => string | null;
}

/** Why the guard refuses an address under `opts`, or null. */
function refusal(opts: GuardOptions, address: string): string | null {
  return metadataRefusal(address) ?? (opts.allowPrivate ? null : (opts.policy ?? addressRefusal)(address));
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
      for (const a of addresses) {
        const why = refusal(opts, a.address);
        if (why) return callback(new UrlNotAllowedError(`${hostname} resolves to ${a.address}, ${why}`), '', 0);
      }
      if (options.all) return callback(null, addresses);
      callback(null, addresses[0].address, addresses[0].family);
    });
  };
}

/** Checks a host without connecting (for a clear 400 at submission); the connection is checked again when made. */
export async function assertPublicHost(url: URL, opts: GuardOptions, field: string): Promise<void> {
  const host = url.hostname.replace(/^\[|\]$/g, '');
  if (net.isIP(host)) {
    const why = refusal(opts, host);
    if (why) throw new UrlNotAllowedError(`${field} points at ${host}, ${why}; only public addresses are fetched`);
    return;
  }
  let addresses: dns.LookupAddress[];
  try {
    addresses = await dns.promises.lookup(host, { all: true, verbatim: true });
  } catch (err) {
    // With private URLs allowed an unresolvable host is left to the connection, as before (closed networks).
    if (opts.allowPrivate) return;
    // Not a refusal of the address: there is none to judge (issue 39).
    throw new UrlUnresolvableError(`${field}: cannot resolve ${host} (${networkReason((err as NodeJS.ErrnoException).code, String(err))})`);
  }
  for (const a of addresses) {
    const why = refusal(opts, a.address);
    if (why) throw new UrlNotAllowedError(`${field}: ${host} resolves to ${a.address}, ${why}; only public addresses are fetched`);
  }
}

/** Literal IP hosts skip `lookup` in Node, so they are checked before connecting. */
export function assertLiteralHostAllowed(url: URL, opts: GuardOptions): void {
  const host = url.hostname.replace(/^\[|\]$/g, '');
  if (!net.isIP(host)) return;
  const why = refusal(opts, host);
  if (why) throw new UrlNotAllowedError(`${host} is ${why}; only public addresses are contacted`);
}
