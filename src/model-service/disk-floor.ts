// The free-disk floor of synchronous calls (TMP_MIN_FREE_DISK_MB on TMP_DIR): a call is refused before its upload is
// read when the upload would not fit above the floor, and its output and spools take their bytes from the same
// budget as the pipeline writes them (pipeline/disk-use.ts). Refusals are 503 `unavailable` with Retry-After: the
// shortage is this server's and passes, so the gateway tries another replica and the client retries (spec part 7).
import type { Request } from 'express';
import type { Config } from '../config';
import { DiskBudget, freeBytesOf, InsufficientStorageError } from '../storage/disk-budget';

/** Seconds a client is told to wait when the disk is short. */
export const DISK_RETRY_AFTER_S = 30;

export class RequestDiskFloor {
  /** What the pipeline's runs take their output's bytes from. */
  readonly budget: DiskBudget;

  constructor(config: Pick<Config, 'tmpDir' | 'tmpMinFreeDiskBytes'>, statFree = () => freeBytesOf(config.tmpDir)) {
    // A file system statfs cannot read is not a reason to refuse calls: the floor is then not enforced (writes that
    // fail still fail the call, as before the floor existed).
    const free = async (): Promise<number> => statFree().catch(() => Number.POSITIVE_INFINITY);
    this.budget = new DiskBudget(free, config.tmpMinFreeDiskBytes);
  }

  /**
   * At a call's start, before its upload is read: InsufficientStorageError when the declared upload (Content-Length)
   * would not fit above the floor. (An upload kept in memory takes no disk; one written to TMP_DIR shows in the next
   * statfs reading.)
   */
  async check(req: Request): Promise<void> {
    const declared = Number(req.headers['content-length']);
    const room = await this.budget.headroom();
    if (room <= 0 || (Number.isFinite(declared) && declared > room)) {
      throw new InsufficientStorageError('the server is short of disk space for this upload (TMP_DIR is near TMP_MIN_FREE_DISK_MB); retry later');
    }
  }
}
