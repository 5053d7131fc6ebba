// The console's JSON API over real HTTP with a real SQLite store: admin secret bootstrap,
// sessions and cookies, CSRF, sign-in rate limiting, keys, workspaces, request log, playground keys.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import express from 'express';
import request from 'supertest';
import { loadConfig, type Config } from '../../src/config';
import { ADMIN_SECRET_SETTING, adminSecretFile, createConsoleRouter, ensureAdminSecret, PLAYGROUND_KEY_NAME } from '../../src/console';
import { openSqliteStore } from '../../src/store/gateway/sqlite';
import { hashToken } from '../../src/store/gateway/tokens';
import type { GatewayStore } from '../../src/store/gateway/types';

interface Harness {
  app: express.Express;
  store: GatewayStore;
  config: Config;
  dir: string;
}

const SECRET = 'console-api-test-secret';

function makeHarness(env: Record<string, string> = { ADMIN_SECRET: SECRET }, options = {}): Harness {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'console-api-'));
  const config = loadConfig({ ...env, DATA_DIR: dir, NODE_ENV: 'test' });
  const store = openSqliteStore(config);
  const app = express();
  app.use('/console', createConsoleRouter({ config, store, options }));
  return { app, store, config, dir };
}

async function cleanup(h: Harness): Promise<void> {
  await h.store.close();
  fs.rmSync(h.dir, { recursive: true, force: true });
}

function sessionCookie(setCookie: string[] | string | undefined): string {
  const list = Array.isArray(setCookie) ? setCookie : setCookie ? [setCookie] : [];
  const c = list.find((s) => s.startsWith('ns_console_session='));
  if (!c) throw new Error('no session cookie set');
  return c.split(';')[0];
}

async function signIn(h: Harness, secret = SECRET): Promise<{ cookie: string; csrf: string; raw: string }> {
  const res = await request(h.app).post('/console/api/login').send({ secret }).expect(200);
  const raw = ([] as string[]).concat(res.headers['set-cookie'] ?? []).find((s) => s.startsWith('ns_console_session='))!;
  return { cookie: sessionCookie(res.headers['set-cookie']), csrf: res.body.csrf_token, raw };
}

describe('console admin secret', () => {
  test('generated on first start when ADMIN_SECRET is unset: written to a 0600 file, the log names the file, only a hash is stored, and it signs in', async () => {
    const h = makeHarness({});
    try {
      const lines: string[] = [];
      const secret = await ensureAdminSecret(h.config, h.store, (l) => lines.push(l));
      expect(secret).toMatch(/^[A-Za-z0-9_-]{32}$/);
      const file = path.join(h.config.dataDir, 'admin-secret');
      expect(adminSecretFile(h.config)).toBe(file);
      expect(fs.readFileSync(file, 'utf8')).toBe(`${secret}\n`);
      expect(fs.statSync(file).mode & 0o777).toBe(0o600);
      expect(lines).toHaveLength(1);
      expect(lines[0]).toContain(file);
      expect(lines[0]).not.toContain(secret!);
      expect(lines[0]).not.toContain('\n');
      const stored = await h.store.getSetting(ADMIN_SECRET_SETTING)!;
      expect(stored).toMatch(/^scrypt\$/);
      expect(stored).not.toContain(secret!);
      // Second start: nothing new generated or printed.
      expect(await ensureAdminSecret(h.config, h.store, (l) => lines.push(l))).toBeNull();
      expect(lines).toHaveLength(1);
      expect(await h.store.getSetting(ADMIN_SECRET_SETTING)).toBe(stored);

      await request(h.app).post('/console/api/login').send({ secret: 'wrong' }).expect(401);
      const { csrf } = await signIn(h, secret!);
      expect(csrf).toBeTruthy();
    } finally {
      await cleanup(h);
    }
  });

  test('with ADMIN_SECRET set nothing is stored and only that secret works', async () => {
    const h = makeHarness();
    try {
      expect(await ensureAdminSecret(h.config, h.store, () => undefined)).toBeNull();
      expect(await h.store.getSetting(ADMIN_SECRET_SETTING)).toBeNull();
      const bad = await request(h.app).post('/console/api/login').send({ secret: SECRET + 'x' }).expect(401);
      expect(bad.body.error.type).toBe('invalid_secret');
      await signIn(h);
    } finally {
      await cleanup(h);
    }
  });
});

