// The in-process WAV reader and writer (src/audio/wav.ts) against ffmpeg: every variant the reader accepts decodes to
// exactly ffmpeg's samples, what it does not accept goes to ffmpeg, and the writer's files are ffmpeg's byte for byte.
import fs from 'node:fs';
import path from 'node:path';
import { loadConfig } from '../../src/config';
import { createInferenceEngine } from '../../src/inference/runtime/engine';
import type { InferenceEngine } from '../../src/inference/types';
import { denoiseFile, type DenoiseFileOptions } from '../../src/pipeline';
import { readPcm, writePcm } from '../../src/pipeline/clips';
import { MemoryFile } from '../../src/audio/memory-file';
import { toInt16 } from '../../src/dsp/pcm';
import { parseWav, WavReader, WavWriter, WAV_HEAD_BYTES } from '../../src/audio/wav';
import { childProcesses, fixture, makeTmpDir } from '../helpers/audio-helpers';

const config = loadConfig();
let tmp: string;
let engine: InferenceEngine;

beforeAll(async () => {
  tmp = makeTmpDir('nsm-wav-');
  engine = await createInferenceEngine({ ...config, workers: 1 });
});
afterAll(async () => {
  await engine?.close();
  fs.rmSync(tmp, { recursive: true, force: true });
});

/** 0.5 s of stereo test signal at 22.05 kHz covering the full range (clipping peaks included). */
function signal(): Float32Array[] {
  const n = 11025;
  return [0, 1].map((c) => Float32Array.from({ length: n }, (_, i) => 1.02 * Math.sin((2 * Math.PI * (220 + 110 * c) * i) / 22050) * ((i % 7) / 6)));
}

async function readAll(file: string): Promise<Float32Array[] | null> {
  const r = await WavReader.open(file);
  if (!r) return null;
  const parts: Float32Array[][] = [];
  for (;;) {
    const p = await r.read(3000);
    if (p[0].length === 0) break;
    parts.push(p);
  }
  await r.close();
  return r.info.channels ? Array.from({ length: r.info.channels }, (_, c) => concat(parts.map((p) => p[c]))) : [];
}

function concat(parts: Float32Array[]): Float32Array {
  const out = new Float32Array(parts.reduce((s, p) => s + p.length, 0));
  let o = 0;
  for (const p of parts) {
    out.set(p, o);
    o += p.length;
  }
  return out;
}

const VARIANTS: [string, string[]][] = [
  ['u8', ['-c:a', 'pcm_u8']],
  ['s16', ['-c:a', 'pcm_s16le']],
  ['s24 (extensible)', ['-c:a', 'pcm_s24le']],
  ['s32 (extensible)', ['-c:a', 'pcm_s32le']],
  ['f32', ['-c:a', 'pcm_f32le']],
  ['f64', ['-c:a', 'pcm_f64le']],
  ['s16 RF64', ['-c:a', 'pcm_s16le', '-rf64', 'always']],
];

