// Whole-file PCM helpers for SMALL clips (fixtures, the sample clip, tests). The service path is denoise() (index.ts).
import type { Config } from '../config';
import { AudioInputError, AudioPipelineError } from '../audio/errors';
import { spawnFfmpeg, StderrTail, waitForExit } from '../audio/ffmpeg';
import { deinterleave, interleave } from '../dsp/interleave';

/** Decodes a file's first audio stream to planar float32 at `sampleRate` with `channels` channels (soxr resampler). */
export async function readPcm(
  config: Config,
  inputPath: string,
  sampleRate: number,
  channels: number,
): Promise<Float32Array[]> {
  const child = spawnFfmpeg(config, [
    '-loglevel', 'error', '-i', inputPath, '-map', '0:a:0',
    '-af', `aresample=${sampleRate}:resampler=soxr`, '-ar', String(sampleRate), '-ac', String(channels),
    '-c:a', 'pcm_f32le', '-f', 'f32le', 'pipe:1',
  ]);
  child.stdin!.end();
  const err = new StderrTail();
  const chunks: Buffer[] = [];
  child.stderr!.on('data', (d: Buffer) => err.push(d));
  child.stdout!.on('data', (d: Buffer) => chunks.push(d));
  const { code } = await waitForExit(child);
  if (code !== 0) throw new AudioInputError(`could not decode: ${err.summary() || `ffmpeg exited with ${code}`}`);
  return deinterleave(Buffer.concat(chunks), channels);
}

/**
 * Encodes planar float32 audio at `sampleRate` to `outputPath`. `codecArgs` pick the codec/container,
 * e.g. ['-c:a', 'pcm_s16le', '-f', 'wav'] or ['-c:a', 'libopus', '-b:a', '48k', '-f', 'webm'].
 */
export async function writePcm(
  config: Config,
  planar: Float32Array[],
  sampleRate: number,
  outputPath: string,
  codecArgs: string[],
): Promise<void> {
  const child = spawnFfmpeg(config, [
    '-loglevel', 'error', '-f', 'f32le', '-ar', String(sampleRate), '-ac', String(planar.length), '-i', 'pipe:0',
    '-fflags', '+bitexact', '-flags', '+bitexact', '-map_metadata', '-1',
    ...codecArgs, '-y', outputPath,
  ]);
  const err = new StderrTail();
  child.stderr!.on('data', (d: Buffer) => err.push(d));
  child.stdout!.resume();
  child.stdin!.on('error', () => undefined);
  child.stdin!.end(interleave(planar));
  const { code } = await waitForExit(child);
  if (code !== 0) throw new AudioPipelineError(`ffmpeg could not write ${outputPath}: ${err.summary()}`);
}
