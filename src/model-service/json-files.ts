// Sends JSON whose `audio_base64` strings are files on disk (or small outputs kept in memory), base64-encoded while
// streaming: a 100 MB output never becomes a 133 MB string in memory. Content-Length is exact and known up front.
import crypto from 'node:crypto';
import fs from 'node:fs';
import fsp from 'node:fs/promises';
import { once } from 'node:events';
import type { Response } from 'express';
import type { MemoryFile } from '../audio/memory-file';

/** A file's bytes in the JSON: a path, or a file in memory. */
export class FileBase64 {
  constructor(readonly source: string | MemoryFile) {}
}

// 3-byte multiples so each chunk encodes without padding until the last.
const READ_CHUNK = 3 * 64 * 1024;

async function writeChunk(res: Response, chunk: string | Buffer): Promise<void> {
  if (!res.write(chunk)) {
    await Promise.race([once(res, 'drain'), once(res, 'close')]);
    if (res.destroyed) throw new Error('client closed the connection');
  }
}

/** The bytes of `source`: a file read READ_CHUNK at a time, or the pieces a MemoryFile holds. */
async function* piecesOf(source: string | MemoryFile): AsyncGenerator<Buffer> {
  if (typeof source !== 'string') {
    for (const piece of source.pieces()) yield piece;
    return;
  }
  for await (const data of fs.createReadStream(source, { highWaterMark: READ_CHUNK })) yield data as Buffer;
}

async function streamBase64(res: Response, source: string | MemoryFile): Promise<void> {
  let carry: Buffer = Buffer.alloc(0);
  for await (const data of piecesOf(source)) {
    const buf = carry.length ? Buffer.concat([carry, data]) : data;
    const usable = buf.length - (buf.length % 3);
    carry = buf.subarray(usable);
    if (usable) await writeChunk(res, buf.subarray(0, usable).toString('base64'));
  }
  if (carry.length) await writeChunk(res, carry.toString('base64'));
}

/**
 * Serialises `value` with JSON.stringify, except that every FileBase64 inside it becomes a JSON string holding
 * the file's bytes in base64.
 */
export async function sendJsonWithFiles(res: Response, status: number, value: unknown): Promise<void> {
  const nonce = crypto.randomBytes(8).toString('hex');
  const files: Array<string | MemoryFile> = [];
  const text = JSON.stringify(value, (_key, v: unknown) => {
    if (v instanceof FileBase64) {
      files.push(v.source);
      return `\u0000${nonce}:${files.length - 1}`;
    }
    return v;
  });
  // JSON.stringify writes U+0000 as the six characters \u0000, which client strings cannot produce with our nonce.
  const pieces = text.split(new RegExp(`"\\\\u0000${nonce}:\\d+"`));
  const sizes = await Promise.all(files.map(async (f) => (typeof f === 'string' ? (await fsp.stat(f)).size : f.size)));
  let length = 0;
  for (const piece of pieces) length += Buffer.byteLength(piece);
  for (const size of sizes) length += 2 + 4 * Math.ceil(size / 3);

  res.status(status);
  res.setHeader('Content-Type', 'application/json; charset=utf-8');
  res.setHeader('Content-Length', String(length));
  for (let i = 0; i < pieces.length; i++) {
    await writeChunk(res, pieces[i]);
    if (i < files.length) {
      await writeChunk(res, '"');
      await streamBase64(res, files[i]);
      await writeChunk(res, '"');
    }
  }
  res.end();
}
