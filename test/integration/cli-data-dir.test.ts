// `keys --data-dir DIR` and `db --data-dir DIR` (issue 39): a server started with DATA_DIR=DIR and the keys CLI given
// the same folder share one database, so the key the CLI prints works at once. Real processes: the server
// (dist/src/server.js) and the CLIs through `npm run -s`, exactly as the README's quick start runs them.
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { PROJECT_ROOT } from '../../src/config';
import { closeQuietly, eventually, listen, rawRequest } from '../helpers/service-helpers';

interface Run {
  code: number;
  stdout: string;
  stderr: string;
}

/** `npm run -s <script> -- args` from the clone, with DATA_DIR pointing somewhere else (it must not be used). */
function npmRun(script: string, args: string[], env: NodeJS.ProcessEnv): Promise<Run> {
  return new Promise((resolve) => {
    execFile('npm', ['run', '-s', script, '--', ...args], { cwd: PROJECT_ROOT, env }, (err, stdout, stderr) => {
      resolve({ code: err ? ((err as { code?: number }).code ?? 1) : 0, stdout, stderr });
    });
  });
}

let root: string;
let dataDir: string;
let wrongDir: string;
let env: NodeJS.ProcessEnv;
let server: ChildProcess;
let base: string;
let output = '';

beforeAll(async () => {
  root = fs.mkdtempSync(path.join(os.tmpdir(), 'ns-data-dir-'));
  dataDir = path.join(root, 'server-data');
  wrongDir = path.join(root, 'not-the-server');
  env = { ...process.env, DATA_DIR: wrongDir };
  const probe = await listen(() => undefined);
  const port = Number(new URL(probe.url).port);
  await closeQuietly(probe.server);
  base = `http://127.0.0.1:${port}`;
  server = spawn(process.execPath, [path.join(PROJECT_ROOT, 'dist/src/server.js')], {
    env: { ...process.env, PORT: String(port), HOST: '127.0.0.1', DATA_DIR: dataDir, WORKERS: '1', ADMIN_SECRET: 'x'.repeat(32), FILE_WORK_PROCESS: 'false' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  server.stdout!.on('data', (d: Buffer) => (output += d.toString()));
  server.stderr!.on('data', (d: Buffer) => (output += d.toString()));
  await eventually(() => output.includes('listening on') || server.exitCode !== null, 30_000).catch(() => undefined);
  if (!output.includes('listening on')) throw new Error(`server did not start:\n${output}`);
}, 60_000);

afterAll(async () => {
  if (server && server.exitCode === null) {
    const exited = new Promise((r) => server.once('exit', r));
    server.kill('SIGTERM');
    await exited;
  }
  fs.rmSync(root, { recursive: true, force: true });
});

test('keys --data-dir DIR (before or after the command) writes into the server\'s database: its key answers 200', async () => {
  const created = await npmRun('keys', ['--data-dir', dataDir, 'create', '--workspace', 'acme'], env);
  expect({ code: created.code, stderr: created.stderr }).toEqual({ code: 0, stderr: '' }); // no "created a new database"
  const token = created.stdout.trimEnd().split('\n').pop()!;
  expect(token).toMatch(/^mw_live_/);
  const health = await rawRequest(`${base}/v1/noise-suppressor/health`, { headers: { Authorization: `Bearer ${token}` } });
  expect(health.status).toBe(200);

  const listed = await npmRun('keys', ['list', `--data-dir=${dataDir}`], env);
  expect(listed.code).toBe(0);
  expect(listed.stdout).toMatch(/acme/);
  expect(fs.existsSync(wrongDir)).toBe(false); // DATA_DIR of the environment was never opened

  // Without the option the environment's DATA_DIR is used, and the CLI says it made a new database there.
  const elsewhere = await npmRun('keys', ['list'], env);
  expect(elsewhere.stderr).toBe(
    `keys: created a new database at ${path.join(wrongDir, 'gateway.db')} (DATA_DIR=${wrongDir}); is the server using the same DATA_DIR?\n`,
  );
  fs.rmSync(wrongDir, { recursive: true, force: true });
});

test('db --data-dir DIR backs up the server\'s databases; mistakes with the option are one usage line', async () => {
  const file = path.join(root, 'backups', 'nsm.db');
  fs.mkdirSync(path.dirname(file));
  const backup = await npmRun('db', ['backup', file, '--data-dir', dataDir], env);
  expect(backup.stderr).toBe('');
  expect(backup.code).toBe(0);
  expect(backup.stdout).toMatch(new RegExp(`^backed up ${path.join(dataDir, 'gateway.db').replace(/[.]/g, '\\.')} to ${file.replace(/[.]/g, '\\.')} .*1 workspaces, 1 keys`, 'm'));
  expect(fs.existsSync(wrongDir)).toBe(false);

  const help = await npmRun('db', ['--help'], env);
  expect(help.stdout).toMatch(/^ {2}--data-dir DIR$/m);
  const keysHelp = await npmRun('keys', ['--help'], env);
  expect(keysHelp.stdout).toMatch(/^ {2}--data-dir DIR$/m);

  const noValue = await npmRun('keys', ['list', '--data-dir'], env);
  expect({ code: noValue.code, stderr: noValue.stderr }).toEqual({ code: 2, stderr: 'keys: --data-dir needs a value (see keys --help)\n' });
  const twice = await npmRun('db', ['--data-dir', dataDir, 'migrate', '--data-dir', wrongDir], env);
  expect({ code: twice.code, stderr: twice.stderr }).toEqual({ code: 2, stderr: 'db: --data-dir given twice (see db --help)\n' });
  expect(fs.existsSync(wrongDir)).toBe(false);
});
