// Console sessions and the sign-in limiter on Redis, so a browser signed in through one gateway replica is signed
// in on all of them and failed sign-ins count across replicas. Same contracts as the memory engines in
// src/console/auth.ts (and the same contract tests).
//
// Playground keys: a session holds the clear token of its playground key. In Redis it is stored sealed with
// AES-256-GCM under a key derived (HKDF-SHA256) from a secret every replica has and Redis never sees: ADMIN_SECRET
// when set, otherwise the stored hash of the generated admin secret (in the database). Someone who can read Redis
// alone learns nothing usable; a token that cannot be unsealed (the secret changed) is treated as absent and the
// playground takes a fresh key.
import crypto from 'node:crypto';
import { newSession, sessionEndsAt, sessionKey, type ConsoleSession, type ConsoleStateEngines, type LoginLimiter, type LoginLimiterOptions, type PlaygroundKey, type SessionOptions, type SessionStore } from '../sessions';
import { RedisScript, type RedisConnection } from './client';

const PLAYGROUND_FIELD = 'pg:';
/** A session's hash outlives its end by this much, so the sweeper can still read it to revoke its keys. */
const KEEP_AFTER_END_MS = 10 * 60_000;

// ---- sealing ---------------------------------------------------------------------------------------------------

export class Sealer {
  private readonly key: Buffer;

  constructor(secret: string) {
    this.key = Buffer.from(crypto.hkdfSync('sha256', secret, 'nsg console session seal', 'playground keys v1', 32));
  }

  /** base64url(iv ‖ tag ‖ ciphertext); `context` (session and workspace) is bound as associated data. */
  seal(plain: string, context: string): string {
    const iv = crypto.randomBytes(12);
    const cipher = crypto.createCipheriv('aes-256-gcm', this.key, iv);
    cipher.setAAD(Buffer.from(context));
    const ct = Buffer.concat([cipher.update(plain, 'utf8'), cipher.final()]);
    return Buffer.concat([iv, cipher.getAuthTag(), ct]).toString('base64url');
  }

  /** The plain text, or null when it was sealed under another key or for another context. */
  open(sealed: string, context: string): string | null {
    try {
      const raw = Buffer.from(sealed, 'base64url');
      const decipher = crypto.createDecipheriv('aes-256-gcm', this.key, raw.subarray(0, 12));
      decipher.setAAD(Buffer.from(context));
      decipher.setAuthTag(raw.subarray(12, 28));
      return Buffer.concat([decipher.update(raw.subarray(28)), decipher.final()]).toString('utf8');
    } catch {
      return null;
    }
  }
}

// ---- sessions ----------------------------------------------------------------------------------------------------

// Reads a session and, in the same step, either refreshes it (touch = 1) or ends it when it is over. Ending deletes
// the hash and its index entry inside the script, so exactly one caller, on whichever replica, gets 'ended'.
// KEYS: hash, ends index. ARGV: member, now, idleTtlMs, touch (1|0).
const GET_OR_END = new RedisScript(`
local h = redis.call('HGETALL', KEYS[1])
if #h == 0 then
  redis.call('ZREM', KEYS[2], ARGV[1])
  return {'none'}
end
local f = {}
for i = 1, #h, 2 do f[h[i]] = h[i + 1] end
local now = tonumber(ARGV[2])
local idle = tonumber(ARGV[3])
local expires = tonumber(f['expiresAt'])
local seen = tonumber(f['lastSeenAt'])
if now >= expires or now - seen >= idle then
  redis.call('DEL', KEYS[1])
  redis.call('ZREM', KEYS[2], ARGV[1])
  table.insert(h, 1, 'ended')
  return h
end
if ARGV[4] == '1' then
  if now > seen then
    redis.call('HSET', KEYS[1], 'lastSeenAt', ARGV[2])
    seen = now
  end
  local ends = math.min(expires, seen + idle)
  redis.call('ZADD', KEYS[2], ends, ARGV[1])
  h[#h + 1] = 'lastSeenAt'
  h[#h + 1] = tostring(seen)
end
table.insert(h, 1, 'live')
return h
`);

