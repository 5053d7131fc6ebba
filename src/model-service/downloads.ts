// How the model service sends what it made: one file (from memory or from its temp file) with its exact length, or
// denoised.zip streamed while archiver reads each output from its temp file.
import fs from 'node:fs';
import fsp from 'node:fs/promises';
import type { Response } from 'express';
import type archiverType from 'archiver';
import type { MemoryFile } from '../audio/memory-file';
import { contentDisposition } from './names';

// Loaded with the first zip (a batch's download): ~190 ms of CPU that a start-up and a single-file call do not need.
let archiverModule: typeof archiverType | null = null;
const archiver = (): typeof archiverType => (archiverModule ??= require('archiver') as typeof archiverType);

/** What the zip needs of a batch manifest (app.ts's BatchManifest): each item's output name, and the whole as JSON. */
interface ZipManifest {
  items: ReadonlyArray<{ status: 'ok'; index: number; output: string } | { status: 'error' }>;
}

/** The 200 headers of a download: type, exact length, and the file name to save it under. */
function startDownload(
  res: Response,
  size: number,
  contentType: string,
  filename: string,
  disposition: 'attachment' | 'inline' = 'attachment',
): void {
  res.status(200);
  res.setHeader('Content-Type', contentType);
  res.setHeader('Content-Length', String(size));
  const cd = contentDisposition(filename);
  res.setHeader('Content-Disposition', disposition === 'inline' ? cd.replace(/^attachment/, 'inline') : cd);
}

/** Sends an output kept in memory, piece by piece (no copy into one buffer). */
export function sendBytes(res: Response, file: MemoryFile, contentType: string, filename: string): void {
  startDownload(res, file.size, contentType, filename);
  for (const piece of file.pieces()) res.write(piece);
  res.end();
}

/** Streams a file with Content-Length; resolves when the body was handed to the socket or the client left. */
export async function sendFile(
  res: Response,
  filePath: string,
  contentType: string,
  filename: string,
  disposition: 'attachment' | 'inline' = 'attachment',
): Promise<void> {
  const { size } = await fsp.stat(filePath);
  startDownload(res, size, contentType, filename, disposition);
  if (res.req.method === 'HEAD') {
    res.end();
    return;
  }
  await new Promise<void>((resolve) => {
    const input = fs.createReadStream(filePath);
    input.on('error', () => {
      res.destroy();
      resolve();
    });
    res.once('close', () => {
      input.destroy();
      resolve();
    });
    input.pipe(res);
  });
}

/** Streams denoised.zip: archiver reads each output from its temp file while the zip goes out. */
export async function sendZip(res: Response, manifest: ZipManifest, outputs: string[]): Promise<void> {
  res.status(200);
  res.setHeader('Content-Type', 'application/zip');
  res.setHeader('Content-Disposition', contentDisposition('denoised.zip'));
  // Audio barely compresses; a low level keeps CPU for denoising.
  const archive = archiver()('zip', { zlib: { level: 1 } });
  await new Promise<void>((resolve) => {
    archive.on('error', () => {
      res.destroy();
      resolve();
    });
    archive.on('warning', () => undefined);
    res.once('close', () => {
      if (!res.writableFinished) archive.abort();
      resolve();
    });
    archive.pipe(res);
    for (const item of manifest.items) {
      if (item.status === 'ok') archive.file(outputs[item.index], { name: item.output });
    }
    archive.append(JSON.stringify(manifest, null, 2) + '\n', { name: 'manifest.json' });
    void archive.finalize();
  });
}
