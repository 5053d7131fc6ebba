// Does the credit reservation need better-sqlite3's synchronous transactions? The gateway store now runs on SQLite
// through the same asynchronous statements as on PostgreSQL (src/db/sqlite.ts: BEGIN IMMEDIATE, statements of the
// file in turns). These cases give the scheduler every chance to interleave: each statement waits a turn of the event
// loop first, callers in this process share three connections to the file, two more processes reserve on it too.
// The hold never passes the limit, because the check and the hold are one conditional upsert in one transaction. The
// last case is the control: the same harness with the check as a statement of its own double-spends at once.
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { Sql, SqlDatabase } from '../../src/db/dialect';
import { gatewayDbPath } from '../../src/db/paths';
import { openSqliteFile, sqliteDatabase } from '../../src/db/sqlite';
import { openSqliteStore } from '../../src/store/gateway/sqlite';
import { createGatewayStore } from '../../src/store/gateway/store';
import type { GatewayStore } from '../../src/store/gateway/types';

const tick = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

/** The same database, with a turn of the event loop before every statement (inside transactions too). */
function yielding(db: SqlDatabase): SqlDatabase {
  const slow = (sql: Sql): Sql => ({
    dialect: sql.dialect,
    all: async (text, params) => (await tick(), sql.all(text, params)),
    run: async (text, params) => (await tick(), sql.run(text, params)),
  });
  return { ...slow(db), transaction: (fn) => db.transaction((tx) => fn(slow(tx))), close: () => db.close() };
}

let dir: string;
let config: { dataDir: string };
let workspaceId: string;
const opened: Array<{ close(): Promise<void> }> = [];

/** A store on its own connection to the test's gateway.db, every statement yielding first. */
function yieldingStore(): { store: GatewayStore; db: SqlDatabase } {
  const db = yielding(sqliteDatabase(openSqliteFile(gatewayDbPath(config), { foreignKeys: true })));
  const store = createGatewayStore(db);
  opened.push(store);
  return { store, db };
}

beforeEach(async () => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'credit-race-'));
  config = { dataDir: dir };
  const store = openSqliteStore(config); // creates and migrates the file
  workspaceId = (await store.createWorkspace('race', 'free')).id;
  await store.close();
});

afterEach(async () => {
  for (const s of opened.splice(0)) await s.close();
  fs.rmSync(dir, { recursive: true, force: true });
});

test('many callers on one connection: exactly the limit is held, however the statements interleave', async () => {
  const { store } = yieldingStore();
  const when = new Date();
  const results = await Promise.all(Array.from({ length: 200 }, () => store.reserveCredits(workspaceId, 1, 50, when, 60_000)));
  const held = results.filter((r) => r.ok);
  expect(held).toHaveLength(50);
  expect(new Set(held.map((r) => r.reservation!.id)).size).toBe(50);
  expect(Math.max(...results.map((r) => r.reserved))).toBe(50);
  expect(await store.creditsHeld(workspaceId, when)).toBe(50);
  await Promise.all(held.map((r) => store.settleReservation(r.reservation!)));
  expect(await store.creditsUsed(workspaceId, when)).toBe(50);
  expect(await store.creditsHeld(workspaceId, when)).toBe(0);
});

