// The scheduling priority of a file worker thread (Linux): its niceness (FILE_WORK_NICE), and SCHED_IDLE
// (FILE_WORK_IDLE), under which the thread only gets CPU time that no normal thread of the box wants. Niceness alone
// still gives a busy file worker a share whenever it competes (weights ~1:9 at nice 10), and a live tick that has to
// wait behind it is late; with SCHED_IDLE a waking live worker or HTTP thread takes the core at once.
// Node has no call for a thread's policy, so util-linux's chrt (config/system-tools.ts) sets it on this thread's id (a
// lowering: no privilege).
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { CHRT_PATH } from '../../config/system-tools';

/** This thread's kernel id (Linux), or null. */
export function threadId(): number | null {
  try {
    return Number(path.basename(fs.readlinkSync('/proc/thread-self')));
  } catch {
    return null;
  }
}

/** What the thread ended up with: its niceness and whether it runs under SCHED_IDLE. */
export interface ThreadPriority {
  tid: number | null;
  nice: number;
  idle: boolean;
}

/**
 * The calling thread's niceness to `nice`; the niceness it has afterwards (0 where that is not allowed: a seccomp
 * profile, another OS). On Linux the niceness is a thread's own: setpriority(PRIO_PROCESS, 0) from a worker changes
 * that worker only.
 */
export function niceThisThread(nice: number): number {
  try {
    os.setPriority(0, nice);
    return nice;
  } catch {
    return 0;
  }
}

/** The calling thread to SCHED_IDLE; whether it took (no chrt, or not allowed: it runs as it was). */
export function idleThisThread(): Promise<boolean> {
  const tid = threadId();
  return tid === null ? Promise.resolve(false) : chrtIdle(['-p', '0', String(tid)]);
}

/**
 * Every thread of process `pid` to SCHED_IDLE (chrt --all-tasks); threads it starts later inherit the policy. For npm
 * start's file-work process, lowered once it is ready (file-process/): a process that starts under SCHED_IDLE loads
 * its models only with CPU time no normal thread of the box wants, and the server listens only once it is ready.
 */
export function idleProcess(pid: number): Promise<boolean> {
  return chrtIdle(['--all-tasks', '-p', '0', String(pid)]);
}

function chrtIdle(args: string[]): Promise<boolean> {
  const chrt = CHRT_PATH;
  if (chrt === null) return Promise.resolve(false);
  return new Promise<boolean>((resolve) => execFile(chrt, ['--idle', ...args], { timeout: 5000 }, (err) => resolve(!err)));
}

/** A thread's niceness and policy as the kernel reports them (/proc/PID/task/TID/stat), for checks; null if gone. */
export function readThreadPriority(tid: number, pid = process.pid): { nice: number; policy: number } | null {
  let stat: string;
  try {
    stat = fs.readFileSync(`/proc/${pid}/task/${tid}/stat`, 'utf8');
  } catch {
    return null;
  }
  // Fields after "(comm)": state is field 3, so field k is at index k - 3; nice is 19, policy 41 (5: SCHED_IDLE).
  const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return { nice: Number(f[19 - 3]), policy: Number(f[41 - 3]) };
}
