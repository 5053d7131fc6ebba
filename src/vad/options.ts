// What a caller may ask of speech detection (files: speech_segments, trim_silence; live streams later: vad=true), its
// defaults and bounds, and the segments it reports. Shared by the parameter parsers (model service, CLI) and the
// worker (speech-track.ts); no onnxruntime-node here.

/** The decision rule's settings (detector.ts). */
export interface VadOptions {
  /** A frame whose speech probability reaches this starts (or continues) speech; speech continues while the probability stays at or above threshold − VAD_HYSTERESIS. */
  threshold: number;
  /** Speech shorter than this (ms) is dropped: a cough, a click, a word of babble. */
  minSpeechMs: number;
  /** Speech ends only after this much (ms) below the lower threshold, so a short pause does not split a turn. */
  hangoverMs: number;
}

/** Gap between the threshold that starts speech and the one that ends it (Silero's own `neg_threshold` rule). */
export const VAD_HYSTERESIS = 0.15;

/**
 * 0.7 rather than Silero's published 0.5: on the denoised audio with the gate (gate.ts) it gave the best mean F1 over
 * the call mixtures at −5, 0 and 5 dB it was chosen on (0.6 and 0.7 within 0.001), and held on other mixtures
 * (docs/speech.md, "Quality").
 */
export const VAD_DEFAULTS: VadOptions = { threshold: 0.7, minSpeechMs: 250, hangoverMs: 300 };

/** Accepted per call (inclusive). */
export const VAD_BOUNDS: Record<keyof VadOptions, { min: number; max: number }> = {
  threshold: { min: 0.2, max: 0.95 },
  minSpeechMs: { min: 0, max: 2000 },
  hangoverMs: { min: 0, max: 3000 },
};

/** trim_silence: pauses longer than this (s) are shortened to it. */
export const TRIM_DEFAULT_MAX_PAUSE_S = 0.5;
export const TRIM_MAX_PAUSE_BOUNDS = { min: 0.1, max: 10 };
/** Length of the equal-power crossfade at each cut (s). */
export const TRIM_FADE_S = 0.01;

/** Speech detection for one file: what to report and whether to shorten pauses. */
export interface SpeechRequest {
  /** Report the speech segments (speech_segments=true). */
  segments: boolean;
  /** trim_silence=true: the longest pause kept (s); null: the audio is not shortened. */
  trimMaxPauseS: number | null;
  vad: VadOptions;
}

/** One stretch of speech, in seconds of the input (the output's timeline before any trimming). */
export interface SpeechSegment {
  start_s: number;
  end_s: number;
}

/** What the worker reports at the end of a stream with speech detection. */
export interface SpeechReport {
  /** Segments as [start0, end0, start1, end1, ...] seconds on the input timeline. */
  segments: Float64Array;
  /** Seconds of audio removed by trimming (0 without it). */
  removedS: number;
  /** Frames written out (equal to the input's without trimming). */
  outputFrames: number;
}

export function segmentList(flat: Float64Array): SpeechSegment[] {
  const out: SpeechSegment[] = [];
  for (let i = 0; i + 1 < flat.length; i += 2) out.push({ start_s: round3(flat[i]), end_s: round3(flat[i + 1]) });
  return out;
}

export function speechSeconds(flat: Float64Array): number {
  let s = 0;
  for (let i = 0; i + 1 < flat.length; i += 2) s += flat[i + 1] - flat[i];
  return s;
}

export function round3(x: number): number {
  return Math.round(x * 1000) / 1000;
}
