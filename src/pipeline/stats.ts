// The stats of one file run (DenoiseStats, sent as X-NS-Stats and printed by the CLI): durations, rates, the bands
// and what was done to each, the loudness metered on the way, the noise removed, and loudness normalisation's result.
import { gatedLoudness, noiseRemovedDb } from '../dsp/loudness';
import type { OutputFormat } from '../audio/formats';
import { scaledBlocks } from './loudness';
import type { AudioSource } from '../audio/sources';
import { bandsUpTo } from '../inference/models';
import type { BandProcessing, EchoReport, ModelId, StreamControl, StreamLoudness } from '../inference/types';
import { modelRateFor } from './plan';
import type { DenoiseFileOptions } from './types';
import { round3, speechSeconds, type SpeechReport } from '../vad/options';

export interface DenoiseStats {
  duration_s: number;
  processing_s: number;
  rtf: number;
  model: ModelId;
  input_sample_rate: number;
  output_sample_rate: number;
  model_sample_rate: number;
  channels: number;
  input_codec: string;
  output_format: OutputFormat;
  attenuation_limit_db: number;
  /** Rate the chain ran at: the model's rate, or 48000 when a 16 kHz model ran full band. */
  processing_sample_rate: number;
  /** What was done to each band of the output (up to half the lower of the input and output rates). */
  bands: BandProcessing[];
  /** Integrated loudness (BS.1770) of the input as the model hears it (at the model's rate); null for silence. */
  input_loudness_lufs: number | null;
  /** Integrated loudness of the output; null for silence. */
  output_loudness_lufs: number | null;
  /** Estimated noise attenuation: input/output energy over the input's quietest 400 ms blocks; null if none. */
  noise_removed_db: number | null;
  /**
   * With loudness normalisation only: the target; the whole gain applied before the limiter, and the part of it
   * applied to the input before the model (a quiet input lifted into the models' level range); the output's true
   * peak; whether the output is within 0.5 LU of the target (false: silence, or a limiter that would have had to take
   * more than 6 LU away; pipeline/loudness.ts).
   */
  loudness_target_lufs?: number;
  loudness_gain_db?: number;
  loudness_input_gain_db?: number;
  output_true_peak_dbtp?: number | null;
  loudness_target_reached?: boolean;
  /**
   * With speech_segments or trim_silence only (docs/speech.md): seconds of speech and the number of segments; with
   * trim_silence also the seconds of pause removed and the output's duration (duration_s stays the input's).
   */
  speech_s?: number;
  speech_segment_count?: number;
  silence_removed_s?: number;
  output_duration_s?: number;
  /**
   * With an echo reference only (docs/echo.md): that it was given; whether it ever carried signal (false: a silent
   * reference, the output is what it would be without it); the echo's delay behind the reference the canceller
   * estimated (ms; null before a confident estimate); the echo return loss enhancement while the reference was active
   * (dB: microphone over cleaned energy before the denoiser, near-end speech included; null when never active).
   */
  echo_reference?: true;
  echo_reference_active?: boolean;
  echo_delay_ms?: number | null;
  echo_erle_db?: number | null;
}

/** The run's loudness: metered in the worker (input and output), then changed by normalisation's second pass. */
export interface LoudnessResult {
  input: number | null;
  output: number | null;
  noiseRemoved: number | null;
  target: number | null;
  /** Gain applied after the model, before the limiter (dB). */
  gainDb: number;
  /** Gain applied to the input before the model (dB). */
  inputGainDb: number;
  truePeak: number | null;
  /** With a target: whether the output is within REACHED_TOLERANCE_LU of it; null without one. */
  reached: boolean | null;
}

/**
 * The loudness of a stream's input and output from its block powers (BS.1770 gating), before any normalisation. The
 * stream metered the input after a lift of `inputGainDb` (pass 0 of a loudness target): the blocks are scaled back, so
 * the figures are the file's own.
 */
export function measuredLoudness(measured: StreamLoudness, target: number | null, inputGainDb = 0): LoudnessResult {
  const input = inputGainDb === 0 ? measured.input : scaledBlocks(measured.input, -inputGainDb);
  const output = inputGainDb === 0 ? measured.output : scaledBlocks(measured.output, -inputGainDb);
  // Trimmed output: the noise estimate compares blocks at the same times, so it reads the output before the cuts.
  const aligned = measured.alignedOutput ?? measured.output;
  const alignedOut = inputGainDb === 0 ? aligned : scaledBlocks(aligned, -inputGainDb);
  return {
    input: gatedLoudness(input),
    output: gatedLoudness(output),
    noiseRemoved: noiseRemovedDb(input, alignedOut),
    target,
    gainDb: 0,
    inputGainDb,
    truePeak: null,
    reached: null,
  };
}

/** What a finished run reports. */
export interface RunResult {
  /** Frames read from the source (at the stream's rate). */
  frames: number;
  source: AudioSource;
  stream: StreamControl;
  outputRate: number;
  loudness: LoudnessResult;
  /** With speech detection: what the worker reported. */
  speech: SpeechReport | null;
  /** With an echo reference: the canceller's figures. */
  echo?: EchoReport | null;
}

/** The stats of a finished run that took `processingS` seconds. */
export function runStats(opts: DenoiseFileOptions, run: RunResult, processingS: number): DenoiseStats {
  const { source, stream, loudness, outputRate } = run;
  const durationS = run.frames / stream.sampleRate;
  const stats: DenoiseStats = {
    duration_s: round(durationS, 3),
    processing_s: round(processingS, 3),
    rtf: round(durationS > 0 ? processingS / durationS : 0, 4),
    model: opts.model,
    input_sample_rate: source.inputRate,
    output_sample_rate: outputRate,
    model_sample_rate: modelRateFor(opts.model),
    channels: source.channels,
    input_codec: source.codec,
    output_format: opts.outputFormat,
    attenuation_limit_db: opts.attenuationLimitDb,
    processing_sample_rate: stream.sampleRate,
    bands: bandsUpTo(stream.bands, Math.min(source.inputRate, outputRate) / 2),
    input_loudness_lufs: roundOrNull(loudness.input, 2),
    output_loudness_lufs: roundOrNull(loudness.output, 2),
    noise_removed_db: roundOrNull(loudness.noiseRemoved, 1),
  };
  if (run.speech) {
    stats.speech_s = round3(speechSeconds(run.speech.segments));
    stats.speech_segment_count = run.speech.segments.length / 2;
    if (opts.speech?.trimMaxPauseS != null) {
      stats.silence_removed_s = round3(run.speech.removedS);
      stats.output_duration_s = round3(run.speech.outputFrames / stream.sampleRate);
    }
  }
  if (run.echo) {
    stats.echo_reference = true;
    stats.echo_reference_active = run.echo.referenceActive;
    stats.echo_delay_ms = roundOrNull(run.echo.delayMs, 0);
    stats.echo_erle_db = roundOrNull(run.echo.erleDb, 1);
  }
  if (loudness.target !== null) {
    stats.loudness_target_lufs = loudness.target;
    stats.loudness_gain_db = round(loudness.inputGainDb + loudness.gainDb, 2);
    stats.loudness_input_gain_db = round(loudness.inputGainDb, 2);
    stats.output_true_peak_dbtp = loudness.truePeak === null ? null : round(loudness.truePeak, 2);
    stats.loudness_target_reached = loudness.reached === true;
  }
  return stats;
}

function roundOrNull(x: number | null, digits: number): number | null {
  return x === null || !Number.isFinite(x) ? null : round(x, digits);
}

function round(x: number, digits: number): number {
  const f = 10 ** digits;
  return Math.round(x * f) / f;
}
