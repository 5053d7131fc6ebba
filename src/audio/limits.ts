// Input limits of the file pipeline (config: MAX_AUDIO_SECONDS, MIN_SAMPLE_RATE, MAX_SAMPLE_RATE, MAX_CHANNELS).
// They bound the work one upload can cause: checked from the header before anything is decoded, the duration again
// from a scan of the packets (duration-scan.ts) and on the decoded samples, because a header can lie or say nothing
// (a tiny compressed file can decode to hours).
import type { Config } from '../config';
import { AudioInputError, AudioTooLongError } from './errors';

export type AudioLimits = Pick<Config, 'maxAudioSeconds' | 'minSampleRate' | 'maxSampleRate' | 'maxChannels'>;

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
}

/** Throws AudioTooLongError once more than maxAudioSeconds have been decoded, or counted in the packets by a scan. */
export function checkDecodedDuration(limits: AudioLimits, decodedS: number): void {
  // A little slack: container durations and decoded lengths differ by a frame or two.
  if (decodedS > limits.maxAudioSeconds + 1) tooLong(limits, null);
}

function tooLong(limits: AudioLimits, durationS: number | null): never {
  const max = formatSeconds(limits.maxAudioSeconds);
  throw new AudioTooLongError(
    durationS === null
      ? `audio too long: it decodes to more than ${max}, the most accepted per file`
      : `audio too long: ${formatSeconds(durationS)}, the most accepted per file is ${max}`,
  );
}
