// The shared Redis connection (selected by REDIS_URL) and Lua-script helper used by the Redis engines of the rate
// limiter, the console sessions and the sign-in limiter (this folder). Client: node-redis (`@redis/client`), the
// client Redis itself maintains and recommends for new Node.js projects; it speaks RESP2/3, reconnects on its own and
// runs Lua scripts with EVALSHA. One connection per process is enough: node-redis pipelines concurrent commands.
import crypto from 'node:crypto';
import type { RedisClientType } from '@redis/client';
import { redactUrl, type Config } from '../../config';

// Loaded with the first connection: on memory shared state (the default) the client is never loaded (~200 ms of CPU).
let redisModule: typeof import('@redis/client') | null = null;
const redis = (): typeof import('@redis/client') => (redisModule ??= require('@redis/client') as typeof import('@redis/client'));

// eslint-disable-next-line @typescript-eslint/no-empty-object-type
export type RedisClient = RedisClientType<{}, {}, {}, 3, {}>;


export interface RedisConnection {
  client: RedisClient;
  /** Prefix of every key (REDIS_KEY_PREFIX), e.g. 'nsg:'. */
  prefix: string;
  close(): Promise<void>;
}

/**
 * Connects to REDIS_URL. A server that cannot be reached at start fails the start (after a few quick tries), with
 * the address in the message. Once started, a lost connection is retried with backoff, and while it is down every
 * command fails at once (no offline queue), so requests get an error instead of hanging.
 */
export async function openRedis(config: Pick<Config, 'redisUrl' | 'redisKeyPrefix'>, log: (line: string) => void = console.error): Promise<RedisConnection> {
  if (!config.redisUrl) throw new Error('REDIS_URL is not set');
  const where = redactUrl(config.redisUrl);
  let started = false;
  let lastLogged = 0;
  const client = redis().createClient({
    url: config.redisUrl,
    disableOfflineQueue: true,
    socket: {
      connectTimeout: 5_000,
      reconnectStrategy: (retries, cause) => {
        if (!started) return retries >= 3 ? new Error(`Redis at ${where}: ${cause.message}`) : 200;
        return Math.min(100 * 2 ** Math.min(retries, 5), 3_000);
      },
    },
  });
  client.on('error', (err: Error) => {
    // Errors repeat on every reconnect attempt: log at most one line every 10 s.
    const now = Date.now();
    if (started && now - lastLogged >= 10_000) {
      lastLogged = now;
      log(`[redis] ${where}: ${err.message}`);
    }
  });
  try {
    await client.connect();
  } catch (err) {
    const message = (err as Error).message;
    throw new Error(message.startsWith('Redis at') ? message : `Redis at ${where}: ${message}`);
  }
  started = true;
  return {
    client,
    prefix: config.redisKeyPrefix,
    async close() {
      if (client.isOpen) await client.close();
    },
  };
}

/** A Lua script run with EVALSHA, loaded on first use (and again after a Redis restart forgets it). */
export class RedisScript {
  readonly sha: string;

  constructor(readonly source: string) {
    this.sha = crypto.createHash('sha1').update(source).digest('hex');
  }

  async run(client: RedisClient, keys: string[], args: Array<string | number>): Promise<unknown> {
    const options = { keys, arguments: args.map(String) };
    try {
      return await client.evalSha(this.sha, options);
    } catch (err) {
      if (!/NOSCRIPT/.test((err as Error).message)) throw err;
      return await client.eval(this.source, options);
    }
  }
}
