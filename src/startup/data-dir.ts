// Start-up check of the folders the service writes (DATA_DIR for gateway.db, TMP_DIR for uploads): a folder that
// cannot be created or written (a bind mount owned by another user, a read-only volume) stops the start with one
// clear sentence naming the folder, the user and the fix, instead of a SQLite or multer error on the first call.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

export class StartupError extends Error {
  override readonly name = 'StartupError';
}

function whoAmI(): string {
  try {
    const { username, uid, gid } = os.userInfo();
    return `user ${username} (uid ${uid}, gid ${gid})`;
  } catch {
    const uid = typeof process.getuid === 'function' ? process.getuid() : undefined;
    return uid === undefined ? 'this user' : `uid ${uid}`;
  }
}

function hint(dir: string): string {
  const uid = typeof process.getuid === 'function' ? process.getuid() : undefined;
  const gid = typeof process.getgid === 'function' ? process.getgid() : undefined;
  const owner = uid === undefined ? '' : ` (e.g. \`chown -R ${uid}:${gid} <host folder>\` for a bind mount, or use a named volume)`;
  return `make ${dir} writable by this user${owner}, or point the variable at a writable folder`;
}

/**
 * Creates `dir` when missing and proves it writable by creating and removing a file in it; files listed in
 * `mustBeWritable` (relative to dir) must be writable when they exist. Throws StartupError with the reason.
 */
export function assertWritableDir(dir: string, variable: string, mustBeWritable: string[] = []): void {
  const shown = `${variable}=${dir}`;
  try {
    fs.mkdirSync(dir, { recursive: true });
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code ?? String(err);
    throw new StartupError(`${shown} cannot be created by ${whoAmI()} (${code}): ${hint(path.dirname(dir))}`);
  }
  const probe = path.join(dir, `.write-test-${process.pid}-${Date.now()}`);
  try {
    fs.writeFileSync(probe, '');
    fs.rmSync(probe, { force: true });
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code ?? String(err);
    throw new StartupError(`${shown} is not writable by ${whoAmI()} (${code}): ${hint(dir)}`);
  }
  for (const name of mustBeWritable) {
    const file = path.join(dir, name);
    try {
      fs.accessSync(file, fs.constants.R_OK | fs.constants.W_OK);
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code;
      if (code === 'ENOENT') continue;
      throw new StartupError(`${file} (in ${shown}) is not readable and writable by ${whoAmI()} (${code}): ${hint(dir)}`);
    }
  }
}
