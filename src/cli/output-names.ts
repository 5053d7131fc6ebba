// What an output file's name says it will hold: an audio format by its extension (.wav, .flac, …) or a video
// container (.mp4, .mov, .mkv, .webm). `nsm denoise` and `nsm jobs` read names the same way, so that neither writes
// one format under another's extension.
import path from 'node:path';
import { FORMATS, OUTPUT_FORMATS, type OutputFormat } from '../audio/formats';
import { VIDEO_EXTENSIONS, type VideoContainer } from '../video';

/** Output file extensions and the format each one means (the output's extension picks the format). */
export const OUTPUT_EXTENSIONS: Record<string, OutputFormat> = Object.fromEntries(
  OUTPUT_FORMATS.map((f) => [FORMATS[f].extension, f]),
) as Record<string, OutputFormat>;

/** The audio format a file name's extension names; null for another or no extension. */
export function formatOfPath(file: string): OutputFormat | null {
  const ext = path.extname(file).slice(1).toLowerCase();
  return ext ? (OUTPUT_EXTENSIONS[ext] ?? null) : null;
}

/** The video container a file name's extension names; null otherwise. */
export function videoOfPath(file: string): VideoContainer | null {
  return VIDEO_EXTENSIONS.find((e) => path.extname(file).toLowerCase() === `.${e}`) ?? null;
}

/** What a file name asks for: `video` for a video container's extension, else the audio format it names, else null. */
export function namedOutput(file: string): OutputFormat | 'video' | null {
  return videoOfPath(file) ? 'video' : formatOfPath(file);
}

/** MP4 and MOV, or Matroska and WebM: a video is written back in its own family (its streams are copied). */
export function videoFamily(c: VideoContainer): string {
  return c === 'mp4' || c === 'mov' ? 'MP4/MOV' : 'Matroska/WebM';
}