// Sets or removes a field only while the session exists (never re-creates a deleted session without its expiry).
// KEYS: hash. ARGV: field, value ('' = remove).
const SET_IF_EXISTS = new RedisScript(`
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
if ARGV[2] == '' then redis.call('HDEL', KEYS[1], ARGV[1]) else redis.call('HSET', KEYS[1], ARGV[1], ARGV[2]) end
return 1
`);

// KEYS: hash, ends index. ARGV: member.
const TAKE = new RedisScript(`
local h = redis.call('HGETALL', KEYS[1])
redis.call('DEL', KEYS[1])
redis.call('ZREM', KEYS[2], ARGV[1])
return h
`);

export class RedisSessionStore implements SessionStore {
  private endHandler: (session: ConsoleSession) => void = () => undefined;
  private readonly endsKey: string;

  constructor(
    private readonly redis: RedisConnection,
    private readonly options: SessionOptions,
    private readonly sealer: () => Promise<Sealer>,
  ) {
    this.endsKey = `${redis.prefix}console:session-ends`;
  }

  onEnd(handler: (session: ConsoleSession) => void): void {
    this.endHandler = handler;
  }

  private hashKey(member: string): string {
    return `${this.redis.prefix}console:session:${member}`;
  }

  private async decode(member: string, flat: string[]): Promise<ConsoleSession> {
    const f = new Map<string, string>();
    for (let i = 0; i + 1 < flat.length; i += 2) f.set(flat[i], flat[i + 1]);
    const session: ConsoleSession = {
      csrfToken: f.get('csrf') ?? '',
      createdAt: Number(f.get('createdAt')),
      lastSeenAt: Number(f.get('lastSeenAt')),
      expiresAt: Number(f.get('expiresAt')),
      playgroundKeys: new Map(),
    };
    const sealed = [...f].filter(([k]) => k.startsWith(PLAYGROUND_FIELD));
    if (sealed.length > 0) {
      const sealer = await this.sealer();
      for (const [field, value] of sealed) {
        const workspaceId = field.slice(PLAYGROUND_FIELD.length);
        const plain = sealer.open(value, `${member}/${workspaceId}`);
        if (plain === null) continue;
        try {
          const key = JSON.parse(plain) as PlaygroundKey;
          if (typeof key.tokenId === 'string' && typeof key.token === 'string') session.playgroundKeys.set(workspaceId, key);
        } catch {
          // not ours: ignore
        }
      }
    }
    return session;
  }

  async create(now = Date.now()): Promise<{ sessionId: string; session: ConsoleSession }> {
    const created = newSession(now, this.options);
    const member = sessionKey(created.sessionId);
    const key = this.hashKey(member);
    const s = created.session;
    await this.redis.client
      .multi()
      .hSet(key, {
        csrf: s.csrfToken,
        createdAt: String(s.createdAt),
        lastSeenAt: String(s.lastSeenAt),
        expiresAt: String(s.expiresAt),
      })
      .pExpireAt(key, Math.max(s.expiresAt, Date.now()) + KEEP_AFTER_END_MS)
      .zAdd(this.endsKey, { score: sessionEndsAt(s, this.options), value: member })
      .exec();
    return created;
  }

  async get(sessionId: string | undefined, now = Date.now()): Promise<ConsoleSession | null> {
    if (!sessionId) return null;
    const member = sessionKey(sessionId);
    const reply = (await GET_OR_END.run(
      this.redis.client,
      [this.hashKey(member), this.endsKey],
      [member, Math.trunc(now), this.options.idleTtlMs, 1],
    )) as string[];
    const [state, ...flat] = reply;
    if (state === 'live') return this.decode(member, flat);
    if (state === 'ended') this.endHandler(await this.decode(member, flat));
    return null;
  }

