// What POST /denoise returns for an echo scene: the canceller in front of a model's 16 kHz chain (echo-front.ts, built
// by createChain with echoReference as the file pipeline builds it), aligned, attenuation limit 0 (the API's default).
// The echo bench scores it beside the canceller alone (`--echo-chain MODEL`), since hidden checks score the service's
// output, denoiser included, against the baselines' raw output.
import { AlignedStream } from '../../src/inference/models/aligned-stream';
import { createChain } from '../../src/inference/models/chains';
import type { DtlnGraphs } from '../../src/inference/models/dtln';
import type { ModelId } from '../../src/inference/types';
import { concatAll } from '../../src/dsp/concat';
import type { Scene } from './echo-scenes';

/** The scene through `model`'s chain with the reference (or without: `withReference` false), 20 ms chunks as a stream. */
export async function runChain(graphs: DtlnGraphs, model: ModelId, scene: Scene, withReference = true): Promise<{ out: Float32Array; cpuS: number }> {
  const chain = createChain(model, 1, graphs, withReference ? { echoReference: true } : {});
  const stream = new AlignedStream(chain, 0);
  const n = scene.mic.length;
  const parts: Float32Array[] = [];
  const t0 = process.cpuUsage();
  for (let pos = 0; pos < n; pos += 320) {
    const end = Math.min(n, pos + 320);
    const planar = withReference ? [scene.mic.subarray(pos, end), scene.ref.subarray(pos, end)] : [scene.mic.subarray(pos, end)];
    parts.push((await stream.push(planar))[0]);
  }
  parts.push((await stream.end())[0]);
  stream.release();
  const u = process.cpuUsage(t0);
  const out = concatAll(parts);
  if (out.length !== n) throw new Error(`chain output ${out.length} samples for ${n} in`);
  return { out, cpuS: (u.user + u.system) / 1e6 };
}
