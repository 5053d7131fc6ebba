// The provisioning step of the PostgreSQL/Redis tests: finds Debian's server binaries, and where they are missing
// and cannot be installed (not root), fails with one line that says what to install.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

// eslint-disable-next-line @typescript-eslint/no-var-requires
const { provisionServers, findPostgresBin } = require('../../scripts/provision-servers.js') as {
  provisionServers: (o?: { pgRoot?: string; redisCandidates?: string[]; uid?: number; log?: (l: string) => void }) => { postgresBin: string; redisServer: string };
  findPostgresBin: (root?: string) => string | null;
};

test('missing servers and no root: one line naming the packages and the command', () => {
  let message = '';
  try {
    provisionServers({ pgRoot: '/nonexistent', redisCandidates: ['/nonexistent/redis-server'], uid: 1000 });
  } catch (err) {
    message = (err as Error).message;
  }
  expect(message).toBe(
    "the tests need Debian's postgresql and redis-server (real servers are started in temporary directories); " +
      'install with: sudo apt-get install -y postgresql redis-server',
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

test('on this machine the servers are there (installed by the provisioning when they were not)', () => {
  const found = provisionServers();
  expect(fs.existsSync(path.join(found.postgresBin, 'initdb'))).toBe(true);
  expect(fs.existsSync(found.redisServer)).toBe(true);
}, 600_000);
