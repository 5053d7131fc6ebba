// scripts/test-prereqs.js: the step `npm test` runs first. Present packages pass silently; a missing one, where it
// cannot be installed, fails with exactly one line that names the Debian package to install.
import { execFileSync } from 'node:child_process';
import path from 'node:path';
import { PROJECT_ROOT } from '../../src/config';

const SCRIPT = path.join(PROJECT_ROOT, 'scripts', 'test-prereqs.js');
// eslint-disable-next-line @typescript-eslint/no-var-requires
const { ensurePrerequisites, PREREQUISITES } = require(SCRIPT) as {
  ensurePrerequisites(opts: {
    list?: Array<{ deb: string; for: string; check(): boolean }>;
    isRoot?: boolean;
    aptGet?: string | null;
    write?(line: string): void;
  }): number;
  PREREQUISITES: Array<{ deb: string; for: string; check(): boolean }>;
};

describe('test prerequisites', () => {
  test('the list names every server the suites drive, and on this machine everything is present (exit 0, silent)', () => {
    // nginx too: without it the load-balancer suite (streaming-nginx) would not run, so it is installed like the rest.
    expect(PREREQUISITES.map((p) => p.deb).sort()).toEqual(['chromium', 'nginx', 'postgresql', 'python3-websockets', 'redis-server']);
    for (const p of PREREQUISITES) expect(p.check()).toBe(true);
    const out = execFileSync(process.execPath, [SCRIPT], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
    expect(out).toBe('');
  });

  test('missing and not root: one line naming the package and the apt-get command, exit 1, nothing run', () => {
    const lines: string[] = [];
    const code = ensurePrerequisites({
      list: [{ deb: 'nsm-missing-example', for: 'the example tests', check: () => false }, ...PREREQUISITES],
      isRoot: false,
      aptGet: '/usr/bin/apt-get',
      write: (l) => lines.push(l),
    });
    expect(code).toBe(1);
    expect(lines).toHaveLength(1);
    expect(lines[0]).toContain('apt-get install -y nsm-missing-example');
    expect(lines[0]).toContain('the example tests');
    expect(lines[0]).not.toContain('chromium'); // only what is missing
    expect(lines[0]).not.toContain('\n');
  });

  test('missing with no apt-get (not Debian): one line, exit 1', () => {
    const lines: string[] = [];
    const code = ensurePrerequisites({
      list: [{ deb: 'nsm-missing-example', for: 'x', check: () => false }],
      isRoot: true,
      aptGet: null,
      write: (l) => lines.push(l),
    });
    expect(code).toBe(1);
    expect(lines).toEqual([expect.stringContaining('no apt-get here')]);
  });
});
