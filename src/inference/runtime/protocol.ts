// Messages between the pool (main thread) and an inference worker. A live tick's items travel packed (live/packing.ts).
import type { ThreadPriority } from './thread-priority';
import type { WavSampleFormat } from '../../dsp/pcm';
import type { EchoReport, ModelId, StreamLoudness } from '../types';
import type { LiveOpen, PackedLive } from '../live/packing';
import type { SpeechReport, SpeechRequest } from '../../vad/options';

export type ToWorker =
  | { type: 'open'; reqId: number; streamId: number; model: ModelId; channels: number; attenuationLimitDb: number; fullBand?: boolean; narrowBand?: boolean; measureLoudness?: boolean; pcmInput?: WavSampleFormat; speech?: SpeechRequest; echoReference?: boolean }
  | { type: 'push'; reqId: number; streamId: number; planar: Float32Array[] }
  /** A stream opened with pcmInput: interleaved bytes of whole frames; answered with `pcm` (16-bit, dithered). */
  | { type: 'push-pcm'; reqId: number; streamId: number; bytes: Uint8Array }
  | { type: 'end'; reqId: number; streamId: number }
  | { type: 'abort'; streamId: number }
  | { type: 'crash' }
  // Live streams (live/host.ts): handled on arrival, ahead of the file requests queued in the worker.
  | { type: 'live-open'; reqId: number; open: LiveOpen }
  | { type: 'live-tick'; reqId: number; packed: PackedLive }
  | { type: 'live-abort'; streamId: number };

/**
 * Whether `view` spans its whole ArrayBuffer (and that buffer is not shared), so transferring the buffer moves exactly
 * these bytes; other views are copied before they are posted.
 */
export function spansItsBuffer(view: ArrayBufferView): boolean {
  return view.byteOffset === 0 && view.byteLength === view.buffer.byteLength && !(view.buffer instanceof SharedArrayBuffer);
}

export type FromWorker =
  | { type: 'ready'; priority: ThreadPriority }
  | { type: 'init-error'; message: string }
  | { type: 'result'; reqId: number; planar: Float32Array[]; pcm?: Uint8Array; loudness?: StreamLoudness; speech?: SpeechReport; echo?: EchoReport }
  | { type: 'error'; reqId: number; message: string }
  | { type: 'live-opened'; reqId: number; latencySamples: number; chainRate: number }
  | { type: 'live-result'; reqId: number; packed: PackedLive };
