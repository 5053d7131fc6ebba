// The console's session and CSRF checks (src/console/session.ts) on a bare Express app: no console pages, no
// browser. A state-changing call needs the session's CSRF token, a cross-site one is refused, the session cookie
// carries its attributes, and a session that ends (sign-out or time-out) takes its playground keys with it.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import express from 'express';
import request from 'supertest';
import { loadConfig } from '../../src/config';
import { CSRF_HEADER, SESSION_COOKIE, consoleSessions, parseCookies, signedIn, type ConsoleSessions } from '../../src/console/session';
import { memoryConsoleState } from '../../src/shared-state/sessions';
import type { TrustProxySetting } from '../../src/config/trust-proxy';
import { openSqliteStore } from '../../src/store/gateway/sqlite';
import type { GatewayStore } from '../../src/store/gateway/types';
import { eventually } from '../helpers/service-helpers';

const OPTIONS = { idleTtlMs: 60 * 60 * 1000, absoluteTtlMs: 12 * 60 * 60 * 1000 };

let dir: string;
let store: GatewayStore;
/** Playground keys whose revocation has completed. */
const revoked = new Set<string>();

beforeAll(() => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'console-session-'));
  store = openSqliteStore(loadConfig({ NODE_ENV: 'test', DATA_DIR: dir }));
});

afterAll(async () => {
  await store.close();
  fs.rmSync(dir, { recursive: true, force: true });
});

/** The console API's checks in front of a read and a write route and sign-out, plus a route that sets the cookie. */
function harness(trustProxy: TrustProxySetting = 0): { app: express.Express; auth: ConsoleSessions } {
  const auth = consoleSessions({
    trustProxy,
    sessions: memoryConsoleState.sessions(OPTIONS),
    options: OPTIONS,
    revokePlaygroundKey: async ({ tokenId }) => {
      const out = await store.revokeToken(tokenId);
      revoked.add(tokenId);
      return out;
    },
  });
  const app = express();
  app.get('/cookie', (req, res) => {
    auth.setCookie(req, res, 'abc', 90_500);
    res.end();
  });
  const api = express.Router();
  app.use('/console/api', api);
  api.use(auth.refuseCrossSite);
  api.use(auth.requireSession);
  api.get('/thing', (_req, res) => res.json({ read: true }));
  api.post('/thing', (_req, res) => res.json({ wrote: true, sessionId: signedIn(res).sessionId }));
  api.post('/logout', (req, res) => {
    auth.end(parseCookies(req.headers.cookie)[SESSION_COOKIE]).then(() => res.json({ signed_in: false }));
  });
  return { app, auth };
}

const cookie = (sessionId: string): string => `${SESSION_COOKIE}=${sessionId}`;

describe('requireSession', () => {
  test('without a live session every call is 401', async () => {
    const { app } = harness();
    for (const r of [request(app).get('/console/api/thing'), request(app).post('/console/api/thing').set('Cookie', cookie('made-up'))]) {
      const res = await r;
      expect(res.status).toBe(401);
      expect(res.body).toEqual({ error: { type: 'not_signed_in', message: 'sign in first', request_id: res.headers['x-request-id'] } });
    }
  });

  test('reads need the session only; writes also need its CSRF token', async () => {
    const { app, auth } = harness();
    const { sessionId, session } = await auth.store.create();
    const other = await auth.store.create();

    const read = await request(app).get('/console/api/thing').set('Cookie', cookie(sessionId));
    expect(read.status).toBe(200);
    expect(read.body).toEqual({ read: true });

    const refused = { error: { type: 'csrf_failed', message: 'missing or wrong CSRF token', request_id: expect.stringMatching(/^req_[0-9a-f]{32}$/) } };
    const missing = await request(app).post('/console/api/thing').set('Cookie', cookie(sessionId));
    expect(missing.status).toBe(403);
    expect(missing.body).toEqual(refused);
    const wrong = await request(app).post('/console/api/thing').set('Cookie', cookie(sessionId)).set(CSRF_HEADER, session.csrfToken + 'x');
    expect(wrong.status).toBe(403);
    expect(wrong.body).toEqual(refused);
    // Another session's token is no better.
    const foreign = await request(app).post('/console/api/thing').set('Cookie', cookie(sessionId)).set(CSRF_HEADER, other.session.csrfToken);
    expect(foreign.status).toBe(403);
    expect(foreign.body).toEqual(refused);

    const ok = await request(app).post('/console/api/thing').set('Cookie', cookie(sessionId)).set(CSRF_HEADER, session.csrfToken);
    expect(ok.status).toBe(200);
    expect(ok.body).toEqual({ wrote: true, sessionId });
  });

  test('a request the browser marks cross-site is refused even with session and token', async () => {
    const { app, auth } = harness();
    const { sessionId, session } = await auth.store.create();
    for (const method of ['get', 'post'] as const) {
      const res = await request(app)
        [method]('/console/api/thing')
        .set('Cookie', cookie(sessionId))
        .set(CSRF_HEADER, session.csrfToken)
        .set('Sec-Fetch-Site', 'cross-site');
      expect(res.status).toBe(403);
      expect(res.body).toEqual({ error: { type: 'csrf_failed', message: 'cross-site request refused', request_id: res.headers['x-request-id'] } });
    }
    const sameOrigin = await request(app).get('/console/api/thing').set('Cookie', cookie(sessionId)).set('Sec-Fetch-Site', 'same-origin');
    expect(sameOrigin.status).toBe(200);
  });
});

