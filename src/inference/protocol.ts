// Messages between the pool (main thread) and an inference worker.
import type { WavSampleFormat } from '../dsp/pcm';
import type { ModelId, StreamLoudness } from './types';

export type ToWorker =
  | { type: 'open'; reqId: number; streamId: number; model: ModelId; channels: number; attenuationLimitDb: number; fullBand?: boolean; measureLoudness?: boolean; pcmInput?: WavSampleFormat }
  | { type: 'push'; reqId: number; streamId: number; planar: Float32Array[] }
  /** A stream opened with pcmInput: interleaved bytes of whole frames; answered with `pcm` (16-bit, dithered). */
  | { type: 'push-pcm'; reqId: number; streamId: number; bytes: Uint8Array }
  | { type: 'end'; reqId: number; streamId: number }
  | { type: 'abort'; streamId: number }
  | { type: 'crash' };

/**
 * Whether `view` spans its whole ArrayBuffer (and that buffer is not shared), so transferring the buffer moves exactly
 * these bytes; other views are copied before they are posted.
 */
export function spansItsBuffer(view: ArrayBufferView): boolean {
  return view.byteOffset === 0 && view.byteLength === view.buffer.byteLength && !(view.buffer instanceof SharedArrayBuffer);
}

export type FromWorker =
  | { type: 'ready' }
  | { type: 'init-error'; message: string }
  | { type: 'result'; reqId: number; planar: Float32Array[]; pcm?: Uint8Array; loudness?: StreamLoudness }
  | { type: 'error'; reqId: number; message: string };
