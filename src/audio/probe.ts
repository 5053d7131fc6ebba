// What an input file holds, from ffprobe's JSON output (-print_format json -show_format -show_streams
// -show_chapters): the container, its duration and start, every stream (type, codec, rate, channels, start time) and
// the chapter count. ffprobe's JSON is its stable interface; ffmpeg's human-readable stderr banner, which this
// replaced, changes between ffmpeg versions. The input is opened under the same demuxer and protocol whitelist as the
// decoder (untrustedInputArgs). Errors for the client come from ffprobe's error string and its last stderr lines.
import fs from 'node:fs';
import path from 'node:path';
import type { Config } from '../config';
import { AudioInputError, AudioPipelineError, UnsupportedFormatError } from './errors';
import { killChild, spawnFfprobe, StderrTail, untrustedInputArgs, waitForExit } from './ffmpeg';

export { AudioInputError } from './errors';

export type StreamType = 'audio' | 'video' | 'subtitle' | 'data' | 'attachment' | 'other';

export interface ProbedStream {
  /** The stream's index in the container (ffmpeg's `0:N`). */
  index: number;
  type: StreamType;
  /** ffmpeg's codec name, e.g. "aac", "opus", "h264", "mov_text"; "unknown" when ffprobe names none. */
  codec: string;
  /** Audio only: sample rate (Hz) and channel count; null otherwise or when unknown. */
  sampleRate: number | null;
  channels: number | null;
  startTimeS: number | null;
  durationS: number | null;
  /** A cover picture stored as a video stream (MP3/M4A artwork): not a video. */
  attachedPicture: boolean;
  /** The disposition flags set (ffprobe's names: "default", "forced", "comment", …): a remux gives them back. */
  dispositions: string[];
}

export interface MediaProbe {
  /** ffmpeg demuxer name(s), e.g. "wav", "ogg", "mov,mp4,m4a,3gp,3g2,mj2", "matroska,webm". */
  container: string;
  /** Container duration in seconds, or null when the container does not say. */
  durationS: number | null;
  streams: ProbedStream[];
  chapters: number;
  /** MP4/MOV: the `ftyp` major brand ("isom", "mp42", "qt  "...); null for other containers. */
  brand: string | null;
  /** Start of the first chapter (seconds); null without chapters. */
  firstChapterS: number | null;
}

export interface AudioProbe {
  /** Sample rate of the first audio stream, Hz (Opus: the rate its header says it was recorded at). */
  sampleRate: number;
  channels: number;
  /** Container duration in seconds, or null when the container does not say. */
  durationS: number | null;
  /** ffmpeg decoder name of the first audio stream, e.g. "pcm_s16le", "mp3", "aac", "opus". */
  codec: string;
  /** ffmpeg demuxer name(s). */
  container: string;
}

export type ProbeTool = Pick<Config, 'ffprobePath' | 'ffmpegPath' | 'fileWorkNice' | 'fileWorkIdle'>;

const PROBE_TIMEOUT_MS = 30_000;
/** ffprobe's JSON for a file with a few thousand chapters or streams is still far under this. */
const MAX_JSON_BYTES = 8 << 20;

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

/** Describes the file at `inputPath` (any media ffmpeg's whitelisted demuxers open); AudioInputError when none does. */
export async function probeMedia(tool: ProbeTool, inputPath: string): Promise<MediaProbe> {
  // Absolute path: a relative name like "concat:a|b" or "http:x" would be read as a protocol URL.
  inputPath = path.resolve(inputPath);
  const child = spawnFfprobe(tool, [
    '-v', 'error',
    ...untrustedInputArgs(),
    '-print_format', 'json=compact=1', '-show_error', '-show_format', '-show_streams', '-show_chapters',
    '-i', inputPath,
  ]);
  const stderr = new StderrTail(16 * 1024);
  const stdout: Buffer[] = [];
  let stdoutBytes = 0;
  child.stderr!.on('data', (d: Buffer) => stderr.push(d));
  child.stdout!.on('data', (d: Buffer) => {
    stdoutBytes += d.length;
    if (stdoutBytes <= MAX_JSON_BYTES) stdout.push(d);
    else killChild(child);
  });
  child.stdin!.on('error', () => undefined);
  child.stdin!.end();
  let timedOut = false;
  const timer = setTimeout(() => {
    timedOut = true;
    killChild(child);
  }, PROBE_TIMEOUT_MS);
  let exit: { code: number | null; signal: NodeJS.Signals | null };
  try {
    exit = await waitForExit(child);
  } finally {
    clearTimeout(timer);
  }
  if (timedOut) throw new AudioInputError(`could not read the file's description within ${PROBE_TIMEOUT_MS / 1000} s`);
  if (stdoutBytes > MAX_JSON_BYTES) throw new AudioInputError('the file describes too many streams or chapters');
  if (exit.signal) throw new AudioPipelineError(`ffprobe was killed (${exit.signal})`);
  let json: FfprobeJson;
  try {
    json = JSON.parse(Buffer.concat(stdout).toString('utf8')) as FfprobeJson;
  } catch {
    throw exit.code === 0
      ? new AudioPipelineError('ffprobe wrote no readable JSON')
      : probeFailure(stderr.toString(), inputPath, null);
  }
  if (exit.code !== 0 || json.error || !json.format) throw probeFailure(stderr.toString(), inputPath, json.error?.string ?? null);
  return parseProbe(json);
}

