// Chain definitions: what each model id is, its rate and the graph files its chain uses.
// scripts/convert-models.ts may import this to write models/manifest.json; engine.listModels() serves it.
import type { ModelId } from './types';
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
    description: 'DTLN magnitude-mask stage alone, resynthesised with a Hann overlap-add. Lowest cost, for real-time and high-volume jobs.',
    files: [STAGE1_FILE],
  },
  'nsm-2': {
    id: 'nsm-2',
    label: 'NSM-2 Balanced',
    sample_rate: 16000,
    description: 'Both DTLN stages (magnitude mask, then learned-basis time-domain stage). The default.',
    files: [STAGE1_FILE, STAGE2_FILE],
  },
  'nsm-3': {
    id: 'nsm-3',
    label: 'NSM-3 Quality',
    sample_rate: 16000,
    description: 'Both DTLN stages plus a residual-noise post-filter (noise-floor tracking, Wiener gain with a floor). Cleaner, slightly slower.',
    files: [STAGE1_FILE, STAGE2_FILE],
  },
  'nsm-4': {
    id: 'nsm-4',
    label: 'NSM-4 Studio',
    sample_rate: 16000,
    description: 'DTLN averaged over four shifted frame grids, then post-filtered. Best 16 kHz quality, about 4x the cost of NSM-2.',
    files: [STAGE1_FILE, STAGE2_FILE],
  },
  'nsm-2-hd': {
    id: 'nsm-2-hd',
    label: 'NSM-2 HD (48 kHz)',
    sample_rate: 48000,
    description: 'Full-band 48 kHz: DTLN plus a residual-noise post-filter on the speech band; above 8 kHz a per-frequency noise filter guided by DTLN\'s speech/noise decision, so noise under speech is reduced there too.',
    files: [STAGE1_FILE, STAGE2_FILE],
  },
};
