// The model catalogue for GET /models and /health: each model's spec (models.ts), its size from models/manifest.json
// when present, and whether every graph file its chain needs is there.
import fs from 'node:fs';
import path from 'node:path';
import type { Config } from '../../config';
import { MODELS } from './specs';
import { DEFAULT_MODEL, MODEL_IDS, type ModelId, type ModelManifestEntry } from '../types';

export interface ModelListEntry {
  id: ModelId;
  label: string;
  sample_rate: number;
  description: string;
  available: boolean;
  size_mb: number;
}

/**
 * The catalogue: label, rate and description from each model's spec, the size from models/manifest.json (or the
 * files), `available` when the manifest lists the model and every graph file it names exists.
 */
export function listModels(config: Config): { models: ModelListEntry[]; default: ModelId } {
  let manifest: { models?: ModelManifestEntry[]; default?: string } = {};
  try {
    manifest = JSON.parse(fs.readFileSync(path.join(config.modelsDir, 'manifest.json'), 'utf8'));
  } catch {
    // no manifest yet: every model is listed as unavailable
  }
  const byId = new Map((manifest.models ?? []).map((m) => [m.id, m]));
  const models = MODEL_IDS.map((id) => {
    const spec = MODELS[id];
    const entry = byId.get(id);
    const files = entry?.files ?? spec.graphs;
    const available = !!entry && files.every((f) => fs.existsSync(path.join(config.modelsDir, f)));
    let size = 0;
    for (const f of files) {
      try {
        size += fs.statSync(path.join(config.modelsDir, f)).size;
      } catch {
        // missing file: not available, size unknown
      }
    }
    return {
      id,
      label: spec.label,
      sample_rate: spec.sampleRate,
      description: spec.description,
      available,
      size_mb: entry?.size_mb ?? Math.round((size / 1e6) * 100) / 100,
    };
  });
  const dflt = MODEL_IDS.includes(manifest.default as ModelId) ? (manifest.default as ModelId) : DEFAULT_MODEL;
  return { models, default: dflt };
}