/** The first audio stream's properties (what the file pipeline needs); AudioInputError when there is none. */
export async function probeAudio(tool: ProbeTool, inputPath: string): Promise<AudioProbe> {
  await assertReadableFile(inputPath);
  return audioOf(await probeMedia(tool, inputPath), inputPath);
}

/** The first audio stream of a probed file, as the pipeline describes its input. */
export async function audioOf(probe: MediaProbe, inputPath: string): Promise<AudioProbe> {
  const audio = probe.streams.find((s) => s.type === 'audio');
  if (!audio) throw new AudioInputError('no audio stream found');
  if (!audio.sampleRate || !audio.channels) throw new AudioInputError('could not decode: the audio stream has no sample rate or channel count');
  // Opus always decodes at 48 kHz; the stream header records the rate the audio was recorded at.
  const opusRate = audio.codec === 'opus' ? await opusInputSampleRate(inputPath) : null;
  return {
    sampleRate: opusRate ?? audio.sampleRate,
    channels: audio.channels,
    durationS: probe.durationS,
    codec: audio.codec,
    container: probe.container,
  };
}

/** The parts of ffprobe's JSON read here (every value may be missing). */
interface FfprobeJson {
  error?: { code?: number; string?: string };
  format?: { format_name?: string; duration?: string; start_time?: string; tags?: { major_brand?: string } };
  streams?: Array<{
    index?: number;
    codec_type?: string;
    codec_name?: string;
    sample_rate?: string;
    channels?: number;
    start_time?: string;
    duration?: string;
    disposition?: Record<string, unknown>;
  }>;
  chapters?: Array<{ start_time?: string }>;
}

const STREAM_TYPES: readonly StreamType[] = ['audio', 'video', 'subtitle', 'data', 'attachment'];

export function parseProbe(json: FfprobeJson): MediaProbe {
  const seconds = (v: string | undefined): number | null => {
    const n = v === undefined ? NaN : Number(v);
    return Number.isFinite(n) ? n : null;
  };
  const streams = (json.streams ?? []).map((s, i): ProbedStream => {
    const rate = Number(s.sample_rate);
    const type = STREAM_TYPES.find((t) => t === s.codec_type) ?? 'other';
    return {
      index: Number.isInteger(s.index) ? s.index! : i,
      type,
      codec: s.codec_name ?? 'unknown',
      sampleRate: type === 'audio' && Number.isInteger(rate) && rate > 0 ? rate : null,
      channels: type === 'audio' && Number.isInteger(s.channels) && s.channels! > 0 ? s.channels! : null,
      startTimeS: seconds(s.start_time),
      durationS: seconds(s.duration),
      attachedPicture: s.disposition?.attached_pic === 1,
      dispositions: Object.entries(s.disposition ?? {}).filter(([name, on]) => on === 1 && /^[a-z_]+$/.test(name)).map(([name]) => name),
    };
  });
  const duration = seconds(json.format?.duration);
  return {
    container: json.format?.format_name ?? 'unknown',
    durationS: duration !== null && duration >= 0 ? duration : null,
    streams,
    chapters: Array.isArray(json.chapters) ? json.chapters.length : 0,
    brand: typeof json.format?.tags?.major_brand === 'string' ? json.format.tags.major_brand : null,
    firstChapterS: Array.isArray(json.chapters) && json.chapters.length > 0 ? seconds(json.chapters[0].start_time) : null,
  };
}

/** The client-facing reason an input could not be opened, from ffprobe's (or ffmpeg's) stderr and error string. */
export function probeFailure(stderr: string, inputPath: string, errorString: string | null): AudioInputError {
  if (/matches no streams/.test(stderr)) return new AudioInputError('no audio stream found');
  const rejected = /\[([A-Za-z0-9_]+)[A-Za-z0-9_,]* @ 0x[0-9a-f]+\] Format not on whitelist/.exec(stderr);
  if (rejected) return new UnsupportedFormatError(rejected[1]);
  const lines = stderr.split(/\r?\n/).map((l) => l.trim()).filter(Boolean);
  // The useful reason is usually the line naming the input ("<path>: Invalid data found ...") plus what preceded it.
  const reasonIdx = lines.findIndex((l) => l.includes(inputPath) && /:\s*\S/.test(l.slice(l.indexOf(inputPath) + inputPath.length)));
  const detailLines = reasonIdx >= 0 ? lines.slice(Math.max(0, reasonIdx - 2), reasonIdx + 1) : lines.slice(-3);
  const detail = cleanDetail(detailLines.join('; ') || errorString || '', inputPath);
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
