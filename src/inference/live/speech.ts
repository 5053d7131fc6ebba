// Speech events for the live worker's streams (vad=true): one VadBatch (src/vad/batch.ts) for all of them, fed in the
// same tick as the chains with what each chain took and gave back (chain-stream.ts `tap`, at the chain's rate), so
// every stream's frames share one session.run. Times are moved to the input timeline (the input resampler's delay
// taken off, as /denoise's resampler has none) and kept within the input.
import type * as ort from 'onnxruntime-node';
import { concatAll } from '../../dsp/concat';
import { VadBatch, type VadChunk, type VadEvent } from '../../vad/batch';
import { dryMixForLimit } from '../models/aligned-stream';
import type { LiveChainStream } from './chain-stream';
import type { LiveItem, LiveOpen } from './packing';

interface Tapped {
  stream: LiveChainStream;
  /** ms the chain's timeline runs ahead of the input's. */
  shiftMs: number;
  clientRate: number;
  channels: number;
  input: Float32Array[][];
  output: Float32Array[][];
}

export class LiveSpeech {
  private batch: VadBatch | null = null;
  private readonly streams = new Map<number, Tapped>();

  get size(): number {
    return this.streams.size;
  }

  open(id: number, stream: LiveChainStream, opts: LiveOpen, session: ort.InferenceSession): void {
    if (!opts.vad) return;
    this.batch ??= new VadBatch(session);
    // The tap's channels are the output's: with an echo reference, the microphone without the reference.
    const channels = stream.outChannels;
    this.batch.open(id, { vad: opts.vad, rate: stream.chainRate, channels, dryMix: dryMixForLimit(opts.attenuationLimitDb) });
    const t: Tapped = { stream, shiftMs: (stream.chainShift * 1000) / stream.chainRate, clientRate: opts.sampleRate, channels, input: [], output: [] };
    // Copies: the chain reuses its buffers within a tick (a flush pushes twice).
    stream.tap = (input, output) => {
      t.input.push(input.map((x) => x.slice()));
      t.output.push(output.map((x) => x.slice()));
    };
    this.streams.set(id, t);
  }

  close(id: number): void {
    if (!this.streams.delete(id)) return;
    this.batch?.close(id);
  }

  /** ms until frames waiting are due for their run although nothing more came; undefined when none waits. */
  dueMs(now = performance.now()): number | undefined {
    return this.batch?.dueIn(now) ?? undefined;
  }

  /**
   * After the chains' part of a tick: every speech stream's new audio to the batch, and the events it decided added to
   * the results (a stream not in the tick gets an item of its own, with no bytes). What goes wrong here fails speech
   * streams only: a throw out of this method would fail every stream of the tick (host.ts awaits it for all of them).
   */
  async tick(results: LiveItem[], now = performance.now()): Promise<LiveItem[]> {
    const batch = this.batch;
    if (!batch || this.streams.size === 0) return results;
    const chunks: VadChunk[] = [];
    const tapped = new Map<number, Tapped>();
    const ended = new Set<number>();
    for (const r of results) {
      if (!this.streams.has(r.streamId)) continue;
      if (r.error !== undefined) this.close(r.streamId);
      else if (r.end) ended.add(r.streamId);
    }
    for (const [id, t] of this.streams) {
      const end = ended.has(id);
      if (t.output.length === 0 && !end) continue;
      const input = join(t.input, t.channels);
      const output = join(t.output, t.channels);
      t.input = [];
      t.output = [];
      if (input === null || output === null) {
        // Not the channels the stream was opened with: a defect, and this stream's alone.
        results = this.failOne(results, id, `speech detection failed: the audio has other channels than the stream's ${t.channels}`);
        continue;
      }
      chunks.push({ id, input, output, end });
      tapped.set(id, t);
    }
    for (const id of ended) this.streams.delete(id); // the batch drops them itself after their last frames
    let decided: Map<number, VadEvent[]>;
    try {
      decided = await batch.tick(chunks, now);
    } catch (err) {
      // The speech streams fail (their detectors' state is unknown now); the others of the tick go on.
      return this.failAll(results, `speech detection failed: ${(err as Error).message}`);
    }
    if (decided.size === 0) return results;
    const byId = new Map(results.map((r) => [r.streamId, r]));
    for (const [id, events] of decided) {
      const t = this.streams.get(id) ?? tapped.get(id);
      if (!t) continue; // closed meanwhile
      const list = events.map((e) => onInput(e, t));
      const item = byId.get(id);
      if (item) item.events = list;
      else results.push({ streamId: id, bytes: new Uint8Array(0), end: false, events: list });
    }
    return results;
  }

  private failOne(results: LiveItem[], id: number, message: string): LiveItem[] {
    this.close(id);
    const failed: LiveItem = { streamId: id, bytes: new Uint8Array(0), end: false, error: message };
    return results.some((r) => r.streamId === id) ? results.map((r) => (r.streamId === id ? failed : r)) : [...results, failed];
  }

  private failAll(results: LiveItem[], message: string): LiveItem[] {
    const failed = new Set(this.streams.keys());
    for (const id of failed) this.close(id);
    const out = results.map((r) => (failed.has(r.streamId) ? { streamId: r.streamId, bytes: new Uint8Array(0), end: false, error: message } : r));
    for (const id of failed) if (!results.some((r) => r.streamId === id)) out.push({ streamId: id, bytes: new Uint8Array(0), end: false, error: message });
    return out;
  }
}

/** A chunk's pieces as one planar array per channel; null when a piece has another number of channels. */
function join(parts: Float32Array[][], channels: number): Float32Array[] | null {
  if (parts.some((p) => p.length !== channels)) return null;
  if (parts.length === 1) return parts[0];
  return Array.from({ length: channels }, (_, c) => concatAll(parts.map((p) => p[c])));
}

/** An event's times on the input timeline (the chain's, less the input resampler's delay), within the input. */
function onInput(e: VadEvent, t: Tapped): VadEvent {
  const endMs = Math.round((t.stream.inputFrames * 1000) / t.clientRate);
  const at = (ms: number): number => Math.min(endMs, Math.max(0, Math.round(ms - t.shiftMs)));
  return { type: e.type, at_ms: at(e.at_ms), decided_ms: Math.max(0, Math.round(e.decided_ms - t.shiftMs)) };
}
