// In-process WAV: the header parser and sample reader for uncompressed RIFF/RF64 WAVE files, and a 16-bit PCM writer.
// The file pipeline uses them instead of spawning ffmpeg when a WAV needs no resampling (the common case), because a
// process spawn from the big server process costs more than the audio work of a short clip.
//
// Read: PCM 8 (unsigned) / 16 / 24 / 32-bit and IEEE float 32 / 64-bit, plain or WAVE_FORMAT_EXTENSIBLE (PCM or float
// sub-format), RIFF or RF64 (ds64 sizes). Anything else (ADPCM, µ-law, big-endian RIFX, a `data` chunk before `fmt `,
// a header longer than the bytes given) returns null and the caller hands the file to ffmpeg. The declared data size is
// never trusted: it is clamped to the bytes the file really has, rounded down to whole frames (truncated files, huge or
// "unknown" 0 / 0xFFFFFFFF sizes). Samples convert to float32 exactly as ffmpeg's swresample does (u8: (v-128)/128,
// s16: v/2^15, s24: v/2^23, s32: v/2^31, f64: rounded to float32); float samples are bounded (NaN and ±Inf become 0,
// beyond ±1e4 they are clamped: dsp/sample-bound.ts).
//
// Write: 16-bit PCM, float → int16 as ffmpeg does (scale by 32768, round half to even, clip), the RIFF header patched
// with the sizes at the end, or turned into RF64 (the reserved JUNK chunk becomes ds64) above 4 GiB, byte for byte
// the layout `ffmpeg -rf64 auto -fflags +bitexact` writes.
import fs from 'node:fs';
import type { MemoryFile } from './memory-file';
import { decodeFrames, encodeInt16, SAMPLE_BYTES, type WavSampleFormat } from '../dsp/pcm';

/** What the reader needs of a file: a FileHandle, or a MemoryFile (small uploads kept in memory). */
interface ReadableFile {
  read(buffer: Buffer, offset: number, length: number, position: number): Promise<{ bytesRead: number }>;
  stat(): Promise<{ size: number }>;
  close(): Promise<void>;
}

/** What the writer needs of a file: a FileHandle, or a MemoryFile. */
interface WritableFile {
  write(buffer: Buffer, offset: number, length: number, position: number): Promise<unknown>;
  close(): Promise<void>;
}

export interface WavInfo {
  container: 'wav' | 'rf64';
  /** ffmpeg's decoder name for the samples, e.g. pcm_s16le, pcm_f32le. */
  codec: string;
  format: WavSampleFormat;
  channels: number;
  sampleRate: number;
  /** Bytes per frame (all channels). */
  blockAlign: number;
  /** Byte offset of the first sample. */
  dataOffset: number;
  /** Whole frames actually present in the file (declared size clamped to the file size). */
  frames: number;
}

const KSDATAFORMAT_TAIL = Buffer.from([0x00, 0x00, 0x00, 0x00, 0x10, 0x00, 0x80, 0x00, 0x00, 0xaa, 0x00, 0x38, 0x9b, 0x71]);
const CODEC: Record<WavSampleFormat, string> = {
  u8: 'pcm_u8', s16: 'pcm_s16le', s24: 'pcm_s24le', s32: 'pcm_s32le', f32: 'pcm_f32le', f64: 'pcm_f64le',
};

/** How many bytes of a file parseWav should be given: enough for any sane header (metadata chunks included). */
export const WAV_HEAD_BYTES = 64 * 1024;

/**
 * Parses the header of an uncompressed WAV from its first bytes (`head`, up to WAV_HEAD_BYTES) and the file's size.
 * Returns null for anything this reader does not handle; the file then goes to ffmpeg.
 */
export function parseWav(head: Buffer, fileSize: number): WavInfo | null {
  if (head.length < 12) return null;
  const riff = head.toString('ascii', 0, 4);
  if ((riff !== 'RIFF' && riff !== 'RF64') || head.toString('ascii', 8, 12) !== 'WAVE') return null;
  const rf64 = riff === 'RF64';
  let ds64DataSize: number | null = null;
  let fmt: { format: WavSampleFormat; channels: number; sampleRate: number; blockAlign: number } | null = null;
  let off = 12;
  while (off + 8 <= head.length) {
    const id = head.toString('ascii', off, off + 4);
    const size = head.readUInt32LE(off + 4);
    const body = off + 8;
    if (id === 'ds64') {
      if (body + 16 > head.length) return null;
      ds64DataSize = Number(head.readBigUInt64LE(body + 8));
    } else if (id === 'fmt ') {
      if (size < 16 || body + size > head.length) return null;
      fmt = parseFmt(head.subarray(body, body + size));
      if (!fmt) return null;
    } else if (id === 'data') {
      if (!fmt) return null;
      let declared = size;
      if (rf64 && size === 0xffffffff) {
        if (ds64DataSize === null) return null;
        declared = ds64DataSize;
      }
      const available = Math.max(0, fileSize - body);
      // 0 and 0xFFFFFFFF are what streaming writers put when they could not seek back; either way, the file decides.
      const bytes = declared === 0 || declared === 0xffffffff ? available : Math.min(declared, available);
      return {
        container: rf64 ? 'rf64' : 'wav',
        codec: CODEC[fmt.format],
        ...fmt,
        dataOffset: body,
        frames: Math.floor(bytes / fmt.blockAlign),
      };
    }
    // Chunks are padded to an even size.
    off = body + size + (size & 1);
  }
  return null;
}

