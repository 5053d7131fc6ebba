// What the file pipeline takes and gives besides its stats (stats.ts): its dependencies, the options of one run, and
// where the output goes (a file, or memory for small WAV round trips).
import type { Config } from '../config';
import type { OutputFormat } from '../audio/formats';
import type { MemoryFile } from '../audio/memory-file';
import type { SourceInput } from '../audio/sources';
import type { InferenceEngine, ModelId } from '../inference/types';
import type { DiskBudget } from '../storage/disk-budget';
import type { SpeechRequest, SpeechSegment } from '../vad/options';

export interface DenoiseFileDeps {
  config: Config;
  engine: InferenceEngine;
}

export interface DenoiseFileOptions {
  model: ModelId;
  attenuationLimitDb: number;
  outputFormat: OutputFormat;
  /** true: output at the input file's sample rate; false: at the model's native rate. */
  keepInputSampleRate: boolean;
  /** Called after each chunk with seconds processed and the container's duration (null if unknown). */
  onProgress?(doneS: number, totalS: number | null): void;
  signal?: AbortSignal;
  /**
   * Seconds of audio per engine call (default DEFAULT_CHUNK_SECONDS, fewer for many channels: at most
   * MAX_CHUNK_SAMPLES samples over all channels per call).
   */
  chunkSeconds?: number;
  /** false: always decode and encode with ffmpeg, even where the in-process WAV path applies (tests, benchmark). */
  inProcessWav?: boolean;
  /**
   * Integrated loudness (LUFS) to normalise the cleaned audio to, or 'keep': the input's speech loudness (measured on
   * the way, loudness.ts keepTarget); null/undefined: no normalisation.
   */
  loudnessLufs?: number | 'keep' | null;
  /** The free-disk floor's budget the output and spools take their bytes from (disk-use.ts); none: unchecked. */
  disk?: Pick<DiskBudget, 'open'>;
  /** Speech detection on the cleaned audio (speech_segments, trim_silence); null/undefined: none, output as before. */
  speech?: SpeechRequest | null;
  /** With `speech`: called once, after the run, with the speech segments (seconds of the input). */
  onSpeechSegments?(segments: SpeechSegment[]): void;
  /**
   * The echo reference (echo-reference.ts, docs/echo.md): what the loudspeaker played, its timeline starting with the
   * input's; its echo is removed from the input before the model. null/undefined: none, output as before.
   */
  echoReference?: SourceInput | null;
}

/** Where denoise() puts the output. */
export interface DenoiseTarget {
  /**
   * true: when the input is in memory and the output is a WAV written in-process (no loudness target), the output
   * stays in memory too: no bigger than the input's frames at 16 bits, so bounded by the upload's size.
   */
  inMemory: boolean;
  /** The output file's path otherwise (called at most once). */
  path(): Promise<string>;
}

/** The finished output: a file, or in memory. */
export type DenoiseOutput = { path: string } | { memory: MemoryFile };
