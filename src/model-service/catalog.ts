// The model catalog behind GET /models and /health: the inference engine's listModels (models/manifest.json plus
// which graph files are installed), read on every call so installing models needs no restart.
import type { Config } from '../config';
import { listModels, type ModelListEntry } from '../inference/engine';
import { MODEL_IDS, type ModelId } from '../inference/types';

export type ModelRecord = ModelListEntry;

export interface ModelCatalog {
  models: ModelRecord[];
  default: ModelId;
}

export function loadCatalog(config: Config): ModelCatalog {
  return listModels(config);
}

export function isModelId(value: string): value is ModelId {
  return (MODEL_IDS as readonly string[]).includes(value);
}
