// The keys CLI, spawned as a real child process against the DATA_DIR a running gateway uses.
import { execFile, spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import express from 'express';
import request from 'supertest';
import { runKeysCli } from '../../src/cli/keys';
import { loadConfig, type Config } from '../../src/config';
import { createGateway, gatewayErrorHandler } from '../../src/gateway';
import type { Forwarder } from '../../src/gateway/types';
import { openSqliteStore } from '../../src/store/gateway/sqlite';
import type { GatewayStore } from '../../src/store/gateway/types';

const CLI = path.join(__dirname, '../../src/cli/keys.js');
const TOKEN = /^mw_live_[A-Za-z0-9]{32}$/;

/** Answers like the model service would for a successful call. */
const modelServiceLike: Forwarder = async (req, res, ctx) => {
  for await (const _chunk of req);
  res.status(200).json({ endpoint: ctx.route!.endpoint });
  return { status: 200, ok: true, upstreamMs: 1 };
};

interface CliResult {
  code: number;
  stdout: string;
  stderr: string;
}

let dataDir: string;
let config: Config;
let store: GatewayStore;
let app: express.Express;

function keys(...args: string[]): Promise<CliResult> {
  return new Promise((resolve) => {
    execFile(process.execPath, [CLI, ...args], { env: { ...process.env, DATA_DIR: dataDir } }, (err, stdout, stderr) => {
      resolve({ code: err ? ((err as { code?: number }).code ?? 1) : 0, stdout, stderr });
    });
  });
}

function lastLine(text: string): string {
  const lines = text.trimEnd().split('\n');
  return lines[lines.length - 1];
}

beforeEach(async () => {
  dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'keys-cli-test-'));
  config = loadConfig({ DATA_DIR: dataDir, NODE_ENV: 'test' });
  // The "server" holds the database open the whole time the CLI processes write to it.
  store = openSqliteStore(config);
  app = express();
  app.use(createGateway({ config, store, forward: modelServiceLike }));
  app.use(gatewayErrorHandler);
});

afterEach(async () => {
  await store.close();
  fs.rmSync(dataDir, { recursive: true, force: true });
});

test('create prints the token last; list never shows it; revoke makes the next call key_revoked', async () => {
  const created = await keys('create', '--workspace', 'acme', '--name', 'ci key');
  expect(created.code).toBe(0);
  const tok = lastLine(created.stdout);
  expect(tok).toMatch(TOKEN);
  expect(created.stdout).toContain('noise-suppressor:*'); // default scopes
  expect(created.stdout).toContain('plan=free');

  const ok = await request(app).post('/v1/noise-suppressor/denoise').set('Authorization', `Bearer ${tok}`);
  expect(ok.status).toBe(200);
  expect(ok.headers['ratelimit-limit']).toBe('60');

  const listed = await keys('list');
  expect(listed.code).toBe(0);
  expect(listed.stdout).not.toContain(tok);
  expect(listed.stdout).not.toContain(tok.slice(12));
  expect(listed.stdout).toContain(tok.slice(0, 12));
  expect(listed.stdout).toContain('ci key');
  expect(listed.stdout).toMatch(/active/);

  const usage = await keys('usage', '--workspace', 'acme');
  expect(usage.code).toBe(0);
  expect(usage.stdout).toMatch(/acme\s+free\s+\d{4}-\d{2}\s+1\s+999\s+1000\s+1\s+0\s+60/);

  // A start of the token longer than the 12 stored characters names it too (issue 35, item 13: "no such key").
  const revoked = await keys('revoke', tok.slice(0, 16));
  expect(revoked.code).toBe(0);
  expect(revoked.stdout).toContain('revoked');
  const after = await request(app).get('/v1/noise-suppressor/models').set('X-API-Key', tok);
  expect(after.status).toBe(401);
  expect(after.body.error.type).toBe('key_revoked');
  expect((await keys('list', '--workspace', 'acme')).stdout).toMatch(/revoked/);
});

