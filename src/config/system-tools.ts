// System programs the server runs beside ffmpeg, found once: util-linux's chrt, which lowers file work to Linux's
// SCHED_IDLE policy (FILE_WORK_IDLE: the file workers' threads once warm, inference/thread-priority.ts, their ffmpeg
// children, audio/ffmpeg.ts, and npm start's file-work process once ready, file-process/). Debian has it in every
// image; null where it is missing (file work is then niced only).
import fs from 'node:fs';

export const CHRT_PATH: string | null =
  process.platform === 'linux' ? (['/usr/bin/chrt', '/bin/chrt'].find((p) => fs.existsSync(p)) ?? null) : null;

/**
 * The command line that starts `command args` under SCHED_IDLE when `idle` and chrt is there, else as it is. chrt
 * sets the policy and execs the command in the same process (same pid: signals, exit codes and IPC are the command's).
 */
export function idleCommandLine(idle: boolean, command: string, args: string[]): [string, string[]] {
  return idle && CHRT_PATH ? [CHRT_PATH, ['--idle', '0', command, ...args]] : [command, args];
}
