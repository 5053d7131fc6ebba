// The model catalog behind GET /models and /health: the inference engine's listModels (models/manifest.json plus
// which graph files are installed), read again at most a second later, so installing models needs no restart. (Every
// /denoise checks its model against it; reading the manifest and stat-ing every graph file took ~80 µs a call.)
import type { Config } from '../config';
import { listModels, type ModelListEntry } from '../inference/runtime/engine';
import { MODEL_IDS, type ModelId } from '../inference/types';

export type ModelRecord = ModelListEntry;

export interface ModelCatalog {
  models: ModelRecord[];
  default: ModelId;
}

/** How long a catalog read stays current. */
export const CATALOG_TTL_MS = 1000;

const cached = new Map<string, { at: number; catalog: ModelCatalog }>();

export function loadCatalog(config: Config): ModelCatalog {
  const now = Date.now();
  const hit = cached.get(config.modelsDir);
  if (hit && now - hit.at < CATALOG_TTL_MS) return hit.catalog;
  const catalog = listModels(config);
  cached.set(config.modelsDir, { at: now, catalog });
  return catalog;
}

export function isModelId(value: string): value is ModelId {
  return (MODEL_IDS as readonly string[]).includes(value);
}
