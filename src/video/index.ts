// Video in → video out (`output_format=video`, `nsm denoise talk.mp4 -o clean.mp4`): the file pipeline cleans the
// input's first audio track into an AAC (MP4/MOV) or Opus (Matroska/WebM) file, then ONE ffmpeg remux writes the
// input's container again with every video stream, the other audio tracks, subtitles, attachments, chapters and
// metadata copied as they are (-c copy: no re-encode) and the cleaned track in the first one's place, shifted to its
// start time so sync is kept. Memory stays bounded (ffmpeg streams file to file); the cleaned track is a temp file
// next to the output, removed whatever happens.
import fs from 'node:fs';
import path from 'node:path';
import { AudioAbortedError, AudioPipelineError, UnsupportedFormatError } from '../audio/errors';
import { killChild, spawnFfmpeg, StderrTail, untrustedInputArgs, waitForExit } from '../audio/ffmpeg';
import { assertReadableFile, probeMedia, type MediaProbe, type ProbedStream } from '../audio/probe';
import { denoiseFile, type DenoiseFileDeps, type DenoiseFileOptions, type DenoiseStats } from '../pipeline';
import { CONTAINERS, containerOf, notAVideoContainer, VideoRequestError, videoStreams, type VideoContainer } from './containers';

export { CONTAINERS, VIDEO_EXTENSIONS, VideoRequestError, videoExtensionOf, type VideoContainer } from './containers';

/** The stats of /denoise plus what the answer holds. */
export type VideoStats = Omit<DenoiseStats, 'output_format'> & {
  output_format: 'video';
  /** mp4, mov, mkv or webm: the input's own. */
  output_container: VideoContainer;
  /** The cleaned track's codec (the other streams are copied). */
  output_audio_codec: 'aac' | 'opus';
  video_streams: number;
  audio_streams: number;
  subtitle_streams: number;
  chapters: number;
};

export interface VideoPlan {
  probe: MediaProbe;
  container: VideoContainer;
}

/**
 * Checks, before anything is decoded, that the input is a video this answers (a video stream, in MP4, MOV, MKV or
 * WebM): VideoRequestError (400) otherwise, with what to do instead.
 */
export async function planVideo(deps: Pick<DenoiseFileDeps, 'config'>, inputPath: string, nameHint: string): Promise<VideoPlan> {
  await assertReadableFile(inputPath);
  const probe = await probeMedia(deps.config, inputPath).catch((err: unknown) => {
    // A container the decoder does not open at all (AVI, MPEG-TS, FLV) is as much a wrong request for video as one it
    // opens but this does not remux (WMV): the same 400, rather than the audio upload's "send WAV, FLAC, …".
    if (err instanceof UnsupportedFormatError) throw notAVideoContainer(err.format);
    throw err;
  });
  if (videoStreams(probe).length === 0) {
    throw new VideoRequestError(
      'output_format=video needs an input with a video stream; this file has none (ask for wav, flac, mp3, opus or m4a instead)',
    );
  }
  return { probe, container: containerOf(probe, nameHint) };
}

/** Denoises the video file at `inputPath` into `outputPath` (the container of `plan`). */
export async function denoiseVideo(
  deps: DenoiseFileDeps,
  inputPath: string,
  outputPath: string,
  plan: VideoPlan,
  opts: Omit<DenoiseFileOptions, 'outputFormat'>,
): Promise<VideoStats> {
  const spec = CONTAINERS[plan.container];
  const cleaned = `${outputPath}.cleaned.${spec.audio}`;
  try {
    const stats = await denoiseFile(deps, inputPath, cleaned, { ...opts, outputFormat: spec.audio });
    if (opts.signal?.aborted) throw new AudioAbortedError();
    await writeInSync(deps, inputPath, plan.probe, cleaned, outputPath, spec, opts.signal);
    const { output_format: _audio, ...rest } = stats;
    const count = (type: string) => plan.probe.streams.filter((s) => s.type === type && !s.attachedPicture).length;
    return {
      ...rest,
      output_format: 'video',
      output_container: plan.container,
      output_audio_codec: spec.audio === 'm4a' ? 'aac' : 'opus',
      video_streams: videoStreams(plan.probe).length,
      audio_streams: count('audio'),
      subtitle_streams: count('subtitle'),
      chapters: plan.probe.chapters,
    };
  } catch (err) {
    await fs.promises.rm(outputPath, { force: true }).catch(() => undefined);
    throw err;
  } finally {
    await fs.promises.rm(cleaned, { force: true }).catch(() => undefined);
  }
}

/** As long as a remux may take: it copies packets, about as fast as the disk reads (2 GB jobs included). */
const REMUX_TIMEOUT_MS = 15 * 60_000;
/** Start times agree within this (s): Matroska counts in milliseconds. */
const SYNC_TOLERANCE_S = 0.0005;

/** Time shifts (s) given to the inputs of a remux: the video (with subtitles), the cleaned track, the chapters. */
interface Offsets {
  video: number;
  audio: number;
  chapters: number;
}

interface Starts {
  video: number | null;
  audio: number | null;
  chapters: number | null;
}

const startsOf = (probe: MediaProbe): Starts => ({
  video: videoStreams(probe)[0]?.startTimeS ?? null,
  audio: probe.streams.find((s) => s.type === 'audio')?.startTimeS ?? null,
  chapters: probe.firstChapterS,
});

