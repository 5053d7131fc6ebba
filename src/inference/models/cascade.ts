// DTLN passes in series (nsm-4's three) run as rows of one batch. Pass p+1 works on pass p's output one block of
// frames behind, so a block costs one session.run per graph for every pass together instead of one per pass: ONNX
// Runtime's recurrent products (a matrix-vector product per frame and layer, bound by reading the weights) then read
// the weights once for all rows. Measured on this graph pair: 27.5 µs per row and frame at 4 rows against 38 at 1.
//
// The passes are Dtln16Chains (their cores, grid delays and grid averaging are used as they are), and the output is
// the same, bit for bit, as running them in a SerialChain: each pass sees the same input stream in blocks of
// CASCADE_BLOCK_FRAMES frames, and DtlnCore.processJoint computes every row as the row alone would be. Streaming as any chain: the blocks are counted from the start of the stream, so how the
// input is chunked does not matter; the last, partial blocks go through when AlignedStream.end() pushes silence.
import type { Dtln16Chain } from './dtln-chain';
import { DtlnCore, HOP } from './dtln';
import { concat, concatAll } from '../../dsp/concat';
import { type ChainProcessor } from './aligned-stream';

/**
 * Frames per block (0.5 s). Smaller blocks: less audio held back between passes (emitted later, and pushed through by
 * the silence at the end of a stream); larger: fewer runs. At 64 frames the per-run cost is already small.
 */
export const CASCADE_BLOCK_FRAMES = 64;

export class DtlnCascade implements ChainProcessor {
  readonly sampleRate = 16000;
  readonly channels: number;
  readonly latency: number;
  private readonly block: number;
  /** Per pass, per channel: input not yet run (the stage's input for the first pass, the previous pass's output). */
  private queues: Float32Array[][];

  constructor(
    /** The passes in series, each with both DTLN stages (the first may average frame grids). */
    private readonly passes: Dtln16Chain[],
    blockFrames = CASCADE_BLOCK_FRAMES,
  ) {
    if (passes.length === 0) throw new Error('a cascade needs at least one pass');
    this.block = blockFrames * HOP;
    this.channels = passes[0].channels;
    this.latency = passes.reduce((sum, pass) => sum + pass.latency, 0);
    this.queues = passes.map(() => Array.from({ length: this.channels }, () => new Float32Array(0)));
  }

  async process(planar: Float32Array[]): Promise<Float32Array[]> {
    const B = this.block;
    const passes = this.passes;
    const queues = this.queues;
    queues[0] = queues[0].map((q, c) => concat(q, planar[c]));
    /** Read position in each pass's queue (blocks taken this call). */
    const pos = passes.map(() => 0);
    const done: Float32Array[][] = [];
    for (;;) {
      // Every pass with a whole block waiting runs in this round; what a pass emits waits for the next round.
      const ready = passes.map((_, p) => p).filter((p) => queues[p][0].length - pos[p] >= B);
      if (ready.length === 0) break;
      const parts = ready.map((p) => {
        const inputs = passes[p].gridInputs(queues[p].map((q) => q.subarray(pos[p], pos[p] + B)));
        pos[p] += B;
        return { core: passes[p].core, inputs };
      });
      const results = await DtlnCore.processJoint(parts);
      ready.forEach((p, i) => {
        const y = passes[p].gridOutput(results[i].out);
        if (p + 1 < passes.length) {
          queues[p + 1] = queues[p + 1].map((q, c) => concat(q.subarray(pos[p + 1]), y[c]));
          pos[p + 1] = 0;
        } else {
          done.push(y);
        }
      });
    }
    passes.forEach((_, p) => {
      if (pos[p] > 0) queues[p] = queues[p].map((q) => q.slice(pos[p]));
    });
    return Array.from({ length: this.channels }, (_, c) => concatAll(done.map((y) => y[c])));
  }
}
