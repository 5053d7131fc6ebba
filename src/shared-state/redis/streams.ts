// Live-stream tickets and concurrent-stream slots on Redis, so that a ticket issued by one gateway replica is redeemed
// by any other and a workspace's streams are counted across replicas. Same contracts as the memory engines
// (src/shared-state/streams.ts) and the same contract tests.
import crypto from 'node:crypto';
import {
  STREAM_LEASE_TTL_MS,
  TICKET_PATTERN,
  TICKET_TTL_MS,
  newTicket,
  type SlotGrant,
  type SlotLease,
  type StreamSlots,
  type StreamStateOptions,
  type StreamTickets,
} from '../streams';
import { RedisScript, type RedisConnection } from './client';

/**
 * A ticket is one string key (under the hash of the ticket: reading Redis gives no usable ticket) holding the key's id,
 * expiring with the ticket; GETDEL reads and deletes it in one step, so of two replicas redeeming it at once exactly
 * one gets the id.
 */
export class RedisStreamTickets implements StreamTickets {
  private readonly now: () => number;
  private readonly ttlMs: number;

  constructor(private readonly redis: RedisConnection, options: StreamStateOptions = {}) {
    this.now = options.now ?? Date.now;
    this.ttlMs = options.ticketTtlMs ?? TICKET_TTL_MS;
  }

  private key(ticket: string): string {
    return `${this.redis.prefix}tk:${crypto.createHash('sha256').update(ticket).digest('base64url')}`;
  }

  async issue(tokenId: string): Promise<{ ticket: string; expiresAt: number }> {
    const ticket = newTicket();
    const expiresAt = this.now() + this.ttlMs;
    await this.redis.client.set(this.key(ticket), tokenId, { expiration: { type: 'PX', value: this.ttlMs } });
    return { ticket, expiresAt };
  }

  async redeem(ticket: string): Promise<string | null> {
    if (!TICKET_PATTERN.test(ticket)) return null;
    const tokenId = await this.redis.client.getDel(this.key(ticket));
    return typeof tokenId === 'string' ? tokenId : null;
  }
}

// KEYS[1] the workspace's sorted set (member = lease id, score = its expiry in ms); ARGV now, ttl, max, lease id.
// Drops the lapsed leases, counts, and adds the new one only when fewer than max are left: one step, so replicas
// acquiring at once can never hold more than max. Returns {1 | 0, leases counted (the new one included)}.
const ACQUIRE = new RedisScript(`
local now = tonumber(ARGV[1])
local ttl = tonumber(ARGV[2])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
local count = redis.call('ZCARD', KEYS[1])
if count >= tonumber(ARGV[3]) then return {0, count} end
redis.call('ZADD', KEYS[1], now + ttl, ARGV[4])
redis.call('PEXPIRE', KEYS[1], 2 * ttl)
return {1, count + 1}
`);

// KEYS[1] the workspace's sorted set; ARGV now, ttl, lease ids. Pushes out the expiry of the leases still live; one
// that lapsed or was released is not brought back (it may have been counted out already).
const RENEW = new RedisScript(`
local now = tonumber(ARGV[1])
local ttl = tonumber(ARGV[2])
for i = 3, #ARGV do
  local score = redis.call('ZSCORE', KEYS[1], ARGV[i])
  if score and tonumber(score) > now then redis.call('ZADD', KEYS[1], 'XX', now + ttl, ARGV[i]) end
end
redis.call('PEXPIRE', KEYS[1], 2 * ttl)
return 0
`);

/**
 * One sorted set per workspace, scored by lease expiry. The caller's clock decides what lapsed (as for the rate
 * limiter); the key itself expires 2 × the lease time after its last write, so an idle workspace leaves nothing behind.
 */
export class RedisStreamSlots implements StreamSlots {
  private readonly now: () => number;
  private readonly ttlMs: number;

  constructor(private readonly redis: RedisConnection, options: StreamStateOptions = {}) {
    this.now = options.now ?? Date.now;
    this.ttlMs = options.leaseTtlMs ?? STREAM_LEASE_TTL_MS;
  }

  private key(workspaceId: string): string {
    return `${this.redis.prefix}streams:${workspaceId}`;
  }

  async acquire(workspaceId: string, max: number): Promise<SlotGrant> {
    const id = crypto.randomUUID();
    const [ok, open] = (await ACQUIRE.run(this.redis.client, [this.key(workspaceId)], [Math.trunc(this.now()), this.ttlMs, max, id])) as [number, number];
    return { lease: Number(ok) === 1 ? { workspaceId, id } : null, open: Number(open) };
  }

  async release(lease: SlotLease): Promise<void> {
    await this.redis.client.zRem(this.key(lease.workspaceId), lease.id);
  }

  async renew(leases: SlotLease[]): Promise<void> {
    const byWorkspace = new Map<string, string[]>();
    for (const l of leases) byWorkspace.set(l.workspaceId, [...(byWorkspace.get(l.workspaceId) ?? []), l.id]);
    const t = Math.trunc(this.now());
    await Promise.all([...byWorkspace].map(([ws, ids]) => RENEW.run(this.redis.client, [this.key(ws)], [t, this.ttlMs, ...ids])));
  }
}
