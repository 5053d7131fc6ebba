// The model catalog behind GET /models: models/manifest.json plus which graph files are actually installed.
import fs from 'node:fs';
import path from 'node:path';
import type { Config } from '../config';
import { DEFAULT_MODEL, MODEL_IDS, type ModelId, type ModelManifestEntry } from '../inference/types';

export interface ModelRecord {
  id: ModelId;
  label: string;
  sample_rate: number;
  description: string;
  available: boolean;
  size_mb: number;
}

export interface ModelCatalog {
  models: ModelRecord[];
  default: ModelId;
}

// Used for models the manifest does not describe (e.g. before `npm run models` has run): spec part 1.
const FALLBACK: Record<ModelId, Omit<ModelRecord, 'available' | 'size_mb'>> = {
  'nsm-1': { id: 'nsm-1', label: 'Fast', sample_rate: 16000, description: 'Fast; for real-time and high-volume jobs' },
  'nsm-2': { id: 'nsm-2', label: 'Balanced', sample_rate: 16000, description: 'Balanced; the default' },
  'nsm-3': { id: 'nsm-3', label: 'Quality', sample_rate: 16000, description: 'Quality; cleaner output, slower' },
  'nsm-4': { id: 'nsm-4', label: 'Studio', sample_rate: 16000, description: 'Studio; best 16 kHz quality' },
  'nsm-2-hd': {
    id: 'nsm-2-hd',
    label: 'Full-band HD',
    sample_rate: 48000,
    description: 'Full-band 48 kHz audio, for music beds and broadcast',
  },
};

function readManifest(modelsDir: string): { entries: ModelManifestEntry[]; default?: string } {
  try {
    const raw = JSON.parse(fs.readFileSync(path.join(modelsDir, 'manifest.json'), 'utf8')) as unknown;
    if (Array.isArray(raw)) return { entries: raw as ModelManifestEntry[] };
    const obj = raw as { models?: ModelManifestEntry[]; default?: string };
    return { entries: Array.isArray(obj.models) ? obj.models : [], default: obj.default };
  } catch {
    return { entries: [] };
  }
}

/** Reads the manifest and checks the files on every call, so installing models needs no restart. */
export function loadCatalog(config: Config): ModelCatalog {
  const manifest = readManifest(config.modelsDir);
  const byId = new Map(manifest.entries.map((e) => [e.id, e]));
  const models = MODEL_IDS.map((id): ModelRecord => {
    const entry = byId.get(id);
    if (!entry) return { ...FALLBACK[id], available: false, size_mb: 0 };
    const files = Array.isArray(entry.files) ? entry.files : [];
    const available = files.length > 0 && files.every((f) => fs.existsSync(path.join(config.modelsDir, f)));
    return {
      id,
      label: entry.label ?? FALLBACK[id].label,
      sample_rate: entry.sample_rate ?? FALLBACK[id].sample_rate,
      description: entry.description ?? FALLBACK[id].description,
      available,
      size_mb: typeof entry.size_mb === 'number' ? entry.size_mb : 0,
    };
  });
  const def = MODEL_IDS.includes(manifest.default as ModelId) ? (manifest.default as ModelId) : DEFAULT_MODEL;
  return { models, default: def };
}

export function isModelId(value: string): value is ModelId {
  return (MODEL_IDS as readonly string[]).includes(value);
}
