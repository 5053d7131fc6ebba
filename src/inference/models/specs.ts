// One ModelSpec per public model id (cf. sherpa-onnx's one config object per model with Validate()): label, rate,
// graph files, 16 kHz chain, full-band behaviour and bands, latency, cost. Validated when this module loads; the
// manifest (scripts/convert-models.ts), GET /models (model-list.ts), chains.ts, the engine and the pipeline read it.
import type { GateOptions } from '../../dsp/gate';
import type { HighBandOptions } from '../../dsp/highband';
import type { PostFilterOptions } from '../../dsp/postfilter';
import { DEFAULT_MODEL, MODEL_IDS, type BandProcessing, type ModelId } from '../types';

// No onnxruntime-node here, nor anything that imports it: the main thread loads this module (the catalogue, the
// engine, the file pipeline, the CLI's start-up) and only the worker threads run ONNX Runtime.

/** File names of the generated ONNX graphs (models/, written by `npm run models`). */
export const STAGE1_FILE = 'dtln_stage1.onnx';
export const STAGE2_FILE = 'dtln_stage2.onnx';
/** Every graph a chain can run, in the order a spec lists them (the manifest's `files` and sha256 follow it). */
export const GRAPH_FILES: readonly string[] = [STAGE1_FILE, STAGE2_FILE];

/**
 * A 16 kHz chain as data: stages run one after the other, each on the previous one's output. `dtln` is one DTLN
 * pass (both stages unless `stage2: false`; `grids`: frame-grid offsets averaged in one batched run), `stage1` DTLN's
 * stage 1 alone at a coarser hop, `postFilter` the residual-noise post-filter, `gate` the residual gate. The bench's
 * quality harness builds experimental chains from the same description (chains.ts buildChain).
 */
export type StageSpec =
  | { dtln: { stage2?: boolean; grids?: number[] } }
  | { stage1: { hop: number } }
  | { postFilter: PostFilterOptions }
  | { gate: GateOptions };
export type ChainSpec = StageSpec[];

/** The rate every chain core runs at, and the rate of a full-band stream. */
export const CORE_RATE = 16000;
export const FULL_BAND_RATE = 48000;
/** Telephony: a 16 kHz model runs there between 2:1 resamplers (narrowband.ts), for 8 kHz inputs whose rate is kept. */
export const NARROW_BAND_RATE = 8000;
/** Crossover between the 16 kHz chain's band and the guided high band (the 48 <-> 16 kHz resamplers' edge). */
export const CROSSOVER_HZ = 8000;

