// The file pipeline's entry, denoise() and denoiseFile(): any audio → model-rate float32 → DenoiseStream → WAV, FLAC,
// MP3, Opus or M4A (formats.ts). plan.ts decides a run (rates, bands, source and sink), run.ts carries it out (the
// read/push/write pump), stats.ts reports it (X-NS-Stats).
//
//   source (planar float32 at the model rate, ~8 s chunks) ──▶ DenoiseStream.push (worker thread) ──▶ sink (file)
//
// Sources (sources.ts): an uncompressed WAV at the model's rate is read in-process (wav.ts), with no child process at
// all; a WAV at another rate is read in-process and resampled by an ffmpeg child (soxr) fed through its stdin; anything
// else is described by ffprobe's JSON (codec, container, duration, input rate, channels) and a packet scan, checked
// against the limits, then decoded (and resampled) by ONE ffmpeg child. Sinks (sinks.ts): 16-bit WAV at the model's rate is
// written in-process; FLAC or another rate goes through an ffmpeg encoder child. A small upload can come from memory
// (denoise(), memory-file.ts); when it is such a WAV and so is the output, the output is written into memory too.
//
// PCM edges: when a WAV is read as it is (in-process) and the output is the in-process 16-bit WAV, the source's bytes
// go to the engine undecoded and come back as the 16-bit PCM the sink writes (PcmDenoiseStream): decoding, dither and
// rounding run in the worker thread with the chain, so this thread (the server's one main thread, which every request
// shares) only moves bytes. The bytes are those of the float path (test/integration/audio-pipeline.test.ts, "PCM edges").
//
// Loudness (loudness.ts): the input and the cleaned audio are metered on the way (BS.1770 at the model's rate) for
// the stats, by the engine's worker thread (measureLoudness), which takes that work off the server's main thread.
// With a loudness target the decoded input first goes to a spool file (spool.ts) while it is metered, and one quieter
// than the models' training range is lifted before the model (./loudness.ts); the cleaned audio goes to a second spool
// while it is metered, then is replayed through a gain and a true-peak limiter (normalize.ts) into the sink, and the
// delivered file is measured again (normalize-pass.ts): several passes, memory still bounded.
//
// Speech (speech_segments, trim_silence: src/vad, docs/speech.md): the worker runs the VAD on the chain's output and,
// with trim_silence, returns it with long pauses shortened, so everything after the engine (meters, spool, sink) sees
// the shorter audio; the segments come back with the stream's end (onSpeechSegments), the summary in the stats.
//
// Limits (limits.ts) are checked from the header or probe before any decoding, and the duration and the decoded
// samples (MAX_DECODED_SAMPLES) again while decoding.
// Non-finite samples (NaN, ±Inf) are silence: float WAVs are cleaned as they are read, other decoders' output here.
//
// Memory stays bounded whatever the duration: one chunk is read only after the previous one went through the engine
// and was accepted by the sink (file write, or the encoder's stdin 'drain'), so a slow engine or encoder pauses the
// decoder instead of buffering audio here.
import fs from 'node:fs';
import { AudioAbortedError, AudioInputError } from '../audio/errors';
import { assertReadableFile } from '../audio/probe';
import type { SourceInput } from '../audio/sources';
import { PipelineRun } from './run';
import { runStats, type DenoiseStats } from './stats';
import type { DenoiseFileDeps, DenoiseFileOptions, DenoiseOutput, DenoiseTarget } from './types';
import { segmentList } from '../vad/options';

export { AudioAbortedError, AudioInputError, AudioPipelineError, AudioTooLongError } from '../audio/errors';
export { deinterleave, interleave, silenceNonFinite } from '../dsp/interleave';
export type { OutputFormat } from '../audio/formats';
export type { InMemoryInput, SourceInput } from '../audio/sources';
export { DEFAULT_CHUNK_SECONDS, MAX_CHUNK_SAMPLES, modelRateFor } from './plan';
export type { DenoiseStats } from './stats';
export type { DenoiseFileDeps, DenoiseFileOptions, DenoiseOutput, DenoiseTarget } from './types';

/** Denoises the file at `inputPath` into `outputPath`. */
export async function denoiseFile(
  deps: DenoiseFileDeps,
  inputPath: string,
  outputPath: string,
  opts: DenoiseFileOptions,
): Promise<DenoiseStats> {
  const { stats } = await denoise(deps, inputPath, { inMemory: false, path: async () => outputPath }, opts);
  return stats;
}

/** Denoises `input` (a path, or an upload in memory) into a file or, for small WAV round trips, into memory. */
export async function denoise(
  deps: DenoiseFileDeps,
  input: SourceInput,
  target: DenoiseTarget,
  opts: DenoiseFileOptions,
): Promise<{ stats: DenoiseStats; output: DenoiseOutput }> {
  const started = process.hrtime.bigint();
  if (opts.signal?.aborted) throw new AudioAbortedError();
  if (typeof input === 'string') await assertReadableFile(input);
  else if (input.file.size === 0) throw new AudioInputError('file is empty');
  const run = new PipelineRun(deps, input, target, opts);
  try {
    const result = await run.execute();
    const processingS = Number(process.hrtime.bigint() - started) / 1e9;
    if (result.speech) opts.onSpeechSegments?.(segmentList(result.speech.segments));
    return { stats: runStats(opts, result, processingS), output: result.output };
  } catch (err) {
    await run.teardown();
    if (run.outputPath) await fs.promises.rm(run.outputPath, { force: true }).catch(() => undefined);
    throw err;
  } finally {
    await run.dispose();
  }
}
