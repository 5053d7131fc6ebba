// Chaos suite: the hostile-input corpus, generated at run time into a temp directory (nothing large is committed).
// From the project's 3 s speech fixture ffmpeg makes ~30 formats; from those, truncations at many points and bit
// rot; by hand: random bytes, absurd WAV headers (rates, channels, sizes, chunk layouts), NaN/Inf floats, huge
// declared sizes, video/image/text/archive files and playlists that point elsewhere (SSRF bait).
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import zlib from 'node:zlib';
import { PROJECT_ROOT } from '../../src/config';
import { pool } from './http';

export interface CorpusItem {
  /** Unique, descriptive: e.g. "truncated/mp3@50%". */
  name: string;
  category: string;
  path: string;
  /** Name sent as the multipart filename. */
  filename: string;
  contentType: string;
  /** A valid, complete recording (a 200 is expected). */
  valid?: boolean;
  /** Holds NaN or infinite samples (the answer must not be full-scale noise). */
  nonFinite?: boolean;
}

const BASE = path.join(PROJECT_ROOT, 'fixtures/speech-noisy-44k1-stereo.wav');

/** Seeded PRNG (mulberry32) so a run can be repeated. */
import { seededRandom as prng } from '../../src/audio/synthetic-noise';
export { prng };

function ffmpeg(ffmpegPath: string, args: string[]): Promise<void> {
  return new Promise((resolve, reject) => {
    execFile(ffmpegPath, ['-hide_banner', '-loglevel', 'error', '-y', ...args], { timeout: 60_000 }, (err, _out, stderr) => {
      if (err) reject(new Error(`ffmpeg ${args.join(' ')}: ${stderr || err.message}`));
      else resolve();
    });
  });
}

/** [name, extension, encoder args] of the formats made from the fixture. */
const FORMATS: Array<[string, string, string[]]> = [
  ['wav-s16', 'wav', ['-c:a', 'pcm_s16le']],
  ['wav-s24', 'wav', ['-c:a', 'pcm_s24le']],
  ['wav-s32', 'wav', ['-c:a', 'pcm_s32le']],
  ['wav-f32', 'wav', ['-c:a', 'pcm_f32le']],
  ['wav-f64', 'wav', ['-c:a', 'pcm_f64le']],
  ['wav-u8', 'wav', ['-c:a', 'pcm_u8']],
  ['wav-alaw', 'wav', ['-c:a', 'pcm_alaw', '-ar', '8000', '-ac', '1']],
  ['wav-mulaw', 'wav', ['-c:a', 'pcm_mulaw', '-ar', '8000', '-ac', '1']],
  ['wav-adpcm-ms', 'wav', ['-c:a', 'adpcm_ms']],
  ['wav-adpcm-ima', 'wav', ['-c:a', 'adpcm_ima_wav']],
  ['wav-g722', 'wav', ['-c:a', 'g722', '-ar', '16000', '-ac', '1']],
  ['flac', 'flac', ['-c:a', 'flac']],
  ['ogg-vorbis', 'ogg', ['-c:a', 'libvorbis']],
  ['opus', 'opus', ['-c:a', 'libopus']],
  ['mp3', 'mp3', ['-c:a', 'libmp3lame']],
  ['m4a-aac', 'm4a', ['-c:a', 'aac']],
  ['m4a-alac', 'm4a', ['-c:a', 'alac']],
  ['webm-opus', 'webm', ['-c:a', 'libopus']],
  ['aiff', 'aiff', []],
  ['caf', 'caf', []],
  ['au', 'au', []],
  ['mka-flac', 'mka', ['-c:a', 'flac']],
  ['ac3', 'ac3', []],
  ['eac3', 'eac3', []],
  ['mp2', 'mp2', []],
  ['wma', 'wma', ['-c:a', 'wmav2']],
  ['tta', 'tta', []],
  ['wavpack', 'wv', []],
  ['amr-nb', 'amr', ['-c:a', 'libopencore_amrnb', '-ar', '8000', '-ac', '1', '-b:a', '12.2k']],
  ['speex', 'spx', ['-c:a', 'libspeex', '-ar', '16000', '-ac', '1']],
];

