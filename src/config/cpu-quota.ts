// The default number of inference workers: the CPUs this process may really use. In a container limited with
// `--cpus 2` / compose `cpus: 2` the kernel's CFS quota says 2 while os.availableParallelism() on Node 20 still
// counts every core of the host (libuv reads the quota only from 1.49, Node 22 on), so the quota is read here.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

/** Where the kernel tells a process its cgroups; injectable so tests can feed a fake tree. */
export interface CgroupPaths {
  /** Mount point of the cgroup file systems (v2: the unified tree; v1: one folder per controller below it). */
  root: string;
  /** This process's membership, `/proc/self/cgroup` ("0::/path" for v2, "N:cpu,cpuacct:/path" for v1). */
  self: string;
}

export const SYSTEM_CGROUP: CgroupPaths = { root: '/sys/fs/cgroup', self: '/proc/self/cgroup' };

function read(file: string): string | null {
  try {
    return fs.readFileSync(file, 'utf8').trim();
  } catch {
    return null;
  }
}

/** CPUs one quota allows, from a quota and a period in µs; null when unlimited ("max", -1) or unreadable. */
function quotaCpus(quota: string | null | undefined, period: string | null | undefined): number | null {
  if (!quota || !period || quota === 'max' || !/^\d+$/.test(quota) || !/^\d+$/.test(period)) return null;
  const q = Number(quota);
  const p = Number(period);
  return q > 0 && p > 0 ? q / p : null;
}

/**
 * The folders to look in for one hierarchy, own cgroup first, then each parent up to the mount point (a limit
 * set on a parent, such as a systemd slice, applies too). Inside a container the own path is usually "/" (cgroup
 * namespace); when the own path does not exist under the mount (another namespace), only the mount point is read.
 */
function candidates(mount: string, own: string | undefined): string[] {
  const dirs: string[] = [];
  if (own && own !== '/') {
    let dir = path.join(mount, own);
    if (fs.existsSync(dir)) {
      while (dir.length > mount.length && dir.startsWith(mount)) {
        dirs.push(dir);
        dir = path.dirname(dir);
      }
    }
  }
  dirs.push(mount);
  return dirs;
}

/** The smallest of the numbers, or null when there is none. */
function smallest(values: (number | null)[]): number | null {
  const limits = values.filter((v): v is number => v !== null);
  return limits.length ? Math.min(...limits) : null;
}

/**
 * CPUs the cgroup CPU quota allows this process (fractional, e.g. 1.5), or null when there is no quota or no cgroup
 * file to read. cgroup v2 `cpu.max` ("200000 100000" = 2 CPUs, "max 100000" = no limit) is read first, then v1's
 * `cpu.cfs_quota_us` / `cpu.cfs_period_us` (quota -1 = no limit).
 */
export function cgroupCpuLimit(paths: CgroupPaths = SYSTEM_CGROUP): number | null {
  const membership = (read(paths.self) ?? '').split('\n').map((line) => line.split(':'));
  const v2Own = membership.find((m) => m[0] === '0' && m[1] === '')?.[2];
  const v2 = smallest(
    candidates(paths.root, v2Own).map((dir) => {
      const [quota, period] = (read(path.join(dir, 'cpu.max')) ?? '').split(/\s+/);
      return quotaCpus(quota, period);
    }),
  );
  if (v2 !== null) return v2;
  const v1Own = membership.find((m) => m[1]?.split(',').includes('cpu'))?.[2];
  return smallest(
    candidates(path.join(paths.root, 'cpu'), v1Own).map((dir) =>
      quotaCpus(read(path.join(dir, 'cpu.cfs_quota_us')), read(path.join(dir, 'cpu.cfs_period_us'))),
    ),
  );
}

/** Cores the scheduler lets this process run on (the affinity mask on Linux), whatever the quota. */
export function hostCores(): number {
  return os.availableParallelism ? os.availableParallelism() : os.cpus().length;
}

/**
 * The default of WORKERS: the CPU quota rounded down (a 1.5-CPU quota gets 1 worker: a second one would only be
 * throttled), at least 1, and never more than the cores there are; without a quota, the cores.
 */
export function defaultWorkers(paths: CgroupPaths = SYSTEM_CGROUP, cores: number = hostCores()): number {
  const limit = cgroupCpuLimit(paths);
  if (limit === null) return cores;
  return Math.max(1, Math.min(cores, Math.floor(limit)));
}
