// The default of WORKERS from a container's CPU quota (src/config/cpu-quota.ts), fed fake cgroup trees: cgroup v2
// cpu.max, v1 cfs_quota_us/cfs_period_us, a limit on a parent cgroup, and no cgroup files at all.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { cgroupCpuLimit, defaultWorkers, loadConfig, type CgroupPaths } from '../../src/config';
import { hostCores, SYSTEM_CGROUP } from '../../src/config/cpu-quota';

let dir: string;
beforeEach(() => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ns-cgroup-'));
});
afterEach(() => fs.rmSync(dir, { recursive: true, force: true }));

/** A fake tree: files relative to the cgroup mount, and the /proc/self/cgroup text. */
function tree(files: Record<string, string>, self = '0::/\n'): CgroupPaths {
  const root = path.join(dir, 'cgroup');
  for (const [name, text] of Object.entries(files)) {
    fs.mkdirSync(path.dirname(path.join(root, name)), { recursive: true });
    fs.writeFileSync(path.join(root, name), text);
  }
  fs.mkdirSync(root, { recursive: true });
  fs.writeFileSync(path.join(dir, 'self'), self);
  return { root, self: path.join(dir, 'self') };
}

describe('WORKERS default from the cgroup CPU quota', () => {
  const CORES = 8;

  test.each([
    ['200000 100000', 2, 2],
    ['max 100000', null, CORES],
    ['50000 100000', 0.5, 1],
    ['150000 100000', 1.5, 1],
    ['1600000 100000', 16, CORES],
  ])('cgroup v2 cpu.max "%s": limit %p, %p workers on an 8-core host', (cpuMax, limit, workers) => {
    const paths = tree({ 'cpu.max': `${cpuMax}\n` });
    expect(cgroupCpuLimit(paths)).toBe(limit);
    expect(defaultWorkers(paths, CORES)).toBe(workers);
  });

  test.each([
    ['200000', '100000', 2],
    ['-1', '100000', CORES],
    ['50000', '100000', 1],
  ])('cgroup v1 cfs_quota_us %s / cfs_period_us %s: %p workers', (quota, period, workers) => {
    const paths = tree({ 'cpu/cpu.cfs_quota_us': quota, 'cpu/cpu.cfs_period_us': period }, '2:cpu,cpuacct:/\n1:memory:/\n');
    expect(defaultWorkers(paths, CORES)).toBe(workers);
  });

  test('a limit on a parent cgroup (a systemd slice) applies to the service below it', () => {
    const paths = tree(
      { 'cpu.max': 'max 100000', 'nsm.slice/cpu.max': '300000 100000', 'nsm.slice/nsm.service/cpu.max': 'max 100000' },
      '0::/nsm.slice/nsm.service\n',
    );
    expect(cgroupCpuLimit(paths)).toBe(3);
    expect(defaultWorkers(paths, CORES)).toBe(3);
  });

  test('v2 is read before v1, and no cgroup files at all means the cores', () => {
    const both = tree({ 'cpu.max': '100000 100000', 'cpu/cpu.cfs_quota_us': '400000', 'cpu/cpu.cfs_period_us': '100000' });
    expect(defaultWorkers(both, CORES)).toBe(1);
    const none: CgroupPaths = { root: path.join(dir, 'nothing'), self: path.join(dir, 'nothing', 'self') };
    expect(cgroupCpuLimit(none)).toBeNull();
    expect(defaultWorkers(none, CORES)).toBe(CORES);
  });

  test('loadConfig uses it when WORKERS is unset, and WORKERS wins when set', () => {
    expect(loadConfig({}).workers).toBe(defaultWorkers(SYSTEM_CGROUP, hostCores()));
    expect(loadConfig({ WORKERS: '3' }).workers).toBe(3);
  });
});
