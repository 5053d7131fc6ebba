// System programs the server runs beside ffmpeg, found once: util-linux's chrt, which lowers file work to Linux's
// SCHED_IDLE policy (FILE_WORK_IDLE: the file workers' threads, inference/thread-priority.ts, and their ffmpeg
// children, audio/ffmpeg.ts). Debian has it in every image; null where it is missing (file work is then niced only).
import fs from 'node:fs';

export const CHRT_PATH: string | null =
  process.platform === 'linux' ? (['/usr/bin/chrt', '/bin/chrt'].find((p) => fs.existsSync(p)) ?? null) : null;
