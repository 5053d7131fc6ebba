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
import { Decimator2, HALF_BAND_DELAY, Interpolator2 } from '../../dsp/halfband';
import { NARROW_BAND_RATE } from './specs';
import type { ChainProcessor } from './aligned-stream';

export class NarrowBandChain implements ChainProcessor {
  readonly sampleRate = NARROW_BAND_RATE;
  readonly channels: number;
  /** More than `channels` when the core takes extra inputs (the echo reference: echo-front.ts): resampled, not output. */
  readonly inputChannels?: number;
  readonly latency: number;
  readonly holdback?: number;
  private readonly up: Interpolator2[];
  private readonly down: Decimator2[];

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
  }

  async process(planar: Float32Array[]): Promise<Float32Array[]> {
    const y16 = await this.core.process(planar.map((x, c) => this.up[c].process(x)));
    return y16.map((y, c) => this.down[c].process(y));
  }
}
