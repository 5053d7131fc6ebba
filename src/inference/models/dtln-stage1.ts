// DTLN's stage 1 (the magnitude mask) alone at a coarser frame hop, for the fastest model (nsm-1): 512-sample frames
// every `hop` samples (256: half the frames of DTLN's 128, so half the LSTM steps and FFTs), the mask applied to the
// complex spectrum, inverse FFT, periodic Hann synthesis scaled to sum to 1 at that hop, overlap-add. It is a
// DtlnCore without stage 2 at that hop (dtln.ts: the same STFT back end, batching of live streams and carried
// state), seen as a chain: its channels are the core's batch streams, and its output is delayed by BLOCK - hop.
import { BLOCK, DtlnCore, type DtlnGraphs } from './dtln';
import { ChainProcessor } from './aligned-stream';

export class Stage1Chain implements ChainProcessor {
  readonly sampleRate = 16000;
  readonly latency: number;
  private readonly core: DtlnCore;

  constructor(
    graphs: DtlnGraphs,
    readonly channels: number,
    hop: number,
  ) {
    this.core = new DtlnCore(graphs, { batch: channels, useStage2: false, hop });
    this.latency = BLOCK - hop;
  }

  async process(planar: Float32Array[]): Promise<Float32Array[]> {
    return (await this.core.process(planar)).out;
  }
}
