// ONE contract suite for the short-lived shared state, run against process memory and a real Redis server (from
// Debian's package, in a temporary directory): the sliding-window rate limiter, console sessions (with sealed
// playground keys), the console sign-in limiter, live-stream tickets and concurrent-stream slots. Also: two Redis
// clients (two "replicas") hitting one key at once never admit more than the limit, never redeem one ticket twice and
// never hold more than a workspace's stream slots.
import { MemoryLoginLimiter, MemorySessionStore, type ConsoleSession, type LoginLimiter, type SessionStore } from '../../src/shared-state/sessions';
import { addressKey, RATE_WINDOW_MS, SlidingWindowRateLimiter, type RateLimiter } from '../../src/shared-state/rate-limit';
import { openRedis, type RedisConnection } from '../../src/shared-state/redis/client';
import { RedisLoginLimiter, RedisSessionStore, Sealer } from '../../src/shared-state/redis/console-state';
import { RedisRateLimiter } from '../../src/shared-state/redis/rate-limiter';
import { RedisStreamSlots, RedisStreamTickets } from '../../src/shared-state/redis/streams';
import { MemoryStreamSlots, MemoryStreamTickets, type StreamSlots, type StreamStateOptions, type StreamTickets } from '../../src/shared-state/streams';
import { startRedis, type RedisServer, serverBinaries } from '../helpers/real-servers';
import { eventually } from '../helpers/service-helpers';

// Fails the suite at once, with one line naming the Debian packages, when the server binaries are missing.
beforeAll(() => {
  serverBinaries();
});

let redisServer: RedisServer | null = null;
const connections: RedisConnection[] = [];
let prefixCounter = 0;

async function redis(prefix = `t${process.pid}_${++prefixCounter}:`): Promise<RedisConnection> {
  redisServer ??= await startRedis();
  const c = await openRedis({ redisUrl: redisServer.url, redisKeyPrefix: prefix });
  connections.push(c);
  return c;
}

afterAll(async () => {
  for (const c of connections) await c.close();
  await redisServer?.stop();
});

interface Engines {
  name: string;
  limiter(): Promise<RateLimiter>;
  /** Two limiters that share state, as two gateway processes would (memory: the same instance). */
  twoReplicas(): Promise<[RateLimiter, RateLimiter]>;
  sessions(opts: { idleTtlMs: number; absoluteTtlMs: number }): Promise<[SessionStore, SessionStore]>;
  login(opts: { maxFailures: number; windowMs: number }): Promise<[LoginLimiter, LoginLimiter]>;
  /** Two replicas' stream tickets and slots on one shared state (memory: the same instances). */
  streams(opts: StreamStateOptions): Promise<{ tickets: [StreamTickets, StreamTickets]; slots: [StreamSlots, StreamSlots] }>;
}

const sealer = async () => new Sealer('admin-secret:test');

const engines: Engines[] = [
  {
    name: 'memory',
    limiter: async () => new SlidingWindowRateLimiter(),
    twoReplicas: async () => {
      const l = new SlidingWindowRateLimiter();
      return [l, l];
    },
    sessions: async (opts) => {
      const s = new MemorySessionStore(opts);
      return [s, s];
    },
    login: async (opts) => {
      const l = new MemoryLoginLimiter(opts);
      return [l, l];
    },
    streams: async (opts) => {
      const t = new MemoryStreamTickets(opts);
      const s = new MemoryStreamSlots(opts);
      return { tickets: [t, t], slots: [s, s] };
    },
  },
  {
    name: 'redis',
    limiter: async () => new RedisRateLimiter(await redis()),
    twoReplicas: async () => {
      const prefix = `pair${++prefixCounter}:`;
      return [new RedisRateLimiter(await redis(prefix)), new RedisRateLimiter(await redis(prefix))];
    },
    sessions: async (opts) => {
      const prefix = `sess${++prefixCounter}:`;
      return [new RedisSessionStore(await redis(prefix), opts, sealer), new RedisSessionStore(await redis(prefix), opts, sealer)];
    },
    login: async (opts) => {
      const prefix = `login${++prefixCounter}:`;
      return [new RedisLoginLimiter(await redis(prefix), opts), new RedisLoginLimiter(await redis(prefix), opts)];
    },
    streams: async (opts) => {
      const prefix = `streams${++prefixCounter}:`;
      const [a, b] = [await redis(prefix), await redis(prefix)];
      return { tickets: [new RedisStreamTickets(a, opts), new RedisStreamTickets(b, opts)], slots: [new RedisStreamSlots(a, opts), new RedisStreamSlots(b, opts)] };
    },
  },
];