/**
 * Remuxes, then checks with ffprobe that the video, the cleaned track and the chapters start where the input's did,
 * and when not, remuxes once more with the differences taken off. MP4 and MOV come out right the first time; the
 * bundled ffmpeg (4.1) moves Matroska's other streams by the Opus codec delay when it writes an Opus track (a plain
 * `-c copy` of such a file does the same), and the second pass puts them back.
 */
async function writeInSync(
  deps: DenoiseFileDeps,
  inputPath: string,
  probe: MediaProbe,
  cleaned: string,
  outputPath: string,
  spec: (typeof CONTAINERS)[VideoContainer],
  signal: AbortSignal | undefined,
): Promise<void> {
  const want = startsOf(probe);
  const cleanedStart = startsOf(await probeMedia(deps.config, cleaned)).audio ?? 0;
  const offsets: Offsets = { video: 0, audio: (want.audio ?? 0) - cleanedStart, chapters: 0 };
  for (let pass = 0; pass < 2; pass++) {
    await remux(deps, inputPath, cleaned, offsets, probe, outputPath, spec, signal);
    const got = startsOf(await probeMedia(deps.config, outputPath));
    const off = (k: keyof Starts): number => (want[k] === null || got[k] === null ? 0 : got[k]! - want[k]!);
    if (Math.abs(off('video')) <= SYNC_TOLERANCE_S && Math.abs(off('audio')) <= SYNC_TOLERANCE_S && Math.abs(off('chapters')) <= SYNC_TOLERANCE_S) return;
    offsets.video -= off('video');
    offsets.audio -= off('audio');
    offsets.chapters -= off('chapters');
  }
}

/** Disposition flags the bundled ffmpeg (4.1) sets with `-disposition` (ffprobe also reports others it cannot set). */
const SETTABLE_DISPOSITIONS = new Set([
  'default', 'dub', 'original', 'comment', 'lyrics', 'karaoke', 'forced', 'hearing_impaired', 'visual_impaired',
  'clean_effects', 'captions', 'descriptions', 'metadata',
]);

/**
 * The output's streams, one `-map` each and in this order: the input's video streams, the cleaned track (input 1) in
 * the first audio track's place, the other audio tracks, subtitles and attachments. Each takes its input stream's
 * metadata (language, title, an attachment's filename and mimetype) explicitly: naming one stream's metadata turns
 * ffmpeg's copying of every other stream's off. The cleaned track also takes the first audio track's dispositions, so
 * it stays the default track where that one was.
 */
function streamMaps(probe: MediaProbe): string[] {
  const of = (type: ProbedStream['type']) => probe.streams.filter((s) => s.type === type);
  const [first, ...otherAudio] = of('audio');
  const args: string[] = [];
  let out = 0;
  const map = (source: string, metadataFrom: ProbedStream): void => {
    args.push('-map', source, `-map_metadata:s:${out}`, `0:s:${metadataFrom.index}`);
    out++;
  };
  for (const s of of('video')) map(`0:${s.index}`, s);
  if (first) {
    const flags = first.dispositions.filter((d) => SETTABLE_DISPOSITIONS.has(d));
    args.push(`-disposition:${out}`, flags.length > 0 ? flags.join('+') : '0');
    map('1:a:0', first);
  }
  for (const s of [...otherAudio, ...of('subtitle'), ...of('attachment')]) map(`0:${s.index}`, s);
  return args;
}

/**
 * The input's container again: its streams as `streamMaps` lists them, chapters and global metadata, all copied, each
 * input shifted by its offset.
 */
async function remux(
  deps: DenoiseFileDeps,
  inputPath: string,
  cleaned: string,
  offsets: Offsets,
  probe: MediaProbe,
  outputPath: string,
  spec: (typeof CONTAINERS)[VideoContainer],
  signal: AbortSignal | undefined,
): Promise<void> {
  const input = path.resolve(inputPath);
  const chapters = probe.chapters > 0;
  const child = spawnFfmpeg(deps.config, [
    '-nostats', '-loglevel', 'error',
    ...untrustedInputArgs(), '-itsoffset', offsets.video.toFixed(6), '-i', input,
    '-itsoffset', offsets.audio.toFixed(6), '-i', path.resolve(cleaned),
    // The chapters from a third reading of the input: the muxer moves them apart from the streams.
    ...(chapters ? [...untrustedInputArgs(), '-itsoffset', offsets.chapters.toFixed(6), '-i', input] : []),
    ...streamMaps(probe),
    '-c', 'copy', '-map_metadata', '0', '-map_chapters', chapters ? '2' : '-1',
    ...spec.args, '-f', spec.muxer, '-y', path.resolve(outputPath),
  ]);
  child.stdin!.end();
  child.stdout!.resume();
  const stderr = new StderrTail();
  child.stderr!.on('data', (d: Buffer) => stderr.push(d));
  const stop = (): void => killChild(child);
  signal?.addEventListener('abort', stop, { once: true });
  const timer = setTimeout(stop, REMUX_TIMEOUT_MS);
  try {
    const { code, signal: killed } = await waitForExit(child);
    if (signal?.aborted) throw new AudioAbortedError();
    if (code !== 0) {
      throw new AudioPipelineError(`ffmpeg could not write the ${spec.extension} file: ${killed ? `killed (${killed})` : stderr.summary() || `exit code ${code}`}`);
    }
  } finally {
    clearTimeout(timer);
    signal?.removeEventListener('abort', stop);
  }
}
