// Who the client is behind reverse proxies (issue 9 item 2): TRUST_PROXY is a hop count or a list of proxy
// addresses with Express semantics; the client is the right-most untrusted address; the gateway's IP allow-list,
// the request log and the console's sign-in limiter all use the same answer. Real gateway, console and SQLite; the
// forwarder is a stand-in that answers like the model service (the model service plays no part in who called).
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import express from 'express';
import request from 'supertest';
import { loadConfig } from '../../src/config';
import { createConsoleRouter } from '../../src/console';
import { createGateway, gatewayErrorHandler } from '../../src/gateway';
import { parseTrustProxy } from '../../src/config/trust-proxy';
import type { Forwarder } from '../../src/gateway/types';
import { openSqliteStore } from '../../src/store/gateway/sqlite';
import type { GatewayStore, RequestLogEntry } from '../../src/store/gateway/types';
import { eventually } from '../helpers/service-helpers';

const SECRET = 'client-ip-test-admin-secret';
const MODELS = '/v1/noise-suppressor/models';

const answers: Forwarder = async (req, res) => {
  for await (const _ of req);
  res.status(200).json({ ok: true });
  return { status: 200, ok: true, upstreamMs: 1 };
};

interface Harness {
  app: express.Express;
  store: GatewayStore;
  dir: string;
  token: string;
}

const harnesses: Harness[] = [];

async function harness(trustProxy: string | undefined, allowedIps: string[] = ['10.9.9.9']): Promise<Harness> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'client-ip-'));
  const env: NodeJS.ProcessEnv = { DATA_DIR: dir, NODE_ENV: 'test', ADMIN_SECRET: SECRET };
  if (trustProxy !== undefined) env.TRUST_PROXY = trustProxy;
  const config = { ...loadConfig(env), logRequests: false };
  const store = openSqliteStore(config);
  const ws = await store.createWorkspace('acme', 'scale');
  const { token } = await store.createToken({ workspaceId: ws.id, name: 'k', scopes: ['*'], allowedIps, expiresAt: null });
  const app = express();
  app.use('/console', createConsoleRouter({ config, store, options: { maxFailures: 2, windowMs: 60_000 } }));
  app.use(createGateway({ config, store, forward: answers }));
  app.use(gatewayErrorHandler);
  const h = { app, store, dir, token };
  harnesses.push(h);
  return h;
}

afterAll(async () => {
  for (const h of harnesses) {
    await h.store.close();
    fs.rmSync(h.dir, { recursive: true, force: true });
  }
});

async function call(h: Harness, xff?: string): Promise<{ status: number; ip: string }> {
  let r = request(h.app).get(MODELS).set('Authorization', `Bearer ${h.token}`);
  if (xff !== undefined) r = r.set('X-Forwarded-For', xff);
  const res = await r;
  // The request-log row is written when the response finishes.
  let row: RequestLogEntry | undefined;
  await eventually(async () => {
    row = (await h.store.queryRequests({ limit: 50 })).find((e) => e.requestId === res.headers['x-request-id']);
    return row !== undefined;
  });
  return { status: res.status, ip: row!.clientIp };
}

describe('TRUST_PROXY parsing', () => {
  test('hop counts, true/false, proxy lists; junk is refused at start', () => {
    expect(parseTrustProxy(undefined)).toBe(0);
    expect(parseTrustProxy('')).toBe(0);
    expect(parseTrustProxy('false')).toBe(0);
    expect(parseTrustProxy('0')).toBe(0);
    expect(parseTrustProxy('true')).toBe(1); // one proxy, NOT "trust every hop"
    expect(parseTrustProxy('1')).toBe(1);
    expect(parseTrustProxy('3')).toBe(3);
    expect(parseTrustProxy('loopback, 10.0.0.0/8,2001:db8::/32')).toEqual(['loopback', '10.0.0.0/8', '2001:db8::/32']);
    expect(() => parseTrustProxy('banana')).toThrow(/TRUST_PROXY/);
    expect(() => parseTrustProxy('10.0.0.0/99')).toThrow(/TRUST_PROXY/);
    expect(() => loadConfig({ TRUST_PROXY: 'everyone' })).toThrow(/TRUST_PROXY/);
  });
});