const CONTENT_TYPES: Record<string, string> = {
  wav: 'audio/wav',
  flac: 'audio/flac',
  ogg: 'audio/ogg',
  opus: 'audio/ogg',
  mp3: 'audio/mpeg',
  m4a: 'audio/mp4',
  webm: 'audio/webm',
};

/** 16-bit (or other) WAV with every header field chosen by the caller. */
export function craftWav(o: {
  format?: number;
  channels?: number;
  rate?: number;
  bits?: number;
  blockAlign?: number;
  byteRate?: number;
  data?: Buffer;
  dataSize?: number;
  riffSize?: number;
  fmtSize?: number;
  before?: Buffer[];
  omitFmt?: boolean;
  omitData?: boolean;
  fmtAfterData?: boolean;
  riffId?: string;
}): Buffer {
  const channels = o.channels ?? 1;
  const bits = o.bits ?? 16;
  const rate = o.rate ?? 16000;
  const data = o.data ?? Buffer.alloc(3200);
  const fmtBody = Buffer.alloc(16);
  fmtBody.writeUInt16LE(o.format ?? 1, 0);
  fmtBody.writeUInt16LE(channels & 0xffff, 2);
  fmtBody.writeUInt32LE(rate >>> 0, 4);
  fmtBody.writeUInt32LE((o.byteRate ?? rate * channels * Math.ceil(bits / 8)) >>> 0, 8);
  fmtBody.writeUInt16LE((o.blockAlign ?? channels * Math.ceil(bits / 8)) & 0xffff, 12);
  fmtBody.writeUInt16LE(bits & 0xffff, 14);
  const chunk = (id: string, body: Buffer, size = body.length) => {
    const h = Buffer.alloc(8);
    h.write(id, 0, 'ascii');
    h.writeUInt32LE(size >>> 0, 4);
    return Buffer.concat([h, body, body.length % 2 ? Buffer.alloc(1) : Buffer.alloc(0)]);
  };
  const fmt = o.omitFmt ? Buffer.alloc(0) : chunk('fmt ', fmtBody, o.fmtSize ?? 16);
  const dat = o.omitData ? Buffer.alloc(0) : chunk('data', data, o.dataSize ?? data.length);
  const parts = [...(o.before ?? []), ...(o.fmtAfterData ? [dat, fmt] : [fmt, dat])];
  const body = Buffer.concat([Buffer.from('WAVE', 'ascii'), ...parts]);
  const head = Buffer.alloc(8);
  head.write(o.riffId ?? 'RIFF', 0, 'ascii');
  head.writeUInt32LE((o.riffSize ?? body.length) >>> 0, 4);
  return Buffer.concat([head, body]);
}

function floatWav(values: (i: number) => number, frames: number, channels = 1, bits: 32 | 64 = 32): Buffer {
  const bytes = bits / 8;
  const data = Buffer.alloc(frames * channels * bytes);
  for (let i = 0; i < frames * channels; i++) {
    if (bits === 32) data.writeFloatLE(values(i), i * 4);
    else data.writeDoubleLE(values(i), i * 8);
  }
  return craftWav({ format: 3, channels, rate: 16000, bits, data });
}

/** A minimal ZIP (stored, one entry) without a library, for "an archive instead of audio". */
function zipOf(name: string, content: Buffer): Buffer {
  const crc = zlib.crc32 ? zlib.crc32(content) : 0;
  const nameBuf = Buffer.from(name);
  const local = Buffer.alloc(30);
  local.writeUInt32LE(0x04034b50, 0);
  local.writeUInt16LE(20, 4);
  local.writeUInt32LE(crc >>> 0, 14);
  local.writeUInt32LE(content.length, 18);
  local.writeUInt32LE(content.length, 22);
  local.writeUInt16LE(nameBuf.length, 26);
  const central = Buffer.alloc(46);
  central.writeUInt32LE(0x02014b50, 0);
  central.writeUInt16LE(20, 4);
  central.writeUInt16LE(20, 6);
  central.writeUInt32LE(crc >>> 0, 16);
  central.writeUInt32LE(content.length, 20);
  central.writeUInt32LE(content.length, 24);
  central.writeUInt16LE(nameBuf.length, 28);
  const end = Buffer.alloc(22);
  end.writeUInt32LE(0x06054b50, 0);
  end.writeUInt16LE(1, 8);
  end.writeUInt16LE(1, 10);
  end.writeUInt32LE(46 + nameBuf.length, 12);
  end.writeUInt32LE(30 + nameBuf.length + content.length, 16);
  return Buffer.concat([local, nameBuf, content, central, nameBuf, end]);
}

