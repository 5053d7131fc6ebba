// What crosses to a live worker and back (the live-open and live-tick messages of protocol.ts): a stream's settings,
// and a tick's items packed into two transferable buffers (with a tick's speech events, vad=true, and the echo
// canceller's figures at a stream's end beside them).
import type { VadEvent } from '../../vad/batch';
import type { VadOptions } from '../../vad/options';
import type { EchoReport, LiveEncoding, ModelId } from '../types';

/** What a live stream is: its id, chain and the client's PCM. */
export interface LiveOpen {
  streamId: number;
  model: ModelId;
  channels: number;
  sampleRate: number;
  encoding: LiveEncoding;
  attenuationLimitDb: number;
  /** Speech events with these settings (vad=true). */
  vad?: VadOptions;
  /** The last of `channels` is the echo reference (echo-front.ts before the chain). */
  echoReference?: boolean;
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
  /** Back, vad=true: the speech events decided in this tick (an item may carry them and no bytes). */
  events?: VadEvent[];
  /** Back with `end`, for a stream with an echo reference: the canceller's figures. */
  echo?: EchoReport;
}

/**
 * A tick's items as two transferable buffers: a tick carries tens to hundreds of streams, and posting each one's bytes
 * as its own transferred buffer cost the main thread more than the WebSocket reads (profile of 300 nsm-1 streams).
 */
export interface PackedLive {
  /** Per item: stream id, byte length, flags (1: end, 2: error, 4: events, 8: echo figures). */
  meta: Int32Array;
  /** The items' bytes one after another. */
  data: Uint8Array;
  /** The messages of the items flagged 2, in order. */
  errors: string[];
  /** The speech events of the items flagged 4, in order (few: structured clone is enough). */
  events?: VadEvent[][];
  /**
   * Back: ms until speech frames waiting in the worker are due for their run although no stream sent anything (the
   * pool then posts an empty tick: events never wait for more input). Absent: nothing waits.
   */
  vadDueMs?: number;
  /** The echo figures of the items flagged 8, in order. */
  echoes?: EchoReport[];
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
  const events: VadEvent[][] = [];
  const echoes: EchoReport[] = [];
  let o = 0;
  items.forEach((it, i) => {
    const start = o;
    for (const p of pieces[i]) {
      data.set(p, o);
      o += p.byteLength;
    }
    meta[i * 3] = it.streamId;
    meta[i * 3 + 1] = o - start;
    const hasEvents = (it.events?.length ?? 0) > 0;
    meta[i * 3 + 2] = (it.end ? 1 : 0) | (it.error !== undefined ? 2 : 0) | (hasEvents ? 4 : 0) | (it.echo ? 8 : 0);
    if (it.error !== undefined) errors.push(it.error);
    if (hasEvents) events.push(it.events!);
    if (it.echo) echoes.push(it.echo);
  });
  return { meta, data, errors, ...(events.length > 0 ? { events } : {}), ...(echoes.length > 0 ? { echoes } : {}) };
}

/** packLive's inverse; each item's bytes are a view into `data` (nothing is copied). */
export function unpackLive(p: PackedLive): LiveItem[] {
  const items: LiveItem[] = [];
  let o = 0;
  let e = 0;
  let v = 0;
  let k = 0;
  for (let i = 0; i < p.meta.length; i += 3) {
    const len = p.meta[i + 1];
    const flags = p.meta[i + 2];
    const item: LiveItem = { streamId: p.meta[i], bytes: p.data.subarray(o, o + len), end: (flags & 1) !== 0 };
    if (flags & 2) item.error = p.errors[e++];
    if (flags & 4 && p.events) item.events = p.events[v++];
    if (flags & 8 && p.echoes) item.echo = p.echoes[k++];
    items.push(item);
    o += len;
  }
  return items;
}

export function packedTransfer(p: PackedLive): ArrayBuffer[] {
  return [p.meta.buffer as ArrayBuffer, p.data.buffer as ArrayBuffer];
}
