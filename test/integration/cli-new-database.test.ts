// A CLI pointed at a DATA_DIR other than the server's used to create an empty database there without a word, and
// keys made in it answered 401. Now creating a database file is said on stderr, with its path (real processes).
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { PROJECT_ROOT } from '../../src/config';
import { openSqliteStore } from '../../src/store/gateway/sqlite';

const dist = (p: string) => path.join(PROJECT_ROOT, 'dist/src/cli', p);

function run(file: string, args: string[], dataDir: string): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(process.execPath, [file, ...args], { env: { ...process.env, DATA_DIR: dataDir } }, (err, stdout, stderr) => {
      resolve({ code: err ? ((err as { code?: number }).code ?? 1) : 0, stdout, stderr });
    });
  });
}

const created = (program: string, file: string, dataDir: string) =>
  `${program}: created a new database at ${file} (DATA_DIR=${dataDir}); is the server using the same DATA_DIR?\n`;

let dataDir: string;
beforeEach(() => {
  dataDir = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'ns-new-db-')), 'data');
});
afterEach(() => fs.rmSync(path.dirname(dataDir), { recursive: true, force: true }));

test('keys create in an empty DATA_DIR says it created gateway.db, once; the token is still the last line', async () => {
  const first = await run(dist('keys.js'), ['create', '--workspace', 'acme'], dataDir);
  expect(first.code).toBe(0);
  expect(first.stderr).toBe(created('keys', path.join(dataDir, 'gateway.db'), dataDir));
  expect(first.stdout.trimEnd().split('\n').pop()).toMatch(/^mw_live_/);

  const again = await run(dist('keys.js'), ['list'], dataDir);
  expect({ code: again.code, stderr: again.stderr }).toEqual({ code: 0, stderr: '' });

  // The job queue is a database too: the first webhook-secret creates jobs.db, and says so.
  const secret = await run(dist('keys.js'), ['webhook-secret', '--workspace', 'acme'], dataDir);
  expect(secret.code).toBe(0);
  expect(secret.stderr).toBe(created('keys', path.join(dataDir, 'jobs.db'), dataDir));
});

test('nothing is said where the server\'s database already is, nor when the command line is wrong', async () => {
  const store = openSqliteStore({ dataDir });
  try {
    const r = await run(dist('keys.js'), ['create', '--workspace', 'acme'], dataDir);
    expect({ code: r.code, stderr: r.stderr }).toEqual({ code: 0, stderr: '' });
  } finally {
    await store.close();
  }
  const elsewhere = path.join(path.dirname(dataDir), 'elsewhere');
  const wrong = await run(dist('keys.js'), ['list', '--plan', 'free'], elsewhere);
  expect(wrong.code).toBe(2);
  expect(fs.existsSync(elsewhere)).toBe(false); // a usage error opens nothing
});

test('db migrate in an empty DATA_DIR says so too', async () => {
  const r = await run(dist('db.js'), ['migrate'], dataDir);
  expect(r.code).toBe(0);
  expect(r.stderr).toBe(created('db', path.join(dataDir, 'gateway.db'), dataDir));
});
