// One live stream in the worker: the model's aligned chain (AlignedStream) between the edges of the client's bytes
// (decoding s16/f32/μ-law/A-law; dithered 16-bit output, float output, or G.711: the dithered 16-bit output encoded, so
// a G.711 stream's output is its 16-bit twin's, encoded) and, when the client's rate is not the chain's, a resampler
// each way. The chain is the one /denoise runs for a file at that rate kept: at 16 kHz the model's, above 16 kHz full
// band at 48 kHz, at 8 kHz narrow band (its resamplers inside it: equal to /denoise of the 8 kHz file); at any other
// rate the 16 kHz chain (below 16 kHz) or the full-band one (above) between RationalResamplers. Input reaches the
// chain in whole frame hops only: then every stream's DTLN cores hold the same samples and their runs can be joined
// (batching.ts). With an echo reference (the last input channel) the chain has the canceller in front of its 16 kHz
// chain, as in the file path's worker (echo-front.ts): the output has one channel less than the input.
import { concat } from '../../dsp/concat';
import { LowFrequencyDither } from '../../dsp/dither';
import { g711DecodeInto, g711EncodeInt16, type G711Law } from '../../dsp/g711';
import { decodeFramesInto } from '../../dsp/pcm';
import { RationalResampler } from '../../dsp/rational-resampler';
import { createChain } from '../models/chains';
import { NARROW_BAND_RATE } from '../models/specs';
import { AEC_HOP } from '../../dsp/aec';
import type { DtlnGraphs } from '../models/dtln';
import type { LiveOpen } from './packing';
import { LIVE_SAMPLE_BYTES, type EchoReport } from '../types';
import { AlignedStream } from '../models/aligned-stream';

/** The chain's frame hop at 16 kHz (nsm-1 runs stage 1 at half DTLN's frame rate). */
function hopAt16k(model: string): number {
  return model === 'nsm-1' ? 256 : 128;
}

/** A live stream's chain and byte edges, in the worker (the main thread's handle is types.ts LiveStream). */
export class LiveChainStream {
  readonly chainRate: number;
  /** Samples at the client's rate from input sample n to the moment output sample n can be computed. */
  readonly latencySamples: number;
  private readonly stream: AlignedStream;
  private readonly quantum: number;
  /**
   * Chain-rate samples the first run takes (then whole quanta): with an echo reference, the canceller's hop less
   * what is whole quanta of it, so that its output, one hop behind, reaches the model in whole frame hops (nsm-1's
   * hops are two of the canceller's).
   */
  private phase: number;
  private readonly toChain: RationalResampler | null;
  private readonly fromChain: RationalResampler | null;
  private readonly dither: LowFrequencyDither | null;
  /**
   * Chain-rate samples waiting for a whole hop: the first pendLen of each channel's buffer, grown as needed and reused
   * (chunks are decoded straight into it when no resampler is in the way).
   */
  private pend: Float32Array[];
  private pendLen = 0;
  /** Output samples (client rate) still to drop: the resamplers' delay. */
  private toSkip: number;
  private inSamples = 0;
  private outSamples = 0;
  /**
   * Sees every chunk the chain takes and its aligned output (chain rate; views: copy what is kept), for speech events
   * (host.ts). `chainShift`: chain samples by which that timeline runs ahead of the input's (the resampler's delay).
   */
  tap: ((input: Float32Array[], output: Float32Array[]) => void) | null = null;
  readonly chainShift: number;