function parseFmt(b: Buffer): { format: WavSampleFormat; channels: number; sampleRate: number; blockAlign: number } | null {
  let tag = b.readUInt16LE(0);
  const channels = b.readUInt16LE(2);
  const sampleRate = b.readUInt32LE(4);
  const blockAlign = b.readUInt16LE(12);
  const bits = b.readUInt16LE(14);
  if (tag === 0xfffe) {
    // WAVE_FORMAT_EXTENSIBLE: the sub-format GUID's first two bytes are the real tag.
    if (b.length < 40 || b.readUInt16LE(16) < 22) return null;
    if (!b.subarray(26, 40).equals(KSDATAFORMAT_TAIL)) return null;
    tag = b.readUInt16LE(24);
  }
  let format: WavSampleFormat | null = null;
  if (tag === 1) format = bits === 8 ? 'u8' : bits === 16 ? 's16' : bits === 24 ? 's24' : bits === 32 ? 's32' : null;
  else if (tag === 3) format = bits === 32 ? 'f32' : bits === 64 ? 'f64' : null;
  if (!format || channels < 1 || sampleRate < 1) return null;
  if (blockAlign !== (channels * bits) / 8) return null;
  return { format, channels, sampleRate, blockAlign };
}

/** Reads an uncompressed WAV's samples in chunks of whole frames, through one file handle (bounded memory). */
export class WavReader {
  private pos = 0;
  private constructor(
    private readonly fh: ReadableFile,
    readonly info: WavInfo,
  ) {}

  /** Opens `file` (a path, or a file in memory); resolves null (handle closed) when it is not a WAV it handles. */
  static async open(file: string | MemoryFile): Promise<WavReader | null> {
    const fh: ReadableFile = typeof file === 'string' ? await fs.promises.open(file, 'r') : file;
    try {
      const { size } = await fh.stat();
      const head = Buffer.alloc(Math.min(WAV_HEAD_BYTES, size));
      const { bytesRead } = await fh.read(head, 0, head.length, 0);
      const info = parseWav(head.subarray(0, bytesRead), size);
      if (!info) {
        await fh.close();
        return null;
      }
      return new WavReader(fh, info);
    } catch (err) {
      await fh.close().catch(() => undefined);
      throw err;
    }
  }

  /** The next up to `maxFrames` frames as planar float32; an empty array per channel at the end. */
  async read(maxFrames: number): Promise<Float32Array[]> {
    return decodeFrames(await this.readBytes(maxFrames), this.info);
  }

  /**
   * The next up to `maxFrames` frames as they are in the file (interleaved, info.format); empty at the end. The bytes
   * start a fresh ArrayBuffer (not the Buffer pool): aligned, so decodeFrames reads them through typed views.
   */
  async readBytes(maxFrames: number): Promise<Buffer> {
    const frames = Math.min(maxFrames, this.info.frames - this.pos);
    if (frames <= 0) return Buffer.alloc(0);
    const bytes = Buffer.from(new ArrayBuffer(frames * this.info.blockAlign));
    const { bytesRead } = await this.fh.read(bytes, 0, bytes.length, this.info.dataOffset + this.pos * this.info.blockAlign);
    const got = Math.floor(bytesRead / this.info.blockAlign);
    this.pos += got;
    if (got < frames) this.pos = this.info.frames; // the file shrank under us: stop at what was there
    return bytes.subarray(0, got * this.info.blockAlign);
  }

  close(): Promise<void> {
    return this.fh.close().catch(() => undefined);
  }
}

const HEADER_BYTES = 80; // RIFF(12) + JUNK/ds64(8 + 28) + fmt(8 + 16) + data(8)

/** A 16-bit PCM WAV file written as frames come; close() writes the sizes (RF64 above 4 GiB). */
export class WavWriter {
  private dataBytes = 0;
  private constructor(
    private readonly fh: WritableFile,
    private readonly channels: number,
    private readonly sampleRate: number,
  ) {}

  /** Creates `file` (a path), or writes into an empty MemoryFile. */
  static async create(file: string | MemoryFile, channels: number, sampleRate: number): Promise<WavWriter> {
    const fh: WritableFile = typeof file === 'string' ? await fs.promises.open(file, 'w') : file;
    const w = new WavWriter(fh, channels, sampleRate);
    try {
      await fh.write(w.header(), 0, HEADER_BYTES, 0);
    } catch (err) {
      await fh.close().catch(() => undefined);
      throw err;
    }
    return w;
  }

  async write(planar: Float32Array[]): Promise<void> {
    if (planar.length === 0 || planar[0].length === 0) return;
    await this.writePcm(encodeInt16(planar));
  }

