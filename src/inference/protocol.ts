// Messages between the pool (main thread) and an inference worker.
import type { WavSampleFormat } from '../dsp/pcm';
import type { LiveEncoding, ModelId, StreamLoudness } from './types';

export type ToWorker =
  | { type: 'open'; reqId: number; streamId: number; model: ModelId; channels: number; attenuationLimitDb: number; fullBand?: boolean; measureLoudness?: boolean; pcmInput?: WavSampleFormat }
  | { type: 'push'; reqId: number; streamId: number; planar: Float32Array[] }
  /** A stream opened with pcmInput: interleaved bytes of whole frames; answered with `pcm` (16-bit, dithered). */
  | { type: 'push-pcm'; reqId: number; streamId: number; bytes: Uint8Array }
  | { type: 'end'; reqId: number; streamId: number }
  | { type: 'abort'; streamId: number }
  | { type: 'crash' }
  // Live streams (live-host.ts): handled on arrival, ahead of the file requests queued in the worker.
  | { type: 'live-open'; reqId: number; open: LiveOpen }
  | { type: 'live-tick'; reqId: number; items: LiveItem[] }
  | { type: 'live-abort'; streamId: number };

/** What a live stream is: its id, chain and the client's PCM. */
export interface LiveOpen {
  streamId: number;
  model: ModelId;
  channels: number;
  sampleRate: number;
  encoding: LiveEncoding;
  attenuationLimitDb: number;
}

/** One live stream's bytes for a tick (whole frames, possibly none), and whether the client ended the stream. */
export interface LiveItem {
  streamId: number;
  bytes: Uint8Array;
  end: boolean;
}

export interface LiveItemResult {
  streamId: number;
  /** The output these bytes completed (with `ended`, everything left: total output = total input). */
  bytes: Uint8Array;
  ended?: boolean;
  error?: string;
}

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
  | { type: 'error'; reqId: number; message: string }
  | { type: 'live-opened'; reqId: number; latencySamples: number; chainRate: number }
  | { type: 'live-result'; reqId: number; items: LiveItemResult[] };
