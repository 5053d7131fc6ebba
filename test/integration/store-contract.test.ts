// ONE contract suite for every GatewayStore engine: the embedded SQLite file and a real PostgreSQL server (started
// from Debian's packages in a temporary directory). Same calls, same answers: workspaces, tokens (hash only),
// credits with atomic charge/reserve/settle/release under concurrency from several processes, expired reservations
// reclaimed, the request log with its filters, retention pruning and client request ids, settings, migrations.
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { Client } from 'pg';
import { openStore, type StoreConfig } from '../../src/store';
import { startStoreMaintenance } from '../../src/store/gateway/maintenance';
import { POSTGRES_MIGRATIONS } from '../../src/store/gateway/migrations/postgres';
import { SQLITE_MIGRATIONS } from '../../src/store/gateway/migrations/sqlite';
import { hashToken, TOKEN_PATTERN } from '../../src/store/gateway/tokens';
import type { GatewayStore, RequestLogEntry } from '../../src/store/gateway/types';
import { startPostgres, type PostgresServer, serverBinaries } from '../helpers/real-servers';
import { eventually } from '../helpers/service-helpers';

// Fails the suite at once, with one line naming the Debian packages, when the server binaries are missing.
beforeAll(() => {
  serverBinaries();
});

const run = promisify(execFile);

interface Engine {
  name: string;
  /** A config for a brand-new, empty store. */
  fresh(): Promise<StoreConfig>;
  /** Every stored text of the tokens table (to prove the clear token is not there). */
  tokenTableText(config: StoreConfig): Promise<string>;
}

let pg: PostgresServer | null = null;
let dbCounter = 0;
const tempDirs: string[] = [];

const engines: Engine[] = [
  {
    name: 'sqlite',
    async fresh() {
      const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'store-contract-'));
      tempDirs.push(dir);
      return { dataDir: path.join(dir, 'data') };
    },
    async tokenTableText(config) {
      return fs
        .readdirSync(config.dataDir)
        .map((f) => fs.readFileSync(path.join(config.dataDir, f)).toString('latin1'))
        .join('\n');
    },
  },
  {
    name: 'postgres',
    async fresh() {
      pg ??= await startPostgres();
      const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'store-contract-'));
      tempDirs.push(dir);
      const url = await pg.createDatabase(`contract_${process.pid}_${++dbCounter}`);
      return { dataDir: dir, databaseUrl: url, databasePoolSize: 5 };
    },
    async tokenTableText(config) {
      const c = new Client({ connectionString: config.databaseUrl! });
      await c.connect();
      try {
        const { rows } = await c.query<{ t: string }>('SELECT row_to_json(x)::text AS t FROM tokens x');
        return rows.map((r) => r.t).join('\n');
      } finally {
        await c.end();
      }
    },
  },
];

afterAll(async () => {
  await pg?.stop();
  for (const d of tempDirs) fs.rmSync(d, { recursive: true, force: true });
});

function logEntry(over: Partial<RequestLogEntry>): RequestLogEntry {
  return {
    requestId: 'req_x',
    time: new Date().toISOString(),
    tokenId: null,
    workspaceId: null,
    method: 'GET',
    service: 'noise-suppressor',
    endpoint: 'models',
    status: 200,
    errorType: null,
    creditsCharged: 0,
    bytesIn: 0,
    bytesOut: 10,
    upstreamMs: 3,
    totalMs: 5,
    clientIp: '127.0.0.1',
    ...over,
  };
}

test('both engines know the same numbered migrations', () => {
  expect(POSTGRES_MIGRATIONS.map((m) => [m.version, m.name])).toEqual(SQLITE_MIGRATIONS.map((m) => [m.version, m.name]));
  expect(SQLITE_MIGRATIONS.map((m) => m.version)).toEqual(SQLITE_MIGRATIONS.map((_, i) => i + 1));
});

