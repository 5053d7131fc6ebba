// Client IP resolution and IP / CIDR allow-lists (IPv4 and IPv6).
//
// Who the client is behind reverse proxies follows Express's `trust proxy` semantics, implemented by the same
// library Express uses (proxy-addr): walk from the socket peer leftwards through X-Forwarded-For, skipping the
// addresses that are trusted proxies, and take the first untrusted one (the right-most untrusted address).
// Entries further left were written by the client and prove nothing. The gateway, the console's sign-in limiter and
// the request log all call clientIpOf, so they always agree on who called.
import net from 'node:net';
import type { IncomingMessage } from 'node:http';
import proxyaddr from 'proxy-addr';
import type { TrustProxySetting } from '../config/trust-proxy';

const MAPPED_V4 = /^::ffff:(\d{1,3}\.\d{1,3}\.\d{1,3}\.\d{1,3})$/i;

/** Strips IPv4-mapped IPv6 (::ffff:127.0.0.1 → 127.0.0.1) and zone ids so one address has one spelling. */
export function normalizeIp(ip: string): string {
  let s = ip.trim();
  if (s.startsWith('[') && s.endsWith(']')) s = s.slice(1, -1);
  const zone = s.indexOf('%');
  if (zone >= 0) s = s.slice(0, zone);
  const mapped = MAPPED_V4.exec(s);
  if (mapped) return mapped[1];
  return s.toLowerCase();
}

type TrustFn = (addr: string, hop: number) => boolean;
const compiled = new WeakMap<string[], TrustFn>();

/** The trust predicate of a setting (compiled lists are cached per setting object). */
export function trustFunction(setting: TrustProxySetting): TrustFn {
  if (typeof setting === 'number') {
    const hops = setting;
    return (_addr, hop) => hop < hops;
  }
  let fn = compiled.get(setting);
  if (!fn) {
    fn = proxyaddr.compile(setting);
    compiled.set(setting, fn);
  }
  return fn;
}

/** Whether the request reached us through a trusted proxy (so its X-Forwarded-* headers may be believed). */
export function fromTrustedProxy(req: IncomingMessage, trust: TrustProxySetting): boolean {
  const peer = req.socket.remoteAddress;
  return peer !== undefined && trustFunction(trust)(peer, 0);
}

/**
 * The caller's address: the right-most address in [X-Forwarded-For…, socket peer] that is not a trusted proxy.
 * With no trusted proxy this is the socket peer. An entry that is not an IP address (a misbehaving proxy) gives
 * 'unknown', which no allow-list matches.
 */
export function clientIpOf(req: IncomingMessage, trust: TrustProxySetting): string {
  const addr = trust === 0 ? (req.socket.remoteAddress ?? '') : proxyaddr(req, trustFunction(trust));
  const ip = normalizeIp(addr ?? '');
  return net.isIP(ip) ? ip : 'unknown';
}

interface ParsedRule {
  address: string;
  prefix: number;
  family: 'ipv4' | 'ipv6';
}

/** Parses '10.0.0.0/8', '203.0.113.7', '2001:db8::/32' or '::1'; throws on anything else. */
export function parseIpRule(rule: string): ParsedRule {
  const [rawAddr, rawPrefix, extra] = rule.trim().split('/');
  if (extra !== undefined) throw new Error(`not an IP or CIDR: "${rule}"`);
  const address = normalizeIp(rawAddr ?? '');
  const version = net.isIP(address);
  if (version === 0) throw new Error(`not an IP or CIDR: "${rule}"`);
  const family = version === 4 ? 'ipv4' : 'ipv6';
  const max = version === 4 ? 32 : 128;
  let prefix = max;
  if (rawPrefix !== undefined) {
    if (!/^\d{1,3}$/.test(rawPrefix)) throw new Error(`bad prefix length in "${rule}"`);
    prefix = Number(rawPrefix);
    // '::ffff:10.0.0.0/104' is the mapped spelling of 10.0.0.0/8.
    if (version === 4 && MAPPED_V4.test(rawAddr!.trim())) prefix -= 96;
    if (prefix < 0 || prefix > max) throw new Error(`bad prefix length in "${rule}"`);
  }
  return { address, prefix, family };
}

/** Whether `ip` matches any rule; an empty list allows every address. */
export function ipAllowed(ip: string, rules: string[]): boolean {
  if (rules.length === 0) return true;
  const address = normalizeIp(ip);
  const version = net.isIP(address);
  if (version === 0) return false;
  const list = new net.BlockList();
  for (const rule of rules) {
    let parsed: ParsedRule;
    try {
      parsed = parseIpRule(rule);
    } catch {
      continue; // an unparsable stored rule grants nothing
    }
    list.addSubnet(parsed.address, parsed.prefix, parsed.family);
  }
  return list.check(address, version === 4 ? 'ipv4' : 'ipv6');
}
