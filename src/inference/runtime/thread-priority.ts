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
 * Lowers the calling thread: niceness `nice` (when > 0), then SCHED_IDLE when `idle`. Either may not be allowed (a
 * seccomp profile, no chrt, another OS); the thread then runs as it could, and the answer says how.
 */
export async function lowerThisThread(nice: number, idle: boolean): Promise<ThreadPriority> {
  const tid = threadId();
  let niceNow = 0;
  if (nice > 0) {
    try {
      // On Linux the niceness is a thread's own: setpriority(PRIO_PROCESS, 0) from a worker changes that worker only.
      os.setPriority(0, nice);
      niceNow = nice;
    } catch {
      // not permitted
    }
  }
  let idleNow = false;
  if (idle && tid !== null && CHRT_PATH) {
    const chrt = CHRT_PATH;
    idleNow = await new Promise<boolean>((resolve) =>
      execFile(chrt, ['--idle', '-p', '0', String(tid)], { timeout: 5000 }, (err) => resolve(!err)),
    );
  }
  return { tid, nice: niceNow, idle: idleNow };
}

/**
 * Every thread of process `pid` to SCHED_IDLE (chrt --all-tasks); threads it starts later inherit the policy. For npm
 * start's file-work process, lowered once it is ready (file-process/): a process that starts under SCHED_IDLE loads
 * its models only with CPU time no normal thread of the box wants, and the server listens only once it is ready.
 */
export function lowerProcess(pid: number): Promise<boolean> {
  const chrt = CHRT_PATH;
  if (chrt === null) return Promise.resolve(false);
  return new Promise<boolean>((resolve) => execFile(chrt, ['--idle', '--all-tasks', '-p', '0', String(pid)], { timeout: 5000 }, (err) => resolve(!err)));
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
