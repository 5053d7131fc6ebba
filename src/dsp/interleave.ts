// Planar ↔ interleaved f32le conversions shared by the sources, the sinks and the pipeline (no other dependencies).

/** f32le interleaved bytes (whole frames) → one Float32Array per channel. */
export function deinterleave(bytes: Buffer, channels: number): Float32Array[] {
  const frames = Math.floor(bytes.length / (4 * channels));
  // Copy into a fresh, aligned buffer: pipe Buffers may start at any byte offset.
  const interleaved = new Float32Array(frames * channels);
  new Uint8Array(interleaved.buffer).set(bytes.subarray(0, frames * channels * 4));
  if (channels === 1) return [interleaved];
  const planar: Float32Array[] = [];
  for (let c = 0; c < channels; c++) planar.push(new Float32Array(frames));
  for (let i = 0, k = 0; i < frames; i++) {
    for (let c = 0; c < channels; c++, k++) planar[c][i] = interleaved[k];
  }
  return planar;
}

/**
 * One Float32Array per channel → f32le interleaved bytes. Always a copy unless `copyMono` is false for a mono input
 * whose array the caller will not touch again (the engine may reuse its output arrays while a pipe still holds them).
 */
export function interleave(planar: Float32Array[], copyMono = true): Buffer {
  const channels = planar.length;
  const frames = planar[0].length;
  if (channels === 1) {
    const x = planar[0];
    return copyMono ? Buffer.from(x.slice().buffer) : Buffer.from(x.buffer, x.byteOffset, x.byteLength);
  }
  const out = new Float32Array(frames * channels);
  for (let i = 0, k = 0; i < frames; i++) {
    for (let c = 0; c < channels; c++, k++) out[k] = planar[c][i];
  }
  return Buffer.from(out.buffer);
}

/** Replaces non-finite samples (NaN, ±Inf) with 0 in place; true when there were any. */
export function silenceNonFinite(planar: Float32Array[]): boolean {
  let found = false;
  for (const ch of planar) {
    for (let i = 0; i < ch.length; i++) {
      if (ch[i] - ch[i] !== 0) {
        ch[i] = 0;
        found = true;
      }
    }
  }
  return found;
}