describe('client address behind proxies', () => {
  test('TRUST_PROXY=true: a client-written X-Forwarded-For entry cannot satisfy an IP allow-list', async () => {
    const h = await harness('true');
    // The audit's reproduction: key limited to 10.9.9.9, client prepends that address itself.
    const forged = await call(h, '10.9.9.9, 198.51.100.7');
    expect(forged).toEqual({ status: 403, ip: '198.51.100.7' });
    // The proxy appended 10.9.9.9 (what it saw): that is the client.
    expect(await call(h, '198.51.100.7, 10.9.9.9')).toEqual({ status: 200, ip: '10.9.9.9' });
    // No header: the socket peer.
    expect(await call(h)).toEqual({ status: 403, ip: '127.0.0.1' });
  });

  test('a hop count skips exactly that many proxies', async () => {
    const h = await harness('2');
    // socket (proxy 1) → 172.16.0.1 (proxy 2) → 10.9.9.9 is the client; 1.1.1.1 was written by the client.
    expect(await call(h, '1.1.1.1, 10.9.9.9, 172.16.0.1')).toEqual({ status: 200, ip: '10.9.9.9' });
    expect(await call(h, '10.9.9.9, 203.0.113.4, 172.16.0.1')).toEqual({ status: 403, ip: '203.0.113.4' });
    // Fewer entries than hops: the left-most there is.
    expect(await call(h, '10.9.9.9')).toEqual({ status: 200, ip: '10.9.9.9' });
  });

  test('a proxy list skips only the listed proxies; a peer that is not a listed proxy is the client', async () => {
    const h = await harness('loopback, 172.16.0.0/12');
    expect(await call(h, '10.9.9.9, 172.16.0.5, 172.20.1.1')).toEqual({ status: 200, ip: '10.9.9.9' });
    expect(await call(h, '10.9.9.9, 203.0.113.5, 172.16.0.5')).toEqual({ status: 403, ip: '203.0.113.5' });
    // Garbage where the client address should be matches no allow-list.
    expect(await call(h, 'not-an-ip, 172.16.0.5')).toEqual({ status: 403, ip: 'unknown' });

    const elsewhere = await harness('10.0.0.0/8'); // the test's socket peer 127.0.0.1 is not a trusted proxy
    expect(await call(elsewhere, '10.9.9.9')).toEqual({ status: 403, ip: '127.0.0.1' });
  });

  test('TRUST_PROXY unset or false: X-Forwarded-For is ignored', async () => {
    for (const setting of [undefined, 'false']) {
      const h = await harness(setting);
      expect(await call(h, '10.9.9.9')).toEqual({ status: 403, ip: '127.0.0.1' });
    }
  });

  test("the console's sign-in limiter counts the same client as the gateway (two proxy hops)", async () => {
    const h = await harness('2');
    const login = (xff: string) => request(h.app).post('/console/api/login').set('X-Forwarded-For', xff).send({ secret: 'wrong' });
    // One client (198.51.100.9) behind two proxies whose inner hop varies, writing junk on the left each time.
    expect((await login('1.1.1.1, 198.51.100.9, 10.0.0.1')).status).toBe(401);
    expect((await login('2.2.2.2, 198.51.100.9, 10.0.0.2')).status).toBe(401);
    expect((await login('3.3.3.3, 198.51.100.9, 10.0.0.1')).status).toBe(429);
    // Another client through the same proxies is not locked out.
    const other = await request(h.app)
      .post('/console/api/login')
      .set('X-Forwarded-For', '198.51.100.9, 198.51.100.10, 10.0.0.1')
      .send({ secret: SECRET });
    expect(other.status).toBe(200);
  });
});