describe.each(engines)('RateLimiter contract: $name', (engine) => {
  test('sliding window: limit admitted, then 429 state; slots return one by one as requests leave the window', async () => {
    const l = await engine.limiter();
    const t0 = Date.UTC(2030, 0, 1, 12, 0, 30);
    const seen = [];
    for (let i = 0; i < 4; i++) seen.push(await l.hit('k', 3, t0 + i * 1000));
    expect(seen).toEqual([
      { allowed: true, limit: 3, remaining: 2, resetSeconds: 60 },
      { allowed: true, limit: 3, remaining: 1, resetSeconds: 59 },
      { allowed: true, limit: 3, remaining: 0, resetSeconds: 58 },
      { allowed: false, limit: 3, remaining: 0, resetSeconds: 57 },
    ]);
    expect(await l.peek('k', 3, t0 + 10_000)).toEqual({ limit: 3, remaining: 0, resetSeconds: 50 });
    // Past the minute boundary, still inside 60 s of the three: nothing more (a fixed window would reset here).
    expect((await l.hit('k', 3, t0 + 31_000)).allowed).toBe(false);
    // The first leaves at t0+60 s exactly: one slot.
    expect(await l.hit('k', 3, t0 + RATE_WINDOW_MS)).toEqual({ allowed: true, limit: 3, remaining: 0, resetSeconds: 1 });
    expect((await l.hit('k', 3, t0 + RATE_WINDOW_MS)).allowed).toBe(false);
    expect((await l.hit('k', 3, t0 + RATE_WINDOW_MS + 1000)).allowed).toBe(true);
    // Long idle: the full budget, and reset is a whole window.
    expect(await l.peek('k', 3, t0 + 10 * RATE_WINDOW_MS)).toEqual({ limit: 3, remaining: 3, resetSeconds: 60 });
  });

  test('keys are independent; peek counts nothing; a lowered limit waits for enough requests to leave', async () => {
    const l = await engine.limiter();
    const t0 = Date.UTC(2030, 0, 1, 12, 0, 0);
    for (let i = 0; i < 5; i++) await l.hit('a', 10, t0 + i * 1000);
    expect(await l.peek('b', 10, t0)).toEqual({ limit: 10, remaining: 10, resetSeconds: 60 });
    expect(await l.peek('a', 10, t0 + 5000)).toEqual({ limit: 10, remaining: 5, resetSeconds: 55 });
    expect(await l.peek('a', 10, t0 + 5000)).toEqual({ limit: 10, remaining: 5, resetSeconds: 55 });
    // The plan drops to 2 per minute: 5 are counted, 4 must leave before one more fits (the 4th leaves at t0+63 s).
    const d = await l.hit('a', 2, t0 + 10_000);
    expect(d).toEqual({ allowed: false, limit: 2, remaining: 0, resetSeconds: 53 });
    expect((await l.hit('a', 2, t0 + 62_999)).allowed).toBe(false);
    expect((await l.hit('a', 2, t0 + 63_000)).allowed).toBe(true);
  });

  test('two replicas sharing the state, hammered at once: exactly the limit admitted in the window', async () => {
    const [a, b] = await engine.twoReplicas();
    const t0 = Date.now();
    const results = await Promise.all(
      Array.from({ length: 200 }, (_, i) => (i % 2 ? a : b).hit('shared', 60, t0 + Math.floor(i / 10))),
    );
    expect(results.filter((r) => r.allowed)).toHaveLength(60);
    expect((await a.peek('shared', 60, t0 + 100)).remaining).toBe(0);
  });
});

