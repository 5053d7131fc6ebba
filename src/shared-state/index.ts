// Where the short-lived, per-request state lives — rate-limit windows (per token and per unauthenticated address),
// console sessions, sign-in failures, live-stream tickets and concurrent-stream slots: in process memory by default
// (the single box, nothing else to run), in Redis when REDIS_URL is set, so that any gateway replica can serve any
// request. Both engines implement the same contracts (RateLimiter in rate-limit.ts; SessionStore and LoginLimiter in
// sessions.ts; StreamTickets and StreamSlots in streams.ts).
import { redactUrl, type Config } from '../config';
import { memoryConsoleState, type ConsoleStateEngines } from './sessions';
import { ADMIN_SECRET_SETTING } from '../store/gateway/settings';
import { SlidingWindowRateLimiter, type RateLimiter } from './rate-limit';
import { openRedis } from './redis/client';
import { redisConsoleState } from './redis/console-state';
import { RedisRateLimiter } from './redis/rate-limiter';
import { RedisStreamSlots, RedisStreamTickets } from './redis/streams';
import { MemoryStreamSlots, MemoryStreamTickets, type StreamSlots, type StreamTickets } from './streams';
import type { GatewayStore } from '../store/gateway/types';

export interface SharedState {
  /** 'memory' or 'Redis redis://host:port' (password hidden). */
  description: string;
  rateLimiter: RateLimiter;
  console: ConsoleStateEngines;
  /** Browser tickets for the live-stream upgrade (docs/streaming.md). */
  streamTickets: StreamTickets;
  /** Each workspace's concurrent live streams. */
  streamSlots: StreamSlots;
  /** Resolves when the engine answers (the readiness probe); memory always does. */
  ready(): Promise<void>;
  close(): Promise<void>;
}

export async function openSharedState(
  config: Pick<Config, 'redisUrl' | 'redisKeyPrefix' | 'adminSecret'>,
  store: GatewayStore,
  log: (line: string) => void = console.error,
): Promise<SharedState> {
  if (!config.redisUrl) {
    return {
      description: 'memory',
      rateLimiter: new SlidingWindowRateLimiter(),
      console: memoryConsoleState,
      streamTickets: new MemoryStreamTickets(),
      streamSlots: new MemoryStreamSlots(),
      ready: async () => undefined,
      close: async () => undefined,
    };
  }
  const redis = await openRedis(config, log);
  // Playground tokens are sealed under a secret every replica has and Redis never sees (src/shared-state/redis/console-state.ts).
  const sealSecret = async (): Promise<string> => {
    if (config.adminSecret) return `admin-secret:${config.adminSecret}`;
    const stored = await store.getSetting(ADMIN_SECRET_SETTING);
    if (!stored) throw new Error('no admin secret yet to derive the session sealing key from');
    return `admin-secret-hash:${stored}`;
  };
  return {
    description: `Redis ${redactUrl(config.redisUrl)}`,
    rateLimiter: new RedisRateLimiter(redis),
    console: redisConsoleState(redis, sealSecret),
    streamTickets: new RedisStreamTickets(redis),
    streamSlots: new RedisStreamSlots(redis),
    ready: async () => {
      if ((await redis.client.ping()) !== 'PONG') throw new Error('Redis did not answer PING');
    },
    close: () => redis.close(),
  };
}
