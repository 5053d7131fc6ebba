// Chain definitions: what each model id is, its rate and the graph files its chain uses.
// scripts/convert-models.ts may import this to write models/manifest.json; engine.listModels() serves it.
import type { BandProcessing, ModelId } from './types';
import { STAGE1_FILE, STAGE2_FILE } from './graph-files';

export interface ChainDefinition {
  id: ModelId;
  label: string;
  sample_rate: number;
  description: string;
  files: string[];
}

export const CHAINS: Record<ModelId, ChainDefinition> = {
  'nsm-1': {
    id: 'nsm-1',
    label: 'NSM-1 Fast',
    sample_rate: 16000,
    description: 'DTLN magnitude-mask stage alone at half its frame rate, resynthesised with a Hann overlap-add. Lowest cost (about 0.4x NSM-2), lower quality than NSM-2; for real-time and high-volume jobs. Above 16 kHz (rate kept) the band above 8 kHz is filtered under its guidance.',
    files: [STAGE1_FILE],
  },
  'nsm-2': {
    id: 'nsm-2',
    label: 'NSM-2 Balanced',
    sample_rate: 16000,
    description: 'Both DTLN stages (magnitude mask, then learned-basis time-domain stage). The default. Above 16 kHz (rate kept) the band above 8 kHz is filtered under its guidance.',
    files: [STAGE1_FILE, STAGE2_FILE],
  },
  'nsm-3': {
    id: 'nsm-3',
    label: 'NSM-3 Quality',
    sample_rate: 16000,
    description: 'DTLN, then a residual-noise post-filter and a gate for what is left between words. Clearly cleaner than NSM-2, about 1.8x its cost. Above 16 kHz (rate kept) the band above 8 kHz is filtered under its guidance.',
    files: [STAGE1_FILE, STAGE2_FILE],
  },
  'nsm-4': {
    id: 'nsm-4',
    label: 'NSM-4 Studio',
    sample_rate: 16000,
    description: 'DTLN run three times (the first pass averaged over two shifted frame grids), a stronger post-filter and the residual gate. The cleanest, about 4x the cost of NSM-2. Above 16 kHz (rate kept) the band above 8 kHz is filtered under its guidance.',
    files: [STAGE1_FILE, STAGE2_FILE],
  },
  'nsm-2-hd': {
    id: 'nsm-2-hd',
    label: 'NSM-2 HD (48 kHz)',
    sample_rate: 48000,
    description: 'Full band at 48 kHz whatever the input and keep_input_sample_rate: NSM-4\'s chain on the speech band; above 8 kHz the input\'s own high band through a per-frequency noise filter guided by it, so noise under speech is reduced there too.',
    files: [STAGE1_FILE, STAGE2_FILE],
  },
};


/** Crossover between the 16 kHz chain's band and the guided high band (the 48 <-> 16 kHz resamplers' edge). */
export const CROSSOVER_HZ = 8000;

/**
 * The rate a stream runs at and what it does to each band up to half that rate. 16 kHz models run full band (48 kHz,
 * FullBandChain around their chain) when asked; nsm-2-hd always does.
 */
export function streamLayout(model: ModelId, fullBand: boolean): { sampleRate: number; bands: BandProcessing[] } {
  const rate = CHAINS[model].sample_rate === 48000 || fullBand ? 48000 : 16000;
  const bands: BandProcessing[] = [{ from_hz: 0, to_hz: CROSSOVER_HZ, processing: 'denoised_16k' }];
  if (rate > 16000) bands.push({ from_hz: CROSSOVER_HZ, to_hz: rate / 2, processing: 'guided_high_band' });
  return { sampleRate: rate, bands };
}

/** `bands` cut at `topHz` (half the lower of the input and output rates: nothing above it reaches the output). */
export function bandsUpTo(bands: BandProcessing[], topHz: number): BandProcessing[] {
  return bands.filter((b) => b.from_hz < topHz).map((b) => ({ ...b, to_hz: Math.min(b.to_hz, topHz) }));
}