describe.each(engines)('GatewayStore contract: $name', (engine) => {
  let config: StoreConfig;
  let store: GatewayStore;

  beforeEach(async () => {
    config = await engine.fresh();
    store = await openStore(config);
  });

  afterEach(async () => {
    await store.close();
  });

  test('migrations are applied once, in order, also when several connections open the store at the same time', async () => {
    const latest = SQLITE_MIGRATIONS.length;
    expect(await store.schemaVersions()).toEqual(Array.from({ length: latest }, (_, i) => i + 1));
    const fresh = await engine.fresh();
    const opened = await Promise.all([openStore(fresh), openStore(fresh), openStore(fresh)]);
    for (const s of opened) expect(await s.schemaVersions()).toEqual(Array.from({ length: latest }, (_, i) => i + 1));
    await Promise.all(opened.map((s) => s.close()));
  });

  test('workspaces: unique names (also under a race), plans, enterprise custom limits, exclusions', async () => {
    const ws = await store.createWorkspace('acme', 'free', { requestsPerMinute: 5 });
    expect(ws).toMatchObject({ name: 'acme', plan: 'free', customRequestsPerMinute: null, excludedServices: [] });
    expect(Date.parse(ws.createdAt)).toBeGreaterThan(Date.now() - 60_000);
    await expect(store.createWorkspace('acme', 'starter')).rejects.toThrow(/already exists/);
    await expect(store.createWorkspace('x', 'gold' as never)).rejects.toThrow(/unknown plan/);
    await expect(store.createWorkspace('  ', 'free')).rejects.toThrow(/must not be empty/);
    const raced = await Promise.allSettled(Array.from({ length: 5 }, () => store.createWorkspace('race', 'free')));
    expect(raced.filter((r) => r.status === 'fulfilled')).toHaveLength(1);
    const ent = await store.setPlan(ws.id, 'enterprise', { requestsPerMinute: 7 });
    expect(ent).toMatchObject({ plan: 'enterprise', customRequestsPerMinute: 7, customCreditsPerMonth: null });
    expect(await store.setPlan(ws.id, 'enterprise', { creditsPerMonth: 99 })).toMatchObject({ customRequestsPerMinute: 7, customCreditsPerMonth: 99 });
    expect(await store.setPlan(ws.id, 'scale')).toMatchObject({ plan: 'scale', customRequestsPerMinute: null, customCreditsPerMonth: null });
    await expect(store.setPlan('ws_none', 'free')).rejects.toThrow(/not found/);
    expect((await store.setExcludedServices(ws.id, ['noise-suppressor', 'noise-suppressor'])).excludedServices).toEqual(['noise-suppressor']);
    expect((await store.getWorkspace(ws.id))!.excludedServices).toEqual(['noise-suppressor']);
    expect((await store.getWorkspaceByName(' acme '))!.id).toBe(ws.id);
    expect(await store.getWorkspace('ws_none')).toBeNull();
    expect((await store.listWorkspaces()).map((w) => w.name)).toEqual(['acme', 'race']);
  });

  test('tokens: mw_live_ + 32 base62, only the sha256 stored, 12-char prefix; revoke by id or prefix; touch', async () => {
    const ws = await store.createWorkspace('acme', 'free');
    await expect(store.createToken({ workspaceId: 'ws_none', name: 'x', scopes: ['*'], allowedIps: [], expiresAt: null })).rejects.toThrow(/not found/);
    await expect(store.createToken({ workspaceId: ws.id, name: 'x', scopes: [], allowedIps: [], expiresAt: null })).rejects.toThrow(/scope/);
    const a = await store.createToken({ workspaceId: ws.id, name: 'a', scopes: ['*'], allowedIps: ['10.0.0.0/8', '::1'], expiresAt: '2031-02-03T04:05:06Z' });
    const b = await store.createToken({ workspaceId: ws.id, name: 'b', scopes: ['noise-suppressor:models'], allowedIps: [], expiresAt: null });
    expect(a.token).toMatch(TOKEN_PATTERN);
    expect(a.record).toMatchObject({ name: 'a', prefix: a.token.slice(0, 12), scopes: ['*'], allowedIps: ['10.0.0.0/8', '::1'], expiresAt: '2031-02-03T04:05:06.000Z', revokedAt: null, lastUsedAt: null });
    expect((await store.findTokenByHash(hashToken(a.token)))!.id).toBe(a.record.id);
    expect((await store.findTokenByHash(hashToken(a.token).toUpperCase()))!.id).toBe(a.record.id);
    expect(await store.findTokenByHash(hashToken('mw_live_nothing'))).toBeNull();
    expect((await store.getToken(b.record.id))!.scopes).toEqual(['noise-suppressor:models']);
    expect((await store.listTokens(ws.id)).map((t) => t.name)).toEqual(['a', 'b']);
    expect(await store.listTokens('ws_none')).toEqual([]);

    expect((await store.revokeToken(a.record.prefix))!.revokedAt).not.toBeNull();
    const firstRevocation = (await store.getToken(a.record.id))!.revokedAt;
    expect((await store.revokeToken(a.record.id))!.revokedAt).toBe(firstRevocation); // revoking twice keeps the first time
    expect((await store.revokeToken(b.record.id))!.revokedAt).not.toBeNull();
    expect(await store.revokeToken('mw_live_none')).toBeNull();
    await store.touchToken(a.record.id, '2030-01-01T00:00:00.000Z');
    expect((await store.getToken(a.record.id))!.lastUsedAt).toBe('2030-01-01T00:00:00.000Z');

    // The clear tokens are stored nowhere; their hashes are.
    const text = await engine.tokenTableText(config);
    expect(text.includes(a.token)).toBe(false);
    expect(text.includes(b.token)).toBe(false);
    expect(text.includes(hashToken(a.token))).toBe(true);
  });

  test('reissueToken: a new secret for the same key row; the old secret stops working, the row is not revoked', async () => {
    const ws = await store.createWorkspace('reissue', 'free');
    const first = await store.createToken({ workspaceId: ws.id, name: 'console playground', scopes: ['noise-suppressor:denoise'], allowedIps: [], expiresAt: '2031-01-01T00:00:00Z' });
    await store.revokeToken(first.record.id);
    await expect(store.reissueToken(first.record.id, { scopes: [], expiresAt: null })).rejects.toThrow(/scope/);
    const again = (await store.reissueToken(first.record.id, { scopes: ['noise-suppressor:denoise', 'noise-suppressor:stream'], expiresAt: '2032-02-02T00:00:00Z' }))!;
    expect(again.token).toMatch(TOKEN_PATTERN);
    expect(again.token).not.toBe(first.token);
    expect(again.record).toMatchObject({
      id: first.record.id, name: 'console playground', workspaceId: ws.id, prefix: again.token.slice(0, 12),
      scopes: ['noise-suppressor:denoise', 'noise-suppressor:stream'], expiresAt: '2032-02-02T00:00:00.000Z', revokedAt: null,
      createdAt: first.record.createdAt,
    });
    expect(await store.findTokenByHash(hashToken(first.token))).toBeNull();
    expect((await store.findTokenByHash(hashToken(again.token)))!.id).toBe(first.record.id);
    expect((await store.listTokens(ws.id)).map((t) => t.id)).toEqual([first.record.id]);
    expect(await store.reissueToken('key_none', { scopes: ['*'], expiresAt: null })).toBeNull();
  });

  test('credits: conditional charge per UTC month, refunds, never over the limit', async () => {
    const ws = await store.createWorkspace('acme', 'free');
    const may = new Date('2030-05-31T23:59:59Z');
    const june = new Date('2030-06-01T00:00:00Z');
    expect(await store.chargeCredits(ws.id, 1, 3, may)).toEqual({ ok: true, used: 1, limit: 3 });
    expect(await store.chargeCredits(ws.id, 2, 3, may)).toEqual({ ok: true, used: 3, limit: 3 });
    expect(await store.chargeCredits(ws.id, 1, 3, may)).toEqual({ ok: false, used: 3, limit: 3 });
    expect((await store.chargeCredits(ws.id, 1, 3, june)).ok).toBe(true);
    expect((await store.chargeCredits(ws.id, 5, 3, new Date('2030-07-02T00:00:00Z'))).ok).toBe(false);
    await store.refundCredits(ws.id, 1, may);
    expect(await store.creditsUsed(ws.id, may)).toBe(2);
    expect(await store.creditsUsed(ws.id, june)).toBe(1);
    expect(await store.creditsUsed(ws.id, new Date('2030-07-02T00:00:00Z'))).toBe(0);
    await store.refundCredits(ws.id, 50, may); // never below zero
    expect(await store.creditsUsed(ws.id, may)).toBe(0);
  });

  test('reservations: held credits count against the limit; settle charges, release gives back', async () => {
    const ws = await store.createWorkspace('acme', 'free');
    const t = new Date('2030-05-10T12:00:00Z');
    const r1 = await store.reserveCredits(ws.id, 1, 3, t, 60_000);
    expect(r1).toMatchObject({ ok: true, used: 0, reserved: 1, limit: 3 });
    expect(r1.reservation).toMatchObject({ workspaceId: ws.id, period: '2030-05', amount: 1 });
    const r2 = await store.reserveCredits(ws.id, 2, 3, t, 60_000);
    expect(r2).toMatchObject({ ok: true, used: 0, reserved: 3 });
    // Full while nothing is settled: the answer says so (used 0, reserved 3), which the gateway turns into a 429.
    const full = await store.reserveCredits(ws.id, 1, 3, t, 60_000);
    expect(full).toEqual({ ok: false, used: 0, reserved: 3, limit: 3, reservation: null });
    expect((await store.chargeCredits(ws.id, 1, 3, t)).ok).toBe(false); // a direct charge respects holds too
    expect(await store.creditsUsed(ws.id, t)).toBe(0);
    expect(await store.creditsHeld(ws.id, t)).toBe(3);

    await store.settleReservation(r1.reservation!);
    expect(await store.creditsUsed(ws.id, t)).toBe(1);
    await store.releaseReservation(r2.reservation!);
    await store.releaseReservation(r2.reservation!); // ending twice changes nothing
    expect(await store.creditsUsed(ws.id, t)).toBe(1);
    expect(await store.creditsHeld(ws.id, t)).toBe(0);
    const r3 = await store.reserveCredits(ws.id, 2, 3, t, 60_000);
    expect(r3).toMatchObject({ ok: true, used: 1, reserved: 2 });
    expect(await store.reserveCredits(ws.id, 1, 3, t, 60_000)).toMatchObject({ ok: false, used: 1, reserved: 2 });
    await store.settleReservation(r3.reservation!);
    expect(await store.reserveCredits(ws.id, 1, 3, t, 60_000)).toMatchObject({ ok: false, used: 3, reserved: 0 });
    await expect(store.reserveCredits(ws.id, 0, 3, t, 60_000)).rejects.toThrow(/positive/);
    // The credit goes to the month the call started in, even when it settles in the next one.
    const late = await store.reserveCredits(ws.id, 1, 10, new Date('2030-06-30T23:59:59Z'), 60_000);
    await store.settleReservation(late.reservation!);
    expect(await store.creditsUsed(ws.id, new Date('2030-06-15T00:00:00Z'))).toBe(1);
    expect(await store.creditsUsed(ws.id, new Date('2030-07-01T00:00:00Z'))).toBe(0);
  });

  test('reservations of a gateway that died expire and are reclaimed; renewal keeps a live one', async () => {
    const ws = await store.createWorkspace('acme', 'free');
    const other = await store.createWorkspace('other', 'free');
    const t0 = Date.parse('2030-05-10T12:00:00Z');
    const dead = await store.reserveCredits(ws.id, 2, 3, new Date(t0), 10_000);
    const live = await store.reserveCredits(ws.id, 1, 3, new Date(t0), 10_000);
    expect((await store.reserveCredits(ws.id, 1, 3, new Date(t0 + 5_000), 10_000)).ok).toBe(false);
    expect(await store.renewReservation(live.reservation!, new Date(t0 + 30_000))).toBe(true);
    // 10 s later the dead gateway's hold has expired: the next reservation reclaims it and fits.
    const after = await store.reserveCredits(ws.id, 2, 3, new Date(t0 + 10_000), 10_000);
    expect(after).toMatchObject({ ok: true, used: 0, reserved: 3 });
    expect(await store.renewReservation(dead.reservation!, new Date(t0 + 40_000))).toBe(false); // it is gone
    await store.releaseReservation(dead.reservation!); // late release of a reclaimed hold: nothing given back twice
    expect((await store.reserveCredits(ws.id, 1, 3, new Date(t0 + 11_000), 10_000)).ok).toBe(false);
    // A call that still delivers after its hold was reclaimed is charged: the work was done.
    await store.settleReservation(dead.reservation!);
    expect(await store.creditsUsed(ws.id, new Date(t0))).toBe(2);

    // The background sweep gives back expired holds of every workspace.
    await store.reserveCredits(other.id, 1, 5, new Date(t0), 1_000);
    await store.reserveCredits(other.id, 1, 5, new Date(t0), 1_000);
    expect(await store.reclaimExpiredReservations(new Date(t0 + 500))).toBe(0);
    expect(await store.reclaimExpiredReservations(new Date(t0 + 25_000))).toBe(3); // other's 2 + ws's `after`
    expect(await store.reserveCredits(other.id, 5, 5, new Date(t0 + 25_000), 1_000)).toMatchObject({ ok: true, reserved: 5 });
  });

  test('credits: several processes reserving and settling at once never exceed the limit', async () => {
    const ws = await store.createWorkspace('acme', 'free');
    const LIMIT = 300;
    const storeModule = path.join(__dirname, '../../src/store/index.js');
    const script = `
      const { openStore } = require(${JSON.stringify(storeModule)});
      (async () => {
        const s = await openStore(${JSON.stringify(config)});
        let ok = 0;
        await Promise.all(Array.from({ length: 8 }, async () => {
          for (let i = 0; i < 40; i++) {
            const r = await s.reserveCredits(${JSON.stringify(ws.id)}, 1, ${LIMIT}, new Date(), 60000);
            if (!r.ok) continue;
            if (i % 4 === 0) { await s.releaseReservation(r.reservation); continue; }
            await s.settleReservation(r.reservation);
            ok++;
          }
        }));
        await s.close();
        process.stdout.write(String(ok));
      })().catch((e) => { console.error(e); process.exit(1); });
    `;
    const children = Promise.all([run(process.execPath, ['-e', script]), run(process.execPath, ['-e', script])]);
    let mine = 0;
    await Promise.all(
      Array.from({ length: 8 }, async () => {
        for (let i = 0; i < 40; i++) if ((await store.chargeCredits(ws.id, 1, LIMIT, new Date())).ok) mine++;
      }),
    );
    const results = await children;
    const total = results.reduce((sum, r) => sum + Number(r.stdout), mine);
    // 3 × 320 attempts against 300 credits (a quarter of the children's holds released): exactly the limit is used.
    expect(total).toBe(LIMIT);
    expect(await store.creditsUsed(ws.id, new Date())).toBe(LIMIT);
    expect(await store.reserveCredits(ws.id, 1, LIMIT, new Date(), 60_000)).toMatchObject({ ok: false, used: LIMIT, reserved: 0 });
  });

  test('request log: filters, counts, per-day series, client request ids, retention pruning', async () => {
    const ws = await store.createWorkspace('acme', 'free');
    const now = Date.now();
    await store.logRequest(logEntry({ requestId: 'r1', workspaceId: ws.id, tokenId: 't1', time: new Date(now - 2000).toISOString() }));
    await store.logRequest(logEntry({ requestId: 'r2', clientRequestId: 'client-7', workspaceId: ws.id, tokenId: 't1', status: 401, errorType: 'invalid_token', time: new Date(now - 1000).toISOString() }));
    await store.logRequest(logEntry({ requestId: 'r3', workspaceId: ws.id, tokenId: 't2', endpoint: 'denoise', method: 'POST', creditsCharged: 1, bytesIn: 5_000_000_000, upstreamMs: 12.5, time: new Date(now).toISOString() }));
    await store.logRequest(logEntry({ requestId: 'old', workspaceId: ws.id, time: new Date(now - 3 * 86_400_000).toISOString() }));
    await store.logRequest(logEntry({ requestId: 'ancient', workspaceId: ws.id, time: new Date(now - 100 * 86_400_000).toISOString() }));
    expect((await store.queryRequests({ workspaceId: ws.id })).map((r) => r.requestId)).toEqual(['r3', 'r2', 'r1', 'old', 'ancient']);
    expect((await store.queryRequests({ tokenId: 't1' })).map((r) => r.requestId)).toEqual(['r2', 'r1']);
    expect((await store.queryRequests({ status: 401 }))[0]).toMatchObject({ requestId: 'r2', clientRequestId: 'client-7', errorType: 'invalid_token' });
    expect((await store.queryRequests({ tokenId: 't2' }))[0]).toEqual({
      requestId: 'r3', clientRequestId: null, time: new Date(now).toISOString(), tokenId: 't2', workspaceId: ws.id, method: 'POST',
      service: 'noise-suppressor', endpoint: 'denoise', status: 200, errorType: null, creditsCharged: 1, bytesIn: 5_000_000_000,
      bytesOut: 10, upstreamMs: 12.5, totalMs: 5, clientIp: '127.0.0.1', errorMessage: null, calls: 1,
    });
    expect(await store.queryRequests({ errorType: 'invalid_token' })).toHaveLength(1);
    expect((await store.queryRequests({ workspaceId: ws.id, limit: 1, offset: 1 })).map((r) => r.requestId)).toEqual(['r2']);
    expect(await store.queryRequests({ workspaceId: ws.id, limit: 0 })).toHaveLength(1); // clamped to 1..1000
    expect(await store.countRequests({ workspaceId: ws.id, since: new Date(now - 86_400_000).toISOString() })).toBe(3);
    expect(await store.countRequests({})).toBe(5);
    const days = await store.requestsPerDay(ws.id, 7);
    expect(days).toHaveLength(7);
    expect(days.reduce((s, d) => s + d.count, 0)).toBe(4);
    expect(days.reduce((s, d) => s + d.errors, 0)).toBe(1);
    expect(days[6].day).toBe(new Date().toISOString().slice(0, 10));

    // Retention: rows older than the cut-off go, in bounded batches.
    const cutoff = new Date(now - 2 * 86_400_000).toISOString();
    expect(await store.pruneRequests(cutoff, 1)).toBe(1);
    expect(await store.pruneRequests(cutoff, 1000)).toBe(1);
    expect(await store.pruneRequests(cutoff, 1000)).toBe(0);
    expect((await store.queryRequests({})).map((r) => r.requestId)).toEqual(['r3', 'r2', 'r1']);
  });

  test('maintenance: the request log keeps REQUEST_LOG_RETENTION_DAYS, expired holds are given back, in the background', async () => {
    const ws = await store.createWorkspace('acme', 'free');
    const now = Date.now();
    for (let i = 0; i < 25; i++) {
      await store.logRequest(logEntry({ requestId: `old${i}`, time: new Date(now - (91 + i) * 86_400_000).toISOString() }));
    }
    await store.logRequest(logEntry({ requestId: 'recent', time: new Date(now - 89 * 86_400_000).toISOString() }));
    await store.reserveCredits(ws.id, 1, 10, new Date(now - 10 * 60_000), 60_000); // a dead gateway's hold
    const lines: string[] = [];
    const m = startStoreMaintenance(store, { requestLogRetentionDays: 90 }, { intervalMs: 3_600_000, batchRows: 10, log: (l) => lines.push(l) });
    try {
      // The first run starts right away, without waiting for the interval.
      await eventually(async () => (await store.countRequests({})) <= 1);
      expect((await store.queryRequests({})).map((r) => r.requestId)).toEqual(['recent']);
      expect(await store.reserveCredits(ws.id, 10, 10, new Date(now), 60_000)).toMatchObject({ ok: true, reserved: 10 });
      expect(await m.runOnce()).toEqual({ pruned: 0, reclaimed: 0 });
    } finally {
      await m.stop();
    }
    // 0 keeps everything.
    await store.logRequest(logEntry({ requestId: 'ancient', time: new Date(now - 5000 * 86_400_000).toISOString() }));
    const keep = startStoreMaintenance(store, { requestLogRetentionDays: 0 }, { intervalMs: 3_600_000 });
    expect((await keep.runOnce()).pruned).toBe(0);
    await keep.stop();
    expect(await store.countRequests({})).toBe(2);
    expect(lines).toEqual([]);
  });

  test('request log: entries with one aggregate key share a row that counts them, also written at once by many (issue 35, item 7)', async () => {
    const ws = await store.createWorkspace('acme', 'free');
    const t = new Date().toISOString();
    const refusal = (i: number) => logEntry({ requestId: `r${i}`, workspaceId: ws.id, tokenId: 'k1', status: 429, errorType: 'rate_limited', bytesIn: 5, time: t, aggregateKey: `k1 429 ${t.slice(0, 16)}` });
    await store.logRequest(refusal(0));
    await Promise.all(Array.from({ length: 40 }, (_, i) => store.logRequest(refusal(i + 1))));
    await store.logRequest(logEntry({ requestId: 'other', workspaceId: ws.id, tokenId: 'k1', status: 429, errorType: 'rate_limited', time: t, aggregateKey: 'another minute' }));
    await store.logRequest(logEntry({ requestId: 'ok', workspaceId: ws.id, tokenId: 'k1', status: 200, time: t }));
    await store.logRequest(logEntry({ requestId: 'ok2', workspaceId: ws.id, tokenId: 'k1', status: 200, time: t, aggregateKey: null }));
    const rows = await store.queryRequests({ workspaceId: ws.id });
    expect(rows.map((r) => [r.requestId, r.calls]).sort()).toEqual([['ok', 1], ['ok2', 1], ['other', 1], ['r0', 41]]);
    expect(rows.find((r) => r.requestId === 'r0')).toMatchObject({ bytesIn: 205, status: 429, errorType: 'rate_limited' });
    expect(await store.countRequests({ workspaceId: ws.id })).toBe(44);
    expect(await store.countRequests({ workspaceId: ws.id, status: 429 })).toBe(42);
    expect(await store.countRequests({ workspaceId: 'ws_none' })).toBe(0);
    const days = await store.requestsPerDay(ws.id, 2);
    expect(days[1]).toMatchObject({ day: t.slice(0, 10), count: 44, errors: 42 });
  });

  test('credits across the job queue: a pending charge settles with its hold, goes when confirmed; refunds given once per key (issue 35, item 12)', async () => {
    const ws = await store.createWorkspace('acme', 'enterprise', { creditsPerMonth: 100 });
    const when = new Date();
    const period = when.toISOString().slice(0, 7);
    const hold = async () => (await store.reserveCredits(ws.id, 2, 100, when, 60_000)).reservation!;
    await store.settleReservation(await hold(), { key: 'job_a', owner: 'aaaaaaaa-1-bbbbbbbb' });
    await store.settleReservation(await hold(), { key: 'job_b', owner: 'aaaaaaaa-2-bbbbbbbb' });
    await store.settleReservation(await hold()); // an ordinary call: no pending charge
    expect(await store.creditsUsed(ws.id, when)).toBe(6);
    const pending = await store.pendingCharges(10);
    expect(pending.map((p) => [p.key, p.owner, p.workspaceId, p.period, p.amount])).toEqual([
      ['job_a', 'aaaaaaaa-1-bbbbbbbb', ws.id, period, 2],
      ['job_b', 'aaaaaaaa-2-bbbbbbbb', ws.id, period, 2],
    ]);
    expect(Math.abs(pending[0].createdAt - Date.now())).toBeLessThan(60_000);

    await store.confirmCharge('job_a');
    await store.confirmCharge('job_none');
    expect((await store.pendingCharges(10)).map((p) => p.key)).toEqual(['job_b']);
    expect(await store.creditsUsed(ws.id, when)).toBe(6);

    // A refund ends a pending charge of its key too; given at once by many, it is applied once.
    const refunds = await Promise.all(Array.from({ length: 8 }, () => store.refundOnce('job_b', ws.id, 2, period)));
    expect(refunds.filter(Boolean)).toHaveLength(1);
    expect(await store.creditsUsed(ws.id, when)).toBe(4);
    expect(await store.pendingCharges(10)).toEqual([]);
    expect(await store.refundOnce('job_b', ws.id, 2, period)).toBe(false);
    expect(await store.refundOnce('job_a', ws.id, 2, period)).toBe(true);
    expect(await store.creditsUsed(ws.id, when)).toBe(2);
    expect(await store.refundOnce('job_zero', ws.id, 0, period)).toBe(false);

    expect(await store.pruneRefunds(new Date(Date.now() - 60_000))).toBe(0);
    expect(await store.pruneRefunds(new Date(Date.now() + 1_000))).toBe(2);
    expect(await store.refundOnce('job_a', ws.id, 1, period)).toBe(true); // forgotten: given again
    expect(await store.creditsUsed(ws.id, when)).toBe(1);
  });

  test('request log: the reason of a failed call in words (error_message)', async () => {
    await store.logRequest(logEntry({ requestId: 'failed', status: 422, errorType: null, errorMessage: 'could not decode the uploaded file' }));
    await store.logRequest(logEntry({ requestId: 'fine' }));
    expect((await store.queryRequests({ status: 422 }))[0]).toMatchObject({ requestId: 'failed', errorMessage: 'could not decode the uploaded file' });
    expect((await store.queryRequests({ status: 200 }))[0].errorMessage).toBeNull();
  });

  test('revoke by a start of the token longer than the stored prefix (16 characters), the whole token or a start of the id; too short refused', async () => {
    const ws = await store.createWorkspace('acme', 'free');
    const mk = (name: string) => store.createToken({ workspaceId: ws.id, name, scopes: ['*'], allowedIps: [], expiresAt: null });
    const [a, b, c, d] = [await mk('a'), await mk('b'), await mk('c'), await mk('d')];
    expect((await store.revokeToken(a.token.slice(0, 16)))!.id).toBe(a.record.id); // issue 35, item 13
    expect((await store.revokeToken(b.token))!.id).toBe(b.record.id);
    expect((await store.revokeToken(c.record.id.slice(0, 10)))!.id).toBe(c.record.id);
    expect((await store.revokeToken(d.token.slice(0, 12)))!.id).toBe(d.record.id);
    for (const t of [a, b, c, d]) expect((await store.getToken(t.record.id))!.revokedAt).not.toBeNull();
    await expect(store.revokeToken('mw_live_A')).rejects.toThrow(/too short: give at least 4 characters after mw_live_/);
    await expect(store.revokeToken('key_')).rejects.toThrow(/too short/);
    expect(await store.revokeToken(`mw_live_${'z'.repeat(32)}`)).toBeNull(); // a whole token no key has
    expect(await store.revokeToken('nothing-like-a-key')).toBeNull();
  });

  test('settings', async () => {
    expect(await store.getSetting('console.admin_secret_hash')).toBeNull();
    await store.setSetting('console.admin_secret_hash', 'a');
    await store.setSetting('console.admin_secret_hash', 'b');
    expect(await store.getSetting('console.admin_secret_hash')).toBe('b');
  });
});

