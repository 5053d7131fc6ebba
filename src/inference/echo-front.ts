// Echo cancellation in front of a model's chain (echo_reference: docs/echo.md). The stream's input is the microphone
// channels plus the echo reference as the last channel; EchoFront returns the microphone channels with the
// reference's echo removed, aligned with the input sample for sample (the canceller's delay compensated) and as long
// as it, so that the model's AlignedStream after it sees the echo-free microphone where it would have seen the
// microphone. It uses the canceller (src/dsp/aec) through its public interface only:
//
// - 16 kHz chains: EchoStage, the canceller as a chain stage.
// - 48 kHz chains (nsm-2-hd, full-band runs): FullBandChain around EchoStage, with the broadband high-band gain:
//   the canceller runs on the 16 kHz band (mic and reference decimated alike), and the input's own band above 8 kHz
//   is scaled per hop by what the canceller removed in 4-7.5 kHz (FullBandChain's BandGainProbe on the canceller's
//   input and output): where far-end speech is echoed, its band above 8 kHz is the same far-end speech.
//
// A silent reference changes nothing: until the reference first carries signal the canceller's output is the
// microphone itself (its contract), and EchoFront returns the input itself for that stretch, bit for bit (at 48 kHz
// the band split alone would not give the input back exactly).
import { AEC_HOP, AEC_LATENCY, AEC_SAMPLE_RATE, EchoCanceller } from '../dsp/aec';
import { concatAll } from '../dsp/concat';
import { FullBandChain } from './fullband';
import { AlignedStream, type ChainProcessor } from './stream';
import type { EchoReport } from './types';

/** The canceller as a 16 kHz chain stage: microphone channels and the reference in, microphone channels out. */
export class EchoStage implements ChainProcessor {
  readonly sampleRate = AEC_SAMPLE_RATE;
  readonly latency = AEC_LATENCY;
  readonly inputChannels: number;
  private readonly aec: EchoCanceller;
  /** Input samples fed so far. */
  private fed = 0;
  private active = false;
  /** Once the reference carried signal: the input samples (from the start) whose output is the microphone itself. */
  private exactInput = 0;

  constructor(readonly channels: number) {
    this.inputChannels = channels + 1;
    this.aec = new EchoCanceller({ channels });
  }

  /** Input samples from the start whose output is the microphone itself, bit for bit (all so far while inactive). */
  get exactUntil(): number {
    return this.active ? this.exactInput : Infinity;
  }

  stats(): EchoReport {
    return this.aec.stats();
  }

  async process(planar: Float32Array[]): Promise<Float32Array[]> {
    if (planar.length !== this.inputChannels) throw new Error(`expected ${this.inputChannels} channels, got ${planar.length}`);
    const mic = planar.slice(0, this.channels);
    const ref = planar[this.channels];
    const n = ref.length;
    if (this.active) {
      this.fed += n;
      return this.aec.process(mic, ref);
    }
    // Hop by hop until the reference first carries signal, to know from which hop on the output is no longer the
    // microphone itself; then the rest of the chunk at once.
    const parts: Float32Array[][] = [];
    let pos = 0;
    while (pos < n) {
      const take = this.active ? n - pos : Math.min(n - pos, AEC_HOP - (this.fed % AEC_HOP));
      parts.push(this.aec.process(mic.map((c) => c.subarray(pos, pos + take)), ref.subarray(pos, pos + take)));
      pos += take;
      this.fed += take;
      if (!this.active && this.fed % AEC_HOP === 0 && this.aec.stats().referenceActive) {
        // Hop h = fed / HOP - 1 started the canceller: the outputs of the hops before it (output samples before
        // h * HOP) are the microphone itself, i.e. its input samples before h * HOP - LATENCY.
        this.active = true;
        this.exactInput = Math.max(0, this.fed - AEC_HOP - AEC_LATENCY);
      }
    }
    return parts.length === 1 ? parts[0] : mic.map((_, c) => concatAll(parts.map((p) => p[c])));
  }
}

/**
 * The aligned echo-free microphone: push() takes the microphone channels and the reference (last), both at the
 * chain's rate (16 or 48 kHz), and returns the microphone channels aligned with everything pushed so far, minus what
 * the canceller still holds; end() returns the rest (total output = total input).
 */
export class EchoFront {
  private readonly stage: EchoStage;
  private readonly aligned: AlignedStream;
  /** 48 kHz: 3; 16 kHz: 1 (where the stage's own output is exact). */
  private readonly factor: number;
  /** 48 kHz: the microphone input not yet matched by output, while the exact stretch may still cover it. */
  private pendingMic: Float32Array[] | null;
  private outCount = 0;

  constructor(
    readonly channels: number,
    readonly sampleRate: number,
  ) {
    this.stage = new EchoStage(channels);
    if (sampleRate === AEC_SAMPLE_RATE) {
      this.factor = 1;
      this.aligned = new AlignedStream(this.stage, 0);
      this.pendingMic = null;
    } else if (sampleRate === 3 * AEC_SAMPLE_RATE) {
      this.factor = 3;
      this.aligned = new AlignedStream(new FullBandChain(this.stage, { highBand: null }), 0);
      this.pendingMic = Array.from({ length: channels }, () => new Float32Array(0));
    } else {
      throw new Error(`echo cancellation runs at 16 or 48 kHz, not ${sampleRate} Hz`);
    }
  }

  stats(): EchoReport {
    return this.stage.stats();
  }

  async push(planar: Float32Array[]): Promise<Float32Array[]> {
    if (planar.length !== this.channels + 1) throw new Error(`expected ${this.channels} microphone channels and the reference, got ${planar.length} channels`);
    // A copy (concatAll always makes one): the chain may reuse its input arrays.
    if (this.pendingMic) this.pendingMic = this.pendingMic.map((p, c) => concatAll([p, planar[c]]));
    return this.exact(await this.aligned.push(planar));
  }

  async end(): Promise<Float32Array[]> {
    return this.exact(await this.aligned.end());
  }

  /**
   * 48 kHz: the output within the exact stretch replaced by the input itself. The stretch ends where the canceller's
   * output stops being the microphone (3 × its 16 kHz index): the band split's output there already depends on a
   * little of what comes after it (the interpolator's half length, the probe's 3 hops ahead), so the first few ms
   * after the reference starts are the input too. Ending it there, not earlier, keeps the output independent of the
   * chunking: an output sample before it can be returned before the canceller's start is known, and is then always
   * the input; one after it depends on that start, so it is returned only once the start is known.
   */
  private exact(out: Float32Array[]): Float32Array[] {
    const len = out[0].length;
    const pending = this.pendingMic;
    if (!pending) return out;
    const start = this.outCount;
    this.outCount += len;
    const limit = this.factor * this.stage.exactUntil;
    const copy = Math.max(0, Math.min(len, limit - start));
    const result = out.map((ch, c) => {
      if (copy === 0) return ch;
      const o = ch.slice();
      o.set(pending[c].subarray(0, copy));
      return o;
    });
    // Past the exact stretch for good: the input is no longer needed.
    this.pendingMic = this.outCount >= limit ? null : pending.map((p) => p.subarray(len));
    return result;
  }
}
