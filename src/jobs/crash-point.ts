// Fault injection for the recovery tests (JOBS_CRASH_AT, never set in service): the process ends right there as
// kill -9 would (no handler runs, nothing is flushed), between two writes that live in different databases.
import type { JobsConfig, JobsCrashPoint } from '../config';

export function crashPoint(config: Pick<JobsConfig, 'crashAt'>, here: JobsCrashPoint): void {
  if (config.crashAt === here) process.kill(process.pid, 'SIGKILL');
}
