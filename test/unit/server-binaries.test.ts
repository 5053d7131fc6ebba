// Locating Debian's PostgreSQL and Redis server binaries for the tests that start real servers, and the prerequisites
// step of `npm test` that installs them: where they are missing, one line says what to install.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

// eslint-disable-next-line @typescript-eslint/no-var-requires
const { serverBinaries, findPostgresBin } = require('../../../scripts/server-binaries.js') as {
  serverBinaries: (o?: { pgRoot?: string; redisCandidates?: string[] }) => { postgresBin: string; redisServer: string };
  findPostgresBin: (root?: string) => string | null;
};
// eslint-disable-next-line @typescript-eslint/no-var-requires
const { PREREQUISITES } = require('../../../scripts/test-prereqs.js') as { PREREQUISITES: Array<{ deb: string; check(): boolean }> };

test('missing servers: one line naming the packages and how to get them', () => {
  let message = '';
  try {
    serverBinaries({ pgRoot: '/nonexistent', redisCandidates: ['/nonexistent/redis-server'] });
  } catch (err) {
    message = (err as Error).message;
  }
  expect(message).toBe(
    "these tests start real servers from Debian's postgresql and redis-server, which are not installed: " +
      'run npm test as root (its prerequisites step installs them) or apt-get install -y postgresql redis-server',
  );
  expect(message).not.toContain('\n');
});

test('the highest installed PostgreSQL major version with initdb and postgres is chosen', () => {
  const root = fs.mkdtempSync(path.join(os.tmpdir(), 'pgroot-'));
  try {
    for (const [v, files] of [['13', ['initdb', 'postgres']], ['16', ['initdb', 'postgres']], ['17', ['psql']]] as const) {
      fs.mkdirSync(path.join(root, v, 'bin'), { recursive: true });
      for (const f of files) fs.writeFileSync(path.join(root, v, 'bin', f), '');
    }
    expect(findPostgresBin(root)).toBe(path.join(root, '16', 'bin'));
    expect(findPostgresBin(path.join(root, 'none'))).toBeNull();
  } finally {
    fs.rmSync(root, { recursive: true, force: true });
  }
});

test("npm test's prerequisites step installs postgresql and redis-server, and here they are present", () => {
  const debs = PREREQUISITES.filter((p) => p.deb === 'postgresql' || p.deb === 'redis-server');
  expect(debs.map((p) => p.deb)).toEqual(['postgresql', 'redis-server']);
  for (const p of debs) expect(p.check()).toBe(true);
  const found = serverBinaries();
  expect(fs.existsSync(path.join(found.postgresBin, 'initdb'))).toBe(true);
  expect(fs.existsSync(found.redisServer)).toBe(true);
});
