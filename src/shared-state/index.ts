// Where the short-lived, per-request state lives — rate-limit windows (per token and per unauthenticated address),
// console sessions and sign-in failures: in process memory by default (the single box, nothing else to run), in
// Redis when REDIS_URL is set, so that any gateway replica can serve any request. Both engines implement the same
// contracts (RateLimiter in src/shared-state/rate-limit.ts; SessionStore and LoginLimiter in src/console/auth.ts).
import { redactUrl, type Config } from '../config';
import { memoryConsoleState, type ConsoleStateEngines } from './sessions';
import { ADMIN_SECRET_SETTING } from '../store/settings';
import { SlidingWindowRateLimiter, type RateLimiter } from './rate-limit';
import { openRedis } from './redis/client';
import { redisConsoleState } from './redis/console-state';
import { RedisRateLimiter } from './redis/rate-limiter';
import type { GatewayStore } from '../store/types';

export interface SharedState {
  /** 'memory' or 'Redis redis://host:port' (password hidden). */
  description: string;
  rateLimiter: RateLimiter;
  console: ConsoleStateEngines;
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
    ready: async () => {
      if ((await redis.client.ping()) !== 'PONG') throw new Error('Redis did not answer PING');
    },
    close: () => redis.close(),
  };
}
