// A file held in memory, with the few FileHandle methods the in-process WAV reader and writer use (positional read
// and write, stat, close). Small uploads are denoised from and into these instead of temp files: on a 10 s clip the
// temp files' syscalls (create, write, read back, stream out, remove) cost more CPU than the WAV work itself.
// Callers bound the size: only uploads below the model service's in-memory limit, and their same-length outputs.

export class MemoryFile {
  private chunks: Buffer[];
  private length: number;

  /** A file with `initial` (one Buffer, or pieces in order) as its content, not copied: the caller hands it over. */
  constructor(initial: Buffer | readonly Buffer[] = []) {
    this.chunks = (Buffer.isBuffer(initial) ? [initial] : [...initial]).filter((b) => b.length > 0);
    this.length = this.chunks.reduce((n, b) => n + b.length, 0);
  }

  get size(): number {
    return this.length;
  }

  async stat(): Promise<{ size: number }> {
    return { size: this.length };
  }

  /** Like FileHandle.read: copies up to `length` bytes from `position` into `buffer` at `offset`. */
  async read(buffer: Buffer, offset: number, length: number, position: number): Promise<{ bytesRead: number }> {
    let bytesRead = 0;
    let chunkStart = 0;
    for (const chunk of this.chunks) {
      if (bytesRead === length) break;
      const chunkEnd = chunkStart + chunk.length;
      const from = position + bytesRead;
      if (from < chunkEnd) {
        const n = Math.min(length - bytesRead, chunkEnd - from);
        chunk.copy(buffer, offset + bytesRead, from - chunkStart, from - chunkStart + n);
        bytesRead += n;
      }
      chunkStart = chunkEnd;
    }
    return { bytesRead };
  }

  /**
   * Like FileHandle.write at a position: appends at the end (taking `buffer`'s bytes over, not copying them), or
   * overwrites bytes already written (a header patched at close). Writing past the end, leaving a hole, is refused.
   */
  async write(buffer: Buffer, offset: number, length: number, position: number): Promise<{ bytesWritten: number }> {
    const bytes = buffer.subarray(offset, offset + length);
    if (position === this.length) {
      if (bytes.length > 0) this.chunks.push(bytes);
      this.length += bytes.length;
      return { bytesWritten: length };
    }
    if (position > this.length) throw new Error('MemoryFile: write past the end');
    let done = 0;
    let chunkStart = 0;
    for (const chunk of this.chunks) {
      const chunkEnd = chunkStart + chunk.length;
      const at = position + done;
      if (at < chunkEnd && done < bytes.length) {
        const n = Math.min(bytes.length - done, chunkEnd - at);
        bytes.copy(chunk, at - chunkStart, done, done + n);
        done += n;
      }
      chunkStart = chunkEnd;
    }
    if (done < bytes.length) await this.write(bytes, done, bytes.length - done, this.length);
    return { bytesWritten: length };
  }

  async close(): Promise<void> {
    // Nothing to release: the content stays readable through contents().
  }

  /** The content in the pieces it is held in (no copy). */
  pieces(): readonly Buffer[] {
    return this.chunks;
  }

  /** The content as one Buffer (one copy when it was written in pieces). */
  contents(): Buffer {
    if (this.chunks.length !== 1) this.chunks = [Buffer.concat(this.chunks, this.length)];
    return this.chunks[0] ?? Buffer.alloc(0);
  }
}