describe('WavReader decodes exactly what ffmpeg decodes', () => {
  test.each(VARIANTS)('%s', async (name, codecArgs) => {
    const file = path.join(tmp, `${name.replace(/\W+/g, '_')}.wav`);
    await writePcm(config, signal(), 22050, file, [...codecArgs, '-f', 'wav']);
    const ours = await readAll(file);
    expect(ours).not.toBeNull();
    const theirs = await readPcm(config, file, 22050, 2);
    expect(ours!.map((c) => c.length)).toEqual(theirs.map((c) => c.length));
    for (let c = 0; c < 2; c++) expect(Buffer.from(ours![c].buffer).equals(Buffer.from(theirs[c].buffer))).toBe(true);
  });

  test('odd-sized chunks before the data, a truncated last frame, and a declared size larger than the file', async () => {
    const src = path.join(tmp, 'plain.wav');
    await writePcm(config, signal(), 22050, src, ['-c:a', 'pcm_s16le', '-f', 'wav']);
    const bytes = fs.readFileSync(src);
    const info = parseWav(bytes.subarray(0, WAV_HEAD_BYTES), bytes.length)!;
    // Insert an odd-sized "LIST" chunk (3 bytes + 1 pad byte) before "data", cut the last frame in half and declare
    // a huge data size.
    const head = bytes.subarray(0, info.dataOffset - 8);
    const list = Buffer.from([...Buffer.from('LIST'), 3, 0, 0, 0, 1, 2, 3, 0]);
    const dataHdr = Buffer.from([...Buffer.from('data'), 0xf0, 0xff, 0xff, 0x7f]);
    const body = bytes.subarray(info.dataOffset, bytes.length - 2);
    const patched = path.join(tmp, 'patched.wav');
    fs.writeFileSync(patched, Buffer.concat([head, list, dataHdr, body]));
    const ours = (await readAll(patched))!;
    expect(ours[0].length).toBe(info.frames - 1);
    const [l] = await readPcm(config, src, 22050, 2);
    const want = l.subarray(0, info.frames - 1);
    expect(Buffer.from(ours[0].buffer).equals(Buffer.from(want.buffer, want.byteOffset, want.byteLength))).toBe(true);
  });

  test.each([
    ['not RIFF', Buffer.from('OggS0000WAVEfmt ')],
    ['RIFX (big-endian)', Buffer.concat([Buffer.from('RIFX'), Buffer.alloc(4), Buffer.from('WAVE')])],
  ])('%s → null (handed to ffmpeg)', (_name, head) => {
    expect(parseWav(head, 1000)).toBeNull();
  });

  test('µ-law (format 7) and a data chunk before fmt → null (handed to ffmpeg)', async () => {
    const mulaw = path.join(tmp, 'mulaw.wav');
    await writePcm(config, signal(), 22050, mulaw, ['-c:a', 'pcm_mulaw', '-f', 'wav']);
    expect(await WavReader.open(mulaw)).toBeNull();
    const b = Buffer.alloc(64);
    b.write('RIFF', 0, 'ascii');
    b.write('WAVEdata', 8, 'ascii');
    expect(parseWav(b, 64)).toBeNull();
  });

  test('µ-law WAV still works end to end (through ffmpeg)', async () => {
    const mulaw = path.join(tmp, 'mulaw16k.wav');
    await writePcm(config, [new Float32Array(16000).fill(0.05)], 16000, mulaw, ['-c:a', 'pcm_mulaw', '-f', 'wav']);
    const stats = await denoiseFile({ config, engine }, mulaw, path.join(tmp, 'mulaw-out.wav'), base);
    expect(stats.input_codec).toBe('pcm_mulaw');
    expect(stats.duration_s).toBe(1);
  });
});

const base: DenoiseFileOptions = { model: 'nsm-2', attenuationLimitDb: 0, outputFormat: 'wav', keepInputSampleRate: true };