  async destroy(sessionId: string): Promise<ConsoleSession | null> {
    const member = sessionKey(sessionId);
    const flat = (await TAKE.run(this.redis.client, [this.hashKey(member), this.endsKey], [member])) as string[];
    return flat.length > 0 ? this.decode(member, flat) : null;
  }

  async setPlaygroundKey(sessionId: string, workspaceId: string, key: PlaygroundKey | null): Promise<void> {
    const member = sessionKey(sessionId);
    const value = key ? (await this.sealer()).seal(JSON.stringify(key), `${member}/${workspaceId}`) : '';
    await SET_IF_EXISTS.run(this.redis.client, [this.hashKey(member)], [PLAYGROUND_FIELD + workspaceId, value]);
  }

  async sweep(now = Date.now()): Promise<void> {
    // Candidates by their indexed end time; the script re-checks each against the hash (another replica may have
    // refreshed it meanwhile) and ends it at most once across replicas.
    for (;;) {
      const due = await this.redis.client.zRangeByScore(this.endsKey, '-inf', Math.trunc(now), { LIMIT: { offset: 0, count: 100 } });
      if (due.length === 0) return;
      let ended = 0;
      for (const member of due) {
        const reply = (await GET_OR_END.run(
          this.redis.client,
          [this.hashKey(member), this.endsKey],
          [member, Math.trunc(now), this.options.idleTtlMs, 0],
        )) as string[];
        const [state, ...flat] = reply;
        if (state === 'ended') this.endHandler(await this.decode(member, flat));
        if (state !== 'live') ended++;
        // 'live' with a stale index score: refresh the score so it is not picked again before its time.
        else await this.redis.client.zAdd(this.endsKey, { score: sessionEndsAt(await this.decode(member, flat), this.options), value: member });
      }
      if (due.length < 100 || ended === 0) return;
    }
  }
}

// ---- sign-in limiter ---------------------------------------------------------------------------------------------

// KEYS: counter. ARGV: windowMs. The window starts at the first failure (the key's expiry), as in memory.
const RECORD_FAILURE = new RedisScript(`
local n = redis.call('INCR', KEYS[1])
if n == 1 or redis.call('PTTL', KEYS[1]) < 0 then redis.call('PEXPIRE', KEYS[1], ARGV[1]) end
return n
`);

export class RedisLoginLimiter implements LoginLimiter {
  constructor(
    private readonly redis: RedisConnection,
    private readonly options: LoginLimiterOptions,
  ) {}

  private key(ip: string): string {
    return `${this.redis.prefix}console:login-failures:${ip}`;
  }

  async retryAfterSeconds(ip: string): Promise<number> {
    const [count, ttl] = (await this.redis.client.multi().get(this.key(ip)).pTTL(this.key(ip)).exec()) as unknown as [
      string | null,
      number,
    ];
    if (count === null || Number(count) < this.options.maxFailures || ttl <= 0) return 0;
    return Math.max(1, Math.ceil(ttl / 1000));
  }

  async recordFailure(ip: string): Promise<void> {
    await RECORD_FAILURE.run(this.redis.client, [this.key(ip)], [this.options.windowMs]);
  }

  async recordSuccess(ip: string): Promise<void> {
    await this.redis.client.del(this.key(ip));
  }
}

/** The console's engines on Redis. `sealSecret` gives the secret playground tokens are sealed under (see above). */
export function redisConsoleState(redis: RedisConnection, sealSecret: () => Promise<string>): ConsoleStateEngines {
  let sealer: Promise<Sealer> | null = null;
  const getSealer = (): Promise<Sealer> => {
    sealer ??= sealSecret().then((s) => new Sealer(s));
    // A failed lookup (database briefly down) is retried on the next use rather than remembered.
    sealer.catch(() => (sealer = null));
    return sealer;
  };
  return {
    sessions: (options) => new RedisSessionStore(redis, options, getSealer),
    loginLimiter: (options) => new RedisLoginLimiter(redis, options),
  };
}
