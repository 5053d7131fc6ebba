// Whether a process id is alive on this host, for the sweeps of what dead processes left behind (request dirs, job
// incoming files, backup temp folders): signal 0 tests without touching the process.

export function processAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    // EPERM: it exists but belongs to someone else.
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}