  constructor(opts: LiveOpen, graphs: DtlnGraphs) {
    const fullBand = opts.model === 'nsm-2-hd' || opts.sampleRate > 16000;
    const narrowBand = !fullBand && opts.sampleRate === NARROW_BAND_RATE;
    const outChannels = opts.channels - (opts.echoReference ? 1 : 0);
    // Cascade passes hand over one hop at a time: a live stream cannot wait for half-second blocks.
    const chain = createChain(opts.model, outChannels, graphs, { fullBand, narrowBand, cascadeBlockFrames: 1, echoReference: opts.echoReference });
    this.chainRate = chain.sampleRate;
    this.stream = new AlignedStream(chain, opts.attenuationLimitDb);
    this.quantum = (hopAt16k(opts.model) * this.chainRate) / 16000;
    this.phase = opts.echoReference ? (AEC_HOP * this.chainRate) / 16000 % this.quantum : 0;
    const resample = opts.sampleRate !== this.chainRate;
    this.toChain = resample ? new RationalResampler(opts.sampleRate, this.chainRate, opts.channels) : null;
    this.fromChain = resample ? new RationalResampler(this.chainRate, opts.sampleRate, outChannels) : null;
    const resamplerDelay = resample
      ? (this.toChain!.delay * opts.sampleRate) / this.chainRate + this.fromChain!.delay
      : 0;
    this.toSkip = Math.round(resamplerDelay);
    this.chainShift = resample ? this.toChain!.delay : 0;
    const ratio = opts.sampleRate / this.chainRate;
    // (With an echo reference the holdback has the canceller's hop.)
    this.latencySamples = Math.ceil((chain.latency + (chain.holdback ?? 0) + this.quantum) * ratio + this.toSkip);
    this.law = opts.encoding === 'mulaw' || opts.encoding === 'alaw' ? opts.encoding : null;
    this.format = opts.encoding === 'pcm_f32le' ? 'f32' : 's16';
    // G.711 is encoded from the dithered 16-bit output: the 16-bit stream's bytes, through the codec.
    this.dither = opts.encoding === 'pcm_s16le' || this.law ? new LowFrequencyDither(opts.sampleRate, outChannels) : null;
    this.pend = Array.from({ length: opts.channels }, () => new Float32Array(2 * this.quantum));
    this.channels = opts.channels;
    this.outChannels = outChannels;
    this.frame = LIVE_SAMPLE_BYTES[opts.encoding] * opts.channels;
  }

  /** Input channels (with an echo reference, the reference last) and output channels (the tap's too). */
  private readonly channels: number;
  readonly outChannels: number;
  private readonly frame: number;
  /** μ-law or A-law bytes at the edges (null: PCM in `format`). */
  private readonly law: G711Law | null;
  private readonly format: 's16' | 'f32';

  /** One chunk of interleaved bytes (whole frames) in; the output it completes, in the same encoding. */
  async push(bytes: Uint8Array): Promise<Uint8Array> {
    const frame = this.frame;
    if (bytes.byteLength % frame !== 0) throw new Error(`${bytes.byteLength} bytes are not whole ${frame}-byte frames`);
    const frames = bytes.byteLength / frame;
    this.inSamples += frames;
    if (this.toChain) {
      const planar = Array.from({ length: this.channels }, () => new Float32Array(frames));
      this.decodeInto(bytes, planar, 0);
      return this.encode(this.take(await this.runResampled(this.toChain, planar)));
    }
    this.reserve(frames);
    this.decodeInto(bytes, this.pend, this.pendLen);
    this.pendLen += frames;
    return this.encode(this.take(await this.runPending()));
  }

  /** The client's bytes (whole frames) as planar float32 from index `off` (as the file path reads the same samples). */
  private decodeInto(bytes: Uint8Array, planar: Float32Array[], off: number): void {
    if (this.law) {
      g711DecodeInto(this.law, bytes, this.channels, planar, off);
      return;
    }
    const buf = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
    decodeFramesInto(buf, { format: this.format, channels: this.channels, blockAlign: this.frame }, planar, off);
  }

  /** Input frames taken so far (the client's rate). */
  get inputFrames(): number {
    return this.inSamples;
  }

  /** Flushes: the output of every input sample not yet answered (total output = total input). */
  async end(): Promise<Uint8Array> {
    const parts: Float32Array[][] = [];
    // Silence (not counted as input) carries the last samples through the resamplers' delay; take() cuts the excess.
    if (this.toChain) parts.push(await this.runResampled(this.toChain, this.pend.map(() => new Float32Array(this.toSkip + 2 * this.quantum + 64))));
    if (this.pendLen > 0) {
      const rest = this.pend.map((x) => x.slice(0, this.pendLen));
      this.pendLen = 0;
      const out = await this.chainPush(rest);
      parts.push(this.fromChain ? this.fromChain.process(out) : out);
    }
    const flushed = await this.stream.end();
    // The flush took no input (a reference's canceller gives its last echo-free samples: not the microphone's).
    this.tap?.(this.channels !== this.outChannels ? planar0(this.outChannels) : this.stream.taken, flushed);
    parts.push(this.fromChain ? this.fromChain.process(flushed) : flushed);
    const out = parts.reduce((acc, p) => acc.map((x, c) => concat(x, p[c])));
    return this.encode(this.take(out));
  }

