// The files around one `nsm denoise` run: standard input spooled to a file, the partial name an output is written
// under until it is complete, and a video output, whose container must be the input's own family.
import fs from 'node:fs';
import path from 'node:path';
import { pipeline } from 'node:stream/promises';
import { denoiseVideo, planVideo, VideoRequestError, type VideoContainer } from '../video';
import { videoFamily } from './output-names';

/** Reads standard input into a file (ffmpeg probes and decodes files; a pipe cannot be probed twice). */
export async function spoolStdin(dir: string): Promise<string> {
  const file = path.join(dir, 'stdin');
  await pipeline(process.stdin, fs.createWriteStream(file));
  return file;
}

/** A temporary name beside `target`, so the final rename stays on one file system. */
export function partialName(target: string): string {
  return path.join(path.dirname(target), `.${path.basename(target)}.partial-${process.pid}`);
}

/** -o OUT.mp4 (.mov, .mkv, .webm): the input's container, which OUT's extension must name (MP4 and MOV, or MKV and WebM). */
export async function videoOut(
  deps: Parameters<typeof denoiseVideo>[0],
  input: string,
  partial: string,
  output: string,
  wanted: VideoContainer,
  options: Parameters<typeof denoiseVideo>[4],
) {
  const plan = await planVideo(deps, input, output);
  if (videoFamily(plan.container) !== videoFamily(wanted)) {
    throw new VideoRequestError(`the input is ${videoFamily(plan.container)}: name the output .${plan.container} (the video is copied, not converted)`);
  }
  return denoiseVideo(deps, input, partial, { ...plan, container: wanted }, options);
}