test('scopes, IPs, expiry and plans from the command line take effect in the running gateway', async () => {
  const created = await keys(
    'create', '--workspace', 'bigco', '--plan', 'enterprise', '--rpm', '7', '--credits', '5',
    '--scopes', 'noise-suppressor:models', '--ip', '127.0.0.1,10.0.0.0/8', '--expires', '2099-01-01',
  );
  expect(created.code).toBe(0);
  const tok = lastLine(created.stdout);
  expect(tok).toMatch(TOKEN);
  const models = await request(app).get('/v1/noise-suppressor/models').set('X-API-Key', tok);
  expect(models.status).toBe(200);
  expect(models.headers['ratelimit-limit']).toBe('7');
  expect((await request(app).get('/v1/noise-suppressor/health').set('X-API-Key', tok)).body.error.type).toBe('scope_denied');

  const plan = await keys('plan', '--workspace', 'bigco', '--plan', 'scale');
  expect(plan.code).toBe(0);
  expect(plan.stdout).toContain('plan=scale rpm=1200 credits/month=250000');
  expect((await request(app).get('/v1/noise-suppressor/models').set('X-API-Key', tok)).headers['ratelimit-limit']).toBe('1200');

  const ipOnly = lastLine((await keys('create', '--workspace', 'bigco', '--ip', '192.0.2.0/24')).stdout);
  expect((await request(app).get('/v1/noise-suppressor/models').set('X-API-Key', ipOnly)).body.error.type).toBe('ip_not_allowed');
});

test('bad input exits non-zero with a clear message and prints no token', async () => {
  const cases: Array<[string[], RegExp]> = [
    [['create'], /--workspace is required/],
    [['create', '--workspace', 'a', '--plan', 'gold'], /unknown plan "gold"/],
    [['create', '--workspace', 'a', '--scopes', 'everything'], /unknown scope "everything"/],
    [['create', '--workspace', 'a', '--ip', '10.0.0.0/33'], /bad prefix length/],
    [['create', '--workspace', 'a', '--ip', 'localhost'], /not an IP or CIDR/],
    [['create', '--workspace', 'a', '--expires', 'tomorrow'], /not an ISO date/],
    [['create', '--workspace', 'a', '--expires', '2001-01-01'], /must be in the future/],
    [['create', '--workspace', 'a', '--rpm', '10'], /enterprise/],
    [['revoke', 'mw_live_none'], /no key with id or prefix/],
    [['revoke', 'mw_live_x'], /too short: give at least 4 characters after mw_live_/],
    [['plan', '--workspace', 'ghost', '--plan', 'free'], /no workspace named "ghost"/],
    [['frobnicate'], /unknown command "frobnicate"/],
    [['list', '--color', 'red'], /unknown option --color/],
    // The console's rule for names: 80 characters, no control characters; a bad key name creates no workspace either.
    [['create', '--workspace', 'w'.repeat(81)], /--workspace: workspace name is longer than 80 characters/],
    [['create', '--workspace', 'a\tb'], /--workspace: workspace name contains control characters/],
    [['create', '--workspace', 'a', '--name', 'k'.repeat(81)], /--name: key name is longer than 80 characters/],
  ];
  for (const [args, message] of cases) {
    const res = await keys(...args);
    // args travel with the verdict so a failure names the command line
    expect([args.join(' '), res.code !== 0, message.test(res.stderr)]).toEqual([args.join(' '), true, true]);
    expect(res.stdout).not.toMatch(/mw_live_/);
  }
  expect(await store.listWorkspaces()).toHaveLength(0); // nothing half-created
});

test('runKeysCli is callable in-process; --help exits 0', async () => {
  const out: string[] = [];
  const err: string[] = [];
  const io = { out: (l: string) => out.push(l), err: (l: string) => err.push(l) };
  expect(await runKeysCli(['--help'], config, io)).toBe(0);
  expect(out.join('\n')).toMatch(/Usage: npm run -s keys/);
  expect(await runKeysCli(['create', '--workspace', 'inproc', '--scopes', '*,noise-suppressor:health'], config, io)).toBe(0);
  expect(out[out.length - 1]).toMatch(TOKEN);
  const ws = (await store.getWorkspaceByName('inproc'))!;
  expect((await store.listTokens(ws.id))[0].scopes).toEqual(['*', 'noise-suppressor:health']);
  expect(await runKeysCli(['usage'], config, io)).toBe(0);
  expect(await runKeysCli(['plan', '--workspace', 'inproc'], config, io)).toBe(2);
  expect(err[err.length - 1]).toMatch(/--plan is required/);
});

test('output into a closed pipe (`keys usage | head`) ends quietly with status 0, no EPIPE stack', async () => {
  for (let i = 0; i < 50; i++) await store.createWorkspace(`ws-${i}`, 'free');
  for (const command of [['usage'], ['list']]) {
    const result = await new Promise<{ code: number | null; stderr: string }>((resolve) => {
      const child = spawn(process.execPath, [CLI, ...command], {
        env: { ...process.env, DATA_DIR: dataDir },
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      // The reader goes away before the first line is written, as `head` does after its lines.
      child.stdout.destroy();
      let stderr = '';
      child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
      child.on('close', (code) => resolve({ code, stderr }));
    });
    expect({ command, ...result }).toEqual({ command, code: 0, stderr: '' });
  }
});
