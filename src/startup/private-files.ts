// What the service writes holds secrets and customers' audio (gateway.db: key hashes; jobs.db: webhook secrets in
// clear; uploads, job inputs and results; backups), so it is readable by the service's user only: 0600 files, 0700
// folders. Entry points set the umask (SQLite gives -wal/-shm the mode of their database); what an older version left
// group- or world-readable is tightened at start.
import fs from 'node:fs';
import path from 'node:path';

export const PRIVATE_FILE_MODE = 0o600;
export const PRIVATE_DIR_MODE = 0o700;

/** From now on this process, and the children it starts (ffmpeg, the file-work process), create 0600 / 0700. */
export function usePrivateUmask(): void {
  process.umask(0o077);
}

const ownUid = typeof process.getuid === 'function' ? process.getuid() : null;

/** Drops the group and other bits of an entry this user owns; a symlink is left alone. True when it changed. */
function tightenEntry(p: string, st: fs.Stats): boolean {
  if (st.isSymbolicLink() || (st.mode & 0o077) === 0 || (ownUid !== null && st.uid !== ownUid)) return false;
  try {
    fs.chmodSync(p, st.mode & 0o7700);
    return true;
  } catch {
    return false; // gone meanwhile, or not ours to change
  }
}

/** Tightens `root` (when it exists) and, with `recursive`, everything below it. Returns how many entries changed. */
export function tightenTree(root: string, recursive: boolean): number {
  let changed = 0;
  const visit = (p: string): void => {
    let st: fs.Stats;
    try {
      st = fs.lstatSync(p);
    } catch {
      return;
    }
    if (tightenEntry(p, st)) changed++;
    if (!st.isDirectory() || !recursive) return;
    let names: string[] = [];
    try {
      names = fs.readdirSync(p);
    } catch {
      return;
    }
    for (const name of names) visit(path.join(p, name));
  };
  visit(root);
  return changed;
}

/** A database file and SQLite's companions (-wal, -shm, -journal) tightened when they exist. */
export function tightenDatabaseFiles(file: string): void {
  for (const p of [file, `${file}-wal`, `${file}-shm`, `${file}-journal`]) tightenTree(p, false);
}

/**
 * At start: DATA_DIR and everything in it (databases, the admin secret, job files, backups kept there), JOBS_DIR and
 * the top of TMP_DIR when they lie elsewhere (request folders come and go, each created 0700).
 */
export function tightenDataDirs(dirs: { dataDir: string; tmpDir?: string; jobsDir?: string }): number {
  const inside = (p: string) => p === dirs.dataDir || p.startsWith(dirs.dataDir + path.sep);
  let changed = tightenTree(dirs.dataDir, true);
  if (dirs.jobsDir && !inside(dirs.jobsDir)) changed += tightenTree(dirs.jobsDir, true);
  if (dirs.tmpDir && !inside(dirs.tmpDir)) changed += tightenTree(dirs.tmpDir, false);
  return changed;
}