  /** Client-rate samples through the resampler to the chain's rate, then as runPending. */
  private async runResampled(toChain: RationalResampler, planar: Float32Array[]): Promise<Float32Array[]> {
    const atChain = toChain.process(planar);
    this.reserve(atChain[0].length);
    for (let c = 0; c < this.channels; c++) this.pend[c].set(atChain[c], this.pendLen);
    this.pendLen += atChain[0].length;
    return this.runPending();
  }

  /** The whole hops of what waits, through the chain (and back to the client's rate); the rest waits for more. */
  private async runPending(): Promise<Float32Array[]> {
    const usable = this.pendLen < this.phase ? 0 : this.phase + Math.floor((this.pendLen - this.phase) / this.quantum) * this.quantum;
    if (usable === 0) return this.pend.map(() => new Float32Array(0));
    this.phase = 0;
    // A copy: chains may keep their input (the dry signal of an attenuation limit), and the buffer is reused.
    const hops = this.pend.map((x) => x.slice(0, usable));
    for (const x of this.pend) x.copyWithin(0, usable, this.pendLen);
    this.pendLen -= usable;
    const out = await this.chainPush(hops);
    return this.fromChain ? this.fromChain.process(out) : out;
  }

  /** Chain-rate input (with the reference, when there is one) through the chain. */
  private async chainPush(planar: Float32Array[]): Promise<Float32Array[]> {
    const out = await this.stream.push(planar);
    // The tap sees the input beside the chain's output; with a reference, the microphone as it came (the reference
    // left out), as the file path's speech detector does: echo the canceller removed is not speech.
    this.tap?.(this.channels !== this.outChannels ? planar.slice(0, this.outChannels) : this.stream.taken, out);
    return out;
  }

  /** With an echo reference, after end(): the canceller's figures; else null. */
  echoStats(): EchoReport | null {
    return this.stream.echoStats();
  }

  /** The stream is over (ended, failed or aborted): its canceller's memory goes back now. */
  release(): void {
    this.stream.release();
  }

  /** Room for `more` samples after what waits. */
  private reserve(more: number): void {
    const need = this.pendLen + more;
    if (this.pend[0].length >= need) return;
    this.pend = this.pend.map((old) => {
      const grown = new Float32Array(Math.max(need, 2 * old.length));
      grown.set(old.subarray(0, this.pendLen));
      return grown;
    });
  }

  /** Drops the resamplers' delay and never returns more than was sent in. */
  private take(out: Float32Array[]): Float32Array[] {
    let start = 0;
    if (this.toSkip > 0) {
      start = Math.min(this.toSkip, out[0].length);
      this.toSkip -= start;
    }
    const room = this.inSamples - this.outSamples;
    const len = Math.min(out[0].length - start, room);
    const kept = out.map((x) => x.subarray(start, start + Math.max(0, len)));
    this.outSamples += kept[0].length;
    return kept;
  }

  private encode(planar: Float32Array[]): Uint8Array {
    if (this.dither) {
      const pcm = this.dither.toInt16(planar);
      return this.law ? g711EncodeInt16(this.law, pcm) : pcm;
    }
    const frames = planar[0].length;
    const ch = this.outChannels;
    const out = new Float32Array(frames * ch);
    for (let c = 0; c < ch; c++) for (let f = 0; f < frames; f++) out[f * ch + c] = planar[c][f];
    return new Uint8Array(out.buffer);
  }
}

function planar0(channels: number): Float32Array[] {
  return Array.from({ length: channels }, () => new Float32Array(0));
}
