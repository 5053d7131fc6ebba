// Whole-buffer denoising on the calling thread (tests, benchmark, evaluation). The service uses the worker pool.
import { createChain } from './chains';
import { DtlnGraphs } from './dtln';
import { concatAll } from '../../dsp/concat';
import { AlignedStream } from './aligned-stream';
import { ModelId } from '../types';

/** Runs `planar` through a model chain in chunks of `chunk` samples (default: one chunk), returns aligned output. */
export async function denoiseBuffer(
  graphs: DtlnGraphs,
  model: ModelId,
  planar: Float32Array[],
  attenuationLimitDb = 0,
  chunkSizes?: (i: number) => number,
): Promise<Float32Array[]> {
  const stream = new AlignedStream(createChain(model, planar.length, graphs), attenuationLimitDb);
  const parts: Float32Array[][] = [];
  const n = planar[0].length;
  let pos = 0;
  for (let i = 0; pos < n; i++) {
    const len = chunkSizes ? Math.max(1, Math.min(chunkSizes(i), n - pos)) : n;
    parts.push(await stream.push(planar.map((ch) => ch.subarray(pos, pos + len))));
    pos += len;
  }
  parts.push(await stream.end());
  stream.release();
  return planar.map((_, c) => concatAll(parts.map((p) => p[c])));
}