test('memory limiter: bounded in keys (least recently used forgotten) and idle keys swept', async () => {
  const l = new SlidingWindowRateLimiter({ maxKeys: 100 });
  const t0 = Date.UTC(2030, 0, 1);
  for (let i = 0; i < 3; i++) await l.hit('hot', 3, t0);
  for (let i = 0; i < 250; i++) {
    await l.hit(`spray${i}`, 3, t0 + 1);
    if (i % 50 === 0) expect((await l.hit('hot', 3, t0 + 2)).allowed).toBe(false); // touched: stays, still limited
  }
  expect(l.size).toBeLessThanOrEqual(100);
  expect((await l.hit('hot', 3, t0 + 3)).allowed).toBe(false);
  await l.peek('x', 3, t0 + 2 * RATE_WINDOW_MS); // a later minute: the sweep forgets everything idle
  expect(l.size).toBe(1);
});

test('addressKey: IPv4 per address, IPv6 per /64', () => {
  expect(addressKey('198.51.100.7')).toBe('ip:198.51.100.7');
  expect(addressKey('2001:db8:1:2::1')).toBe(addressKey('2001:db8:1:2:ffff:1:2:3'));
  expect(addressKey('2001:db8:1:2::1')).toBe('ip6:2001:db8:1:2::/64');
  expect(addressKey('2001:db8:1:3::1')).not.toBe(addressKey('2001:db8:1:2::1'));
  expect(addressKey('::1')).toBe('ip6:0:0:0:0::/64');
  expect(addressKey('2001:0db8:0001:0002:0:0:0:9')).toBe('ip6:2001:db8:1:2::/64');
});

describe.each(engines)('SessionStore contract: $name', (engine) => {
  const opts = { idleTtlMs: 60_000, absoluteTtlMs: 600_000 };

  test('create, get from either replica, playground keys, destroy', async () => {
    const [a, b] = await engine.sessions(opts);
    const t0 = Date.now();
    const { sessionId, session } = await a.create(t0);
    expect(sessionId).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(session).toMatchObject({ createdAt: t0, lastSeenAt: t0, expiresAt: t0 + 600_000 });
    const got = await b.get(sessionId, t0 + 1000);
    expect(got).toMatchObject({ csrfToken: session.csrfToken, createdAt: t0, lastSeenAt: t0 + 1000 });
    expect(await b.get('not-a-session', t0)).toBeNull();
    expect(await b.get(undefined, t0)).toBeNull();

    await a.setPlaygroundKey(sessionId, 'ws_1', { tokenId: 'key_1', token: 'mw_live_secret1' });
    await b.setPlaygroundKey(sessionId, 'ws_2', { tokenId: 'key_2', token: 'mw_live_secret2' });
    expect([...(await b.get(sessionId, t0 + 2000))!.playgroundKeys]).toEqual(
      expect.arrayContaining([
        ['ws_1', { tokenId: 'key_1', token: 'mw_live_secret1' }],
        ['ws_2', { tokenId: 'key_2', token: 'mw_live_secret2' }],
      ]),
    );
    await a.setPlaygroundKey(sessionId, 'ws_1', null);
    expect([...(await a.get(sessionId, t0 + 3000))!.playgroundKeys.keys()]).toEqual(['ws_2']);

    const ended = await b.destroy(sessionId);
    expect(ended!.playgroundKeys.get('ws_2')!.token).toBe('mw_live_secret2');
    expect(await a.get(sessionId, t0 + 4000)).toBeNull();
    expect(await a.destroy(sessionId)).toBeNull();
    await a.setPlaygroundKey(sessionId, 'ws_3', { tokenId: 'k', token: 't' }); // no resurrection of a gone session
    expect(await a.get(sessionId, t0 + 5000)).toBeNull();
  });

  test('idle and absolute expiry; each ended session is handed to onEnd exactly once, across replicas', async () => {
    const [a, b] = await engine.sessions(opts);
    const ended: ConsoleSession[] = [];
    a.onEnd((s) => ended.push(s));
    b.onEnd((s) => ended.push(s));
    const t0 = Date.now();
    const idle = await a.create(t0);
    const busy = await a.create(t0);
    await a.setPlaygroundKey(idle.sessionId, 'ws_1', { tokenId: 'key_idle', token: 'mw_live_idle' });
    // `busy` keeps being used (through either replica); `idle` is not.
    for (let t = t0 + 30_000; t <= t0 + 590_000; t += 30_000) expect(await (t % 60_000 ? a : b).get(busy.sessionId, t)).not.toBeNull();
    // idle: over at t0 + 60 s; found by whichever replica looks first, ended once.
    const results = await Promise.all([a.get(idle.sessionId, t0 + 61_000), b.get(idle.sessionId, t0 + 61_000), a.sweep(t0 + 61_000), b.sweep(t0 + 61_000)]);
    expect(results[0]).toBeNull();
    expect(results[1]).toBeNull();
    expect(ended).toHaveLength(1);
    expect(ended[0].playgroundKeys.get('ws_1')).toEqual({ tokenId: 'key_idle', token: 'mw_live_idle' });
    // busy: the absolute limit ends it however active it is.
    await Promise.all([a.sweep(t0 + 600_000), b.sweep(t0 + 600_000)]);
    expect(ended).toHaveLength(2);
    expect(await b.get(busy.sessionId, t0 + 600_001)).toBeNull();
    expect(ended).toHaveLength(2);
  });
});

