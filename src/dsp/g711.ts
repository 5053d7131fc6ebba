// G.711 (μ-law, A-law) sample codecs for live streams: one byte per sample ↔ the 16-bit linear values the codec
// defines. The codec itself is the npm package alawmulaw's; this file only turns its per-sample functions into lookup
// tables, once per process (thread) and codec, the first time a stream needs them: a 256-entry decode table (code →
// float32, exactly what a 16-bit PCM reader makes of the decoded sample) and a 65,536-entry encode table (int16 →
// code). Why tables: per audio second at 8 kHz, the package's decode (with the int16 → float step) took ~100 µs and
// its encode ~60 µs, the tables ~8 and ~12 µs (docs/streaming.md, "G.711"); building both tables takes ~2.5 ms.
import { alaw, mulaw } from 'alawmulaw';

export type G711Law = 'mulaw' | 'alaw';

interface Tables {
  /** code → the decoded 16-bit sample / 32768 (as decodeFrames reads s16). */
  decode: Float32Array;
  /** int16 (as its low 16 bits, v & 0xffff) → code. */
  encode: Uint8Array;
}

const built: Partial<Record<G711Law, Tables>> = {};

function tables(law: G711Law): Tables {
  const have = built[law];
  if (have) return have;
  const codec = law === 'mulaw' ? mulaw : alaw;
  const decode = new Float32Array(256);
  // | 0: μ-law code 0x7F decodes to -0; a 16-bit reader sees 0.
  for (let c = 0; c < 256; c++) decode[c] = (codec.decodeSample(c) | 0) / 32768;
  const encode = new Uint8Array(65536);
  for (let v = -32768; v < 32768; v++) encode[v & 0xffff] = codec.encodeSample(v) & 0xff;
  return (built[law] = { decode, encode });
}

/**
 * Decodes interleaved G.711 bytes (whole frames of `channels`) into planar float32 from index `off` of each array
 * (they must have room), as decodeFramesInto does for PCM. Returns the frames written.
 */
export function g711DecodeInto(law: G711Law, bytes: Uint8Array, channels: number, planar: Float32Array[], off: number): number {
  const table = tables(law).decode;
  const frames = Math.floor(bytes.length / channels);
  if (channels === 1) {
    const out = planar[0];
    for (let i = 0; i < frames; i++) out[off + i] = table[bytes[i]];
  } else {
    for (let f = 0, k = 0; f < frames; f++) for (let c = 0; c < channels; c++, k++) planar[c][off + f] = table[bytes[k]];
  }
  return frames;
}

/** Encodes interleaved 16-bit little-endian PCM bytes (whole samples) to G.711, one byte per sample. */
export function g711EncodeInt16(law: G711Law, pcm: Uint8Array): Uint8Array {
  const table = tables(law).encode;
  const n = pcm.length >> 1;
  const out = new Uint8Array(n);
  for (let i = 0, k = 0; i < n; i++, k += 2) out[i] = table[pcm[k] | (pcm[k + 1] << 8)];
  return out;
}
