// Reads an input file's audio properties with the ffmpeg binary alone (no ffprobe ships with @ffmpeg-installer).
// One ffmpeg run opens the file, decodes ~0.1 s of its first audio stream to a WAV on stdout, and we read:
//   - codec, container and duration from the "Input #0" banner on stderr,
//   - sample rate and channel count from the WAV header ffmpeg wrote (exact, no channel-layout name parsing),
//   - decodability from the exit status.
import fs from 'node:fs';
import path from 'node:path';
import type { Config } from '../config';
import { AudioInputError, AudioPipelineError } from './errors';
import { killChild, spawnFfmpeg, StderrTail, untrustedInputArgs, waitForExit } from './ffmpeg';

export { AudioInputError } from './errors';

export interface AudioProbe {
  /** Sample rate of the first audio stream, Hz. */
  sampleRate: number;
  channels: number;
  /** Container duration in seconds, or null when the container does not say. */
  durationS: number | null;
  /** ffmpeg decoder name of the first audio stream, e.g. "pcm_s16le", "mp3", "aac", "opus". */
  codec: string;
  /** ffmpeg demuxer name(s), e.g. "wav", "ogg", "mov,mp4,m4a,3gp,3g2,mj2", "matroska,webm". */
  container: string;
}

const PROBE_TIMEOUT_MS = 30_000;
/** Enough decoded audio to prove the stream decodes, little enough to be instant. */
const PROBE_DECODE_SECONDS = '0.1';

/** Rejects a missing, non-regular, empty or unreadable input with the client-facing AudioInputError. */
export async function assertReadableFile(inputPath: string): Promise<fs.Stats> {
  let stat: fs.Stats;
  try {
    stat = await fs.promises.stat(inputPath);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    throw new AudioInputError(code === 'ENOENT' ? 'file not found' : `cannot read file (${code ?? 'error'})`);
  }
  if (!stat.isFile()) throw new AudioInputError('not a regular file');
  if (stat.size === 0) throw new AudioInputError('file is empty');
  try {
    await fs.promises.access(inputPath, fs.constants.R_OK);
  } catch {
    throw new AudioInputError('cannot read file (permission denied)');
  }
  return stat;
}

export async function probeAudio(config: Config, inputPath: string): Promise<AudioProbe> {
  await assertReadableFile(inputPath);

  // Absolute path: ffmpeg would read a relative name like "concat:a|b" or "http:x" as a protocol URL.
  inputPath = path.resolve(inputPath);
  const child = spawnFfmpeg(config, [
    ...untrustedInputArgs(),
    '-i', inputPath,
    '-map', '0:a:0', '-vn', '-sn', '-dn',
    '-t', PROBE_DECODE_SECONDS,
    '-fflags', '+bitexact', '-map_metadata', '-1',
    '-c:a', 'pcm_s16le', '-f', 'wav', 'pipe:1',
  ]);
  const stderr = new StderrTail(64 * 1024);
  const stdout: Buffer[] = [];
  let stdoutBytes = 0;
  child.stderr!.on('data', (d: Buffer) => stderr.push(d));
  child.stdout!.on('data', (d: Buffer) => {
    // Only the header matters; 0.1 s of audio is small but cap it anyway.
    if (stdoutBytes < 1 << 20) {
      stdout.push(d);
      stdoutBytes += d.length;
    }
  });
  child.stdin!.on('error', () => undefined);
  child.stdin!.end();
  const timer = setTimeout(() => killChild(child), PROBE_TIMEOUT_MS);
  let exit: { code: number | null; signal: NodeJS.Signals | null };
  try {
    exit = await waitForExit(child);
  } finally {
    clearTimeout(timer);
  }
  const text = stderr.toString();
  if (exit.signal) throw new AudioPipelineError(`ffmpeg probe was killed (${exit.signal})`);

  const banner = parseBanner(text);
  if (exit.code !== 0) throw probeFailure(text, inputPath, banner.hasAudio);

  const header = parseWavHeader(Buffer.concat(stdout));
  if (!header) throw new AudioInputError(`could not decode: ${cleanDetail(stderr.summary(), inputPath) || 'no audio decoded'}`);
  // Opus always decodes at 48 kHz; the stream header records the rate the audio was recorded at.
  const opusRate = banner.codec === 'opus' ? await opusInputSampleRate(inputPath) : null;
  return {
    sampleRate: opusRate ?? header.sampleRate,
    channels: header.channels,
    durationS: banner.durationS,
    codec: banner.codec ?? 'unknown',
    container: banner.container ?? 'unknown',
  };
}

export interface Banner {
  container: string | null;
  durationS: number | null;
  codec: string | null;
  /** Sample rate of the input's first audio stream as ffmpeg prints it. */
  sampleRate: number | null;
  hasAudio: boolean;
  /** ffmpeg guessed the duration from a bitrate (an MP3 without a Xing header, a streamed WAV): it may be far off. */
  estimated: boolean;
}