test('three connections in this process and two other processes: never over the limit, no lock errors', async () => {
  // 300: the children alone can settle at most 240 and this process at most 120 (it gives every other hold back),
  // so both sides settle some and the limit is reached whatever order the machine runs them in.
  const LIMIT = 300;
  const storeModule = path.join(__dirname, '../../src/store/gateway/sqlite.js');
  // Each child opens the store, says so, and starts on "go": 6 callers × 20 attempts, every hold that fits settled.
  const script = `
    const { openSqliteStore } = require(${JSON.stringify(storeModule)});
    const s = openSqliteStore(${JSON.stringify(config)});
    let settled = 0, refused = 0;
    process.stdout.write('ready\\n');
    process.stdin.once('data', async () => {
      try {
        await Promise.all(Array.from({ length: 6 }, async () => {
          for (let i = 0; i < 20; i++) {
            const r = await s.reserveCredits(${JSON.stringify(workspaceId)}, 1, ${LIMIT}, new Date(), 60000);
            if (!r.ok) { refused++; continue; }
            if (r.used + r.reserved > ${LIMIT}) throw new Error('held past the limit: ' + JSON.stringify(r));
            await s.settleReservation(r.reservation);
            settled++;
          }
        }));
        await s.close();
        process.stdout.write(JSON.stringify({ settled, refused }));
        process.exit(0);
      } catch (e) { console.error(e); process.exit(1); }
    });
  `;
  const children = [0, 1].map(() => spawn(process.execPath, ['-e', script], { stdio: ['pipe', 'pipe', 'inherit'] }));
  const outputs = children.map(
    (child) =>
      new Promise<string>((resolve, reject) => {
        let out = '';
        child.stdout.on('data', (b: Buffer) => (out += b.toString()));
        child.on('close', (code) => (code === 0 ? resolve(out) : reject(new Error(`child exited ${code}`)))); // 'close': after its last output
      }),
  );
  await Promise.all(children.map((child) => new Promise((resolve) => child.stdout.once('data', resolve))));
  // This process's connections are open before "go", so that both sides start together (opened after it, on a loaded
  // machine the children had taken every credit before the first of them asked).
  const stores = [yieldingStore().store, yieldingStore().store, yieldingStore().store];
  await Promise.all(stores.map((store) => store.creditsHeld(workspaceId, new Date())));
  for (const child of children) child.stdin.end('go\n');

  let settled = 0;
  let refused = 0;
  // 3 connections × 4 callers × 20 attempts here, 2 × 120 in the children: 480 attempts for 300 credits.
  await Promise.all(
    stores.flatMap((store) =>
      Array.from({ length: 4 }, async () => {
        for (let i = 0; i < 20; i++) {
          const r = await store.reserveCredits(workspaceId, 1, LIMIT, new Date(), 60_000);
          if (!r.ok) {
            refused++;
            continue;
          }
          expect(r.used + r.reserved).toBeLessThanOrEqual(LIMIT);
          // Every other hold is given back, so later attempts race for what is freed.
          if (i % 2) await store.releaseReservation(r.reservation!);
          else (await store.settleReservation(r.reservation!), settled++);
        }
      }),
    ),
  );
  const theirs = (await Promise.all(outputs)).map((out) => JSON.parse(out.replace(/^ready\n/, '')) as { settled: number; refused: number });
  const used = await stores[0].creditsUsed(workspaceId, new Date());
  // Every settled hold counted once, none past the limit, and the limit was reached (calls were refused).
  expect(used).toBe(settled + theirs[0].settled + theirs[1].settled);
  expect(used).toBeLessThanOrEqual(LIMIT);
  expect(refused + theirs[0].refused + theirs[1].refused).toBeGreaterThan(0);
  expect(theirs[0].settled + theirs[1].settled).toBeGreaterThan(0);
  expect(settled).toBeGreaterThan(0);
  expect(await stores[0].creditsHeld(workspaceId, new Date())).toBe(0);
});

test('control: the check as a statement of its own, then the hold, double-spends under the same harness', async () => {
  const { db } = yieldingStore();
  const LIMIT = 10;
  await db.run("INSERT INTO credit_usage (workspace_id, period, used, reserved) VALUES (@ws, '2030-01', 0, 0)", { ws: workspaceId });
  const naive = async (): Promise<boolean> => {
    const [row] = await db.all("SELECT used, reserved FROM credit_usage WHERE workspace_id = @ws AND period = '2030-01'", { ws: workspaceId });
    if (Number(row.used) + Number(row.reserved) + 1 > LIMIT) return false;
    await db.run("UPDATE credit_usage SET reserved = reserved + 1 WHERE workspace_id = @ws AND period = '2030-01'", { ws: workspaceId });
    return true;
  };
  const granted = (await Promise.all(Array.from({ length: 50 }, naive))).filter(Boolean).length;
  const [row] = await db.all("SELECT reserved FROM credit_usage WHERE workspace_id = @ws AND period = '2030-01'", { ws: workspaceId });
  expect(granted).toBeGreaterThan(LIMIT);
  expect(Number(row.reserved)).toBe(granted);
});
