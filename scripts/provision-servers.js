#!/usr/bin/env node
// Makes sure Debian's PostgreSQL server and Redis server binaries are present for the tests that start real ones
// (store, rate-limit and session contract suites, scale-out scenarios). When they are missing and we run as root,
// installs the `postgresql` and `redis-server` packages with apt; otherwise fails with one line saying what to do.
// Nothing is started here and no system service is enabled: the tests start their own servers in temporary
// directories on loopback ports. Usable from the command line (`node scripts/provision-servers.js`) or required.
'use strict';
const { spawnSync } = require('node:child_process');
const fs = require('node:fs');
const path = require('node:path');

const PG_ROOT = '/usr/lib/postgresql';
const REDIS_CANDIDATES = ['/usr/bin/redis-server', '/usr/local/bin/redis-server'];

/** Highest installed PostgreSQL major version's bin folder holding initdb and postgres, or null. */
function findPostgresBin(pgRoot = PG_ROOT) {
  let versions = [];
  try {
    versions = fs.readdirSync(pgRoot).filter((v) => /^\d+$/.test(v)).sort((a, b) => Number(b) - Number(a));
  } catch {
    return null;
  }
  for (const v of versions) {
    const bin = path.join(pgRoot, v, 'bin');
    if (fs.existsSync(path.join(bin, 'initdb')) && fs.existsSync(path.join(bin, 'postgres'))) return bin;
  }
  return null;
}

function findRedisServer(candidates = REDIS_CANDIDATES) {
  return candidates.find((p) => fs.existsSync(p)) ?? null;
}

function missingPackages(found) {
  const out = [];
  if (!found.postgresBin) out.push('postgresql');
  if (!found.redisServer) out.push('redis-server');
  return out;
}

/**
 * Returns { postgresBin, redisServer }, installing what is missing when possible.
 * Throws an Error whose message is one line when the servers cannot be had.
 */
function provisionServers({
  log = (line) => process.stderr.write(line + '\n'),
  // Where to look, and who we are: parameters only so the tests can check the failure message.
  pgRoot = PG_ROOT,
  redisCandidates = REDIS_CANDIDATES,
  uid = typeof process.getuid === 'function' ? process.getuid() : -1,
} = {}) {
  const locate = () => ({ postgresBin: findPostgresBin(pgRoot), redisServer: findRedisServer(redisCandidates) });
  let found = locate();
  const missing = missingPackages(found);
  if (missing.length === 0) return found;
  const isRoot = uid === 0;
  const hasApt = fs.existsSync('/usr/bin/apt-get');
  if (!isRoot || !hasApt) {
    throw new Error(
      `the tests need Debian's ${missing.join(' and ')} (real servers are started in temporary directories); ` +
        `install with: sudo apt-get install -y ${missing.join(' ')}`,
    );
  }
  log(`[setup] apt-get install -y ${missing.join(' ')} (needed by the PostgreSQL/Redis tests)`);
  const env = { ...process.env, DEBIAN_FRONTEND: 'noninteractive' };
  const update = spawnSync('apt-get', ['update', '-qq'], { stdio: ['ignore', 'ignore', 'inherit'], env });
  const install = spawnSync('apt-get', ['install', '-y', '-qq', '--no-install-recommends', ...missing], {
    stdio: ['ignore', 'ignore', 'inherit'],
    env,
  });
  found = locate();
  const still = missingPackages(found);
  if (still.length > 0) {
    throw new Error(
      `could not install ${still.join(' and ')} with apt-get (update exit ${update.status}, install exit ${install.status}); ` +
        `install them by hand: apt-get install -y ${still.join(' ')}`,
    );
  }
  return found;
}

module.exports = { provisionServers, findPostgresBin, findRedisServer };

if (require.main === module) {
  try {
    const found = provisionServers();
    console.log(`postgres: ${found.postgresBin}\nredis-server: ${found.redisServer}`);
  } catch (err) {
    console.error(`provision-servers: ${err.message}`);
    process.exit(1);
  }
}
