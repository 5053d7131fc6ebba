#!/usr/bin/env node
// Where Debian's PostgreSQL, Redis and nginx server binaries are, for the tests that start real servers (store,
// shared-state and scale-out suites) and for `npm test`'s prerequisites step (scripts/test-prereqs.js), which
// installs the `postgresql`, `redis-server` and `nginx` packages when they are missing and it runs as root. Nothing is
// started here and no system service is enabled: the tests start their own servers in temporary directories on
// loopback ports. Plain JavaScript: the prerequisites step runs before anything is compiled.
'use strict';
const fs = require('node:fs');
const path = require('node:path');

const PG_ROOT = '/usr/lib/postgresql';
const REDIS_CANDIDATES = ['/usr/bin/redis-server', '/usr/local/bin/redis-server'];
// Debian's `nginx` package (bookworm and trixie; bookworm's nginx-light is that binary plus one module).
const NGINX_CANDIDATES = ['/usr/sbin/nginx', '/usr/local/sbin/nginx', '/usr/bin/nginx'];

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

/** The nginx binary the load-balancer test (test/integration/streaming-nginx.test.ts) runs, or null. */
function findNginx(candidates = NGINX_CANDIDATES) {
  return candidates.find((p) => fs.existsSync(p)) ?? null;
}

/**
 * Returns { postgresBin, redisServer }; throws an Error whose message is one line naming what to install when
 * either is missing. The options exist so the tests can check that message.
 */
function serverBinaries({ pgRoot = PG_ROOT, redisCandidates = REDIS_CANDIDATES } = {}) {
  const found = { postgresBin: findPostgresBin(pgRoot), redisServer: findRedisServer(redisCandidates) };
  const missing = [];
  if (!found.postgresBin) missing.push('postgresql');
  if (!found.redisServer) missing.push('redis-server');
  if (missing.length > 0) {
    throw new Error(
      `these tests start real servers from Debian's ${missing.join(' and ')}, which are not installed: ` +
        `run npm test as root (its prerequisites step installs them) or apt-get install -y ${missing.join(' ')}`,
    );
  }
  return found;
}

module.exports = { serverBinaries, findPostgresBin, findRedisServer, findNginx };

if (require.main === module) {
  try {
    const found = serverBinaries();
    console.log(`postgres: ${found.postgresBin}\nredis-server: ${found.redisServer}`);
  } catch (err) {
    console.error(err.message);
    process.exit(1);
  }
}
