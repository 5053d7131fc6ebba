#!/usr/bin/env node
// Test prerequisites: the system packages the test suite drives for real (Debian's chromium for the console's
// browser tests, PostgreSQL, Redis, nginx; other engines add theirs to PREREQUISITES below). Run by `npm test` before anything else.
//
//   - everything present             → silent, exit 0
//   - missing, root with apt-get     → apt-get install the missing Debian packages, check again
//   - missing otherwise (or failed)  → ONE line naming what to install, exit 1
//
// Plain JavaScript: it runs before the TypeScript is compiled (and before `npm ci` on a fresh clone).
'use strict';
const { spawnSync } = require('node:child_process');
const fs = require('node:fs');
const { findNginx, findPostgresBin, findRedisServer } = require('./server-binaries');

/** True when an executable file exists at p. */
function executable(p) {
  try {
    fs.accessSync(p, fs.constants.X_OK);
    return fs.statSync(p).isFile();
  } catch {
    return false;
  }
}

/**
 * One entry per Debian package the tests need: `deb` is the package apt-get installs, `check()` says whether what
 * the tests use is there, `for` says which tests need it (shown when it is missing).
 */
const PREREQUISITES = [
  {
    deb: 'chromium',
    for: 'the console browser tests (test/e2e/console.test.ts)',
    check: () => executable('/usr/bin/chromium'),
  },
  {
    deb: 'postgresql',
    for: 'the PostgreSQL store and scale-out tests (a real server in a temporary directory)',
    check: () => findPostgresBin() !== null,
  },
  {
    deb: 'redis-server',
    for: 'the Redis rate-limit/session and scale-out tests (a real server in a temporary directory)',
    check: () => findRedisServer() !== null,
  },
  {
    // Debian's python3 (it comes with the package) importing the optional dependency of the Python client's streams.
    deb: 'python3-websockets',
    for: 'the Python client tests (test/e2e/clients-python.test.ts: its live streams)',
    check: () => executable('/usr/bin/python3') && spawnSync('/usr/bin/python3', ['-c', 'import websockets'], { stdio: 'ignore' }).status === 0,
  },
  {
    // `nginx`, not `nginx-light`: the same binary on Debian 12, and the only one of the two left in Debian 13.
    deb: 'nginx',
    for: 'the load balancer test of live streams (test/integration/streaming-nginx.test.ts, deploy/nginx/nginx.conf)',
    check: () => findNginx() !== null,
  },
];

function missing(list) {
  return list.filter((p) => !p.check());
}

function oneLine(list, why) {
  const debs = list.map((p) => p.deb).join(' ');
  const uses = list.map((p) => `${p.deb}: ${p.for}`).join('; ');
  return `test prerequisites missing (${uses})${why ? ` [${why}]` : ''}: install them with "apt-get install -y ${debs}" (as root) and run npm test again`;
}

/**
 * Checks `list`; installs what is missing when allowed. Returns the exit code; writes at most one line on failure.
 * The options exist so the decision can be tested with a made-up package; the defaults are this machine's.
 */
function ensurePrerequisites({
  list = PREREQUISITES,
  isRoot = typeof process.getuid === 'function' && process.getuid() === 0,
  aptGet = ['/usr/bin/apt-get', '/bin/apt-get'].find(executable),
  write = (line) => process.stderr.write(line + '\n'),
} = {}) {
  let absent = missing(list);
  if (absent.length === 0) return 0;
  if (!isRoot || !aptGet) {
    write(oneLine(absent, !aptGet ? 'no apt-get here' : 'not root, so not installing them'));
    return 1;
  }
  const debs = absent.map((p) => p.deb);
  write(`[test-prereqs] installing Debian packages: ${debs.join(' ')}`);
  const env = { ...process.env, DEBIAN_FRONTEND: 'noninteractive' };
  const quiet = { stdio: ['ignore', 'ignore', 'inherit'], env };
  const update = spawnSync(aptGet, ['update', '-qq'], quiet);
  const install = update.status === 0 ? spawnSync(aptGet, ['install', '-y', '-qq', ...debs], quiet) : update;
  absent = missing(list);
  if (absent.length === 0) return 0;
  write(oneLine(absent, `apt-get failed with exit code ${install.status}`));
  return 1;
}

if (require.main === module) process.exit(ensurePrerequisites());

module.exports = { PREREQUISITES, ensurePrerequisites };
