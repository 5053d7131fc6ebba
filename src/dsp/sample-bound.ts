// The bound on decoded float samples, applied wherever float samples enter (WAV and pcm_f32le decoding, ffmpeg's f32
// output, the echo canceller's input): non-finite samples become 0, finite ones are clamped to ±SAMPLE_LIMIT. Without
// the clamp one sample of 1e30 in a float WAV or a pcm_f32le stream overflowed float32 energies to Infinity and left
// state non-finite for the rest of the call (nsm-4's chain, the echo canceller's filter: silent output from there on).

/** 80 dB over full scale: more than any recording holds, far enough under float32's range for every stage's sums. */
export const SAMPLE_LIMIT = 1e4;

/** `x` if finite and within ±SAMPLE_LIMIT; the limit if beyond it; 0 if NaN or infinite. */
export function boundSample(x: number): number {
  if (x - x !== 0) return 0;
  return x > SAMPLE_LIMIT ? SAMPLE_LIMIT : x < -SAMPLE_LIMIT ? -SAMPLE_LIMIT : x;
}

/** boundSample on every sample, in place; true when any sample changed. */
export function boundSamples(planar: Float32Array[]): boolean {
  let changed = false;
  for (const ch of planar) {
    for (let i = 0; i < ch.length; i++) {
      const x = ch[i];
      if (x - x === 0 && x <= SAMPLE_LIMIT && x >= -SAMPLE_LIMIT) continue;
      ch[i] = boundSample(x);
      changed = true;
    }
  }
  return changed;
}