  /** Appends frames already encoded as interleaved 16-bit little-endian PCM (whole frames of this file's channels). */
  async writePcm(bytes: Buffer): Promise<void> {
    if (bytes.length === 0) return;
    if (bytes.length % (2 * this.channels) !== 0) throw new Error(`${bytes.length} bytes are not whole ${this.channels}-channel frames`);
    await this.fh.write(bytes, 0, bytes.length, HEADER_BYTES + this.dataBytes);
    this.dataBytes += bytes.length;
  }

  /** Writes the final header and closes the file. */
  async close(): Promise<void> {
    try {
      await this.fh.write(this.header(), 0, HEADER_BYTES, 0);
    } finally {
      await this.fh.close();
    }
  }

  /** Closes without finishing (the caller removes the file). */
  abort(): Promise<void> {
    return this.fh.close().catch(() => undefined);
  }

  private header(): Buffer {
    const h = Buffer.alloc(HEADER_BYTES);
    const C = this.channels;
    const riffSize = HEADER_BYTES - 8 + this.dataBytes;
    const big = riffSize > 0xffffffff;
    h.write(big ? 'RF64' : 'RIFF', 0, 'ascii');
    h.writeUInt32LE(big ? 0xffffffff : riffSize, 4);
    h.write('WAVE', 8, 'ascii');
    // A 28-byte chunk reserved for ds64: JUNK while the sizes fit in 32 bits.
    h.write(big ? 'ds64' : 'JUNK', 12, 'ascii');
    h.writeUInt32LE(28, 16);
    if (big) {
      h.writeBigUInt64LE(BigInt(riffSize), 20);
      h.writeBigUInt64LE(BigInt(this.dataBytes), 28);
      h.writeBigUInt64LE(BigInt(this.dataBytes / (2 * C)), 36);
      h.writeUInt32LE(0, 44);
    }
    h.write('fmt ', 48, 'ascii');
    h.writeUInt32LE(16, 52);
    h.writeUInt16LE(1, 56);
    h.writeUInt16LE(C, 58);
    h.writeUInt32LE(this.sampleRate, 60);
    h.writeUInt32LE(this.sampleRate * C * 2, 64);
    h.writeUInt16LE(C * 2, 68);
    h.writeUInt16LE(16, 70);
    h.write('data', 72, 'ascii');
    h.writeUInt32LE(big ? 0xffffffff : this.dataBytes, 76);
    return h;
  }
}

/** The canonical 44-byte header of a 16-bit PCM WAV holding `dataBytes` of samples (streams written whole, tests). */
export function pcm16WavHeader(dataBytes: number, sampleRate: number, channels: number): Buffer {
  const h = Buffer.alloc(44);
  h.write('RIFF', 0, 'ascii');
  h.writeUInt32LE(36 + dataBytes, 4);
  h.write('WAVEfmt ', 8, 'ascii');
  h.writeUInt32LE(16, 16);
  h.writeUInt16LE(1, 20);
  h.writeUInt16LE(channels, 22);
  h.writeUInt32LE(sampleRate, 24);
  h.writeUInt32LE(sampleRate * channels * 2, 28);
  h.writeUInt16LE(channels * 2, 32);
  h.writeUInt16LE(16, 34);
  h.write('data', 36, 'ascii');
  h.writeUInt32LE(dataBytes, 40);
  return h;
}

/** Bytes of g711WavHeader's header. */
export const G711_WAV_HEADER_BYTES = 58;

/**
 * The header of a WAV holding G.711 samples (format tag 7 μ-law, 6 A-law; 8 bits, one byte per sample), laid out as
 * ffmpeg writes one: an 18-byte fmt chunk (cbSize 0) and the `fact` chunk non-PCM formats carry (frames), then data.
 * This reader hands such files to ffmpeg, which decodes them.
 */
export function g711WavHeader(dataBytes: number, sampleRate: number, channels: number, law: 'mulaw' | 'alaw'): Buffer {
  const h = Buffer.alloc(G711_WAV_HEADER_BYTES);
  h.write('RIFF', 0, 'ascii');
  h.writeUInt32LE(G711_WAV_HEADER_BYTES - 8 + dataBytes + (dataBytes & 1), 4);
  h.write('WAVEfmt ', 8, 'ascii');
  h.writeUInt32LE(18, 16);
  h.writeUInt16LE(law === 'mulaw' ? 7 : 6, 20);
  h.writeUInt16LE(channels, 22);
  h.writeUInt32LE(sampleRate, 24);
  h.writeUInt32LE(sampleRate * channels, 28);
  h.writeUInt16LE(channels, 32);
  h.writeUInt16LE(8, 34);
  h.writeUInt16LE(0, 36);
  h.write('fact', 38, 'ascii');
  h.writeUInt32LE(4, 42);
  h.writeUInt32LE(Math.floor(dataBytes / channels), 46);
  h.write('data', 50, 'ascii');
  h.writeUInt32LE(dataBytes, 54);
  return h;
}
