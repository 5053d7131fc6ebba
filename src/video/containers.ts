// The containers video in → video out takes (MP4, MOV, Matroska, WebM): which one an input is, the content type and
// file extension of the answer, and the audio format the cleaned track is encoded in for it (AAC for MP4/MOV, Opus
// for Matroska/WebM: each container's usual codec, and one the bundled ffmpeg stream-copies into it).
import type { OutputFormat } from '../audio/formats';
import type { MediaProbe } from '../audio/probe';

export type VideoContainer = 'mp4' | 'mov' | 'mkv' | 'webm';

export interface ContainerSpec {
  extension: VideoContainer;
  contentType: string;
  /** ffmpeg muxer. */
  muxer: string;
  /** The pipeline's output format for the cleaned track (then copied into the container). */
  audio: OutputFormat;
  /** Muxer options. */
  args: string[];
}

export const CONTAINERS: Record<VideoContainer, ContainerSpec> = {
  mp4: { extension: 'mp4', contentType: 'video/mp4', muxer: 'mp4', audio: 'm4a', args: ['-movflags', '+faststart'] },
  mov: { extension: 'mov', contentType: 'video/quicktime', muxer: 'mov', audio: 'm4a', args: ['-movflags', '+faststart'] },
  mkv: { extension: 'mkv', contentType: 'video/x-matroska', muxer: 'matroska', audio: 'opus', args: [] },
  webm: { extension: 'webm', contentType: 'video/webm', muxer: 'webm', audio: 'opus', args: [] },
};

export const VIDEO_EXTENSIONS = Object.keys(CONTAINERS) as VideoContainer[];

/** The input is not one video in → video out can answer (400: the request, not the audio, is wrong). */
export class VideoRequestError extends Error {
  override readonly name = 'VideoRequestError';
  readonly status = 400;
}

/** Video streams of a probe: not cover pictures (MP3/M4A artwork is stored as a one-frame video stream). */
export function videoStreams(probe: MediaProbe) {
  return probe.streams.filter((s) => s.type === 'video' && !s.attachedPicture);
}

const WEBM_VIDEO = new Set(['vp8', 'vp9', 'av1']);
const WEBM_SUBTITLES = new Set(['webvtt']);
const WEBM_AUDIO = new Set(['opus', 'vorbis']);

/**
 * Which container the answer is: the input's own. MP4 and MOV share a demuxer and differ by brand ("qt  " is MOV);
 * Matroska and WebM share one too: WebM when the name says so (and WebM holds every stream: VP8/VP9/AV1 video,
 * Opus/Vorbis audio, WebVTT subtitles), or when the name says neither and it does. `nameHint`: the upload's or file's
 * name.
 */
export function containerOf(probe: MediaProbe, nameHint: string): VideoContainer {
  const names = probe.container.split(',');
  const ext = /\.([A-Za-z0-9]+)$/.exec(nameHint)?.[1]?.toLowerCase();
  if (names.includes('mov') || names.includes('mp4')) {
    if (ext === 'mov' || probe.brand?.trim() === 'qt') return 'mov';
    return 'mp4';
  }
  if (names.includes('matroska') || names.includes('webm')) {
    // The first audio track is replaced by Opus; every other stream must be one WebM holds.
    const firstAudio = probe.streams.find((s) => s.type === 'audio');
    const misfit = probe.streams.find(
      (s) =>
        s !== firstAudio &&
        !(s.type === 'audio' && WEBM_AUDIO.has(s.codec)) &&
        !(s.type === 'video' && WEBM_VIDEO.has(s.codec)) &&
        !(s.type === 'subtitle' && WEBM_SUBTITLES.has(s.codec)),
    );
    if (ext === 'webm' && misfit) {
      throw new VideoRequestError(`WebM cannot hold this file's ${misfit.type} stream (${misfit.codec}): name the output .mkv`);
    }
    if (ext === 'webm' || ext === 'mkv') return ext;
    return misfit ? 'mkv' : 'webm';
  }
  throw notAVideoContainer(names[0]);
}

/** The refusal of an input in a container other than these four (`format`: ffmpeg's name for it). */
export function notAVideoContainer(format: string): VideoRequestError {
  return new VideoRequestError(`output_format=video takes MP4, MOV, MKV or WebM input; this file is "${format}" (ask for an audio format instead)`);
}

/** The extension of a video answer from its content type (jobs name their result by it); null for audio. */
export function videoExtensionOf(contentType: string): VideoContainer | null {
  return VIDEO_EXTENSIONS.find((c) => CONTAINERS[c].contentType === contentType) ?? null;
}
