// Narrow band (telephony, 8 kHz) around any 16 kHz chain: the input up to 16 kHz, the chain, and back down to 8 kHz,
// with the half-band pair of dsp/halfband.ts, all in the worker. Files at 8 kHz (rate kept) and live streams at 8 kHz
// both run it, so a stream equals /denoise of the same file byte for byte.
//
//   out = down(C(up(x)))
//
// Delays at 16 kHz: up HALF_BAND_DELAY, the chain its latency L, down HALF_BAND_DELAY. The decimator keeps the 16 kHz
// samples whose index has the parity of that sum, so the output is the input's timeline shifted by a whole number of
// 8 kHz samples, (2 HALF_BAND_DELAY + L) / 2 rounded down, and nothing is half a sample off, whatever L (the models'
// chains all have an even L: phase 0).
//
// With an echo reference (core: EchoCore) the reference is interpolated with the microphone, and the echo-free
// microphone at 8 kHz is the input less what the canceller removed, decimated: removal r at 16 kHz comes out of the
// decimator HALF_BAND_DELAY 8 kHz samples late (the interpolator's and the decimator's delays at 16 kHz, halved).
import { Decimator2, HALF_BAND_DELAY, Interpolator2 } from '../../dsp/halfband';
import { concatAll } from '../../dsp/concat';
import { NARROW_BAND_RATE } from './specs';
import type { ChainProcessor } from './aligned-stream';
import { EchoCore, subtract } from './echo-front';
import type { EchoReport } from '../types';

export class NarrowBandChain implements ChainProcessor {
  readonly sampleRate = NARROW_BAND_RATE;
  readonly channels: number;
  /** More than `channels` when the core takes extra inputs (the echo reference: echo-front.ts): resampled, not output. */
  readonly inputChannels?: number;
  readonly latency: number;
  readonly holdback?: number;
  private readonly up: Interpolator2[];
  private readonly down: Decimator2[];
  private readonly echo: { core: EchoCore; removal: Decimator2[]; toSkip: number; input: Float32Array[]; removed: Float32Array[] } | null;

  constructor(
    /** The 16 kHz chain. */
    readonly core: ChainProcessor,
  ) {
    if (core.sampleRate !== 16000) throw new Error('the narrow-band chain needs a 16 kHz core');
    this.channels = core.channels;
    const delay16 = 2 * HALF_BAND_DELAY + core.latency;
    const phase = (delay16 % 2) as 0 | 1;
    this.latency = (delay16 - phase) / 2;
    if (core.holdback) this.holdback = Math.ceil(core.holdback / 2);
    if (core.inputChannels) this.inputChannels = core.inputChannels;
    this.up = Array.from({ length: core.inputChannels ?? this.channels }, () => new Interpolator2());
    this.down = Array.from({ length: this.channels }, () => new Decimator2(phase));
    const none = (): Float32Array[] => Array.from({ length: this.channels }, () => new Float32Array(0));
    this.echo = core instanceof EchoCore
      ? { core, removal: Array.from({ length: this.channels }, () => new Decimator2(0)), toSkip: HALF_BAND_DELAY, input: none(), removed: none() }
      : null;
    if (core instanceof EchoCore) {
      this.takeEchoFree = () => this.echoFree();
      this.echoStats = () => core.echoStats();
      this.release = () => core.release();
    }
  }

  readonly takeEchoFree?: () => Float32Array[];
  readonly echoStats?: () => EchoReport;
  readonly release?: () => void;

  async process(planar: Float32Array[]): Promise<Float32Array[]> {
    const y16 = await this.core.process(planar.map((x, c) => this.up[c].process(x)));
    if (this.echo) this.trackRemoval(planar);
    return y16.map((y, c) => this.down[c].process(y));
  }

  /** The 8 kHz microphone and the decimated removal, queued until both are in: their difference is echo-free. */
  private trackRemoval(planar: Float32Array[]): void {
    const e = this.echo!;
    const { mic, clean } = e.core.takeCancelled();
    let d = mic.map((m, c) => e.removal[c].process(subtract(m, clean[c], m.length)));
    const skip = Math.min(e.toSkip, d[0].length);
    e.toSkip -= skip;
    d = d.map((x) => x.subarray(skip));
    e.input = e.input.map((q, c) => concatAll([q, planar[c]]));
    e.removed = e.removed.map((q, c) => concatAll([q, d[c]]));
  }

  private echoFree(): Float32Array[] {
    const e = this.echo!;
    const n = Math.min(e.input[0].length, e.removed[0].length);
    const out = e.input.map((x, c) => subtract(x, e.removed[c], n));
    e.input = e.input.map((x) => x.subarray(n));
    e.removed = e.removed.map((x) => x.subarray(n));
    return out;
  }
}
