// The denoiser's own evidence, per 32 ms frame: how much of the input's energy its output kept. Where the denoiser
// removed most of a frame (kept < VAD_KEPT_MIN_DB) or left it (near) silent, the frame is not speech, whatever the
// network would hear in the rest: babble and music the denoiser only partly removes sound like a voice on their own,
// and Silero called 40–100 % of such pauses speech on the denoised audio while the input's fuller noise kept it from
// doing so on the noisy one. Such frames are not run through the network at all (half of a call's frames), and the
// next run starts from the network's silence state (silero.ts). Measured in docs/speech.md ("Quality").

/** A frame whose output kept less than this share of its input's energy (dB) is gated. */
export const VAD_KEPT_MIN_DB = -15;
/** A frame whose denoised level is under this (dBFS, mean square re full scale) is gated whatever the input. */
export const VAD_SILENT_DBFS = -70;
/** Energies are floored at this mean level (dBFS), so that two silent frames compare as equal. */
const FLOOR_DBFS = -90;

/**
 * Whether a frame is gated from its sums of squares over n samples: `denoised` of the denoiser's own output (before
 * any attenuation limit mixes the input back), `input` of the aligned input, or null when the input is not known
 * (then only the level decides).
 */
export function gated(denoised: number, input: number | null, n: number): boolean {
  const floor = n * Math.pow(10, FLOOR_DBFS / 10);
  if (denoised < n * Math.pow(10, VAD_SILENT_DBFS / 10)) return true;
  if (input === null) return false;
  return 10 * Math.log10((denoised + floor) / (input + floor)) < VAD_KEPT_MIN_DB;
}
