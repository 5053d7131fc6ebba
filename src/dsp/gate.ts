// Residual gate at 16 kHz: a broadband downward expander for what the DTLN passes leave between words. Per hop of
// 128 samples it compares the level of the last 256 samples with a slowly decaying speech-peak level; hops more than
// `depthDb` below the peak are turned down by `ratio - 1` dB per dB below that threshold, at most `maxAttenDb`. The
// gain opens `lookaheadHops` hops before a louder hop arrives (no clipped onsets) and stays open `holdHops` after it
// (no cut word endings), then closes with a `releaseMs` time constant; it is interpolated sample by sample.
// Streaming with a fixed latency of lookaheadHops * 128 samples; chunked output equals one-pass output.
import { concat } from './concat';

export interface GateOptions {
  /** Threshold below the tracked speech-peak level, dB (hops quieter than peak - depth are expanded). */
  depthDb: number;
  /** Expansion ratio: each dB below the threshold becomes `ratio` dB. */
  ratio: number;
  /** Most attenuation, dB (positive). */
  maxAttenDb: number;
  /** Hops the gain opens ahead of a louder hop; also the stage's latency in hops. Default 3 (24 ms). */
  lookaheadHops?: number;
  /** Hops the gain stays open after one. Default 12 (96 ms). */
  holdHops?: number;
  /** Time constant of the closing gain, ms. Default 60. */
  releaseMs?: number;
  /** How fast the speech-peak level falls when nothing louder comes, dB per second. Default 6. */
  peakDecayDbPerS?: number;
}

const HOP = 128;
const RATE = 16000;
/** Peak level never tracks below this (dBFS): digital silence does not pull the threshold down to nothing. */
const PEAK_FLOOR_DB = -70;

export class ResidualGate {
  readonly latency: number;
  private readonly look: number;
  private readonly hold: number;
  private readonly depth: number;
  private readonly slope: number;
  private readonly maxAtten: number;
  private readonly releaseCoef: number;
  private readonly peakDecay: number;
  /** Samples not yet making up a whole hop. */
  private pending = new Float32Array(0);
  /** The previous hop's samples (levels are measured over 256 samples). */
  private readonly prevHop = new Float32Array(HOP);
  private peakDb = PEAK_FLOOR_DB;
  /** Delayed hops (lookahead): samples and target gains (dB), ring buffers of look + 1 hops. */
  private readonly ring: Float32Array;
  private readonly targets: Float64Array;
  private readonly ringLen: number;
  private hops = 0;
  /** Hops since the last open (0 dB) target within the lookahead; the hold counter. */
  private sinceOpen = Infinity;
  private gainDb = 0;
  private lastLinear = 1;

  constructor(opts: GateOptions) {
    this.look = opts.lookaheadHops ?? 3;
    this.hold = opts.holdHops ?? 12;
    this.depth = opts.depthDb;
    this.slope = opts.ratio - 1;
    this.maxAtten = opts.maxAttenDb;
    this.releaseCoef = Math.exp(-(HOP / RATE) / ((opts.releaseMs ?? 60) / 1000));
    this.peakDecay = ((opts.peakDecayDbPerS ?? 6) * HOP) / RATE;
    this.ringLen = this.look + 1;
    this.ring = new Float32Array(this.ringLen * HOP);
    this.targets = new Float64Array(this.ringLen);
    this.latency = this.look * HOP;
  }

  process(x: Float32Array): Float32Array {
    const src = concat(this.pending, x);
    const whole = Math.floor(src.length / HOP);
    const out = new Float32Array(whole * HOP);
    for (let h = 0; h < whole; h++) this.hop(src, h * HOP, out, h * HOP);
    this.pending = src.slice(whole * HOP);
    return out;
  }

  /** Takes in one hop at src[off..off+HOP), writes the hop `look` hops older (gained) to out[o..o+HOP). */
  private hop(src: Float32Array, off: number, out: Float32Array, o: number): void {
    let e = 0;
    for (let i = 0; i < HOP; i++) e += this.prevHop[i] * this.prevHop[i];
    for (let i = 0; i < HOP; i++) {
      const v = src[off + i];
      e += v * v;
      this.prevHop[i] = v;
    }
    // A non-finite level (NaN from upstream) counts as silence, so the tracked peak never becomes NaN.
    const level = e < Infinity ? 10 * Math.log10(e / (2 * HOP) + 1e-12) : -120;
    this.peakDb = Math.max(level, this.peakDb - this.peakDecay, PEAK_FLOOR_DB);
    const below = this.peakDb - this.depth - level;
    const target = below > 0 ? -Math.min(this.maxAtten, below * this.slope) : 0;
    const slot = this.hops % this.ringLen;
    this.ring.set(src.subarray(off, off + HOP), slot * HOP);
    this.targets[slot] = target;
    this.hops++;
    // The hop leaving the delay line is the oldest one (slot of hops - look - 1, i.e. the next slot to be written).
    const outSlot = this.hops % this.ringLen;
    // Its gain: open (the highest target) over the lookahead, held for `hold` hops, then released smoothly.
    let want = -Infinity;
    for (let k = 0; k < this.ringLen; k++) if (this.targets[k] > want) want = this.targets[k];
    if (this.hops <= this.look) {
      // Still filling the delay line: the leaving hop is silence ahead of the stream.
      out.fill(0, o, o + HOP);
      return;
    }
    if (want >= this.gainDb) {
      this.gainDb = want;
      if (want >= 0) this.sinceOpen = 0;
    } else if (++this.sinceOpen > this.hold) {
      this.gainDb = want + (this.gainDb - want) * this.releaseCoef;
    }
    const g = Math.pow(10, this.gainDb / 20);
    const g0 = this.lastLinear;
    const base = outSlot * HOP;
    for (let i = 0; i < HOP; i++) out[o + i] = this.ring[base + i] * (g0 + ((g - g0) * (i + 1)) / HOP);
    this.lastLinear = g;
  }
}