test('postgres: a database at schema version 1 is upgraded in place, its data kept', async () => {
  pg ??= await startPostgres();
  const url = await pg.createDatabase(`upgrade_${process.pid}`);
  const c = new Client({ connectionString: url });
  await c.connect();
  try {
    await c.query('CREATE TABLE schema_migrations (version integer PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())');
    await c.query(POSTGRES_MIGRATIONS[0].sql);
    await c.query('INSERT INTO schema_migrations (version, name) VALUES (1, $1)', [POSTGRES_MIGRATIONS[0].name]);
    await c.query("INSERT INTO workspaces (id, name, plan, created_at) VALUES ('ws_old', 'old', 'free', now())");
    await c.query("INSERT INTO credit_usage (workspace_id, period, used) VALUES ('ws_old', $1, 7)", [new Date().toISOString().slice(0, 7)]);
  } finally {
    await c.end();
  }
  const store = await openStore({ dataDir: os.tmpdir(), databaseUrl: url });
  try {
    expect(await store.schemaVersions()).toEqual(POSTGRES_MIGRATIONS.map((m) => m.version));
    expect(await store.creditsUsed('ws_old', new Date())).toBe(7);
    expect(await store.reserveCredits('ws_old', 3, 10, new Date(), 1000)).toMatchObject({ ok: true, used: 7, reserved: 3 });
  } finally {
    await store.close();
  }
});

test('postgres: an unreachable server fails the start with the (password-free) address', async () => {
  const { freePort } = await import('../helpers/real-servers');
  const port = await freePort();
  await expect(openStore({ dataDir: os.tmpdir(), databaseUrl: `postgres://app:s3cret@127.0.0.1:${port}/x` })).rejects.toThrow(
    new RegExp(`PostgreSQL at postgres://app:\\*\\*\\*@127\\.0\\.0\\.1:${port}/x: .*ECONNREFUSED`),
  );
});
