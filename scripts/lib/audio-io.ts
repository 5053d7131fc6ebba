// Decode / encode audio with ffmpeg for the benchmark and evaluation (float32 planar, any rate).
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import { LowFrequencyDither } from '../../src/dsp/dither';
import { decodeFrames, encodeInt16 } from '../../src/dsp/pcm';
import { loadConfig } from '../../src/config';

// Math as a module constant: under jest (a vm context) a global's lookup in a per-sample loop goes through the context's
// interceptor (echo-scenes.ts says how much that costs).
const M = Math;

/** Mono `y` as the API's default output delivers it: dithered and rounded to 16-bit PCM as the WAV sink does, read back. */
export function asInt16(y: Float32Array, sampleRate = 16000): Float32Array {
  const dithered = new LowFrequencyDither(sampleRate, 1).process([y]);
  return decodeFrames(encodeInt16(dithered), { format: 's16', channels: 1, blockAlign: 2 })[0];
}

export function decodeAudio(file: string, sampleRate: number, channels = 1): Float32Array[] {
  const ff = loadConfig().ffmpegPath;
  const r = spawnSync(ff, ['-v', 'error', '-i', file, '-ac', String(channels), '-ar', String(sampleRate), '-f', 'f32le', 'pipe:1'], {
    maxBuffer: 2 ** 31,
  });
  if (r.status !== 0) throw new Error(`ffmpeg could not decode ${file}: ${r.stderr}`);
  const b = r.stdout;
  const inter = new Float32Array(b.buffer.slice(b.byteOffset, b.byteOffset + b.length));
  const n = inter.length / channels;
  const planar = Array.from({ length: channels }, () => new Float32Array(n));
  for (let i = 0; i < n; i++) for (let c = 0; c < channels; c++) planar[c][i] = inter[i * channels + c];
  return planar;
}

/** Writes a float32 WAV (mono or planar channels). */
export function writeWavFloat(file: string, planar: Float32Array[], sampleRate: number): void {
  const ch = planar.length;
  const n = planar[0].length;
  const data = Buffer.alloc(n * ch * 4);
  for (let i = 0; i < n; i++) for (let c = 0; c < ch; c++) data.writeFloatLE(planar[c][i], (i * ch + c) * 4);
  const h = Buffer.alloc(44);
  h.write('RIFF', 0);
  h.writeUInt32LE(36 + data.length, 4);
  h.write('WAVE', 8);
  h.write('fmt ', 12);
  h.writeUInt32LE(16, 16);
  h.writeUInt16LE(3, 20);
  h.writeUInt16LE(ch, 22);
  h.writeUInt32LE(sampleRate, 24);
  h.writeUInt32LE(sampleRate * ch * 4, 28);
  h.writeUInt16LE(ch * 4, 32);
  h.writeUInt16LE(32, 34);
  h.write('data', 36);
  h.writeUInt32LE(data.length, 40);
  fs.writeFileSync(file, Buffer.concat([h, data]));
}

/** Writes a 16-bit mono WAV of `total` samples produced by `sampleAt`, in 1 MB pieces (bounded memory). */
export function writeWav16(file: string, sampleRate: number, total: number, sampleAt: (i: number) => number): void {
  const h = Buffer.alloc(44);
  h.write('RIFF', 0);
  h.writeUInt32LE(36 + total * 2, 4);
  h.write('WAVE', 8);
  h.write('fmt ', 12);
  h.writeUInt32LE(16, 16);
  h.writeUInt16LE(1, 20);
  h.writeUInt16LE(1, 22);
  h.writeUInt32LE(sampleRate, 24);
  h.writeUInt32LE(sampleRate * 2, 28);
  h.writeUInt16LE(2, 32);
  h.writeUInt16LE(16, 34);
  h.write('data', 36);
  h.writeUInt32LE(total * 2, 40);
  const fd = fs.openSync(file, 'w');
  try {
    fs.writeSync(fd, h);
    const piece = 1 << 19;
    const buf = Buffer.alloc(piece * 2);
    for (let start = 0; start < total; start += piece) {
      const n = Math.min(piece, total - start);
      for (let i = 0; i < n; i++) buf.writeInt16LE(M.max(-32768, M.min(32767, M.round(sampleAt(start + i) * 32767))), i * 2);
      fs.writeSync(fd, buf, 0, n * 2);
    }
  } finally {
    fs.closeSync(fd);
  }
}
