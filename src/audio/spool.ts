// A temporary file of interleaved float32 frames: loudness normalisation needs the whole cleaned file measured before
// its gain is known, so the cleaned audio waits here (on disk, not in memory) between the two passes. It costs
// 4 bytes per sample per channel at the model's rate (about 230 MB per hour of mono 16 kHz audio) for the length of
// the call, and is removed afterwards whatever happens.
import fs from 'node:fs';
import { deinterleave, interleave } from '../dsp/interleave';

export class FloatSpool {
  private frames = 0;
  private constructor(
    private readonly handle: fs.promises.FileHandle,
    readonly path: string,
    readonly channels: number,
  ) {}

  static async create(path: string, channels: number): Promise<FloatSpool> {
    return new FloatSpool(await fs.promises.open(path, 'w+'), path, channels);
  }

  get length(): number {
    return this.frames;
  }

  async write(planar: Float32Array[]): Promise<void> {
    const n = planar[0]?.length ?? 0;
    if (n === 0) return;
    const bytes = interleave(planar);
    await this.handle.write(bytes, 0, bytes.length, this.frames * this.channels * 4);
    this.frames += n;
  }

  /** Reads the frames back in order, `chunkFrames` at a time, as fresh planar arrays. */
  async *read(chunkFrames: number): AsyncGenerator<Float32Array[]> {
    const C = this.channels;
    const buf = Buffer.alloc(chunkFrames * C * 4);
    for (let start = 0; start < this.frames; start += chunkFrames) {
      const n = Math.min(chunkFrames, this.frames - start);
      const { bytesRead } = await this.handle.read(buf, 0, n * C * 4, start * C * 4);
      if (bytesRead !== n * C * 4) throw new Error(`spool file ${this.path} is short: read ${bytesRead} of ${n * C * 4} bytes`);
      yield deinterleave(buf.subarray(0, n * C * 4), C);
    }
  }

  /** Closes and removes the file; safe to call repeatedly. */
  async dispose(): Promise<void> {
    await this.handle.close().catch(() => undefined);
    await fs.promises.rm(this.path, { force: true }).catch(() => undefined);
  }
}
