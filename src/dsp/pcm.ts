// PCM sample codecs: interleaved integer/float sample bytes ↔ planar float32, converted exactly as ffmpeg's
// swresample does. Used by the in-process WAV reader/writer (audio/wav.ts) and by the inference worker's PCM edges.

import { boundSample } from './sample-bound';

export type WavSampleFormat = 'u8' | 's16' | 's24' | 's32' | 'f32' | 'f64';

/** Bytes of one sample of each format (a frame is channels times this). */
export const SAMPLE_BYTES: Record<WavSampleFormat, number> = { u8: 1, s16: 2, s24: 3, s32: 4, f32: 4, f64: 8 };

/** Converts whole interleaved frames of `bytes` to planar float32 (float samples bounded: sample-bound.ts). */
export function decodeFrames(bytes: Buffer, info: { format: WavSampleFormat; channels: number; blockAlign: number }): Float32Array[] {
  const frames = Math.floor(bytes.length / info.blockAlign);
  const planar = Array.from({ length: info.channels }, () => new Float32Array(frames));
  decodeFramesInto(bytes, info, planar, 0);
  return planar;
}

/**
 * decodeFrames into existing arrays, from index `off` of each (they must have room): a live stream decodes every
 * 20 ms chunk straight into the buffer that gathers whole hops, with no array per chunk. Returns the frames written.
 */
export function decodeFramesInto(
  bytes: Buffer,
  info: { format: WavSampleFormat; channels: number; blockAlign: number },
  planar: Float32Array[],
  off: number,
): number {
  const C = info.channels;
  const frames = Math.floor(bytes.length / info.blockAlign);
  const n = frames * C;
  // Typed views need an aligned start: copy when the bytes do not have one (the reader's own buffers always do).
  const view = <T>(Ctor: { new (b: ArrayBufferLike, o: number, l: number): T; BYTES_PER_ELEMENT: number }): T => {
    const size = Ctor.BYTES_PER_ELEMENT;
    const b = bytes.byteOffset % size === 0 ? bytes : Buffer.from(bytes);
    return new Ctor(b.buffer, b.byteOffset, n);
  };
  switch (info.format) {
    case 'u8':
      for (let f = 0, k = 0; f < frames; f++) for (let c = 0; c < C; c++, k++) planar[c][off + f] = (bytes[k] - 128) / 128;
      break;
    case 's16': {
      const v = view(Int16Array);
      if (C === 1) {
        const out = planar[0];
        for (let i = 0; i < frames; i++) out[off + i] = v[i] / 32768;
      } else {
        for (let f = 0, k = 0; f < frames; f++) for (let c = 0; c < C; c++, k++) planar[c][off + f] = v[k] / 32768;
      }
      break;
    }
    case 's24':
      for (let f = 0, k = 0; f < frames; f++) {
        for (let c = 0; c < C; c++, k += 3) {
          // Little-endian 24-bit, sign from the top byte (<< 8 >> 8 sign-extends).
          planar[c][off + f] = (((bytes[k] | (bytes[k + 1] << 8) | (bytes[k + 2] << 16)) << 8) >> 8) / 8388608;
        }
      }
      break;
    case 's32': {
      const v = view(Int32Array);
      for (let f = 0, k = 0; f < frames; f++) for (let c = 0; c < C; c++, k++) planar[c][off + f] = v[k] / 2147483648;
      break;
    }
    case 'f32': {
      const v = view(Float32Array);
      for (let f = 0, k = 0; f < frames; f++) {
        for (let c = 0; c < C; c++, k++) {
          planar[c][off + f] = boundSample(v[k]);
        }
      }
      break;
    }
    case 'f64': {
      const v = view(Float64Array);
      for (let f = 0, k = 0; f < frames; f++) {
        for (let c = 0; c < C; c++, k++) {
          planar[c][off + f] = boundSample(v[k]);
        }
      }
      break;
    }
  }
  return frames;
}

/** 1.5 * 2^52: adding and subtracting it rounds a double below 2^51 to an integer, ties to even (lrint's rule). */
const ROUND_MAGIC = 6755399441055744;

/**
 * float32 → int16 as ffmpeg's swresample converts (lrintf(x * 32768): round half to even, then clip); non-finite
 * samples become 0 (never full-scale garbage).
 */
export function toInt16(x: number): number {
  const v = x * 32768;
  if (v - v !== 0) return 0; // NaN, ±Inf
  if (v >= 32767) return 32767;
  if (v <= -32768) return -32768;
  return (v + ROUND_MAGIC - ROUND_MAGIC) | 0;
}

/** Interleaves planar float32 into 16-bit little-endian PCM bytes (toInt16 per sample). */
export function encodeInt16(planar: Float32Array[]): Buffer {
  const C = planar.length;
  const frames = planar[0]?.length ?? 0;
  const out = new Int16Array(frames * C);
  for (let c = 0; c < C; c++) {
    const x = planar[c];
    for (let f = 0, k = c; f < frames; f++, k += C) {
      const v = x[f] * 32768;
      out[k] = v - v !== 0 ? 0 : v >= 32767 ? 32767 : v <= -32768 ? -32768 : (v + ROUND_MAGIC - ROUND_MAGIC) | 0;
    }
  }
  // Typed arrays are little-endian on the hosts this path is used on (checked by the callers).
  return Buffer.from(out.buffer, 0, out.byteLength);
}
