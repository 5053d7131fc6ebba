// Input limits of the file pipeline (config: MAX_AUDIO_SECONDS, MIN_SAMPLE_RATE, MAX_SAMPLE_RATE, MAX_CHANNELS,
// MAX_DECODED_SAMPLES). They bound the work and the disk one upload can cause: checked from the probe before anything
// is decoded, the duration again from a scan of the packets (duration-scan.ts) and on the decoded samples, because a
// header can lie or say nothing (a 208 KB FLAC of 8 min of 384 kHz 7.1 silence decodes to 1.5 billion samples).
import type { Config } from '../config';
import { AudioInputError, AudioTooLongError } from './errors';

export type AudioLimits = Pick<Config, 'maxAudioSeconds' | 'minSampleRate' | 'maxSampleRate' | 'maxChannels' | 'maxDecodedSamples'>;

/** What the cap on decoded samples counts: samples at the input's own rate, over all its channels. */
export interface DecodedShape {
  sampleRate: number;
  channels: number;
}

/** "4 h", "90 min", "45 s". */
export function formatSeconds(s: number): string {
  if (s >= 3600 && s % 3600 === 0) return `${s / 3600} h`;
  if (s >= 60 && s % 60 === 0) return `${s / 60} min`;
  if (s >= 3600) return `${(s / 3600).toFixed(1)} h`;
  if (s >= 60) return `${(s / 60).toFixed(1)} min`;
  return `${Math.round(s * 10) / 10} s`;
}

/** Throws AudioInputError (422) for a rate or channel count out of range, AudioTooLongError (413) for the duration. */
export function checkInputLimits(limits: AudioLimits, input: { sampleRate: number; channels: number; durationS: number | null }): void {
  const { sampleRate, channels, durationS } = input;
  if (!(sampleRate >= limits.minSampleRate && sampleRate <= limits.maxSampleRate)) {
    throw new AudioInputError(
      `unsupported sample rate ${sampleRate} Hz: accepted from ${limits.minSampleRate} to ${limits.maxSampleRate} Hz`,
    );
  }
  if (channels > limits.maxChannels) {
    throw new AudioInputError(`too many channels (${channels}): at most ${limits.maxChannels} per file`);
  }
  if (durationS !== null && durationS > limits.maxAudioSeconds) tooLong(limits, durationS);
  if (durationS !== null) checkDecodedSamples(limits, input, durationS, false);
}

/**
 * Throws AudioTooLongError once more than maxAudioSeconds have been decoded, or counted in the packets by a scan; with
 * the input's shape, also once the samples decoded so far pass maxDecodedSamples.
 */
export function checkDecodedDuration(limits: AudioLimits, decodedS: number, shape?: DecodedShape): void {
  // A little slack: container durations and decoded lengths differ by a frame or two.
  if (decodedS > limits.maxAudioSeconds + 1) tooLong(limits, null);
  if (shape) checkDecodedSamples(limits, shape, decodedS, true);
}

/** 413 when `durationS` of audio of this shape is more samples than maxDecodedSamples (`decoding`: found while decoding). */
function checkDecodedSamples(limits: AudioLimits, shape: DecodedShape, durationS: number, decoding: boolean): void {
  const samples = durationS * shape.sampleRate * shape.channels;
  // Rounded down: a file exactly at the cap (4 h of 48 kHz stereo by default) passes; a frame of slack while decoding.
  const slack = decoding ? shape.sampleRate * shape.channels : 0;
  if (Math.floor(samples) <= limits.maxDecodedSamples + slack) return;
  const what = `${formatSeconds(durationS)} of ${shape.sampleRate} Hz × ${shape.channels} channel${shape.channels === 1 ? '' : 's'}`;
  throw new AudioTooLongError(
    `audio too large: ${decoding ? 'it decodes to' : what + ' is'} more than ${formatCount(limits.maxDecodedSamples)} samples over all channels, ` +
      `the most accepted per file (MAX_DECODED_SAMPLES: e.g. ${formatSeconds(Math.floor(limits.maxDecodedSamples / 96000))} of 48 kHz stereo)`,
  );
}

/** 1382400000 → "1.38 billion". */
function formatCount(n: number): string {
  if (n >= 1e9) return `${Math.round(n / 1e7) / 100} billion`;
  if (n >= 1e6) return `${Math.round(n / 1e4) / 100} million`;
  return String(n);
}

function tooLong(limits: AudioLimits, durationS: number | null): never {
  const max = formatSeconds(limits.maxAudioSeconds);
  throw new AudioTooLongError(
    durationS === null
      ? `audio too long: it decodes to more than ${max}, the most accepted per file`
      : `audio too long: ${formatSeconds(durationS)}, the most accepted per file is ${max}`,
  );
}