describe.each(engines)('LoginLimiter contract: $name', (engine) => {
  test('N failures lock the address for the rest of the window, on every replica; success clears it', async () => {
    const [a, b] = await engine.login({ maxFailures: 3, windowMs: 1_500 });
    // The memory limiter runs on `now`. Redis keeps the window as the key's time to live on its own clock, which a
    // test cannot move: there the window's end is waited for (polled).
    let now = Date.now();
    expect(await a.retryAfterSeconds('203.0.113.1', now)).toBe(0);
    await a.recordFailure('203.0.113.1', now);
    await b.recordFailure('203.0.113.1', now);
    expect(await b.retryAfterSeconds('203.0.113.1', now)).toBe(0);
    await b.recordFailure('203.0.113.1', now);
    expect(await a.retryAfterSeconds('203.0.113.1', now)).toBe(2); // ceil(1.5 s)
    expect(await b.retryAfterSeconds('203.0.113.1', now)).toBeGreaterThanOrEqual(1);
    expect(await a.retryAfterSeconds('203.0.113.2', now)).toBe(0);
    now += 1_600;
    await eventually(async () => (await a.retryAfterSeconds('203.0.113.1', now)) === 0); // window over
    await a.recordFailure('203.0.113.3', now);
    await a.recordFailure('203.0.113.3', now);
    await b.recordSuccess('203.0.113.3');
    await a.recordFailure('203.0.113.3', now);
    await a.recordFailure('203.0.113.3', now);
    expect(await a.retryAfterSeconds('203.0.113.3', now)).toBe(0); // 2 after the success, not 4
  });
});

