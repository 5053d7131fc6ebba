// Client IP resolution and IP / CIDR allow-lists (IPv4 and IPv6).
import net from 'node:net';
import type { Request } from 'express';

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

/**
 * The caller's address: the socket peer, or the left-most X-Forwarded-For entry when the
 * deployment says a trusted reverse proxy sits in front (config.trustProxy).
 */
export function clientIpOf(req: Request, trustProxy: boolean): string {
  if (trustProxy) {
    const header = req.headers['x-forwarded-for'];
    const first = (Array.isArray(header) ? header[0] : header)?.split(',')[0]?.trim();
    if (first && net.isIP(normalizeIp(first))) return normalizeIp(first);
  }
  return normalizeIp(req.socket.remoteAddress ?? '');
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
