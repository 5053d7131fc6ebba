// Soak: what is read from the outside of the processes under test, from /proc and the file system: resident memory,
// open file descriptors and child processes of a pid; entries and bytes under the temp directories.
import fs from 'node:fs';
import path from 'node:path';

export interface ProcStats {
  rssKb: number;
  fds: number;
  /** Live child processes (ffmpeg of the model service, say). */
  children: number;
}

export function procStats(pid: number): ProcStats {
  let rssKb = 0;
  let fds = 0;
  try {
    rssKb = Number(/VmRSS:\s+(\d+) kB/.exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1] ?? 0);
    fds = fs.readdirSync(`/proc/${pid}/fd`).length;
  } catch {
    // gone
  }
  let children = 0;
  for (const entry of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = fs.readFileSync(`/proc/${entry}/stat`, 'utf8');
      const [state, ppid] = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      if (Number(ppid) === pid && state !== 'Z') children++;
    } catch {
      // gone meanwhile
    }
  }
  return { rssKb, fds, children };
}

/** Files and folders under `dirs` (not counting the folders themselves) and their bytes. */
export function dirStats(dirs: string[]): { entries: number; bytes: number } {
  let entries = 0;
  let bytes = 0;
  const walk = (dir: string): void => {
    let names: string[];
    try {
      names = fs.readdirSync(dir);
    } catch {
      return;
    }
    for (const name of names) {
      const full = path.join(dir, name);
      try {
        const st = fs.lstatSync(full);
        entries++;
        if (st.isDirectory()) walk(full);
        else bytes += st.size;
      } catch {
        // removed meanwhile
      }
    }
  };
  for (const d of dirs) walk(d);
  return { entries, bytes };
}