describe('console sessions and CSRF', () => {
  let h: Harness;
  beforeEach(async () => {
    h = makeHarness();
  });
  afterEach(() => cleanup(h));

  test('session cookie is HttpOnly, SameSite=Strict, scoped to /console; Secure only behind https', async () => {
    const { raw } = await signIn(h);
    expect(raw).toMatch(/HttpOnly/);
    expect(raw).toMatch(/SameSite=Strict/);
    expect(raw).toMatch(/; Path=\/console\/api(;|$)/);
    // docs/console.md states the same path (issue 9 item 19: it said /console).
    const documented = /\| Cookie \| `[^`]*Path=([^;`]+)/.exec(fs.readFileSync(path.join(__dirname, '../../../docs/console.md'), 'utf8'));
    expect(documented?.[1]).toBe('/console/api');
    expect(raw).not.toMatch(/Secure/);

    const behindProxy = makeHarness({ ADMIN_SECRET: SECRET, TRUST_PROXY: '1' });
    try {
      const res = await request(behindProxy.app)
        .post('/console/api/login')
        .set('X-Forwarded-Proto', 'https')
        .send({ secret: SECRET })
        .expect(200);
      expect(String(res.headers['set-cookie'])).toMatch(/; Secure/);
    } finally {
      await cleanup(behindProxy);
    }
  });

  test('API needs a session; state-changing calls need the CSRF header', async () => {
    const anon = await request(h.app).get('/console/api/workspaces').expect(401);
    expect(anon.body.error.type).toBe('not_signed_in');
    expect((await request(h.app).get('/console/api/session').expect(200)).body).toEqual({ signed_in: false });

    const { cookie, csrf } = await signIn(h);
    const s = await request(h.app).get('/console/api/session').set('Cookie', cookie).expect(200);
    expect(s.body).toMatchObject({ signed_in: true, csrf_token: csrf });

    const noCsrf = await request(h.app).post('/console/api/workspaces').set('Cookie', cookie).send({ name: 'w1' }).expect(403);
    expect(noCsrf.body.error.type).toBe('csrf_failed');
    await request(h.app)
      .post('/console/api/workspaces')
      .set('Cookie', cookie)
      .set('X-CSRF-Token', csrf.slice(0, -1) + (csrf.endsWith('A') ? 'B' : 'A'))
      .send({ name: 'w1' })
      .expect(403);
    expect(await h.store.listWorkspaces()).toHaveLength(0);
    // Cross-site fetches are refused even with the right token.
    await request(h.app)
      .post('/console/api/workspaces')
      .set('Cookie', cookie)
      .set('X-CSRF-Token', csrf)
      .set('Sec-Fetch-Site', 'cross-site')
      .send({ name: 'w1' })
      .expect(403);
    await request(h.app).post('/console/api/workspaces').set('Cookie', cookie).set('X-CSRF-Token', csrf).send({ name: 'w1' }).expect(201);
    expect((await h.store.listWorkspaces()).map((w) => w.name)).toEqual(['w1']);
  });

  test('login accepts JSON only (no cross-site form posts)', async () => {
    await request(h.app).post('/console/api/login').type('form').send({ secret: SECRET }).expect(415);
  });

  test('a JSON body above 64 KB is 413 payload_too_large, sign-in included (issue 35, item 13)', async () => {
    const big = await request(h.app).post('/console/api/login').send({ secret: 'x'.repeat(70 * 1024) }).expect(413);
    expect(big.body.error).toMatchObject({ type: 'payload_too_large', request_id: big.headers['x-request-id'] });
    const bad = await request(h.app).post('/console/api/login').set('Content-Type', 'application/json').send('{"secret":').expect(400);
    expect(bad.body.error.type).toBe('bad_request');
  });

  test('sign-out ends the session server-side and revokes its playground keys', async () => {
    const { cookie, csrf } = await signIn(h);
    const ws = await h.store.createWorkspace('pg', 'free');
    const key = await request(h.app)
      .post('/console/api/playground/key')
      .set('Cookie', cookie)
      .set('X-CSRF-Token', csrf)
      .send({ workspace_id: ws.id })
      .expect(200);
    expect(key.body.token).toMatch(/^mw_live_[A-Za-z0-9]{32}$/);
    // Same session, same workspace: the same key comes back.
    const again = await request(h.app)
      .post('/console/api/playground/key')
      .set('Cookie', cookie)
      .set('X-CSRF-Token', csrf)
      .send({ workspace_id: ws.id })
      .expect(200);
    expect(again.body.key_id).toBe(key.body.key_id);
    const rec = (await h.store.getToken(key.body.key_id))!;
    expect(rec.name).toBe(PLAYGROUND_KEY_NAME);
    expect(rec.scopes.sort()).toEqual(['noise-suppressor:denoise', 'noise-suppressor:models', 'noise-suppressor:sample', 'noise-suppressor:stream']);
    expect(rec.expiresAt).not.toBeNull();

    await request(h.app).post('/console/api/logout').set('Cookie', cookie).expect(403); // CSRF needed for sign-out too
    const out = await request(h.app).post('/console/api/logout').set('Cookie', cookie).set('X-CSRF-Token', csrf).expect(200);
    expect(String(out.headers['set-cookie'])).toMatch(/Max-Age=0/);
    await request(h.app).get('/console/api/workspaces').set('Cookie', cookie).expect(401);
    expect((await h.store.getToken(key.body.key_id))!.revokedAt).not.toBeNull();
  });

  test('one playground key per workspace: signing in again reissues the same row, no pile of keys', async () => {
    const ws = await h.store.createWorkspace('pg-once', 'free');
    const ask = (s: { cookie: string; csrf: string }) =>
      request(h.app).post('/console/api/playground/key').set('Cookie', s.cookie).set('X-CSRF-Token', s.csrf).send({ workspace_id: ws.id }).expect(200);
    const signOut = (s: { cookie: string; csrf: string }) =>
      request(h.app).post('/console/api/logout').set('Cookie', s.cookie).set('X-CSRF-Token', s.csrf).expect(200);
    const works = async (token: string) => {
      const rec = await h.store.findTokenByHash(hashToken(token));
      return rec !== null && rec.revokedAt === null;
    };
    const playgroundRows = async () => (await h.store.listTokens(ws.id)).filter((k) => k.name === PLAYGROUND_KEY_NAME);

    // Five sign-ins, each asking for the key and signing out: still one row, revoked after the last sign-out.
    const tokens: string[] = [];
    let keyId = '';
    for (let i = 0; i < 5; i++) {
      const s = await signIn(h);
      const key = (await ask(s)).body;
      keyId ||= key.key_id;
      expect(key.key_id).toBe(keyId);
      expect(await works(key.token)).toBe(true);
      for (const old of tokens) expect(await works(old)).toBe(false); // an earlier session's secret never comes back
      tokens.push(key.token);
      await signOut(s);
      expect(await works(key.token)).toBe(false);
    }
    expect(new Set(tokens).size).toBe(5);
    expect((await playgroundRows()).map((k) => k.id)).toEqual([keyId]);

    // Two sessions at once: the second gets a new secret for the row; the first one's sign-out leaves it valid.
    const a = await signIn(h);
    const b = await signIn(h);
    const keyA = (await ask(a)).body;
    const keyB = (await ask(b)).body;
    expect([keyA.key_id, keyB.key_id]).toEqual([keyId, keyId]);
    expect(await works(keyA.token)).toBe(false);
    await signOut(a);
    expect(await works(keyB.token)).toBe(true);
    // B asks again: it still holds the current secret, so nothing changes.
    expect((await ask(b)).body.token).toBe(keyB.token);
    expect((await playgroundRows()).map((k) => k.id)).toEqual([keyId]);

    // A key made by hand with the same name is not the playground's: it is never reissued or revoked by the console.
    const own = await h.store.createToken({ workspaceId: ws.id, name: PLAYGROUND_KEY_NAME, scopes: ['*'], allowedIps: [], expiresAt: null });
    const c = await signIn(h);
    expect((await ask(c)).body.key_id).toBe(keyId);
    await signOut(c);
    await signOut(b);
    expect(await works(own.token)).toBe(true);
  });

  test('sessions expire when idle', async () => {
    // 30 s of idle time, so a loaded machine cannot expire the session between sign-in and the first call.
    const short = makeHarness({ ADMIN_SECRET: SECRET }, { idleTtlMs: 30_000 });
    try {
      const { cookie, csrf } = await signIn(short);
      const ws = await short.store.createWorkspace('idle', 'free');
      const key = await request(short.app)
        .post('/console/api/playground/key')
        .set('Cookie', cookie)
        .set('X-CSRF-Token', csrf)
        .send({ workspace_id: ws.id })
        .expect(200);
      // The session store reads Date.now(): Date is moved past the idle time (and keeps running); timers stay real.
      jest.useFakeTimers({ advanceTimers: true, doNotFake: ['hrtime', 'nextTick', 'performance', 'queueMicrotask', 'setImmediate', 'clearImmediate', 'setInterval', 'clearInterval', 'setTimeout', 'clearTimeout'] });
      jest.setSystemTime(Date.now() + 31_000);
      await request(short.app).get('/console/api/workspaces').set('Cookie', cookie).expect(401);
      // The timed-out session's playground key went with it.
      expect((await short.store.getToken(key.body.key_id))!.revokedAt).not.toBeNull();
    } finally {
      jest.useRealTimers();
      await cleanup(short);
    }
  });

  test('failed sign-ins are rate-limited per client with Retry-After', async () => {
    const limited = makeHarness({ ADMIN_SECRET: SECRET }, { maxFailures: 3, windowMs: 60_000 });
    try {
      for (let i = 0; i < 3; i++) await request(limited.app).post('/console/api/login').send({ secret: 'nope' }).expect(401);
      const blocked = await request(limited.app).post('/console/api/login').send({ secret: SECRET }).expect(429);
      expect(blocked.body.error.type).toBe('too_many_attempts');
      expect(Number(blocked.headers['retry-after'])).toBeGreaterThan(0);
    } finally {
      await cleanup(limited);
    }
    // Behind a trusted proxy the proxy-appended (right-most) X-Forwarded-For entry counts, so a
    // client rotating the left-hand entries gets no fresh attempts; another real client is unaffected.
    const proxied = makeHarness({ ADMIN_SECRET: SECRET, TRUST_PROXY: '1' }, { maxFailures: 2, windowMs: 60_000 });
    try {
      for (const spoof of ['1.1.1.1', '2.2.2.2']) {
        await request(proxied.app).post('/console/api/login').set('X-Forwarded-For', `${spoof}, 198.51.100.9`).send({ secret: 'nope' }).expect(401);
      }
      await request(proxied.app).post('/console/api/login').set('X-Forwarded-For', '3.3.3.3, 198.51.100.9').send({ secret: SECRET }).expect(429);
      await request(proxied.app).post('/console/api/login').set('X-Forwarded-For', '198.51.100.10').send({ secret: SECRET }).expect(200);
    } finally {
      await cleanup(proxied);
    }
  });

  test('pages are served with a strict CSP and /console redirects to /console/', async () => {
    await request(h.app).get('/console').expect(301).expect('Location', '/console/');
    const page = await request(h.app).get('/console/').expect(200);
    expect(page.text).toContain('Noise Suppression Console');
    expect(page.headers['content-security-policy']).toContain("script-src 'self'");
    expect(page.headers['x-frame-options']).toBe('DENY');
    await request(h.app).get('/console/console.js').expect(200).expect('Content-Type', /javascript/);
    await request(h.app).get('/console/spectrogram.js').expect(200);
  });
});

describe('console keys, workspaces and request log', () => {
  let h: Harness;
  let cookie: string;
  let csrf: string;
  const post = (url: string, body: unknown = {}) =>
    request(h.app).post(url).set('Cookie', cookie).set('X-CSRF-Token', csrf).send(body as object);
  const get = (url: string) => request(h.app).get(url).set('Cookie', cookie);

  beforeEach(async () => {
    h = makeHarness();
    ({ cookie, csrf } = await signIn(h));
  });
  afterEach(() => cleanup(h));

  test('create a key in a new workspace: token shown once, only listed by prefix afterwards', async () => {
    const created = await post('/console/api/keys', {
      name: 'backend',
      new_workspace: { name: 'acme', plan: 'starter' },
      scopes: ['noise-suppressor:denoise', 'noise-suppressor:models'],
      allowed_ips: '203.0.113.7\n10.0.0.0/8',
      expires_at: '2999-01-01',
    }).expect(201);
    const { token, key } = created.body;
    expect(token).toMatch(/^mw_live_[A-Za-z0-9]{32}$/);
    expect(key).toMatchObject({
      name: 'backend',
      prefix: token.slice(0, 12),
      workspace_name: 'acme',
      allowed_ips: ['203.0.113.7', '10.0.0.0/8'],
      status: 'active',
      expires_at: '2999-01-01T23:59:59.999Z',
    });
    const listed = await get('/console/api/keys').expect(200);
    expect(listed.body.keys).toHaveLength(1);
    expect(JSON.stringify(listed.body)).not.toContain(token);
    expect((await h.store.getWorkspaceByName('acme'))!.plan).toBe('starter');

    const ws = await get('/console/api/workspaces').expect(200);
    expect(ws.body.workspaces[0]).toMatchObject({
      name: 'acme',
      plan: 'starter',
      requests_per_minute: 300,
      credits_per_month: 25_000,
      credits_used: 0,
      credits_left: 25_000,
      active_keys: 1,
    });

    const revoked = await post(`/console/api/keys/${key.id}/revoke`).expect(200);
    expect(revoked.body.key.status).toBe('revoked');
    expect((await get('/console/api/keys').expect(200)).body.keys[0].status).toBe('revoked');
  });

  test('a key created with only a name gets the keys CLI default scope (noise-suppressor:*)', async () => {
    const ws = await h.store.createWorkspace('w', 'free');
    const meta = (await get('/console/api/meta').expect(200)).body;
    expect(meta.default_scopes).toEqual(['noise-suppressor:*']);
    const named = await post('/console/api/keys', { name: 'only a name', workspace_id: ws.id }).expect(201);
    expect(named.body.key.scopes).toEqual(['noise-suppressor:*']);
    const empty = await post('/console/api/keys', { name: 'no scope ticked', workspace_id: ws.id, scopes: [] }).expect(201);
    expect(empty.body.key.scopes).toEqual(['noise-suppressor:*']);
  });

  test('bad key input is refused with a message', async () => {
    const ws = await h.store.createWorkspace('w', 'free');
    const bad = async (body: object, pattern: RegExp) => {
      const res = await post('/console/api/keys', { name: 'k', workspace_id: ws.id, scopes: ['*'], ...body }).expect(400);
      expect(res.body.error.message).toMatch(pattern);
    };
    await bad({ scopes: 'noise-suppressor:*' }, /scopes must be a list/);
    await bad({ scopes: ['admin'] }, /unknown scope/);
    await bad({ allowed_ips: 'not-an-ip' }, /not an IP/);
    await bad({ allowed_ips: '10.0.0.0/33' }, /not an IP/);
    await bad({ expires_at: '2001-01-01' }, /future/);
    await bad({ name: '  ' }, /name/);
    await bad({ workspace_id: 'ws_missing' }, /workspace/);
    expect(await h.store.listTokens()).toHaveLength(0);
  });

  test('expired keys show as expired; usage and request log come from the store with filters', async () => {
    const ws = await h.store.createWorkspace('logs', 'free');
    const { record } = await h.store.createToken({ workspaceId: ws.id, name: 'k1', scopes: ['*'], allowedIps: [], expiresAt: null });
    const { record: old } = await h.store.createToken({
      workspaceId: ws.id,
      name: 'old',
      scopes: ['*'],
      allowedIps: [],
      expiresAt: new Date(Date.now() - 1000).toISOString(),
    });
    const keys = (await get(`/console/api/keys?workspace=${ws.id}`).expect(200)).body.keys;
    expect(keys.find((k: { id: string }) => k.id === old.id).status).toBe('expired');

    const base = {
      time: new Date().toISOString(),
      workspaceId: ws.id,
      method: 'POST',
      service: 'noise-suppressor',
      creditsCharged: 1,
      bytesIn: 10,
      bytesOut: 20,
      upstreamMs: 5,
      totalMs: 9,
      clientIp: '127.0.0.1',
    };
    await h.store.logRequest({ ...base, requestId: 'req_ok', tokenId: record.id, endpoint: 'denoise', status: 200, errorType: null });
    await h.store.logRequest({ ...base, requestId: 'req_rl', tokenId: record.id, endpoint: 'models', status: 429, errorType: 'rate_limited', creditsCharged: 0 });
    await h.store.logRequest({ ...base, requestId: 'req_other', tokenId: old.id, endpoint: 'denoise', status: 401, errorType: 'key_expired', creditsCharged: 0 });
    await h.store.logRequest({
      ...base,
      requestId: 'req_bad',
      tokenId: record.id,
      endpoint: 'denoise',
      status: 422,
      errorType: 'invalid_audio',
      errorMessage: 'could not decode: Invalid data found when processing input',
      creditsCharged: 0,
    });
    await h.store.chargeCredits(ws.id, 1, 1000, new Date());

    const all = (await get(`/console/api/requests?workspace=${ws.id}`).expect(200)).body;
    expect(all.requests.map((r: { request_id: string }) => r.request_id).sort()).toEqual(['req_bad', 'req_ok', 'req_other', 'req_rl']);
    const ok = all.requests.find((r: { request_id: string }) => r.request_id === 'req_ok');
    expect(ok).toMatchObject({ status: 200, endpoint: 'denoise', key_prefix: record.prefix, key_name: 'k1', credits: 1, error_message: null });
    // A refused call carries its reason.
    const bad = all.requests.find((r: { request_id: string }) => r.request_id === 'req_bad');
    expect(bad).toMatchObject({ status: 422, error_type: 'invalid_audio', error_message: 'could not decode: Invalid data found when processing input' });

    const ids = async (q: string) =>
      (await get(`/console/api/requests?workspace=${ws.id}&${q}`).expect(200)).body.requests.map((r: { request_id: string }) => r.request_id).sort();
    expect(await ids('status=429')).toEqual(['req_rl']);
    expect(await ids('error_type=key_expired')).toEqual(['req_other']);
    expect(await ids('endpoint=denoise')).toEqual(['req_bad', 'req_ok', 'req_other']);
    expect(await ids(`key=${record.id}`)).toEqual(['req_bad', 'req_ok', 'req_rl']);
    const paged = (await get(`/console/api/requests?workspace=${ws.id}&limit=2`).expect(200)).body;
    expect(paged.requests).toHaveLength(2);
    expect(paged.has_more).toBe(true);
    await get(`/console/api/requests?status=abc`).expect(400);

    const usage = (await get(`/console/api/workspaces/${ws.id}/usage?days=7`).expect(200)).body;
    expect(usage.workspace).toMatchObject({ credits_used: 1, credits_left: 999 });
    const today = usage.days.find((d: { day: string }) => d.day === new Date().toISOString().slice(0, 10));
    expect(today).toMatchObject({ count: 4, errors: 3 });
  });

  test('request-log paging: offset must be a whole number in range (1e308, Infinity, -1 … → 400, not 500)', async () => {
    for (const bad of ['1e308', 'Infinity', '-Infinity', 'NaN', '-1', '1.5', 'abc', '1e3', '99999999999']) {
      const res = await get(`/console/api/requests?offset=${encodeURIComponent(bad)}`);
      expect([bad, res.status]).toEqual([bad, 400]);
      expect(res.body.error.type).toBe('bad_request');
      expect(res.body.error.message).toMatch(/offset/);
    }
    await get('/console/api/requests?offset=1e308&offset=1').expect(400);
    for (const good of ['', '0', '10', '1000000000']) {
      const res = await get(`/console/api/requests?offset=${good}`).expect(200);
      expect(res.body.offset).toBe(Number(good));
    }
  });

  test('workspaces: create, duplicate name refused, change plan', async () => {
    const created = await post('/console/api/workspaces', { name: 'studio', plan: 'free' }).expect(201);
    await post('/console/api/workspaces', { name: 'studio', plan: 'free' }).expect(400);
    await post('/console/api/workspaces', { name: 'x', plan: 'platinum' }).expect(400);
    const id = created.body.workspace.id;
    const changed = await post(`/console/api/workspaces/${id}/plan`, { plan: 'scale' }).expect(200);
    expect(changed.body.workspace).toMatchObject({ plan: 'scale', requests_per_minute: 1200, credits_per_month: 250_000 });
    await post('/console/api/workspaces/ws_nope/plan', { plan: 'scale' }).expect(404);
  });

  test('enterprise custom limits are whole numbers within bounds (1e300 credits, 1e20 rpm → 400, nothing stored)', async () => {
    const refused = [
      { requests_per_minute: 1e20 },
      { credits_per_month: 1e300 },
      { credits_per_month: 1_000_000_001 },
      { requests_per_minute: 1_000_001 },
      { requests_per_minute: 0 },
      { credits_per_month: -5 },
      { credits_per_month: 2.5 },
      { credits_per_month: '1e3' },
      { credits_per_month: '0x10' },
      { requests_per_minute: true },
    ];
    for (const limits of refused) {
      const field = Object.keys(limits)[0];
      const viaKey = await post('/console/api/keys', { name: 'k', new_workspace: { name: `e-${field}`, plan: 'enterprise', ...limits } });
      expect([limits, viaKey.status]).toEqual([limits, 400]);
      expect(viaKey.body.error).toMatchObject({ type: 'bad_request', message: expect.stringContaining(field) });
      const viaCreate = await post('/console/api/workspaces', { name: `e-${field}`, plan: 'enterprise', ...limits });
      expect([limits, viaCreate.status]).toEqual([limits, 400]);
    }
    expect(await h.store.listWorkspaces()).toHaveLength(0);
    expect(await h.store.listTokens()).toHaveLength(0);

    // The largest accepted values are stored exactly, as integers; plan changes are held to the same bounds.
    const made = await post('/console/api/workspaces', {
      name: 'big',
      plan: 'enterprise',
      requests_per_minute: 1_000_000,
      credits_per_month: '1000000000',
    }).expect(201);
    expect(made.body.workspace).toMatchObject({ requests_per_minute: 1_000_000, credits_per_month: 1_000_000_000 });
    const id = made.body.workspace.id;
    await post(`/console/api/workspaces/${id}/plan`, { plan: 'enterprise', credits_per_month: 1e300 }).expect(400);
    await post(`/console/api/workspaces/${id}/plan`, { plan: 'enterprise', requests_per_minute: 1e20 }).expect(400);
    const stored = (await h.store.getWorkspace(id))!;
    expect([stored.customRequestsPerMinute, stored.customCreditsPerMonth]).toEqual([1_000_000, 1_000_000_000]);
    const changed = await post(`/console/api/workspaces/${id}/plan`, { plan: 'enterprise', requests_per_minute: 5000 }).expect(200);
    expect(changed.body.workspace).toMatchObject({ requests_per_minute: 5000, credits_per_month: 1_000_000_000 });
  });
});