describe.each(engines)('StreamTickets contract: $name', (engine) => {
  test('issued on one replica, redeemed once on either; unknown and malformed tickets are nothing', async () => {
    const clock = { t: Date.now() };
    const { tickets: [a, b] } = await engine.streams({ now: () => clock.t });
    const issued = await a.issue('key_1');
    expect(issued.ticket).toMatch(/^tk_[A-Za-z0-9_-]{32}$/);
    expect(issued.expiresAt).toBe(clock.t + 60_000);
    const other = await b.issue('key_2');
    expect(other.ticket).not.toBe(issued.ticket);
    expect(await b.redeem(issued.ticket)).toBe('key_1');
    expect(await b.redeem(issued.ticket)).toBeNull();
    expect(await a.redeem(issued.ticket)).toBeNull();
    expect(await a.redeem('tk_' + 'A'.repeat(32))).toBeNull(); // well formed, never issued
    expect(await a.redeem(other.ticket.slice(0, -1))).toBeNull(); // malformed
    expect(await a.redeem(other.ticket + 'x')).toBeNull();
    expect(await a.redeem(other.ticket)).toBe('key_2');
  });

  test('a ticket expires after its time to live', async () => {
    const clock = { t: Date.now() };
    const { tickets: [a, b] } = await engine.streams({ now: () => clock.t, ticketTtlMs: 1_000 });
    const late = await a.issue('key_late');
    const early = await a.issue('key_early');
    const issuedAt = Date.now(); // Redis stored both before this
    expect(late.expiresAt).toBe(clock.t + 1_000);
    clock.t += 999;
    expect(await b.redeem(early.ticket)).toBe('key_early');
    clock.t += 1;
    // Memory decides on the injected clock. Redis expires the key on its own clock, which a test cannot move: there
    // the ticket's end is waited for (polled).
    if (engine.name === 'redis') await eventually(() => Date.now() > issuedAt + 1_000);
    expect(await b.redeem(late.ticket)).toBeNull();
  });

  test('one ticket redeemed by both replicas at once: exactly one of them gets the key', async () => {
    const { tickets: [a, b] } = await engine.streams({});
    const issued = await Promise.all(Array.from({ length: 20 }, (_, i) => a.issue(`key_${i}`)));
    for (const [i, { ticket }] of issued.entries()) {
      const got = await Promise.all(Array.from({ length: 6 }, (_, j) => (j % 2 ? a : b).redeem(ticket)));
      expect(got.filter((g) => g !== null)).toEqual([`key_${i}`]);
    }
  });
});

describe.each(engines)('StreamSlots contract: $name', (engine) => {
  test('at most max leases per workspace, on either replica; release frees a slot; workspaces are independent', async () => {
    const { slots: [a, b] } = await engine.streams({});
    const one = await a.acquire('ws_1', 2);
    expect(one).toEqual({ lease: { workspaceId: 'ws_1', id: expect.any(String) }, open: 1 });
    const two = await b.acquire('ws_1', 2);
    expect(two.open).toBe(2);
    expect(two.lease!.id).not.toBe(one.lease!.id);
    expect(await a.acquire('ws_1', 2)).toEqual({ lease: null, open: 2 });
    expect(await b.acquire('ws_1', 2)).toEqual({ lease: null, open: 2 });
    expect((await a.acquire('ws_2', 2)).lease).not.toBeNull();
    await b.release(one.lease!);
    await a.release(one.lease!); // a second release changes nothing
    const three = await a.acquire('ws_1', 2);
    expect(three.open).toBe(2);
    expect(await b.acquire('ws_1', 2)).toEqual({ lease: null, open: 2 });
    // A lowered limit (plan changed) refuses until enough streams end; a raised one admits at once.
    expect(await a.acquire('ws_1', 1)).toEqual({ lease: null, open: 2 });
    expect((await a.acquire('ws_1', 3)).open).toBe(3);
  });

  test('20 acquires at once from two replicas with max 5: exactly 5 leases', async () => {
    const { slots: [a, b] } = await engine.streams({});
    const grants = await Promise.all(Array.from({ length: 20 }, (_, i) => (i % 2 ? a : b).acquire('ws_race', 5)));
    const won = grants.filter((g) => g.lease !== null);
    expect(won).toHaveLength(5);
    expect(new Set(won.map((g) => g.lease!.id)).size).toBe(5);
    expect(grants.filter((g) => g.lease === null).every((g) => g.open === 5)).toBe(true);
    await Promise.all(won.slice(0, 2).map((g) => a.release(g.lease!)));
    const again = await Promise.all(Array.from({ length: 6 }, (_, i) => (i % 2 ? a : b).acquire('ws_race', 5)));
    expect(again.filter((g) => g.lease !== null)).toHaveLength(2);
  });

  test('leases not renewed lapse (a dead gateway does not block the workspace); renewed ones stay', async () => {
    const clock = { t: Date.now() };
    const { slots: [a, b] } = await engine.streams({ now: () => clock.t, leaseTtlMs: 90_000 });
    const kept = (await a.acquire('ws_1', 2)).lease!;
    const dead = (await a.acquire('ws_1', 2)).lease!; // its gateway dies: nobody renews it
    expect((await b.acquire('ws_1', 2)).lease).toBeNull();
    for (let i = 0; i < 3; i++) {
      clock.t += 30_000;
      await a.renew([kept]);
    }
    // 90 s on: `dead` lapsed, `kept` was renewed at t0 + 90 s.
    expect((await b.acquire('ws_1', 3)).open).toBe(2);
    expect(await b.acquire('ws_1', 2)).toEqual({ lease: null, open: 2 });
    // Renewing a lapsed lease does not bring it back.
    await a.renew([dead, kept]);
    clock.t += 89_999;
    expect(await b.acquire('ws_1', 2)).toEqual({ lease: null, open: 2 });
    clock.t += 1;
    // Now the lease b took at t0 + 90 s lapsed too, and `kept` (renewed at t0 + 90 s) as well.
    expect((await b.acquire('ws_1', 1)).open).toBe(1);
  });
});

