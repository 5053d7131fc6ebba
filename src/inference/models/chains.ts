// Builds the chains that models.ts describes: buildChain() turns a 16 kHz ChainSpec (DTLN passes, post-filter, gate
// in series) into processors, createChain() a model's chain, in FullBandChain where it runs full band. Each is a
// ChainProcessor: delayed, hop-quantised output; AlignedStream aligns it.
import { DtlnCascade } from './cascade';
import { DtlnGraphs } from './dtln';
import { Dtln16Chain } from './dtln-chain';
import { Stage1Chain } from './dtln-stage1';
import { FullBandChain } from './fullband';
import { NarrowBandChain } from './narrowband';
import { EchoCore } from './echo-front';
import { ResidualGate } from '../../dsp/gate';
import { PostFilter } from '../../dsp/postfilter';
import { FULLBAND_HIGHBAND, MODELS, type ChainSpec } from './specs';
import { ChainProcessor } from './aligned-stream';
import { ModelId } from '../types';

export { FullBandChain } from './fullband';

/** Stages in series: each one's output is the next one's input; latencies add. */
export class SerialChain implements ChainProcessor {
  readonly sampleRate: number;
  readonly channels: number;
  readonly latency: number;

  constructor(readonly stages: ChainProcessor[]) {
    if (stages.length === 0) throw new Error('a chain needs at least one stage');
    this.sampleRate = stages[0].sampleRate;
    this.channels = stages[0].channels;
    this.latency = stages.reduce((s, st) => s + st.latency, 0);
  }

  async process(planar: Float32Array[]): Promise<Float32Array[]> {
    let y = planar;
    for (const st of this.stages) y = await st.process(y);
    return y;
  }
}

/** A single-channel 16 kHz processor with a fixed latency: the post-filter, the residual gate. */
interface MonoProcessor {
  readonly latency: number;
  process(x: Float32Array): Float32Array;
}

/** One mono processor per channel as a chain stage (post-filter, gate). */
export class PerChannelStage implements ChainProcessor {
  readonly sampleRate = 16000;
  readonly latency: number;
  private readonly units: MonoProcessor[];

  constructor(
    readonly channels: number,
    make: () => MonoProcessor,
  ) {
    this.units = Array.from({ length: channels }, make);
    this.latency = this.units[0].latency;
  }

  async process(planar: Float32Array[]): Promise<Float32Array[]> {
    return planar.map((ch, c) => this.units[c].process(ch));
  }
}

/** Builds a 16 kHz chain from its description. Consecutive DTLN passes (both stages) run as one DtlnCascade. */
export function buildChain(spec: ChainSpec, channels: number, graphs: DtlnGraphs, cascadeBlockFrames?: number): ChainProcessor {
  const stages: ChainProcessor[] = [];
  for (let i = 0; i < spec.length; i++) {
    const st = spec[i];
    if ('dtln' in st && st.dtln.stage2 !== false) {
      const grids: number[][] = [];
      for (let j = i; j < spec.length; j++) {
        const next = spec[j];
        if (!('dtln' in next) || next.dtln.stage2 === false) break;
        grids.push(next.dtln.grids ?? [0]);
      }
      i += grids.length - 1;
      const passes = grids.map((offsets) => new Dtln16Chain(graphs, channels, true, offsets));
      stages.push(passes.length === 1 ? passes[0] : new DtlnCascade(passes, cascadeBlockFrames));
    } else if ('dtln' in st) stages.push(new Dtln16Chain(graphs, channels, false, st.dtln.grids ?? [0]));
    else if ('gate' in st) stages.push(new PerChannelStage(channels, () => new ResidualGate(st.gate)));
    else if ('stage1' in st) stages.push(new Stage1Chain(graphs, channels, st.stage1.hop));
    else stages.push(new PerChannelStage(channels, () => new PostFilter(st.postFilter)));
  }
  return stages.length === 1 ? stages[0] : new SerialChain(stages);
}

export interface ChainOptions {
  /**
   * 16 kHz models only: run at 48 kHz and return the band above 8 kHz too (FullBandChain around the model's chain),
   * for inputs above 16 kHz whose rate is kept. nsm-2-hd is always full band.
   */
  fullBand?: boolean;
  /**
   * 16 kHz models only: run at 8 kHz (NarrowBandChain: the 16 kHz chain between 2:1 resamplers), for 8 kHz inputs
   * whose rate is kept and 8 kHz live streams. Ignored where the model runs full band.
   */
  narrowBand?: boolean;
  /**
   * Frames per block between a cascade's passes (cascade.ts). Files use the default (fewer runs); live streams pass
   * their hop so that a pass does not hold back half a second of audio. The output is the same either way.
   */
  cascadeBlockFrames?: number;
  /**
   * Echo cancellation in front of the 16 kHz chain (echo-front.ts): the input is the microphone channels and the echo
   * reference last; the output has the microphone channels.
   */
  echoReference?: boolean;
}

/**
 * A model's chain as its spec (models.ts) describes it: the 16 kHz chain, in FullBandChain where it runs full band, in
 * NarrowBandChain where it runs at 8 kHz.
 */
export function createChain(model: ModelId, channels: number, graphs: DtlnGraphs, opts: ChainOptions = {}): ChainProcessor {
  const spec = MODELS[model];
  if (!spec) throw new Error(`unknown model ${String(model)}`);
  const built = buildChain(spec.chain, channels, graphs, opts.cascadeBlockFrames);
  const chain = opts.echoReference ? new EchoCore(built) : built;
  if (spec.fullBand === 'always' || opts.fullBand) return new FullBandChain(chain, { highBand: FULLBAND_HIGHBAND });
  return opts.narrowBand ? new NarrowBandChain(chain) : chain;
}
