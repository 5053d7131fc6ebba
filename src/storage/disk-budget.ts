// A free-disk floor, held while bytes arrive: JOBS_MIN_FREE_DISK_MB for job files (every job upload and URL download
// of this process), TMP_MIN_FREE_DISK_MB for synchronous calls' request files (their uploads, outputs and spools). A
// writer takes its bytes from one budget before writing them, so concurrent writers see each other and chunked
// uploads count like declared ones. Free space comes from statfs (at most every REFRESH_MS); what was taken since
// that reading, and what declared writers reserved but have not written yet, is subtracted from it.
import fs from 'node:fs';

/**
 * Writing would take the disk below the floor: 507 insufficient_storage for a job (a URL fetch retries later), 503
 * with Retry-After for a synchronous call.
 */
export class InsufficientStorageError extends Error {
  override readonly name = 'InsufficientStorageError';
}

/** One writer's share of the budget: bytes are taken before they are written; release() ends it. */
export interface SpaceClaim {
  /** Takes `n` bytes (from the reservation first); false, taking nothing, when they would cross the floor. */
  take(n: number): Promise<boolean>;
  /** Gives back what was reserved and not written. Idempotent. */
  release(): void;
}

/** statfs is cheap, but not free: one reading serves every chunk of every writer for this long. */
export const REFRESH_MS = 250;

/** Bytes free for this process on the file system of `dir` (created if missing). */
export async function freeBytesOf(dir: string): Promise<number> {
  await fs.promises.mkdir(dir, { recursive: true });
  const s = await fs.promises.statfs(dir);
  return Number(s.bavail) * Number(s.bsize);
}

export class DiskBudget {
  private free = 0;
  private readAt = Number.NEGATIVE_INFINITY;
  /** Bytes taken since the last statfs reading (may not show in it yet). */
  private taken = 0;
  /** Bytes reserved by declared uploads and not written yet. */
  private reserved = 0;
  private reading: Promise<void> | null = null;

  constructor(
    /** Bytes free for this process on the job files' file system (statfs). */
    private readonly statFree: () => Promise<number>,
    readonly floorBytes: number,
    private readonly now: () => number = Date.now,
  ) {}

  /** Bytes that may still be written before the floor (negative: below it already). */
  async headroom(): Promise<number> {
    await this.fresh();
    return this.free - this.taken - this.reserved - this.floorBytes;
  }

  /**
   * Opens a claim for one writer. With `declared` bytes, they are reserved at once: null when they do not fit, so a
   * declared upload that cannot fit is refused before it starts. Without (chunked), bytes are taken as they come;
   * null when the floor is already reached.
   */
  async open(declared?: number): Promise<SpaceClaim | null> {
    await this.fresh();
    // From here to the reservation nothing awaits: concurrent opens see each other's reservations.
    const room = this.free - this.taken - this.reserved - this.floorBytes;
    const want = declared !== undefined && Number.isFinite(declared) && declared > 0 ? Math.floor(declared) : 0;
    if (room <= 0 || room < want) return null;
    this.reserved += want;
    let left = want;
    let open = true;
    return {
      take: async (n) => {
        if (!open) return false;
        const fromReservation = Math.min(n, left);
        const beyond = n - fromReservation;
        if (beyond > 0) {
          await this.fresh();
          if (this.free - this.taken - this.reserved - beyond < this.floorBytes) return false;
        }
        left -= fromReservation;
        this.reserved -= fromReservation;
        this.taken += n;
        return true;
      },
      release: () => {
        if (!open) return;
        open = false;
        this.reserved -= left;
        left = 0;
      },
    };
  }

  private async fresh(): Promise<void> {
    if (this.now() - this.readAt < REFRESH_MS) return;
    this.reading ??= (async () => {
      // Bytes taken while statfs runs may or may not show in its answer: they stay counted (over-counting is safe).
      const takenBefore = this.taken;
      try {
        this.free = await this.statFree();
        this.taken -= takenBefore;
        this.readAt = this.now();
      } finally {
        this.reading = null;
      }
    })();
    await this.reading;
  }
}