export interface EncodedFormat {
  name: string;
  ext: string;
  contentType: string;
  data: Buffer;
}

/** The 3 s speech fixture in every format of FORMATS this ffmpeg can encode (the soak sends them too). */
export async function encodeFixture(ffmpegPath: string, dir: string): Promise<EncodedFormat[]> {
  fs.mkdirSync(dir, { recursive: true });
  const encoded = await pool(FORMATS, 2, async ([name, ext, args]): Promise<EncodedFormat | null> => {
    const out = path.join(dir, `base-${name}.${ext}`);
    try {
      await ffmpeg(ffmpegPath, ['-i', BASE, ...args, out]);
      return { name, ext, contentType: CONTENT_TYPES[ext] ?? 'application/octet-stream', data: fs.readFileSync(out) };
    } catch {
      return null; // this ffmpeg lacks the encoder: the format is left out
    } finally {
      fs.rmSync(out, { force: true });
    }
  });
  return encoded.filter((f): f is EncodedFormat => f !== null);
}

export interface CorpusOptions {
  dir: string;
  ffmpegPath: string;
  seed: number;
  /** A URL on a loopback listener: playlists in the corpus point there, so a fetch would be seen. */
  baitUrl: string;
}

export async function buildCorpus(opts: CorpusOptions): Promise<CorpusItem[]> {
  const { dir, ffmpegPath } = opts;
  const rnd = prng(opts.seed);
  const items: CorpusItem[] = [];
  fs.mkdirSync(dir, { recursive: true });
  const add = (category: string, label: string, data: Buffer, filename: string, contentType = 'application/octet-stream', valid = false): void => {
    const file = path.join(dir, `${String(items.length).padStart(4, '0')}-${category}`);
    fs.writeFileSync(file, data);
    items.push({ name: `${category}/${label}`, category, path: file, filename, contentType, valid });
  };
  const randomBytes = (n: number): Buffer => {
    const b = Buffer.alloc(n);
    for (let i = 0; i < n; i++) b[i] = Math.floor(rnd() * 256);
    return b;
  };

  // 1. Every format, encoded from the fixture by ffmpeg.
  const formats = await encodeFixture(ffmpegPath, dir);
  for (const f of formats) add('valid', f.name, f.data, `speech.${f.ext}`, f.contentType, true);

  // 2. Truncated at many points: headers cut, mid-frame, almost complete.
  for (const f of formats) {
    const n = f.data.length;
    const cuts: Array<[string, number]> = [
      ['1B', 1],
      ['44B', 44],
      ['1%', Math.floor(n * 0.01)],
      ['10%', Math.floor(n * 0.1)],
      ['50%', Math.floor(n * 0.5)],
      ['90%', Math.floor(n * 0.9)],
      ['99%', Math.floor(n * 0.99)],
      ['n-1', n - 1],
    ];
    for (const [label, at] of cuts) add('truncated', `${f.name}@${label}`, f.data.subarray(0, Math.max(1, at)), `cut.${f.ext}`);
  }

  // 3. Bit rot: 1 % of the bytes after the header flipped; a quarter zeroed.
  for (const f of formats) {
    const flipped = Buffer.from(f.data);
    for (let i = 0; i < flipped.length / 100; i++) {
      const at = 64 + Math.floor(rnd() * Math.max(1, flipped.length - 64));
      flipped[at] ^= 1 << Math.floor(rnd() * 8);
    }
    add('corrupted', `${f.name}+bitflips`, flipped, `rot.${f.ext}`);
    const zeroed = Buffer.from(f.data);
    zeroed.fill(0, Math.floor(zeroed.length * 0.4), Math.floor(zeroed.length * 0.65));
    add('corrupted', `${f.name}+zeroed`, zeroed, `zero.${f.ext}`);
  }

  // 4. Random bytes, bare and behind real magic numbers.
  for (const size of [1, 2, 7, 100, 511, 4096, 65536, 300_000]) add('random', `${size}B`, randomBytes(size), 'noise.wav');
  const magics: Array<[string, Buffer]> = [
    ['RIFF/WAVE', Buffer.from('RIFF\xff\xff\xff\x7fWAVEfmt ', 'latin1')],
    ['fLaC', Buffer.from('fLaC')],
    ['OggS', Buffer.from('OggS\x00\x02')],
    ['ID3', Buffer.from('ID3\x04\x00\x00\x00\x00\x00\x00')],
    ['EBML', Buffer.from([0x1a, 0x45, 0xdf, 0xa3])],
    ['ftyp', Buffer.from('\x00\x00\x00\x20ftypM4A \x00\x00\x00\x00', 'latin1')],
    ['FORM/AIFF', Buffer.from('FORM\x7f\xff\xff\xffAIFF', 'latin1')],
    ['caff', Buffer.from('caff\x00\x01\x00\x00')],
    ['.snd', Buffer.from('.snd\x00\x00\x00\x18\xff\xff\xff\xff', 'latin1')],
    ['MAC ', Buffer.from('MAC \x96\x0f')],
    ['wvpk', Buffer.from('wvpk')],
    ['TTA1', Buffer.from('TTA1')],
    ['#!AMR', Buffer.from('#!AMR\n')],
    ['ADTS', Buffer.from([0xff, 0xf1, 0x50, 0x80])],
    ['MPEG-frame', Buffer.from([0xff, 0xfb, 0x90, 0x64])],
    ['AC3', Buffer.from([0x0b, 0x77])],
  ];
  for (const [label, magic] of magics) {
    add('random', `magic ${label} + 4 KB`, Buffer.concat([magic, randomBytes(4096)]), 'magic.bin');
    add('random', `magic ${label} + 200 KB`, Buffer.concat([magic, randomBytes(200_000)]), 'magic.bin');
  }

  // 5. Absurd WAV headers.
  const pcm = Buffer.alloc(32000);
  for (let i = 0; i < pcm.length / 2; i++) pcm.writeInt16LE(Math.round(8000 * Math.sin(i / 10)), i * 2);
  const headerCases: Array<[string, Parameters<typeof craftWav>[0]]> = [
    ['rate 0', { rate: 0, data: pcm }],
    ['rate 1', { rate: 1, data: pcm.subarray(0, 200) }],
    ['rate 7', { rate: 7, data: pcm.subarray(0, 200) }],
    ['rate 100', { rate: 100, data: pcm.subarray(0, 2000) }],
    ['rate 768000', { rate: 768000, data: pcm }],
    ['rate 12345678', { rate: 12345678, data: pcm }],
    ['rate 2^31', { rate: 2 ** 31, data: pcm }],
    ['rate 2^32-1', { rate: 2 ** 32 - 1, data: pcm }],
    ['channels 0', { channels: 0, data: pcm }],
    ['channels 3', { channels: 3, data: pcm.subarray(0, 31998) }],
    ['channels 9', { channels: 9, data: pcm.subarray(0, 31986) }],
    ['channels 64', { channels: 64, data: pcm.subarray(0, 25600) }],
    ['channels 255', { channels: 255, data: pcm.subarray(0, 30600) }],
    ['channels 1024', { channels: 1024, data: pcm.subarray(0, 30720) }],
    ['channels 65535', { channels: 65535, data: pcm }],
    ['bits 0', { bits: 0, data: pcm }],
    ['bits 1', { bits: 1, data: pcm }],
    ['bits 7', { bits: 7, data: pcm }],
    ['bits 12', { bits: 12, data: pcm }],
    ['bits 33', { bits: 33, data: pcm }],
    ['bits 64 int', { bits: 64, data: pcm }],
    ['float bits 16', { format: 3, bits: 16, data: pcm }],
    ['float bits 24', { format: 3, bits: 24, data: pcm.subarray(0, 31998) }],
    ['format 0', { format: 0, data: pcm }],
    ['format 0xFFFF', { format: 0xffff, data: pcm }],
    ['format ADPCM no extra', { format: 2, bits: 4, data: pcm }],
    ['extensible, no extension', { format: 0xfffe, data: pcm }],
    ['block align 0', { blockAlign: 0, data: pcm }],
    ['byte rate 0', { byteRate: 0, data: pcm }],
    ['data size 0', { dataSize: 0, data: pcm }],
    ['data size 4 GB declared', { dataSize: 0xffffffff, data: pcm }],
    ['data size 2 GB declared', { dataSize: 0x7fffffff, data: pcm }],
    ['RIFF size 0', { riffSize: 0, data: pcm }],
    ['RIFF size 4 GB', { riffSize: 0xffffffff, data: pcm }],
    ['RIFX (big-endian) id', { riffId: 'RIFX', data: pcm }],
    ['RF64 id without ds64', { riffId: 'RF64', data: pcm }],
    ['no fmt chunk', { omitFmt: true, data: pcm }],
    ['no data chunk', { omitData: true }],
    ['fmt after data', { fmtAfterData: true, data: pcm }],
    ['fmt size 0', { fmtSize: 0, data: pcm }],
    ['fmt size 4 GB', { fmtSize: 0xfffffff0, data: pcm }],
    ['junk chunk of 4 GB first', { before: [Buffer.from('JUNK\xf0\xff\xff\xff', 'latin1')], data: pcm }],
    [
      '2000 empty chunks first',
      { before: Array.from({ length: 2000 }, (_, i) => Buffer.from(`x${String(i % 100).padStart(2, '0')}\x00\x00\x00\x00\x00`, 'latin1')), data: pcm },
    ],
  ];
  for (const [label, o] of headerCases) add('wav-header', label, craftWav(o), 'odd.wav', 'audio/wav');

  // 6. Non-finite and extreme float samples.
  const sr = 16000;
  const firstNaN = items.length;
  add('nan-inf', 'f32 all NaN', floatWav(() => NaN, sr), 'nan.wav', 'audio/wav');
  add('nan-inf', 'f32 all +Inf', floatWav(() => Infinity, sr), 'inf.wav', 'audio/wav');
  add('nan-inf', 'f32 all -Inf', floatWav(() => -Infinity, sr), 'ninf.wav', 'audio/wav');
  add('nan-inf', 'f32 half NaN', floatWav((i) => (i % 2 ? NaN : 0.3 * Math.sin(i / 9)), sr), 'halfnan.wav', 'audio/wav');
  add('nan-inf', 'f32 NaN every 100th', floatWav((i) => (i % 100 === 0 ? NaN : 0.3 * Math.sin(i / 9)), sr), 'somenan.wav', 'audio/wav');
  add('nan-inf', 'f32 1e38', floatWav((i) => (i % 2 ? 1e38 : -1e38), sr), 'huge.wav', 'audio/wav');
  add('nan-inf', 'f32 denormals', floatWav(() => 1e-40, sr), 'denormal.wav', 'audio/wav');
  add('nan-inf', 'f64 all NaN', floatWav(() => NaN, sr, 1, 64), 'nan64.wav', 'audio/wav');
  add('nan-inf', 'f64 +-Inf', floatWav((i) => (i % 2 ? Infinity : -Infinity), sr, 1, 64), 'inf64.wav', 'audio/wav');
  add('nan-inf', 'f32 stereo, right NaN', floatWav((i) => (i % 2 ? NaN : 0.3 * Math.sin(i / 18)), sr, 2), 'stereonan.wav', 'audio/wav');
  for (const it of items.slice(firstNaN)) if (!/1e38|denormals/.test(it.name)) it.nonFinite = true;

  // 7. Huge declared sizes in other containers.
  const flac = formats.find((f) => f.name === 'flac')?.data;
  if (flac) {
    const b = Buffer.from(flac);
    // STREAMINFO total samples (36 bits at byte 21.5 of the block): all ones.
    b[8 + 13] |= 0x0f;
    b.fill(0xff, 8 + 14, 8 + 18);
    add('huge-declared', 'flac total samples 2^36-1', b, 'big.flac', 'audio/flac');
  }
  const m4a = formats.find((f) => f.name === 'm4a-aac')?.data;
  if (m4a) {
    const b = Buffer.from(m4a);
    const at = b.indexOf('mdat');
    if (at >= 4) b.writeUInt32BE(0xffffffff, at - 4);
    add('huge-declared', 'm4a mdat size 4 GB', b, 'big.m4a', 'audio/mp4');
    const moov = b.indexOf('mvhd');
    const c = Buffer.from(m4a);
    if (moov >= 0) c.writeUInt32BE(0xffffffff, moov + 4 + 4 + 4 + 4 + 4); // duration field (version 0)
    add('huge-declared', 'm4a mvhd duration max', c, 'long.m4a', 'audio/mp4');
  }
  add('huge-declared', 'aiff 2^31 frames', Buffer.concat([Buffer.from('FORM\x00\x00\x00\x2eAIFFCOMM\x00\x00\x00\x12\x00\x01\x7f\xff\xff\xff\x00\x10\x40\x0e\xac\x44\x00\x00\x00\x00\x00\x00SSND\x7f\xff\xff\xff\x00\x00\x00\x00\x00\x00\x00\x00', 'latin1'), pcm]), 'big.aiff');

  // 8. Odd but real: extreme rates and channel counts, tiny clips.
  const lavfi = async (label: string, args: string[], ext: string, valid = false) => {
    const out = path.join(dir, `gen-${items.length}.${ext}`);
    try {
      await ffmpeg(ffmpegPath, [...args, out]);
      add('odd-valid', label, fs.readFileSync(out), `odd.${ext}`, CONTENT_TYPES[ext] ?? 'application/octet-stream', valid);
    } catch {
      // not producible with this ffmpeg
    } finally {
      fs.rmSync(out, { force: true });
    }
  };
  const sine = (rate: number, d = 1) => ['-f', 'lavfi', '-i', `sine=frequency=300:sample_rate=${rate}:duration=${d}`];
  await lavfi('8 kHz mono', [...sine(8000), '-c:a', 'pcm_s16le'], 'wav', true);
  await lavfi('96 kHz', [...sine(96000), '-c:a', 'pcm_s24le'], 'wav', true);
  await lavfi('192 kHz', [...sine(192000), '-c:a', 'pcm_s16le'], 'wav');
  await lavfi('384 kHz', [...sine(384000), '-c:a', 'pcm_s16le'], 'wav');
  await lavfi('1 kHz', [...sine(1000), '-c:a', 'pcm_s16le'], 'wav');
  await lavfi('5.1 flac', [...sine(48000), '-ac', '6', '-c:a', 'flac'], 'flac');
  await lavfi('8 channels', [...sine(16000), '-ac', '8', '-c:a', 'pcm_s16le'], 'wav');
  await lavfi(
    '32 channels',
    ['-f', 'lavfi', '-i', `aevalsrc=exprs=${Array.from({ length: 32 }, (_, i) => `0.1*sin(${200 + i * 10}*2*PI*t)`).join('|')}:s=16000:d=1`, '-c:a', 'pcm_s16le'],
    'wav',
  );
  await lavfi('10 ms', [...sine(16000, 0.01), '-c:a', 'pcm_s16le'], 'wav');
  await lavfi('2 s digital silence', ['-f', 'lavfi', '-i', 'anullsrc=r=16000:cl=mono', '-t', '2', '-c:a', 'pcm_s16le'], 'wav', true);
  add('odd-valid', 'one sample', craftWav({ data: Buffer.from([0x10, 0x00]) }), 'one.wav', 'audio/wav');

  // 9. Video, images: not audio, or audio inside video.
  const video = (label: string, args: string[], ext: string) => lavfi(label, args, ext);
  const testsrc = ['-f', 'lavfi', '-i', 'testsrc=size=64x64:rate=10:duration=1'];
  await video('mp4 video+audio', [...testsrc, '-f', 'lavfi', '-i', 'sine=duration=1', '-c:v', 'libx264', '-c:a', 'aac', '-shortest'], 'mp4');
  await video('mp4 video only', [...testsrc, '-c:v', 'libx264'], 'mp4');
  await video('webm video only', [...testsrc, '-c:v', 'libvpx'], 'webm');
  await video('mkv video+opus', [...testsrc, '-f', 'lavfi', '-i', 'sine=duration=1', '-c:v', 'libvpx', '-c:a', 'libopus', '-shortest'], 'mkv');
  await video('avi mjpeg+pcm', [...testsrc, '-f', 'lavfi', '-i', 'sine=duration=1', '-c:v', 'mjpeg', '-c:a', 'pcm_s16le', '-shortest'], 'avi');
  await video('gif', [...testsrc, '-frames:v', '5'], 'gif');
  await video('png', [...testsrc, '-frames:v', '1'], 'png');
  await video('jpeg', [...testsrc, '-frames:v', '1'], 'jpg');

  // 10. Text, archives, executables, playlists (which must never make the service fetch anything).
  const wav = formats.find((f) => f.name === 'wav-s16')?.data ?? craftWav({ data: pcm });
  add('other', 'empty file', Buffer.alloc(0), 'empty.wav', 'audio/wav');
  add('other', 'plain text', Buffer.from('hello, this is not audio\n'.repeat(40)), 'notes.wav', 'audio/wav');
  add('other', 'json', Buffer.from(JSON.stringify({ audio: 'base64...', n: [1, 2, 3] })), 'data.json', 'application/json');
  add('other', 'html', Buffer.from('<!doctype html><script>alert(1)</script>'), 'page.html', 'text/html');
  add('other', 'svg', Buffer.from('<svg xmlns="http://www.w3.org/2000/svg"><script>alert(1)</script></svg>'), 'x.svg', 'image/svg+xml');
  add('other', 'pdf header', Buffer.concat([Buffer.from('%PDF-1.7\n'), randomBytes(2000)]), 'doc.pdf', 'application/pdf');
  add('other', 'zip with a wav', zipOf('speech.wav', wav), 'audio.zip', 'application/zip');
  add('other', 'gzip of a wav', zlib.gzipSync(wav), 'speech.wav.gz', 'application/gzip');
  add('other', 'ELF header', Buffer.concat([Buffer.from([0x7f, 0x45, 0x4c, 0x46, 2, 1, 1]), randomBytes(1000)]), 'a.out');
  add('other', 'MZ header', Buffer.concat([Buffer.from('MZ'), randomBytes(1000)]), 'setup.exe');
  add('other', 'm3u8 pointing at a URL', Buffer.from(`#EXTM3U\n#EXT-X-TARGETDURATION:10\n#EXTINF:10,\n${opts.baitUrl}/hls.ts\n#EXT-X-ENDLIST\n`), 'list.m3u8', 'application/vnd.apple.mpegurl');
  add('other', 'm3u pointing at a URL', Buffer.from(`#EXTM3U\n${opts.baitUrl}/a.wav\n`), 'list.m3u', 'audio/x-mpegurl');
  add('other', 'ffconcat of local files', Buffer.from('ffconcat version 1.0\nfile /etc/passwd\nfile /etc/hostname\n'), 'list.txt', 'text/plain');
  add('other', 'SDP with an RTP URL', Buffer.from(`v=0\no=- 0 0 IN IP4 127.0.0.1\ns=x\nc=IN IP4 127.0.0.1\nt=0 0\nm=audio ${new URL(opts.baitUrl).port} RTP/AVP 0\n`), 'a.sdp', 'application/sdp');
  add('other', 'HLS-like with file:// URL', Buffer.from('#EXTM3U\n#EXTINF:1,\nfile:///etc/passwd\n#EXT-X-ENDLIST\n'), 'x.m3u8');
  return items;
}