describe('WavWriter', () => {
  test('toInt16 rounds and clips like ffmpeg (half to even)', () => {
    expect([0.5, 1.5, 2.5, -0.5, -1.5, -2.5].map((v) => toInt16(v / 32768))).toEqual([0, 2, 2, 0, -2, -2]);
    expect([1, 2, -1, -2].map(toInt16)).toEqual([32767, 32767, -32768, -32768]);
  });

  test('RF64 above 4 GiB: the header turns into RF64 with a ds64 chunk', async () => {
    const file = path.join(tmp, 'big-header.wav');
    const w = await WavWriter.create(file, 2, 48000);
    await w.write([new Float32Array(10), new Float32Array(10)]);
    (w as unknown as { dataBytes: number }).dataBytes = 5 * 2 ** 30; // only the header is looked at
    await w.close();
    const h = fs.readFileSync(file).subarray(0, 80);
    expect(h.toString('ascii', 0, 4)).toBe('RF64');
    expect(h.toString('ascii', 12, 16)).toBe('ds64');
    expect(Number(h.readBigUInt64LE(28))).toBe(5 * 2 ** 30);
    expect(h.readUInt32LE(76)).toBe(0xffffffff);
    expect(parseWav(h, 80 + 5 * 2 ** 30)!.frames).toBe((5 * 2 ** 30) / 4);
  });

  test('denoiseFile: the in-process path (no child process) writes the same bytes as the ffmpeg path', async () => {
    const input = fixture('speech-noisy-16k-mono.wav');
    const a = path.join(tmp, 'inproc.wav');
    const b = path.join(tmp, 'ffmpeg.wav');
    // Children started during the run (a child of an earlier test may still be on its way out).
    const earlier = new Set(childProcesses().map((c) => c.pid));
    let children: string[] = ['not sampled'];
    const sa = await denoiseFile({ config, engine }, input, a, {
      ...base,
      chunkSeconds: 0.5,
      onProgress: () => {
        if (children[0] === 'not sampled') children = childProcesses().filter((c) => !earlier.has(c.pid)).map((c) => c.comm);
      },
    });
    const sb = await denoiseFile({ config, engine }, input, b, { ...base, inProcessWav: false });
    expect(children).toEqual([]);
    expect(fs.readFileSync(a).equals(fs.readFileSync(b))).toBe(true);
    expect({ ...sa, processing_s: 0, rtf: 0 }).toEqual({ ...sb, processing_s: 0, rtf: 0 });
  });

  test('48 kHz mono with nsm-2-hd: in-process equals ffmpeg path', async () => {
    const input = fixture('speech-noisy-48k-mono.wav');
    const opts = { ...base, model: 'nsm-2-hd' as const };
    const a = path.join(tmp, 'hd-inproc.wav');
    const b = path.join(tmp, 'hd-ffmpeg.wav');
    await denoiseFile({ config, engine }, input, a, opts);
    await denoiseFile({ config, engine }, input, b, { ...opts, inProcessWav: false });
    expect(fs.readFileSync(a).equals(fs.readFileSync(b))).toBe(true);
  });
});

describe('MemoryFile (small uploads denoised without temp files)', () => {
  test('the writer writes the same bytes into memory as into a file; the reader reads them back the same', async () => {
    const x = signal();
    const file = path.join(tmp, 'mem-cmp.wav');
    const onDisk = await WavWriter.create(file, 2, 22050);
    const inMemory = new MemoryFile();
    const toMemory = await WavWriter.create(inMemory, 2, 22050);
    // Uneven pieces, so the memory file holds several chunks when the header is patched at close.
    for (const [a, b] of [[0, 1000], [1000, 1001], [1001, 7000], [7000, 11025]]) {
      const piece = x.map((ch) => ch.subarray(a, b));
      await onDisk.write(piece);
      await toMemory.write(piece);
    }
    await onDisk.close();
    await toMemory.close();
    const bytes = fs.readFileSync(file);
    expect(inMemory.contents().equals(bytes)).toBe(true);

    const fromFile = (await WavReader.open(file))!;
    const fromMemory = (await WavReader.open(new MemoryFile(bytes)))!;
    expect(fromMemory.info).toEqual(fromFile.info);
    for (;;) {
      const [a, b] = [await fromFile.read(3000), await fromMemory.read(3000)];
      expect(b).toEqual(a);
      if (a[0].length === 0) break;
    }
    await fromFile.close();
    expect(await WavReader.open(new MemoryFile(Buffer.from('not a wav at all')))).toBeNull();
  });

  test('positional reads and writes across chunks; a write past the end is refused', async () => {
    const m = new MemoryFile();
    await m.write(Buffer.from('abcd'), 0, 4, 0);
    await m.write(Buffer.from('xxefgh'), 2, 4, 4);
    await m.write(Buffer.from('ij'), 0, 2, 8);
    // Overwrites spanning all three chunks, and one running past the end (the rest is appended).
    await m.write(Buffer.from('DEFGHI'), 0, 6, 3);
    expect(m.contents().toString()).toBe('abcDEFGHIj');
    await m.write(Buffer.from('JKL'), 0, 3, 9);
    expect(m.contents().toString()).toBe('abcDEFGHIJKL');
    expect(m.size).toBe(12);
    const out = Buffer.alloc(6, '.');
    expect(await m.read(out, 1, 5, 8)).toEqual({ bytesRead: 4 });
    expect(out.toString()).toBe('.IJKL.');
    await expect(m.write(Buffer.from('z'), 0, 1, 20)).rejects.toThrow(/past the end/);
  });
});
