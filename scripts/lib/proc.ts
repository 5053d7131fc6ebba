// What /proc says about a server the bench or the soak started: the processes below it (npm start's file-work
// process, ffmpeg) and their CPU time. Linux only, as those scripts are.
import fs from 'node:fs';

/** A process's descendants (children of every thread, recursively) with their command names. */
export function descendants(pid: number): Array<{ pid: number; comm: string }> {
  const out: Array<{ pid: number; comm: string }> = [];
  let tasks: string[] = [];
  try {
    tasks = fs.readdirSync(`/proc/${pid}/task`);
  } catch {
    return out; // ended meanwhile
  }
  for (const task of tasks) {
    let list = '';
    try {
      list = fs.readFileSync(`/proc/${pid}/task/${task}/children`, 'utf8');
    } catch {
      continue;
    }
    for (const child of list.split(' ').filter(Boolean).map(Number)) {
      let comm = '';
      try {
        comm = fs.readFileSync(`/proc/${child}/comm`, 'utf8').trim();
      } catch {
        continue; // ended meanwhile
      }
      out.push({ pid: child, comm }, ...descendants(child));
    }
  }
  return out;
}

/**
 * CPU ms of a process and of the processes below it: those running (npm start's file-work process) and those
 * already reaped (ffmpeg, counted in their parent's cutime and cstime).
 */
export function treeCpuMs(pid: number): number {
  let ticks = 0;
  for (const p of [pid, ...descendants(pid).map((d) => d.pid)]) {
    try {
      const stat = fs.readFileSync(`/proc/${p}/stat`, 'utf8');
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      ticks += Number(fields[11]) + Number(fields[12]) + Number(fields[13]) + Number(fields[14]); // utime stime cutime cstime
    } catch {
      // ended meanwhile
    }
  }
  return (ticks * 1000) / 100; // CLK_TCK is 100 on Linux
}