export interface ModelSpec {
  id: ModelId;
  /** Listed by GET /models and in models/manifest.json. */
  label: string;
  description: string;
  /** The rate the model runs at and reports as its `sample_rate`; audio is decoded to it. */
  sampleRate: typeof CORE_RATE | typeof FULL_BAND_RATE;
  /** GRAPH_FILES the chain runs, in GRAPH_FILES order: exactly those its stages need (validate() checks). */
  graphs: readonly string[];
  /** The 16 kHz chain: the whole model at 16 kHz, the band below CROSSOVER_HZ of a full-band stream. */
  chain: ChainSpec;
  /**
   * 'always': every stream runs at 48 kHz (FullBandChain around `chain`: above CROSSOVER_HZ the input's own band,
   * filtered under the chain's guidance), whatever the input and keep_input_sample_rate. 'on-request': 16 kHz, and
   * full band when the stream asks for it (DenoiseOptions.fullBand: inputs above 16 kHz whose rate is kept).
   */
  fullBand: 'always' | 'on-request';
  /**
   * Samples the chain delays its output by (AlignedStream compensates it): at `sampleRate`, and at 48 kHz when it
   * runs full band. test/unit/inference-models.test.ts checks both against the chains as built.
   */
  latency: { samples: number; fullBandSamples: number };
  /** Engine CPU per audio second relative to nsm-2 at 16 kHz (docs/engine.md, measured): a hint, not used to process. */
  relativeCost: number;
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

// The chains (docs/engine.md says how each was chosen). Later DTLN passes run on the previous pass's output and take
// out more of the residual noise; the post-filter takes the stationary rest down per frequency bin, and the residual
// gate what is left between words. Measured on real recordings, none of these stages lowers DNSMOS SIG.
// nsm-4: DTLN three times (the first pass averaged over two frame grids), the stronger post-filter, the gate.
const NSM4_CHAIN: ChainSpec = [{ dtln: { grids: [0, 64] } }, { dtln: {} }, { dtln: {} }, { postFilter: NSM4_POSTFILTER }, { gate: RESIDUAL_GATE }];

const SPECS: Record<ModelId, ModelSpec> = {
  'nsm-1': {
    id: 'nsm-1',
    label: 'NSM-1 Fast',
    sampleRate: CORE_RATE,
    description: 'DTLN magnitude-mask stage alone at half its frame rate, resynthesised with a Hann overlap-add. Lowest cost (about 0.4x NSM-2), lower quality than NSM-2; for real-time and high-volume jobs. Above 16 kHz (rate kept) the band above 8 kHz is filtered under its guidance.',
    graphs: [STAGE1_FILE],
    // DTLN stage 1 alone (magnitude mask) at half DTLN's frame rate (hop 256), Hann synthesis: the fastest.
    chain: [{ stage1: { hop: 256 } }],
    fullBand: 'on-request',
    latency: { samples: 256, fullBandSamples: 2032 },
    relativeCost: 0.41,
  },
  'nsm-2': {
    id: 'nsm-2',
    label: 'NSM-2 Balanced',
    sampleRate: CORE_RATE,
    description: 'Both DTLN stages (magnitude mask, then learned-basis time-domain stage). The default. Above 16 kHz (rate kept) the band above 8 kHz is filtered under its guidance.',
    graphs: [STAGE1_FILE, STAGE2_FILE],
    // The faithful DTLN.
    chain: [{ dtln: {} }],
    fullBand: 'on-request',
    latency: { samples: 384, fullBandSamples: 2416 },
    relativeCost: 1,
  },
  'nsm-3': {
    id: 'nsm-3',
    label: 'NSM-3 Quality',
    sampleRate: CORE_RATE,
    description: 'DTLN, then a residual-noise post-filter and a gate for what is left between words. Clearly cleaner than NSM-2, about 1.8x its cost. Above 16 kHz (rate kept) the band above 8 kHz is filtered under its guidance.',
    graphs: [STAGE1_FILE, STAGE2_FILE],
    // The post-filter's STFT is most of the extra cost.
    chain: [{ dtln: {} }, { postFilter: NSM3_POSTFILTER }, { gate: RESIDUAL_GATE }],
    fullBand: 'on-request',
    latency: { samples: 1152, fullBandSamples: 4720 },
    relativeCost: 1.8,
  },
  'nsm-4': {
    id: 'nsm-4',
    label: 'NSM-4 Studio',
    sampleRate: CORE_RATE,
    description: 'DTLN run three times (the first pass averaged over two shifted frame grids), a stronger post-filter and the residual gate. The cleanest, about 4x the cost of NSM-2. Above 16 kHz (rate kept) the band above 8 kHz is filtered under its guidance.',
    graphs: [STAGE1_FILE, STAGE2_FILE],
    chain: NSM4_CHAIN,
    fullBand: 'on-request',
    latency: { samples: 1984, fullBandSamples: 7216 },
    relativeCost: 4, // 3.8-4.6 measured
  },
  'nsm-2-hd': {
    id: 'nsm-2-hd',
    label: 'NSM-2 HD (48 kHz)',
    sampleRate: FULL_BAND_RATE,
    description: 'Full band at 48 kHz whatever the input and keep_input_sample_rate: NSM-4\'s chain on the speech band; above 8 kHz the input\'s own high band through a per-frequency noise filter guided by it, so noise under speech is reduced there too.',
    graphs: [STAGE1_FILE, STAGE2_FILE],
    // The best 16 kHz chain (nsm-4's) on the speech band; above 8 kHz the guided per-bin filter.
    chain: NSM4_CHAIN,
    fullBand: 'always',
    latency: { samples: 7216, fullBandSamples: 7216 },
    relativeCost: 6.5, // ~6-7 measured
  },
};

/** The graph files a chain runs: stage 1 for every DTLN stage, stage 2 for full DTLN passes. In GRAPH_FILES order. */
export function graphsFor(chain: ChainSpec): string[] {
  const stage2 = chain.some((st) => 'dtln' in st && st.dtln.stage2 !== false);
  const stage1 = stage2 || chain.some((st) => 'dtln' in st || 'stage1' in st);
  return GRAPH_FILES.filter((f) => (f === STAGE1_FILE ? stage1 : f === STAGE2_FILE && stage2));
}

const isCount = (x: unknown): boolean => Number.isInteger(x) && (x as number) >= 0;

/** The problems of one stage's description (empty when none). */
function stageProblems(st: StageSpec, i: number): string[] {
  const keys = Object.keys(st);
  if (keys.length !== 1 || !['dtln', 'stage1', 'postFilter', 'gate'].includes(keys[0])) {
    return [`stage ${i} must have exactly one of dtln, stage1, postFilter, gate (has ${keys.join(', ') || 'none'})`];
  }
  if ('dtln' in st) {
    const grids = st.dtln.grids;
    if (grids !== undefined && (grids.length === 0 || !grids.every(isCount) || new Set(grids).size !== grids.length)) {
      return [`stage ${i}: dtln grids must be distinct sample offsets >= 0`];
    }
  } else if ('stage1' in st) {
    if (!(Number.isInteger(st.stage1.hop) && st.stage1.hop > 0)) return [`stage ${i}: stage1 hop must be a positive integer`];
  } else {
    const opts: object = 'postFilter' in st ? st.postFilter : st.gate;
    const bad = Object.entries(opts).filter(([, v]) => typeof v === 'number' && !Number.isFinite(v));
    if (bad.length > 0) return [`stage ${i}: ${bad.map(([k]) => k).join(', ')} must be finite`];
  }
  return [];
}

/** Throws, naming every problem, unless `spec` describes a model the engine can run as described. */
export function validate(spec: ModelSpec): void {
  const problems: string[] = [];
  if (!spec.label.trim() || !spec.description.trim()) problems.push('label and description must not be empty');
  if (spec.sampleRate !== CORE_RATE && spec.sampleRate !== FULL_BAND_RATE) problems.push(`sample rate ${spec.sampleRate} is neither ${CORE_RATE} nor ${FULL_BAND_RATE}`);
  const always = spec.sampleRate === FULL_BAND_RATE;
  if (spec.fullBand !== (always ? 'always' : 'on-request')) {
    problems.push(`a ${spec.sampleRate} Hz model runs full band ${always ? "'always'" : "'on-request'"}, not '${spec.fullBand}'`);
  }
  if (spec.chain.length === 0) problems.push('the chain has no stage');
  spec.chain.forEach((st, i) => problems.push(...stageProblems(st, i)));
  const needed = graphsFor(spec.chain);
  if (spec.graphs.join() !== needed.join()) problems.push(`graphs [${spec.graphs.join(', ')}], but the chain runs [${needed.join(', ')}]`);
  const { samples, fullBandSamples } = spec.latency;
  if (!isCount(samples) || !isCount(fullBandSamples)) problems.push('latencies must be sample counts');
  if (always && samples !== fullBandSamples) problems.push('a full-band model has one latency');
  if (!(spec.relativeCost > 0 && Number.isFinite(spec.relativeCost))) problems.push('relative cost must be positive');
  if (problems.length > 0) throw new Error(`model ${spec.id}: ${problems.join('; ')}`);
}

/** Validates every spec and that they are exactly MODEL_IDS (each under its own id), the default among them. */
export function validateAll(specs: Record<string, ModelSpec>): Record<ModelId, ModelSpec> {
  const ids = Object.keys(specs);
  if (ids.join() !== MODEL_IDS.join()) throw new Error(`model specs [${ids.join(', ')}] are not MODEL_IDS [${MODEL_IDS.join(', ')}]`);
  for (const id of ids) {
    if (specs[id].id !== id) throw new Error(`the spec under ${id} says it is ${specs[id].id}`);
    validate(specs[id]);
  }
  if (!(DEFAULT_MODEL in specs)) throw new Error(`default model ${DEFAULT_MODEL} has no spec`);
  return specs as Record<ModelId, ModelSpec>;
}

/** Every public model, validated at load: a broken spec stops the process that loads it, not a request. */
export const MODELS: Readonly<Record<ModelId, ModelSpec>> = validateAll(SPECS);

/** The 16 kHz models' chains by id (the bench's quality and cost harnesses name them). */
export const MODEL_CHAINS = Object.fromEntries(
  MODEL_IDS.filter((id) => MODELS[id].fullBand === 'on-request').map((id) => [id, MODELS[id].chain]),
) as Record<Exclude<ModelId, 'nsm-2-hd'>, ChainSpec>;

/** A model's entry in models/manifest.json before its sizes and digest (which the converter adds): keys in this order. */
export function manifestFields(id: ModelId): { id: ModelId; label: string; sample_rate: number; description: string; files: string[] } {
  const m = MODELS[id];
  return { id: m.id, label: m.label, sample_rate: m.sampleRate, description: m.description, files: [...m.graphs] };
}

/**
 * The rate a stream runs at and what it does to each band up to half that rate. 'on-request' models run full band
 * (48 kHz, FullBandChain around their chain) when asked; 'always' models always do. Narrow band (8 kHz,
 * NarrowBandChain) only where the model is not full band.
 */
export function streamLayout(model: ModelId, fullBand: boolean, narrowBand = false): { sampleRate: number; bands: BandProcessing[] } {
  const full = MODELS[model].fullBand === 'always' || fullBand;
  const rate = full ? FULL_BAND_RATE : narrowBand ? NARROW_BAND_RATE : CORE_RATE;
  const bands: BandProcessing[] = [{ from_hz: 0, to_hz: Math.min(CROSSOVER_HZ, rate / 2), processing: 'denoised_16k' }];
  if (rate > CORE_RATE) bands.push({ from_hz: CROSSOVER_HZ, to_hz: rate / 2, processing: 'guided_high_band' });
  return { sampleRate: rate, bands };
}

/** `bands` cut at `topHz` (half the lower of the input and output rates: nothing above it reaches the output). */
export function bandsUpTo(bands: BandProcessing[], topHz: number): BandProcessing[] {
  return bands.filter((b) => b.from_hz < topHz).map((b) => ({ ...b, to_hz: Math.min(b.to_hz, topHz) }));
}
