// When `nsm jobs wait` and `submit --wait` ask about a job again. GET /jobs/{id} gives no Retry-After, so the CLI
// starts short (a 0.2 s job is seen finished within about 0.1 s of the end, not at the next 2 s tick), grows each wait
// by half up to the cap (--interval, 2 s), and while the job runs polls no later than its progress says it will end.
export const FIRST_POLL_S = 0.1;
export const POLL_GROWTH = 1.5;

export interface PolledJob {
  status: string;
  /** 0–1 of the current attempt. */
  progress?: number;
}

export class PollSchedule {
  private waitS = 0;
  private runningSince: { atMs: number; progress: number } | null = null;
  /** The progress an early poll was last aimed from: a job that stays there (finishing, encoding) is not hammered. */
  private aimedFrom = -1;

  /** `capS`: the longest wait between two polls (--interval). */
  constructor(private readonly capS: number) {}

  /** Seconds to wait after seeing `job` at `nowMs`. */
  next(job: PolledJob, nowMs: number): number {
    this.waitS = this.waitS === 0 ? FIRST_POLL_S : this.waitS * POLL_GROWTH;
    let wait = Math.min(this.capS, this.waitS);
    const p = job.progress ?? 0;
    if (job.status !== 'running') {
      this.runningSince = null;
    } else if (this.runningSince === null || p < this.runningSince.progress) {
      this.runningSince = { atMs: nowMs, progress: p }; // a new attempt starts again from 0
    } else if (p > this.runningSince.progress && p < 1 && p !== this.aimedFrom) {
      // The rate so far says how long is left: poll then, if that is sooner than the schedule.
      const rate = (p - this.runningSince.progress) / Math.max(1, nowMs - this.runningSince.atMs);
      const leftS = (1 - p) / rate / 1000;
      wait = Math.min(wait, Math.max(FIRST_POLL_S, leftS));
      this.aimedFrom = p;
    }
    return Math.min(this.capS, wait);
  }
}
