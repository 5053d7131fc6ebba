// DTLN passes in series (nsm-4's three) run as rows of one batch. Pass p+1 works on pass p's output one block of
// frames behind, so a block costs one session.run per graph for every pass together instead of one per pass: ONNX
// Runtime's recurrent products (a matrix-vector product per frame and layer, bound by reading the weights) then read
// the weights once for all rows. Measured on this graph pair: 27.5 µs per row and frame at 4 rows against 38 at 1.
//
// The output is the same, bit for bit, as the passes run one after the other (Dtln16Chain in a SerialChain): each
// pass sees the same input stream in blocks of BLOCK_FRAMES frames, and DtlnCore.processJoint computes every row as
// the row alone would be. Streaming as any chain: the blocks are counted from the start of the stream, so how the
// input is chunked does not matter; the last, partial blocks go through when AlignedStream.end() pushes silence.
import { DelayLine } from './dsp';
import { DtlnCore, DtlnGraphs, DTLN_LATENCY, HOP } from './dtln';
import type { ChainProcessor } from './stream';

/**
 * Frames per block (0.5 s). Smaller blocks: less audio held back between passes (emitted later, and pushed through by
 * the silence at the end of a stream); larger: fewer runs. At 64 frames the per-run cost is already small.
 */
export const CASCADE_BLOCK_FRAMES = 64;

interface Pass {
  core: DtlnCore;
  grids: number;
  /** Per grid, per channel: the grid's offset in front of the core, and what makes all grids line up after it. */
  inDelays: DelayLine[][];
  outDelays: DelayLine[][];
  /** Per channel: input not yet run (the stage's input for the first pass, the previous pass's output for the rest). */
  queue: Float32Array[];
}

export class DtlnCascade implements ChainProcessor {
  readonly sampleRate = 16000;
  readonly latency: number;
  private readonly passes: Pass[];
  private readonly block: number;

  constructor(
    graphs: DtlnGraphs,
    readonly channels: number,
    /** Per pass, the frame-grid offsets (samples) averaged in that pass ([0]: plain DTLN). */
    gridsPerPass: number[][],
    blockFrames = CASCADE_BLOCK_FRAMES,
  ) {
    if (gridsPerPass.length === 0) throw new Error('a cascade needs at least one pass');
    this.block = blockFrames * HOP;
    let latency = 0;
    this.passes = gridsPerPass.map((offsets) => {
      const maxOffset = Math.max(...offsets);
      latency += DTLN_LATENCY + maxOffset;
      return {
        core: new DtlnCore(graphs, { batch: channels * offsets.length, useStage2: true }),
        grids: offsets.length,
        inDelays: offsets.map((s) => Array.from({ length: channels }, () => new DelayLine(s))),
        outDelays: offsets.map((s) => Array.from({ length: channels }, () => new DelayLine(maxOffset - s))),
        queue: Array.from({ length: channels }, () => new Float32Array(0)),
      };
    });
    this.latency = latency;
  }

  async process(planar: Float32Array[]): Promise<Float32Array[]> {
    const C = this.channels;
    const B = this.block;
    const passes = this.passes;
    passes[0].queue = passes[0].queue.map((q, c) => join(q, planar[c]));
    /** Read position in each pass's queue (blocks taken this call). */
    const pos = passes.map(() => 0);
    const done: Float32Array[][] = [];
    for (;;) {
      // Every pass with a whole block waiting runs in this round; what a pass emits waits for the next round.
      const ready = passes.map((_, p) => p).filter((p) => passes[p].queue[0].length - pos[p] >= B);
      if (ready.length === 0) break;
      const parts = ready.map((p) => {
        const pass = passes[p];
        const inputs: Float32Array[] = [];
        for (let g = 0; g < pass.grids; g++) {
          for (let c = 0; c < C; c++) {
            inputs.push(pass.inDelays[g][c].process(pass.queue[c].subarray(pos[p], pos[p] + B)));
          }
        }
        pos[p] += B;
        return { core: pass.core, inputs };
      });
      const results = await DtlnCore.processJoint(parts);
      ready.forEach((p, i) => {
        const y = this.average(passes[p], results[i].out);
        if (p + 1 < passes.length) {
          const next = passes[p + 1];
          next.queue = next.queue.map((q, c) => join(q.subarray(pos[p + 1]), y[c]));
          pos[p + 1] = 0;
        } else {
          done.push(y);
        }
      });
    }
    passes.forEach((pass, p) => {
      if (pos[p] > 0) pass.queue = pass.queue.map((q) => q.slice(pos[p]));
    });
    return Array.from({ length: C }, (_, c) => {
      const out = new Float32Array(done.length * B);
      done.forEach((y, k) => out.set(y[c], k * B));
      return out;
    });
  }

  /** One pass's output per channel: its grids lined up and averaged (as Dtln16Chain does; one grid: as it is). */
  private average(pass: Pass, out: Float32Array[]): Float32Array[] {
    const C = this.channels;
    const G = pass.grids;
    if (G === 1) return out;
    const result: Float32Array[] = [];
    for (let c = 0; c < C; c++) {
      const acc = new Float32Array(out[0].length);
      for (let g = 0; g < G; g++) {
        const y = pass.outDelays[g][c].process(out[g * C + c]);
        for (let i = 0; i < acc.length; i++) acc[i] += y[i];
      }
      for (let i = 0; i < acc.length; i++) acc[i] /= G;
      result.push(acc);
    }
    return result;
  }
}

function join(a: Float32Array, b: Float32Array): Float32Array {
  if (a.length === 0) return b;
  const out = new Float32Array(a.length + b.length);
  out.set(a);
  out.set(b, a.length);
  return out;
}
