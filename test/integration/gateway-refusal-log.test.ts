// Issue 35, item 7: a key looping into 429 wrote one request-log row per refusal (33,549 rows in 35 s in the audit).
// Against a real `npm start`: 1,500 calls of one free-plan key (60 per minute) as fast as 16 clients go; the log
// gets a row per served call and one per minute for the refusals, and every count still adds up: the rows' calls,
// the console's request log and usage chart, and `keys usage`.
import { execFile } from 'node:child_process';
import path from 'node:path';
import { promisify } from 'node:util';
import Database from 'better-sqlite3';
import { PROJECT_ROOT } from '../../src/config';
import { openSqliteStore } from '../../src/store/gateway/sqlite';
import { startServer, stop } from '../helpers/file-process-helpers';
import { rawRequest } from '../helpers/service-helpers';

const run = promisify(execFile);
const CALLS = 1_500;

(process.platform === 'linux' ? describe : describe.skip)('refusals in the request log (issue 35, item 7)', () => {
  test('a key hammering into 429: one row per minute for its refusals; console, usage and keys usage exact', async () => {
    const s = await startServer();
    try {
      const store = openSqliteStore({ dataDir: s.dataDir });
      const ws = await store.createWorkspace('hammer', 'free');
      const { token } = await store.createToken({ workspaceId: ws.id, name: 'loop', scopes: ['*'], allowedIps: [], expiresAt: null });
      await store.close();

      const statuses = new Map<number, number>();
      let next = 0;
      await Promise.all(
        Array.from({ length: 16 }, async () => {
          while (next < CALLS) {
            next++;
            const r = await rawRequest(`${s.url}/v1/noise-suppressor/models`, { headers: { Authorization: `Bearer ${token}` } });
            statuses.set(r.status, (statuses.get(r.status) ?? 0) + 1);
          }
        }),
      );
      const served = statuses.get(200) ?? 0;
      const refused = statuses.get(429) ?? 0;
      expect(served + refused).toBe(CALLS);
      expect(served).toBeGreaterThanOrEqual(60);
      expect(refused).toBeGreaterThan(CALLS / 2);

      // Rows: one per served call, and the refusals of each minute the loop touched in one row.
      // A row is written once its response is out, so the last calls' rows may land just after their answers: read
      // until the log holds every call (at most 5 s), then check how they are laid out.
      const readRows = (): Array<{ status: number; calls: number }> => {
        const db = new Database(path.join(s.dataDir, 'gateway.db'), { readonly: true });
        try {
          return db.prepare('SELECT status, calls FROM request_log WHERE workspace_id = ?').all(ws.id) as Array<{ status: number; calls: number }>;
        } finally {
          db.close();
        }
      };
      let rows = readRows();
      for (let waited = 0; rows.reduce((n, r) => n + r.calls, 0) < CALLS && waited < 5000; waited += 50) {
        await new Promise((r) => setTimeout(r, 50));
        rows = readRows();
      }
      const refusalRows = rows.filter((r) => r.status === 429);
      expect(rows.filter((r) => r.status === 200)).toHaveLength(served);
      expect(refusalRows.length).toBeGreaterThanOrEqual(1);
      expect(refusalRows.length).toBeLessThanOrEqual(3); // the minutes the loop spanned
      expect(refusalRows.reduce((n, r) => n + r.calls, 0)).toBe(refused);

      // The console: every page of the log adds up to the calls made; the usage chart counts them and the errors.
      const login = await rawRequest(`${s.url}/console/api/login`, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: Buffer.from('{"secret":"x"}') });
      expect(login.status).toBe(200);
      const cookie = String(login.headers['set-cookie']![0]).split(';')[0];
      let offset = 0;
      let listed = 0;
      for (;;) {
        const page = JSON.parse((await rawRequest(`${s.url}/console/api/requests?workspace=${ws.id}&limit=200&offset=${offset}`, { headers: { Cookie: cookie } })).body.toString()) as {
          requests: Array<{ calls: number }>;
          has_more: boolean;
        };
        listed += page.requests.reduce((n, r) => n + r.calls, 0);
        offset += page.requests.length;
        if (!page.has_more) break;
      }
      expect(listed).toBe(CALLS);
      const usage = JSON.parse((await rawRequest(`${s.url}/console/api/workspaces/${ws.id}/usage?days=2`, { headers: { Cookie: cookie } })).body.toString()) as {
        days: Array<{ count: number; errors: number }>;
      };
      expect(usage.days.reduce((n, d) => n + d.count, 0)).toBe(CALLS);
      expect(usage.days.reduce((n, d) => n + d.errors, 0)).toBe(refused);

      const cli = await run(process.execPath, [path.join(PROJECT_ROOT, 'dist/src/cli/keys.js'), 'usage', '--workspace', 'hammer'], { env: { ...process.env, DATA_DIR: s.dataDir } });
      const line = cli.stdout.split('\n').find((l) => l.startsWith('hammer'))!;
      const [, , , used, , , requests, errors] = line.trim().split(/\s+/);
      expect([Number(used), Number(requests), Number(errors)]).toEqual([0, CALLS, refused]);
    } finally {
      await stop(s);
    }
  }, 120_000);
});
