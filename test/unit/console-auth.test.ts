// The console's admin-secret KDF: scrypt runs on libuv's thread pool, so sign-in attempts never stall the event
// loop (before, 500 wrong sign-ins raised GET /models p50 from 4 ms to 861 ms).
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { ADMIN_SECRET_SETTING } from '../../src/store/gateway/settings';
import { checkAdminSecret, hashAdminSecret, verifyAdminSecretHash } from '../../src/console/auth';
import { loadConfig } from '../../src/config';
import { openSqliteStore } from '../../src/store/gateway/sqlite';

test('hash and verify: scrypt$salt$hash, right and wrong secrets, malformed stored values', async () => {
  const stored = await hashAdminSecret('the right secret');
  expect(stored).toMatch(/^scrypt\$[A-Za-z0-9_-]{22}\$[A-Za-z0-9_-]{43}$/);
  expect(await hashAdminSecret('the right secret')).not.toBe(stored); // salted
  expect(await verifyAdminSecretHash('the right secret', stored)).toBe(true);
  expect(await verifyAdminSecretHash('the wrong secret', stored)).toBe(false);
  expect(await verifyAdminSecretHash('x', 'plain$abc$def')).toBe(false);
  expect(await verifyAdminSecretHash('x', 'scrypt$abc$')).toBe(false);
  expect(await verifyAdminSecretHash('x', 'scrypt$abc$c2hvcnQ')).toBe(false);
});

test('sign-in checks do not block the event loop: timers keep firing while eight run', async () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'console-auth-'));
  const config = loadConfig({ NODE_ENV: 'test', DATA_DIR: dir });
  const store = openSqliteStore(config);
  await store.setSetting(ADMIN_SECRET_SETTING, await hashAdminSecret('the right secret'));
  let ticks = 0;
  const timer = setInterval(() => ticks++, 1);
  try {
    const results = await Promise.all(Array.from({ length: 8 }, () => checkAdminSecret(config, store, 'a wrong guess')));
    expect(results).toEqual(Array(8).fill(false));
  } finally {
    clearInterval(timer);
    await store.close();
    fs.rmSync(dir, { recursive: true, force: true });
  }
  // With the synchronous KDF every check ran back to back on the event loop and no timer could fire in between.
  expect(ticks).toBeGreaterThan(0);
});
