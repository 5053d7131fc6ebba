// Messages between the pool (main thread) and an inference worker.
import type { ModelId, StreamLoudness } from './types';

export type ToWorker =
  | { type: 'open'; reqId: number; streamId: number; model: ModelId; channels: number; attenuationLimitDb: number; fullBand?: boolean; measureLoudness?: boolean }
  | { type: 'push'; reqId: number; streamId: number; planar: Float32Array[] }
  | { type: 'end'; reqId: number; streamId: number }
  | { type: 'abort'; streamId: number }
  | { type: 'crash' };

export type FromWorker =
  | { type: 'ready' }
  | { type: 'init-error'; message: string }
  | { type: 'result'; reqId: number; planar: Float32Array[]; loudness?: StreamLoudness }
  | { type: 'error'; reqId: number; message: string };
