// Loudness normalisation (the `loudness_lufs` option): a constant gain that brings the cleaned audio's integrated
// loudness (BS.1770, measured in a first pass over the whole file) to the target, and a look-ahead true-peak limiter
// that keeps the result under the ceiling (−1 dBTP, EBU R128; lower for lossy formats, whose encoders overshoot).
//
// The limiter works on the linked peak of all channels, estimated 4× oversampled (loudness.ts). For frame m it needs
// gain ≤ r[m] = ceiling / (gain · peak[m]). With W frames of look-ahead:
//   h[m] = min(r[m−W+1 … m])                 hold the smallest requirement for W frames
//   e[m] = h[m] if it falls, else e[m−1] moving towards h[m] with the release time constant
//   G[m] = mean(e[m … m+W−1])                a W-frame ramp into every reduction
// Every e in G[m]'s window is ≤ r[m] (each window of h contains m), so G[m] ≤ r[m]: peaks never exceed the ceiling,
// and the gain moves smoothly (W-frame attack ramp, exponential release). Output is delayed by W − 1 + the
// interpolator's delay; flush() returns the tail, so output length equals input length.
import { TruePeakInterpolator } from './loudness';

/** Accepted loudness targets (EBU R128 integrated loudness, LUFS): −16 podcasts, −23 broadcast, −14 streaming. */
export const LOUDNESS_RANGE = { min: -40, max: -5 } as const;

/** The `loudness` field's presets: integrated loudness targets (LUFS), or the input's own speech loudness ('keep'). */
export const LOUDNESS_PRESETS = { podcast: -16, broadcast: -23, keep: 'keep' } as const;

export interface NormalizerOptions {
  sampleRate: number;
  channels: number;
  /** Constant gain in dB (target − measured loudness). */
  gainDb: number;
  /** Largest true peak allowed after the gain, dBTP. */
  ceilingDbtp: number;
  /** Look-ahead (attack ramp) in ms; default 5. */
  lookaheadMs?: number;
  /** Release time constant in ms; default 80. */
  releaseMs?: number;
}

export class LoudnessNormalizer {
  private readonly gain: number;
  private readonly ceiling: number;
  private readonly W: number;
  private readonly releaseCoef: number;
  private readonly tp: TruePeakInterpolator;
  private readonly channels: number;
  /** Total delay in frames between input and output. */
  readonly latency: number;
  // Delay line of the input audio (per channel) and of the smoothed gain window.
  private readonly delayLine: Float32Array[];
  private readonly delayLength: number;
  private writePos = 0;
  private framesIn = 0;
  private framesOut = 0;
  // Hold-min over the last W requirements: a monotonic deque of (index, value).
  private readonly dqIdx: Float64Array;
  private readonly dqVal: Float64Array;
  private dqHead = 0;
  private dqTail = 0;
  private env = 1;
  // Ring of the last W envelope values and their running sum (the look-ahead mean).
  private readonly envRing: Float64Array;
  private envPos = 0;
  private envSum: number;
  private peaks = new Float64Array(0);
  private minGainSeen = 1;

  constructor(opts: NormalizerOptions) {
    this.channels = opts.channels;
    this.gain = Math.pow(10, opts.gainDb / 20);
    this.ceiling = Math.pow(10, opts.ceilingDbtp / 20);
    this.W = Math.max(2, Math.round((opts.sampleRate * (opts.lookaheadMs ?? 5)) / 1000));
    this.releaseCoef = 1 - Math.exp(-1 / ((opts.sampleRate * (opts.releaseMs ?? 80)) / 1000));
    this.tp = new TruePeakInterpolator(opts.sampleRate, opts.channels);
    // Requirement r for frame m is known once frame m + delay has been read; the gain for m once r[m+W−1] is.
    this.latency = this.tp.delay + this.W - 1;
    this.delayLength = this.latency + 1;
    this.delayLine = Array.from({ length: opts.channels }, () => new Float32Array(this.delayLength));
    this.dqIdx = new Float64Array(this.W + 1);
    this.dqVal = new Float64Array(this.W + 1);
    this.envRing = new Float64Array(this.W).fill(1);
    this.envSum = this.W;
  }

  /** The smallest limiter gain applied so far (1 = the limiter never acted). */
  get minimumLimiterGain(): number {
    return this.minGainSeen;
  }

  /** Feeds a chunk; returns the output frames that are complete (fewer than given at first). */
  push(planar: Float32Array[]): Float32Array[] {
    return this.run(planar, false);
  }

  /** Returns the remaining delayed frames. */
  flush(): Float32Array[] {
    // Pad with silence: it asks for no reduction and pushes the held audio out.
    const pad = Array.from({ length: this.channels }, () => new Float32Array(this.latency));
    return this.run(pad, true);
  }

  private run(planar: Float32Array[], flushing: boolean): Float32Array[] {
    const n = planar[0].length;
    if (this.peaks.length < n) this.peaks = new Float64Array(Math.max(n, 4096));
    this.tp.process(planar, this.peaks);
    const wanted = flushing ? this.framesIn - this.framesOut : Math.max(0, this.framesIn + n - this.latency - this.framesOut);
    const out = Array.from({ length: this.channels }, () => new Float32Array(wanted));
    let produced = 0;
    const { W, delayLength } = this;
    for (let i = 0; i < n; i++) {
      // 1. Store the input frame.
      for (let c = 0; c < this.channels; c++) this.delayLine[c][this.writePos] = planar[c][i];
      const t = this.framesIn + i; // index of this input frame
      // 2. The peak estimate computed now belongs to frame m = t − delay.
      const m = t - this.tp.delay;
      if (m >= 0) {
        const p = this.gain * this.peaks[i];
        const r = p > this.ceiling ? this.ceiling / p : 1;
        // hold-min over the last W requirements
        while (this.dqTail > this.dqHead && this.dqVal[(this.dqTail - 1) % (W + 1)] >= r) this.dqTail--;
        this.dqIdx[this.dqTail % (W + 1)] = m;
        this.dqVal[this.dqTail % (W + 1)] = r;
        this.dqTail++;
        while (this.dqIdx[this.dqHead % (W + 1)] <= m - W) this.dqHead++;
        const h = this.dqVal[this.dqHead % (W + 1)];
        // release envelope (instant down, exponential up; never above h)
        this.env = h < this.env ? h : this.env + (h - this.env) * this.releaseCoef;
        // look-ahead mean over the last W envelope values: the gain for frame m − W + 1
        this.envSum += this.env - this.envRing[this.envPos];
        this.envRing[this.envPos] = this.env;
        this.envPos = this.envPos + 1 === W ? 0 : this.envPos + 1;
        const q = m - W + 1; // the frame whose gain is now final
        if (q >= 0 && produced < wanted) {
          const g = Math.min(1, this.envSum / W);
          if (g < this.minGainSeen) this.minGainSeen = g;
          const readPos = (this.writePos - (t - q) + delayLength) % delayLength;
          const total = this.gain * g;
          for (let c = 0; c < this.channels; c++) out[c][produced] = this.delayLine[c][readPos] * total;
          produced++;
        }
      }
      this.writePos = this.writePos + 1 === delayLength ? 0 : this.writePos + 1;
    }
    if (!flushing) this.framesIn += n;
    this.framesOut += produced;
    return produced === wanted ? out : out.map((ch) => ch.subarray(0, produced));
  }
}
