// The model chains: 16 kHz chains as data (ChainSpec: DTLN passes and the post-filter in series), MODEL_CHAINS for
// nsm-1..nsm-4, and createChain(), which wraps a 16 kHz chain in FullBandChain for nsm-2-hd and for full-band runs.
// Each is a ChainProcessor: delayed, hop-quantised output; AlignedStream aligns it.
import { DtlnCascade } from './cascade';
import { DelayLine } from '../dsp/resample';
import { DtlnGraphs, DTLN_LATENCY } from './dtln';
import { Dtln16Chain } from './dtln-chain';
import { Stage1Chain } from './dtln-stage1';
import { FullBandChain } from './fullband';
import { GateOptions, ResidualGate } from '../dsp/gate';
import { HighBandOptions } from '../dsp/highband';
import { PostFilter, PostFilterOptions } from '../dsp/postfilter';
import { ChainProcessor } from './stream';
import { ModelId } from './types';

export { FullBandChain } from './fullband';


/**
 * A 16 kHz chain as data: stages run one after the other, each on the previous one's output. `dtln` is one DTLN
 * pass (both stages unless `stage2: false`; `grids`: frame-grid offsets averaged in one batched run), `postFilter` the
 * residual-noise post-filter. The bench's quality harness builds experimental chains from the same description.
 */
export type StageSpec =
  | { dtln: { stage2?: boolean; grids?: number[] } }
  | { stage1: { hop: number } }
  | { postFilter: PostFilterOptions }
  | { gate: GateOptions };
export type ChainSpec = StageSpec[];

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
export function buildChain(spec: ChainSpec, channels: number, graphs: DtlnGraphs): ChainProcessor {
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
      stages.push(passes.length === 1 ? passes[0] : new DtlnCascade(passes));
    } else if ('dtln' in st) stages.push(new Dtln16Chain(graphs, channels, false, st.dtln.grids ?? [0]));
    else if ('gate' in st) stages.push(new PerChannelStage(channels, () => new ResidualGate(st.gate)));
    else if ('stage1' in st) stages.push(new Stage1Chain(graphs, channels, st.stage1.hop));
    else stages.push(new PerChannelStage(channels, () => new PostFilter(st.postFilter)));
  }
  return stages.length === 1 ? stages[0] : new SerialChain(stages);
}

/** The per-bin high-band filter of every full-band chain: HighBandFilter's defaults, tuned on fullband/ (docs/engine.md). */
export const FULLBAND_HIGHBAND: HighBandOptions = {};

/**
 * Post-filters (docs/engine.md): the rise-limited noise tracker, lifted to the 1.5 s windowed minimum so that it is
 * not stuck near zero after digital silence or DTLN's leading zeros. nsm-4's stronger one was chosen on the tune half
 * of the real clips (paired difference, CI above zero).
 */
export const NSM3_POSTFILTER: PostFilterOptions = { overSubtract: 4, floorDb: -15, noiseWindowS: 1.5, noiseMode: 'lift' };
export const NSM4_POSTFILTER: PostFilterOptions = { overSubtract: 8, floorDb: -20, noiseWindowS: 1.5, noiseMode: 'lift' };

/**
 * The residual gate of nsm-3 and nsm-4 (gate.ts): hops more than 20 dB below the speech peak are expanded 1:3, at
 * most 30 dB; opens 24 ms ahead, holds 48 ms, closes with 40 ms. Chosen on the tune half (docs/engine.md).
 */
export const RESIDUAL_GATE: GateOptions = { depthDb: 20, ratio: 3, maxAttenDb: 30, lookaheadHops: 3, holdHops: 6, releaseMs: 40 };

export interface ChainOptions {
  /**
   * 16 kHz models only: run at 48 kHz and return the band above 8 kHz too (FullBandChain around the model's chain),
   * for inputs above 16 kHz whose rate is kept. nsm-2-hd is always full band.
   */
  fullBand?: boolean;
}

/**
 * The 16 kHz chain of each 16 kHz model (docs/engine.md says how each was chosen). Later DTLN passes run on the
 * previous pass's output and take out more of the residual noise; the post-filter takes the stationary rest down per
 * frequency bin, and the residual gate what is left between words. Measured on real recordings, none of these stages
 * lowers DNSMOS SIG.
 */
export const MODEL_CHAINS: Record<Exclude<ModelId, 'nsm-2-hd'>, ChainSpec> = {
  // DTLN stage 1 alone (magnitude mask) at half DTLN's frame rate (hop 256), Hann synthesis: the fastest (~0.4x).
  'nsm-1': [{ stage1: { hop: 256 } }],
  // The faithful DTLN.
  'nsm-2': [{ dtln: {} }],
  // DTLN, the post-filter, the residual gate: ~1.8x nsm-2's cost (the post-filter's STFT is most of the extra).
  'nsm-3': [{ dtln: {} }, { postFilter: NSM3_POSTFILTER }, { gate: RESIDUAL_GATE }],
  // DTLN three times (the first pass averaged over two frame grids), the stronger post-filter, the gate: ~4x (3.8-4.6 measured).
  'nsm-4': [{ dtln: { grids: [0, 64] } }, { dtln: {} }, { dtln: {} }, { postFilter: NSM4_POSTFILTER }, { gate: RESIDUAL_GATE }],
};

/** nsm-2-hd's 16 kHz core: the best 16 kHz chain (nsm-4's); above 8 kHz the guided per-bin filter. */
export const NSM2HD_CORE: ChainSpec = MODEL_CHAINS['nsm-4'];

export function createChain(model: ModelId, channels: number, graphs: DtlnGraphs, opts: ChainOptions = {}): ChainProcessor {
  if (model === 'nsm-2-hd') return new FullBandChain(buildChain(NSM2HD_CORE, channels, graphs), { highBand: FULLBAND_HIGHBAND });
  const spec = MODEL_CHAINS[model];
  if (!spec) throw new Error(`unknown model ${String(model)}`);
  const chain = buildChain(spec, channels, graphs);
  return opts.fullBand ? new FullBandChain(chain, { highBand: FULLBAND_HIGHBAND }) : chain;
}

