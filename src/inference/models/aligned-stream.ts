// Turns a chain (delayed, hop-quantised output) into an aligned stream: output sample n lines up with input sample
// n, total output length == total input length, and attenuation_limit_db is applied on the aligned signals.

import { concat, concatAll } from '../../dsp/concat';
import type { EchoReport } from '../types';

export interface ChainProcessor {
  readonly sampleRate: number;
  /** Output channels (and input channels unless inputChannels says otherwise). */
  readonly channels: number;
  /**
   * Input channels when they are more than the output's: the echo canceller's stage (echo-front.ts) takes the
   * microphone channels and the echo reference last, and returns the microphone channels.
   */
  readonly inputChannels?: number;
  /** Output stream index i corresponds to input index i - latency. */
  readonly latency: number;
  /**
   * Input samples beyond `latency` the chain holds before it emits (fed in whole hops): output sample n is out once
   * input sample n + latency + holdback is in. 0 when absent. Live streams declare it in their delay.
   */
  readonly holdback?: number;
  /** Equal-length planar chunks in; equal-length planar chunks out (any length, possibly 0). */
  process(planar: Float32Array[]): Promise<Float32Array[]>;
  /**
   * With an echo reference (echo-front.ts): the echo-free microphone made since the last call, at sampleRate, in the
   * input's timeline (sample n of all of it together is input sample n). AlignedStream takes it after every call.
   */
  takeEchoFree?(): Float32Array[];
  /** With an echo reference: the canceller's figures. */
  echoStats?(): EchoReport;
  /**
   * With an echo reference: the stream is over (ended or dropped); the canceller gives its memory back now. echoStats
   * still answers; process() must not be called again.
   */
  release?(): void;
}

/** Linear mix weight of the (aligned) input that keeps the output within `limitDb` of it; 0 when unlimited. */
export function dryMixForLimit(limitDb: number): number {
  if (!(limitDb > 0)) return 0;
  return Math.pow(10, -limitDb / 20);
}

export class AlignedStream {
  private readonly dry: number;
  /** Chain output samples still to drop (its latency). */
  private toSkip: number;
  private inCount = 0;
  private outCount = 0;
  /** Input samples not yet matched by output; only kept when mixing with the dry signal. */
  private pendingDry: Float32Array[];
  private readonly inputChannels: number;
  /**
   * What the last push() or end() took as the signal its output stands for: the input itself, or with an echo
   * reference the echo-free microphone (the live tap reads it without a reference; with one the tap takes the
   * microphone as it came, as the file path's speech detector does).
   */
  get taken(): Float32Array[] {
    const parts = this.takenParts;
    if (parts.length === 1) return parts[0];
    return Array.from({ length: this.chain.channels }, (_, c) => concatAll(parts.map((p) => p[c])));
  }
  private takenParts: Float32Array[][] = [];

  constructor(
    private readonly chain: ChainProcessor,
    attenuationLimitDb: number,
  ) {
    this.dry = dryMixForLimit(attenuationLimitDb);
    this.toSkip = chain.latency;
    this.inputChannels = chain.inputChannels ?? chain.channels;
    if (this.dry > 0 && this.inputChannels !== chain.channels && !chain.takeEchoFree) throw new Error('a dry mix needs as many input channels as output channels');
    this.pendingDry = Array.from({ length: chain.channels }, () => new Float32Array(0));
  }

  get sampleRate(): number {
    return this.chain.sampleRate;
  }

  /** With an echo reference: the canceller's figures; else null. */
  echoStats(): EchoReport | null {
    return this.chain.echoStats?.() ?? null;
  }

  /** The stream is over (after end() and echoStats(), or dropped): the chain gives back what it holds (release()). */
  release(): void {
    this.chain.release?.();
  }

  async push(planar: Float32Array[]): Promise<Float32Array[]> {
    if (planar.length !== this.inputChannels) {
      throw new Error(`expected ${this.inputChannels} channels, got ${planar.length}`);
    }
    const n = planar[0].length;
    for (const c of planar) if (c.length !== n) throw new Error('channels of a chunk must have equal length');
    this.inCount += n;
    this.takenParts = [];
    if (!this.chain.takeEchoFree) {
      this.takenParts.push(planar);
      if (this.dry > 0) this.pendingDry = this.pendingDry.map((p, c) => concat(p, planar[c]));
    }
    const y = await this.chain.process(planar);
    this.takeEchoFree();
    return this.emit(y, this.inCount - this.outCount);
  }

  async end(): Promise<Float32Array[]> {
    const parts: Float32Array[][] = [];
    this.takenParts = [];
    // Feed silence until the chain has produced every delayed sample of the real input.
    let guard = 0;
    while (this.outCount < this.inCount) {
      const need = this.inCount - this.outCount + this.toSkip;
      const zeros = Array.from({ length: this.inputChannels }, () => new Float32Array(need + 512));
      const y = await this.chain.process(zeros);
      this.takeEchoFree();
      parts.push(this.emit(y, this.inCount - this.outCount));
      if (++guard > 1000) throw new Error('chain did not flush');
    }
    return parts.length === 1 ? parts[0] : this.pendingDry.map((_, c) => concatAll(parts.map((p) => p[c])));
  }

  /**
   * With an echo reference the dry signal is the echo-free microphone the chain made (it comes before the output that
   * needs it: the canceller's output is ahead of the model's), not the input; the excess past the input's end is cut.
   */
  private takeEchoFree(): void {
    if (!this.chain.takeEchoFree) return;
    const free = this.chain.takeEchoFree();
    const room = Math.max(0, this.inCount - this.freeCount);
    const kept = free[0].length > room ? free.map((x) => x.subarray(0, room)) : free;
    this.takenParts.push(kept);
    this.freeCount += kept[0].length;
    if (this.dry > 0) this.pendingDry = this.pendingDry.map((p, c) => concat(p, kept[c]));
  }

  /** Echo-free samples taken so far (within the input). */
  private freeCount = 0;

  private emit(y: Float32Array[], maxLen: number): Float32Array[] {
    let start = 0;
    if (this.toSkip > 0) {
      start = Math.min(this.toSkip, y[0].length);
      this.toSkip -= start;
    }
    const len = Math.max(0, Math.min(y[0].length - start, maxLen));
    const out = y.map((ch) => ch.subarray(start, start + len));
    if (this.dry > 0 && len > 0) {
      if (this.pendingDry[0].length < len) throw new Error('the dry signal fell behind the output');
      const wet = 1 - this.dry;
      for (let c = 0; c < out.length; c++) {
        const d = this.pendingDry[c];
        const o = new Float32Array(len);
        const w = out[c];
        for (let i = 0; i < len; i++) o[i] = this.dry * d[i] + wet * w[i];
        out[c] = o;
        this.pendingDry[c] = d.subarray(len);
      }
    }
    this.outCount += len;
    return out;
  }
}
