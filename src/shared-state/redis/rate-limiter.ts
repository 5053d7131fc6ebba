// RateLimiter on Redis: the same sliding-window log as the in-memory engine (src/shared-state/rate-limit.ts), kept in
// one sorted set per key (score = admission time in ms), checked and updated by one Lua script so that gateway
// replicas hitting the same key at once can never admit more than the limit in any 60 s. Memory: at most `limit`
// entries per active key; a key expires 60 s after its last admission.
import { decide, RATE_WINDOW_MS, type RateLimitDecision, type RateLimiter, type RateLimitState } from '../rate-limit';
import { RedisScript, type RedisConnection } from './client';

// KEYS[1] the sorted set; ARGV now, window, limit, member, hit (1) or peek (0).
// Returns {allowed, count, scores of the entries the reset time depends on (the oldest, and the one at count-limit)}.
const SLIDING_WINDOW = new RedisScript(`
local key = KEYS[1]
local now = tonumber(ARGV[1])
local window = tonumber(ARGV[2])
local limit = tonumber(ARGV[3])
redis.call('ZREMRANGEBYSCORE', key, '-inf', now - window)
local count = redis.call('ZCARD', key)
local allowed = 0
if ARGV[5] == '1' and count < limit then
  local newest = redis.call('ZRANGE', key, -1, -1, 'WITHSCORES')
  local at = now
  if newest[2] and tonumber(newest[2]) > now then at = tonumber(newest[2]) end
  redis.call('ZADD', key, at, ARGV[4])
  redis.call('PEXPIRE', key, window)
  count = count + 1
  allowed = 1
end
local idx = 0
if count >= limit then idx = count - limit end
local oldest = '0'
if count > 0 then
  local e = redis.call('ZRANGE', key, idx, idx, 'WITHSCORES')
  if e[2] then oldest = e[2] end
end
return {allowed, count, oldest}
`);

/** The sorted set that holds `key`'s window under the deployment's key prefix. */
export function rateWindowKey(prefix: string, key: string): string {
  return `${prefix}rl:${key}`;
}

export class RedisRateLimiter implements RateLimiter {
  private seq = 0;
  private readonly tag = Math.random().toString(36).slice(2, 10);

  constructor(private readonly redis: RedisConnection) {}

  private async run(key: string, limit: number, now: number, hit: boolean): Promise<RateLimitDecision> {
    // Members must be unique even for two admissions in the same millisecond from two replicas.
    const member = `${now}:${this.tag}:${(this.seq = (this.seq + 1) % 1e9)}`;
    const reply = (await SLIDING_WINDOW.run(
      this.redis.client,
      [rateWindowKey(this.redis.prefix, key)],
      [Math.trunc(now), RATE_WINDOW_MS, limit, member, hit ? 1 : 0],
    )) as [number, number, string];
    const [allowed, count, edge] = reply;
    // decide() reads exactly one admission time (the oldest, or the one at count - limit): the one the script returned.
    const state: RateLimitState = decide(Number(count), () => Number(edge), limit, now);
    return { allowed: Number(allowed) === 1, ...state };
  }

  hit(key: string, limit: number, now: number): Promise<RateLimitDecision> {
    return this.run(key, limit, now, true);
  }

  async peek(key: string, limit: number, now: number): Promise<RateLimitState> {
    const { allowed: _allowed, ...state } = await this.run(key, limit, now, false);
    return state;
  }
}
