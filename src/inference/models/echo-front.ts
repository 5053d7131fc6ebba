// Echo cancellation in front of a model's 16 kHz chain (echo_reference: docs/echo.md). EchoCore takes the microphone
// channels plus the echo reference (last) at 16 kHz, runs the canceller (src/dsp/aec, through its public interface)
// and hands its output, aligned with its input, straight to the model's 16 kHz chain. createChain (chains.ts) puts it
// inside the rate's wrapper, so the canceller shares the band split the model runs anyway:
//
// - 16 kHz: EchoCore is the chain.
// - 8 kHz (narrow band): NarrowBandChain around it: the microphone and the reference interpolated alike, the model's
//   output decimated (one half-band pair, not a second one around the canceller).
// - 48 kHz (full band): FullBandChain around it: the canceller on the 16 kHz band, the input's own band above 8 kHz
//   scaled per hop by what the canceller removed in 4-7.5 kHz (fullband.ts).
//
// So the canceller adds its own delay only (one hop, AEC_LATENCY), at every rate. A silent reference changes nothing:
// until the reference first carries signal the canceller's output is the microphone itself (its contract), so the
// model sees exactly what it would have seen without the reference.
//
// The wrappers also rebuild the echo-free microphone at their rate (the input less what the canceller removed, so it
// is the input itself, bit for bit, while nothing was removed): the attenuation limit's dry signal and the live tap.
import { AEC_LATENCY, AEC_SAMPLE_RATE, EchoCanceller } from '../../dsp/aec';
import { concatAll } from '../../dsp/concat';
import type { ChainProcessor } from './aligned-stream';
import type { EchoReport } from '../types';

/** The microphone the canceller took and its output, aligned with each other and with the core's input timeline. */
export interface Cancelled {
  mic: Float32Array[];
  clean: Float32Array[];
}

export class EchoCore implements ChainProcessor {
  readonly sampleRate = AEC_SAMPLE_RATE;
  readonly channels: number;
  readonly inputChannels: number;
  /** The core's: the canceller's delay is dropped, its output reaches the core AEC_LATENCY samples later (holdback). */
  readonly latency: number;
  readonly holdback: number;
  private readonly aec: EchoCanceller;
  /** Canceller output samples still to drop (its delay). */
  private toSkip = AEC_LATENCY;
  /** Microphone input not yet matched by canceller output. */
  private micQueue: Float32Array[];
  private taken: Cancelled[] = [];

  constructor(readonly core: ChainProcessor) {
    if (core.sampleRate !== AEC_SAMPLE_RATE) throw new Error('the echo canceller runs in front of a 16 kHz chain');
    this.channels = core.channels;
    this.inputChannels = core.channels + 1;
    this.latency = core.latency;
    this.holdback = (core.holdback ?? 0) + AEC_LATENCY;
    this.aec = new EchoCanceller({ channels: this.channels });
    this.micQueue = Array.from({ length: this.channels }, () => new Float32Array(0));
  }

  echoStats(): EchoReport {
    return this.aec.stats();
  }

  release(): void {
    this.aec.release();
  }

  async process(planar: Float32Array[]): Promise<Float32Array[]> {
    if (planar.length !== this.inputChannels) throw new Error(`expected ${this.channels} microphone channels and the reference, got ${planar.length} channels`);
    const mic = planar.slice(0, this.channels);
    const out = this.aec.process(mic, planar[this.channels]);
    const skip = Math.min(this.toSkip, out[0].length);
    this.toSkip -= skip;
    const clean = out.map((x) => x.subarray(skip));
    const n = clean[0].length;
    // Canceller output i (after the drop) is input i: the same count of the queued microphone lines up with it.
    const queued = this.micQueue.map((q, c) => concatAll([q, mic[c]]));
    this.micQueue = queued.map((q) => q.subarray(n));
    this.taken.push({ mic: queued.map((q) => q.subarray(0, n)), clean });
    return this.core.process(clean);
  }

  /** What the canceller took and gave since the last call (the wrappers take it after every process()). */
  takeCancelled(): Cancelled {
    const parts = this.taken;
    this.taken = [];
    if (parts.length === 1) return parts[0];
    const join = (get: (p: Cancelled) => Float32Array[]): Float32Array[] =>
      Array.from({ length: this.channels }, (_, c) => concatAll(parts.map((p) => get(p)[c])));
    return { mic: join((p) => p.mic), clean: join((p) => p.clean) };
  }

  /** At 16 kHz, where EchoCore is the whole chain: the echo-free microphone is the canceller's output. */
  takeEchoFree(): Float32Array[] {
    return this.takeCancelled().clean;
  }
}

/** The input less what was removed, elementwise, into a new array: exactly the input where nothing was removed. */
export function subtract(x: Float32Array, removed: Float32Array, n: number): Float32Array {
  const y = new Float32Array(n);
  for (let i = 0; i < n; i++) y[i] = x[i] - removed[i];
  return y;
}
