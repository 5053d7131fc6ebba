// Messages between the pool (main thread) and an inference worker.
import type { ThreadPriority } from './thread-priority';
import type { WavSampleFormat } from '../dsp/pcm';
import type { EchoReport, LiveEncoding, ModelId, StreamLoudness } from './types';
import type { SpeechReport, SpeechRequest } from '../vad/options';

export type ToWorker =
  | { type: 'open'; reqId: number; streamId: number; model: ModelId; channels: number; attenuationLimitDb: number; fullBand?: boolean; measureLoudness?: boolean; pcmInput?: WavSampleFormat; speech?: SpeechRequest; echoReference?: boolean }
  | { type: 'push'; reqId: number; streamId: number; planar: Float32Array[] }
  /** A stream opened with pcmInput: interleaved bytes of whole frames; answered with `pcm` (16-bit, dithered). */
  | { type: 'push-pcm'; reqId: number; streamId: number; bytes: Uint8Array }
  | { type: 'end'; reqId: number; streamId: number }
  | { type: 'abort'; streamId: number }
  | { type: 'crash' }
  // Live streams (live-host.ts): handled on arrival, ahead of the file requests queued in the worker.
  | { type: 'live-open'; reqId: number; open: LiveOpen }
  | { type: 'live-tick'; reqId: number; packed: PackedLive }
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

/**
 * One live stream's part of a tick. To the worker: its bytes (whole frames, possibly none) and whether the client
 * ended the stream. Back: the output these bytes completed (with `end`, everything left: total output = total
 * input), or the error that ended the stream.
 */
export interface LiveItem {
  streamId: number;
  bytes: Uint8Array;
  end: boolean;
  error?: string;
}

/**
 * A tick's items as two transferable buffers: a tick carries tens to hundreds of streams, and posting each one's bytes
 * as its own transferred buffer cost the main thread more than the WebSocket reads (profile of 300 nsm-1 streams).
 */
export interface PackedLive {
  /** Per item: stream id, byte length, flags (1: end, 2: error). */
  meta: Int32Array;
  /** The items' bytes one after another. */
  data: Uint8Array;
  /** The messages of the items flagged 2, in order. */
  errors: string[];
}

/** An item to pack: its bytes in one piece or in the pieces they arrived in (copied once, here). */
export type LiveItemToPack = Omit<LiveItem, 'bytes'> & { bytes: Uint8Array | readonly Uint8Array[] };

export function packLive(items: readonly LiveItemToPack[]): PackedLive {
  const meta = new Int32Array(items.length * 3);
  const pieces = items.map((it) => (it.bytes instanceof Uint8Array ? [it.bytes] : it.bytes));
  let total = 0;
  for (const list of pieces) for (const p of list) total += p.byteLength;
  const data = new Uint8Array(total);
  const errors: string[] = [];
  let o = 0;
  items.forEach((it, i) => {
    const start = o;
    for (const p of pieces[i]) {
      data.set(p, o);
      o += p.byteLength;
    }
    meta[i * 3] = it.streamId;
    meta[i * 3 + 1] = o - start;
    meta[i * 3 + 2] = (it.end ? 1 : 0) | (it.error !== undefined ? 2 : 0);
    if (it.error !== undefined) errors.push(it.error);
  });
  return { meta, data, errors };
}

/** packLive's inverse; each item's bytes are a view into `data` (nothing is copied). */
export function unpackLive(p: PackedLive): LiveItem[] {
  const items: LiveItem[] = [];
  let o = 0;
  let e = 0;
  for (let i = 0; i < p.meta.length; i += 3) {
    const len = p.meta[i + 1];
    const flags = p.meta[i + 2];
    const item: LiveItem = { streamId: p.meta[i], bytes: p.data.subarray(o, o + len), end: (flags & 1) !== 0 };
    if (flags & 2) item.error = p.errors[e++];
    items.push(item);
    o += len;
  }
  return items;
}

export function packedTransfer(p: PackedLive): ArrayBuffer[] {
  return [p.meta.buffer as ArrayBuffer, p.data.buffer as ArrayBuffer];
}

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