/** Parses the "Input #0, <demuxer>, from ..." banner ffmpeg prints to stderr. */
export function parseBanner(text: string): Banner {
  const container = /Input #0, (.+?), from /.exec(text)?.[1] ?? null;
  const dur = /Duration: (\d+):(\d\d):(\d\d(?:\.\d+)?)/.exec(text);
  const durationS = dur ? Number(dur[1]) * 3600 + Number(dur[2]) * 60 + Number(dur[3]) : null;
  const audio = /Stream #0:\d+(?:\[[^\]]*\])?(?:\([^)]*\))?: Audio: ([A-Za-z0-9_]+)([^\n]*)/.exec(text);
  const rate = audio ? /, (\d+) Hz/.exec(audio[2]) : null;
  return {
    container, durationS, codec: audio?.[1] ?? null, sampleRate: rate ? Number(rate[1]) : null, hasAudio: !!audio,
    estimated: /Estimating duration from bitrate/.test(text),
  };
}

export function probeFailure(stderr: string, inputPath: string, hasAudio: boolean): AudioInputError {
  if (/matches no streams/.test(stderr) || (/Input #0/.test(stderr) && !hasAudio)) {
    return new AudioInputError('no audio stream found');
  }
  const rejected = /\[([A-Za-z0-9_]+)[A-Za-z0-9_,]* @ 0x[0-9a-f]+\] Format not on whitelist/.exec(stderr);
  if (rejected) {
    return new AudioInputError(`unsupported input format "${rejected[1]}": send WAV, FLAC, OGG, Opus, MP3, M4A, WebM or another audio file`);
  }
  const lines = stderr.split(/\r?\n/).map((l) => l.trim()).filter(Boolean);
  // The useful reason is usually the line naming the input ("<path>: Invalid data found ...") plus what preceded it.
  const reasonIdx = lines.findIndex((l) => l.includes(inputPath) && /:\s*\S/.test(l.slice(l.indexOf(inputPath) + inputPath.length)));
  const detailLines = reasonIdx >= 0 ? lines.slice(Math.max(0, reasonIdx - 2), reasonIdx + 1) : lines.slice(-3);
  const detail = cleanDetail(detailLines.join('; '), inputPath);
  if (/Invalid data found when processing input/.test(detail)) {
    return new AudioInputError(`could not decode: not a recognised audio format, or the file is corrupt (${detail})`);
  }
  return new AudioInputError(`could not decode: ${detail || 'unrecognised or corrupt audio data'}`);
}

/** Strips server paths and ffmpeg's "[demuxer @ 0x...]" prefixes from text shown to clients. */
export function cleanDetail(text: string, inputPath: string): string {
  return text
    .split(`${inputPath}: `).join('')
    .split(inputPath).join('input')
    .replace(/\[[A-Za-z0-9_,]+ @ 0x[0-9a-f]+\]\s*/g, '')
    .replace(/\s+/g, ' ')
    .trim()
    .slice(0, 400);
}

/** Reads channels and sample rate from a RIFF/WAVE header (walks chunks until "fmt "). */
export function parseWavHeader(buf: Buffer): { channels: number; sampleRate: number } | null {
  if (buf.length < 12 || buf.toString('ascii', 0, 4) !== 'RIFF' || buf.toString('ascii', 8, 12) !== 'WAVE') return null;
  let off = 12;
  while (off + 8 <= buf.length) {
    const id = buf.toString('ascii', off, off + 4);
    const size = buf.readUInt32LE(off + 4);
    if (id === 'fmt ') {
      if (off + 16 > buf.length) return null;
      const channels = buf.readUInt16LE(off + 10);
      const sampleRate = buf.readUInt32LE(off + 12);
      if (channels < 1 || sampleRate < 1) return null;
      return { channels, sampleRate };
    }
    off += 8 + size + (size & 1);
  }
  return null;
}

/**
 * The "input sample rate" field of an Opus identification header (RFC 7845 §5.1), found in the first
 * 64 KiB of an Ogg or Matroska/WebM file; null when absent, zero or implausible.
 */
export async function opusInputSampleRate(inputPath: string): Promise<number | null> {
  const fh = await fs.promises.open(inputPath, 'r');
  try {
    const buf = Buffer.alloc(64 * 1024);
    const { bytesRead } = await fh.read(buf, 0, buf.length, 0);
    const head = buf.subarray(0, bytesRead);
    const at = head.indexOf('OpusHead');
    if (at < 0 || at + 16 > head.length) return null;
    const rate = head.readUInt32LE(at + 12);
    return rate >= 8000 && rate <= 192000 ? rate : null;
  } finally {
    await fh.close();
  }
}
