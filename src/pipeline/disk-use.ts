// The disk a file run writes besides its input (the output file, and with a loudness target two float spools), taken
// from the free-disk floor's budget (TMP_MIN_FREE_DISK_MB, storage/disk-budget.ts) before it is written: reserved at
// once, before anything is decoded, when the probe gives the duration, then taken chunk by chunk (past the estimate
// too, for a header that lied). InsufficientStorageError when the floor would be crossed.
import { FORMATS, type OutputFormat } from '../audio/formats';
import { InsufficientStorageError, type DiskBudget, type SpaceClaim } from '../storage/disk-budget';

export interface DiskShape {
  format: OutputFormat;
  channels: number;
  /** The rate frames are counted at (the model's), and the output's. */
  modelRate: number;
  outputRate: number;
  /** A loudness target: the input and the cleaned audio go through float32 spools first. */
  spools: boolean;
}

/** Bytes written per frame at the model's rate: an upper bound for lossless formats, the bitrate for lossy ones. */
export function bytesPerFrame(shape: DiskShape): number {
  const spec = FORMATS[shape.format];
  const perOutputSample = spec.lossy ? (spec.bitratePerChannel ?? 64000) / 8 / shape.outputRate : 2;
  const output = shape.channels * (shape.outputRate / shape.modelRate) * perOutputSample;
  return output + (shape.spools ? 2 * 4 * shape.channels : 0);
}

const SHORT = "the server is short of disk space for this file's output (TMP_DIR would drop below TMP_MIN_FREE_DISK_MB); retry later";

/** One run's share of the budget: reserved at its start, taken chunk by chunk, released at its end. */
export class RunDiskUse {
  /** Frames whose bytes were taken. */
  private covered = 0;

  private constructor(
    private readonly claim: SpaceClaim,
    private readonly perFrame: number,
  ) {}

  /**
   * Before anything is decoded: reserves the estimate for `durationS` (when the probe gave it) at once, and throws
   * InsufficientStorageError when it does not fit above the floor.
   */
  static async start(budget: Pick<DiskBudget, 'open'>, shape: DiskShape, durationS: number | null): Promise<RunDiskUse> {
    const perFrame = bytesPerFrame(shape);
    const claim = await budget.open(durationS === null ? undefined : Math.ceil(durationS * shape.modelRate * perFrame));
    if (!claim) throw new InsufficientStorageError(SHORT);
    return new RunDiskUse(claim, perFrame);
  }

  /** While decoding: `frames` read so far; their bytes are taken (from the reservation first). */
  async cover(frames: number): Promise<void> {
    if (frames <= this.covered) return;
    const bytes = Math.ceil((frames - this.covered) * this.perFrame);
    this.covered = frames;
    if (!(await this.claim.take(bytes))) throw new InsufficientStorageError(SHORT);
  }

  release(): void {
    this.claim.release();
  }
}