test('memory sign-in limiter: spraying 10,001 other addresses does not unlock a locked-out one (LRU eviction)', async () => {
  const l = new MemoryLoginLimiter({ maxFailures: 5, windowMs: 15 * 60_000 });
  const t0 = Date.now();
  for (let i = 0; i < 5; i++) await l.recordFailure('203.0.113.66', t0);
  expect(await l.retryAfterSeconds('203.0.113.66', t0)).toBe(900);
  for (let i = 0; i < 10_001; i++) {
    await l.recordFailure(`10.${(i >> 16) & 255}.${(i >> 8) & 255}.${i & 255}`, t0 + 1);
    // The attacker keeps trying while spraying: each attempt is a use.
    if (i % 1_000 === 0) expect(await l.retryAfterSeconds('203.0.113.66', t0 + 1)).toBeGreaterThan(0);
  }
  expect(await l.retryAfterSeconds('203.0.113.66', t0 + 2)).toBeGreaterThan(0);
  expect(l.size).toBeLessThanOrEqual(10_000);
});

test('sealed playground tokens: unreadable in Redis, and under another secret treated as absent', async () => {
  const conn = await redis('sealcheck:');
  const opts = { idleTtlMs: 60_000, absoluteTtlMs: 600_000 };
  const store = new RedisSessionStore(conn, opts, sealer);
  const { sessionId } = await store.create();
  await store.setPlaygroundKey(sessionId, 'ws_1', { tokenId: 'key_1', token: 'mw_live_VerySecretToken000000000000000' });
  const keys = await conn.client.keys('sealcheck:*');
  let dump = '';
  for (const k of keys) dump += JSON.stringify(await conn.client.type(k) === 'hash' ? await conn.client.hGetAll(k) : await conn.client.zRange(k, 0, -1));
  expect(dump).toContain('pg:ws_1');
  expect(dump).not.toContain('mw_live_VerySecret');
  expect(dump).not.toContain(sessionId); // only the hash of the cookie value is stored
  const rotated = new RedisSessionStore(conn, opts, async () => new Sealer('admin-secret:another'));
  const seen = await rotated.get(sessionId);
  expect(seen).not.toBeNull();
  expect(seen!.playgroundKeys.size).toBe(0);
});

test('Redis outage: calls fail at once (no hanging), and work again when Redis is back', async () => {
  const own = await startRedis();
  let server: RedisServer | null = own;
  const lines: string[] = [];
  const conn = await openRedis({ redisUrl: own.url, redisKeyPrefix: 'outage:' }, (l) => lines.push(l));
  try {
    const limiter = new RedisRateLimiter(conn);
    expect((await limiter.hit('k', 5, Date.now())).allowed).toBe(true);
    await own.stop();
    server = null;
    const t0 = Date.now();
    await expect(limiter.hit('k', 5, Date.now())).rejects.toThrow();
    expect(Date.now() - t0).toBeLessThan(1_000);
    server = await startRedis(own.port);
    await eventually(() => limiter.hit('k', 5, Date.now()).then(() => true, () => false), 10_000);
  } finally {
    await conn.close();
    await server?.stop();
  }
  await expect(openRedis({ redisUrl: own.url, redisKeyPrefix: 'x:' })).rejects.toThrow(/^Redis at redis:\/\/127\.0\.0\.1:\d+: .*ECONNREFUSED/);
});
