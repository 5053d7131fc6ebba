// Console authentication: the admin secret (scrypt, run off the event loop). Sessions, CSRF tokens and the sign-in
// limiter are shared state (src/shared-state/sessions.ts): memory or Redis, chosen by configuration. Nothing here is
// persisted in the store except the admin secret's hash.
import crypto from 'node:crypto';
import fsp from 'node:fs/promises';
import path from 'node:path';
import { promisify } from 'node:util';
import type { Config } from '../config';
import { ADMIN_SECRET_SETTING } from '../store/gateway/settings';
import type { GatewayStore } from '../store/gateway/types';

const scrypt = promisify(crypto.scrypt) as (
  password: crypto.BinaryLike,
  salt: crypto.BinaryLike,
  keylen: number,
  options: crypto.ScryptOptions,
) => Promise<Buffer>;

const SCRYPT_KEYLEN = 32;
const SCRYPT_PARAMS = { N: 16384, r: 8, p: 1 };

/**
 * `scrypt$<salt b64url>$<hash b64url>`: a slow hash, since the secret guards the whole console. The KDF runs on
 * libuv's thread pool (crypto.scrypt), never on the event loop: a burst of sign-ins must not stall API calls.
 */
export async function hashAdminSecret(secret: string): Promise<string> {
  const salt = crypto.randomBytes(16);
  const hash = await scrypt(secret, salt, SCRYPT_KEYLEN, SCRYPT_PARAMS);
  return `scrypt$${salt.toString('base64url')}$${hash.toString('base64url')}`;
}

export async function verifyAdminSecretHash(secret: string, stored: string): Promise<boolean> {
  const [kind, saltB64, hashB64] = stored.split('$');
  if (kind !== 'scrypt' || !saltB64 || !hashB64) return false;
  const expected = Buffer.from(hashB64, 'base64url');
  if (expected.length < 16) return false;
  const actual = await scrypt(secret, Buffer.from(saltB64, 'base64url'), expected.length, SCRYPT_PARAMS);
  return crypto.timingSafeEqual(expected, actual);
}

/** Compares two strings in time independent of where they differ (hashing first equalises lengths). */
export function constantTimeEqual(a: string, b: string): boolean {
  const ha = crypto.createHash('sha256').update(a, 'utf8').digest();
  const hb = crypto.createHash('sha256').update(b, 'utf8').digest();
  return crypto.timingSafeEqual(ha, hb) && a.length === b.length;
}

/** Where a generated admin secret is written: DATA_DIR/admin-secret, readable by the service's user only. */
export function adminSecretFile(config: Pick<Config, 'dataDir'>): string {
  return path.join(config.dataDir, 'admin-secret');
}

/** Writes the file whole or not at all (a temporary name, then a rename), created with mode 0600. */
async function writeSecretFile(file: string, secret: string): Promise<void> {
  await fsp.mkdir(path.dirname(file), { recursive: true });
  const tmp = `${file}.${crypto.randomBytes(6).toString('hex')}.tmp`;
  try {
    await fsp.writeFile(tmp, `${secret}\n`, { mode: 0o600, flag: 'wx' });
    await fsp.rename(tmp, file);
  } catch (err) {
    await fsp.rm(tmp, { force: true });
    throw err;
  }
}

/**
 * Makes sure the console has an admin secret. With ADMIN_SECRET set nothing is stored.
 * Otherwise, on the very first start, a random secret is generated and written to `adminSecretFile(config)` (mode
 * 0600), only its hash is kept in the store settings, and `log` gets one line saying where the file is. The secret
 * itself never goes to the log: log lines are kept (docker logs, journald, shippers) where a file can be deleted.
 * Returns the generated secret (first start only) or null.
 */
export async function ensureAdminSecret(
  config: Config,
  store: GatewayStore,
  log: (line: string) => void = (line) => process.stdout.write(line + '\n'),
): Promise<string | null> {
  if (config.adminSecret) return null;
  if (await store.getSetting(ADMIN_SECRET_SETTING)) return null;
  const secret = crypto.randomBytes(24).toString('base64url');
  const file = adminSecretFile(config);
  // The file first: if storing the hash fails, the next start generates a new secret and overwrites it.
  await writeSecretFile(file, secret);
  await store.setSetting(ADMIN_SECRET_SETTING, await hashAdminSecret(secret));
  log(
    `[console] No ADMIN_SECRET set: generated a console admin secret and wrote it to ${file} (mode 0600; only its ` +
      `hash is stored). Sign in at /console with it, then delete the file. Set ADMIN_SECRET to choose your own.`,
  );
  return secret;
}

/** Checks a sign-in attempt against ADMIN_SECRET, else against the stored hash. */
export async function checkAdminSecret(config: Config, store: GatewayStore, attempt: string): Promise<boolean> {
  if (config.adminSecret) return constantTimeEqual(attempt, config.adminSecret);
  const stored = await store.getSetting(ADMIN_SECRET_SETTING);
  if (!stored) return false;
  return verifyAdminSecretHash(attempt, stored);
}
