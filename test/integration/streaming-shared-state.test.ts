// Live streams on two gateways that share one real Redis (REDIS_URL, Debian's redis-server in a temporary directory)
// and one SQLite store, as gateway-1 and gateway-2 of docker-compose.scale.yml share theirs: a browser's ticket
// issued by one gateway is redeemed by the other, and a workspace's concurrent-stream limit counts the streams of
// both gateways (refusals that come after the slot was taken give it back).
import fs from 'node:fs';
import type http from 'node:http';
import { createApp, type AppHandle } from '../../src/app';
import type { Config } from '../../src/config';
import { openSqliteStore } from '../../src/store/gateway/sqlite';
import type { GatewayStore } from '../../src/store/gateway/types';
import { startRedis, serverBinaries, type RedisServer } from '../helpers/real-servers';
import { closeQuietly, eventually, fixture, rawRequest, testConfig } from '../helpers/service-helpers';
import { refusal, serveApp, StreamClient, wavData } from '../helpers/streaming-helpers';

interface Gateway {
  handle: AppHandle;
  server: http.Server;
  http: string;
  ws: string;
}

describe('live streams on two gateways sharing Redis', () => {
  let redis: RedisServer;
  let config: Config;
  let store: GatewayStore;
  const gateways: Gateway[] = [];
  const input = wavData(fs.readFileSync(fixture('speech-noisy-16k-mono.wav'))).subarray(0, 32_000);

  async function token(plan: 'free' | 'enterprise', custom?: { creditsPerMonth: number }): Promise<string> {
    const ws = await store.createWorkspace(`ws-${Math.random().toString(36).slice(2)}`, plan, custom);
    return (await store.createToken({ workspaceId: ws.id, name: 't', scopes: ['*'], allowedIps: [], expiresAt: null })).token;
  }

  /** A stream that got its `ready`; null when the upgrade was refused. */
  async function open(url: string, headers: Record<string, string>): Promise<StreamClient | null> {
    const stream = new StreamClient(url, headers);
    return stream.ready.then(
      () => stream,
      () => null,
    );
  }

  async function finish(stream: StreamClient): Promise<number> {
    stream.send(input);
    stream.end();
    return (await stream.closed).code;
  }

  beforeAll(async () => {
    serverBinaries(); // one line naming the Debian packages when redis-server is missing
    redis = await startRedis();
    // Enterprise streams are limited by STREAMS_ENTERPRISE_MAX: 2 here, for the workspace without credits below.
    config = testConfig({ workers: 1, redisUrl: redis.url, redisKeyPrefix: `sst${process.pid}:`, streamsEnterpriseMax: 2 });
    store = openSqliteStore(config);
    const a = await createApp(config, { store, log: () => undefined });
    // The second gateway denoises on the first one's engine: this test is about the state the gateways share.
    const b = await createApp(config, { store, engine: a.engine!, log: () => undefined });
    for (const handle of [a, b]) gateways.push({ handle, ...(await serveApp(handle)) });
  }, 60_000);

  afterAll(async () => {
    for (const g of gateways) await closeQuietly(g.server);
    for (const g of gateways.reverse()) await g.handle.close();
    await store?.close();
    await redis?.stop();
    if (config) fs.rmSync(config.dataDir, { recursive: true, force: true });
  }, 30_000);

  test('both gateways run on Redis', () => {
    for (const g of gateways) expect(g.handle.sharedState.description).toBe(`Redis ${redis.url}`);
  });

  test("a ticket issued by one gateway is redeemed by the other, once", async () => {
    const key = await token('free');
    for (const [issuer, redeemer] of [
      [gateways[0], gateways[1]],
      [gateways[1], gateways[0]],
    ]) {
      const issued = await rawRequest(`${issuer.http}/v1/noise-suppressor/stream/tickets`, { method: 'POST', headers: { Authorization: `Bearer ${key}` } });
      expect(issued.status).toBe(201);
      const { ticket } = JSON.parse(issued.body.toString()) as { ticket: string };
      const stream = await open(`${redeemer.ws}?ticket=${ticket}`, {});
      expect(stream).not.toBeNull();
      expect(await finish(stream!)).toBe(1000);
      expect(stream!.audio.length).toBe(input.length);
      for (const g of gateways) {
        const again = await refusal(`${g.ws}?ticket=${ticket}`, {});
        expect(again.status).toBe(401);
        expect(again.body.error.type).toBe('invalid_token');
      }
    }
  }, 30_000);

  test('a free workspace (2 streams) holding 2 on gateway A is refused a third on gateway B; one ends, B admits one', async () => {
    const auth = { Authorization: `Bearer ${await token('free')}` };
    const [a, b] = gateways;
    const held = await Promise.all([open(a.ws, auth), open(a.ws, auth)]);
    expect(held.every((s) => s !== null)).toBe(true);
    for (const g of [b, a]) {
      const third = await refusal(g.ws, auth);
      expect(third.status).toBe(429);
      expect(third.body.error).toMatchObject({ type: 'too_many_streams', message: 'the free plan allows 2 concurrent streams; 2 are open' });
      expect(Number(third.headers['retry-after'])).toBeGreaterThan(0);
    }
    expect(await finish(held[0]!)).toBe(1000);
    // The slot is given back once the first gateway has settled the stream, a moment after the close.
    let onB: StreamClient | null = null;
    await eventually(async () => (onB = await open(b.ws, auth)) !== null, 10_000);
    expect((await refusal(b.ws, auth)).body.error.type).toBe('too_many_streams');
    expect(await finish(held[1]!)).toBe(1000);
    expect(await finish(onB!)).toBe(1000);
  }, 30_000);

  test('an upgrade refused after its slot was taken (no credits: 402) gives the slot back, on either gateway', async () => {
    const auth = { Authorization: `Bearer ${await token('enterprise', { creditsPerMonth: 0 })}` };
    // Three refusals with a limit of 2: a slot kept by any of them would turn the third into 429.
    for (let i = 0; i < 3; i++) {
      const r = await refusal(gateways[i % 2].ws, auth);
      expect(r.status).toBe(402);
      expect(r.body.error.type).toBe('quota_exhausted');
    }
  }, 30_000);
});
