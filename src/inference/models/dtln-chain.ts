// One DTLN pass at 16 kHz as a chain stage (Dtln16Chain): the unit nsm-1..nsm-4 are built from (chains.ts) and that
// cascade.ts runs several of in one batch.
import { DelayLine } from '../../dsp/resample';
import { DtlnCore, DtlnGraphs, DTLN_LATENCY } from './dtln';
import type { ChainProcessor } from './aligned-stream';

/** A DTLN pass at hop 128: both stages (nsm-2) or stage 1 alone with Hann resynthesis, optionally averaged over shifted frame grids. */
export class Dtln16Chain implements ChainProcessor {
  readonly sampleRate = 16000;
  readonly latency: number;
  /** The pass's DTLN core (DtlnCascade runs several passes' cores in one batch). */
  readonly core: DtlnCore;
  private readonly inDelays: DelayLine[][];
  private readonly outDelays: DelayLine[][];

  constructor(
    graphs: DtlnGraphs,
    readonly channels: number,
    useStage2: boolean,
    /** Frame-grid offsets (samples) to average over; [0] = plain DTLN. */
    private readonly offsets: number[] = [0],
  ) {
    const maxOffset = Math.max(...offsets);
    this.core = new DtlnCore(graphs, { batch: channels * offsets.length, useStage2 });
    this.inDelays = offsets.map((s) => Array.from({ length: channels }, () => new DelayLine(s)));
    this.outDelays = offsets.map((s) => Array.from({ length: channels }, () => new DelayLine(maxOffset - s)));
    this.latency = DTLN_LATENCY + maxOffset;
  }

  async process(planar: Float32Array[]): Promise<Float32Array[]> {
    return this.gridOutput((await this.core.process(this.gridInputs(planar))).out);
  }

  /** The core's input rows for a chunk: every channel delayed by every grid's offset (one grid: the chunk itself). */
  gridInputs(planar: Float32Array[]): Float32Array[] {
    if (this.offsets.length === 1) return planar;
    const batch: Float32Array[] = [];
    for (let g = 0; g < this.offsets.length; g++) {
      for (let c = 0; c < this.channels; c++) batch.push(this.inDelays[g][c].process(planar[c]));
    }
    return batch;
  }

  /** The pass's output from the core's rows: the grids lined up and averaged (one grid: the rows themselves). */
  gridOutput(out: Float32Array[]): Float32Array[] {
    const G = this.offsets.length;
    if (G === 1) return out;
    const result: Float32Array[] = [];
    for (let c = 0; c < this.channels; c++) {
      const acc = new Float32Array(out[0].length);
      for (let g = 0; g < G; g++) {
        const y = this.outDelays[g][c].process(out[g * this.channels + c]);
        for (let i = 0; i < acc.length; i++) acc[i] += y[i];
      }
      for (let i = 0; i < acc.length; i++) acc[i] /= G;
      result.push(acc);
    }
    return result;
  }
}
