// Cleaning up after a write stream that failed: a job upload (api/) or a URL download (outbound/) leaves no partial
// file behind. Here, below both folders, because both use it.
import fs from 'node:fs';

/**
 * Removes the file a write stream was writing when the write failed. The stream opens its file asynchronously, and
 * a file removed before that open completes is created again by it, so this waits until the stream has closed.
 */
export async function removeFailedWrite(stream: fs.WriteStream, file: string): Promise<void> {
  stream.destroy();
  if (!stream.closed) await new Promise<void>((resolve) => stream.once('close', () => resolve()));
  await fs.promises.rm(file, { force: true });
}