describe('the session cookie', () => {
  test('HttpOnly, SameSite=Strict, Max-Age in whole seconds; X-Forwarded-Proto from an untrusted peer adds no Secure', async () => {
    const { app } = harness(0);
    const res = await request(app).get('/cookie').set('X-Forwarded-Proto', 'https');
    expect(res.headers['set-cookie']).toEqual([`${SESSION_COOKIE}=abc; Path=/; HttpOnly; SameSite=Strict; Max-Age=90`]);
  });

  test('the cookie path follows the mount point; a trusted proxy saying https adds Secure', async () => {
    const { app } = harness(['loopback']);
    const outer = express();
    outer.use('/console', app);
    const res = await request(outer).get('/console/cookie').set('X-Forwarded-Proto', 'http, https');
    expect(res.headers['set-cookie']).toEqual([`${SESSION_COOKIE}=abc; Path=/console; HttpOnly; SameSite=Strict; Max-Age=90; Secure`]);
    const http = await request(outer).get('/console/cookie');
    expect(http.headers['set-cookie']).toEqual([`${SESSION_COOKIE}=abc; Path=/console; HttpOnly; SameSite=Strict; Max-Age=90`]);
  });

  test('parseCookies: the first of repeated names wins, a value that does not decode is kept as sent', () => {
    expect(parseCookies(undefined)).toEqual({});
    expect(parseCookies('a=1; b=x%20y; a=2; junk; c=%E0%A4%A')).toEqual({ a: '1', b: 'x y', c: '%E0%A4%A' });
  });
});

describe('ending a session', () => {
  async function playgroundKey(auth: ConsoleSessions, sessionId: string): Promise<string> {
    const ws = await store.createWorkspace(`ws-${sessionId.slice(0, 8)}`, 'free');
    const { record, token } = await store.createToken({ workspaceId: ws.id, name: 'pg', scopes: ['*'], allowedIps: [], expiresAt: null });
    await auth.store.setPlaygroundKey(sessionId, ws.id, { tokenId: record.id, token });
    return record.id;
  }

  test('sign-out ends the session and revokes its playground keys', async () => {
    const { app, auth } = harness();
    const { sessionId, session } = await auth.store.create();
    const keyId = await playgroundKey(auth, sessionId);
    const out = await request(app).post('/console/api/logout').set('Cookie', cookie(sessionId)).set(CSRF_HEADER, session.csrfToken);
    expect(out.status).toBe(200);
    await eventually(() => revoked.has(keyId));
    expect((await request(app).get('/console/api/thing').set('Cookie', cookie(sessionId))).status).toBe(401);
    expect((await store.getToken(keyId))?.revokedAt).toBeTruthy();
  });

  test('a session that times out has its playground keys revoked too', async () => {
    const { auth } = harness();
    const { sessionId } = await auth.store.create();
    const keyId = await playgroundKey(auth, sessionId);
    await auth.store.sweep(Date.now() + OPTIONS.idleTtlMs + 1);
    expect(await auth.store.get(sessionId)).toBeNull();
    // The end handler fires the revocation without awaiting it.
    await eventually(() => revoked.has(keyId));
    expect((await store.getToken(keyId))?.revokedAt).toBeTruthy();
  });
});
