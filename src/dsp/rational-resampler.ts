// Streaming polyphase resampler for any rational rate ratio: live streams arrive at 8-48 kHz and run at the model's
// 16 or 48 kHz. A Kaiser-windowed sinc prototype (designLowpass) split into `up` phases of TAPS_PER_PHASE taps; state
// is carried between chunks, so any chunking gives the same output. Hand-written rather than a library because it
// must run inside the inference worker per 20 ms chunk with no process or native module per stream (the file pipeline
// resamples with ffmpeg instead); cost at 44.1 -> 48 kHz: TAPS_PER_PHASE multiply-adds per output sample.
import { designLowpass } from './resample';

/** Taps per phase: ~70 dB stop band with a transition of ~10 % of the lower Nyquist frequency. */
const TAPS_PER_PHASE = 32;
const KAISER_BETA = 7;

function gcd(a: number, b: number): number {
  while (b) [a, b] = [b, a % b];
  return a;
}

export class RationalResampler {
  readonly up: number;
  readonly down: number;
  /** Group delay in output samples (the prototype's centre), possibly fractional. */
  readonly delay: number;
  /** Phase-major taps: phase p's taps are h[p * TAPS_PER_PHASE ...], tap j applying to input sample n - j. */
  private readonly taps: Float32Array;
  /** Per channel: the last TAPS_PER_PHASE - 1 input samples before the current chunk. */
  private history: Float32Array[];
  /** Next output index, and the absolute index of the first sample of `history`. */
  private outIndex = 0;
  private inBase: number;

  constructor(inRate: number, outRate: number, readonly channels: number) {
    const g = gcd(inRate, outRate);
    this.up = outRate / g;
    this.down = inRate / g;
    const n = this.up * TAPS_PER_PHASE;
    // Cutoff below the lower of the two Nyquist rates, as a fraction of the upsampled rate.
    const cutoff = (0.5 * 0.92) / Math.max(this.up, this.down);
    const proto = designLowpass(n, cutoff, KAISER_BETA);
    this.taps = new Float32Array(n);
    for (let p = 0; p < this.up; p++) {
      for (let j = 0; j < TAPS_PER_PHASE; j++) this.taps[p * TAPS_PER_PHASE + j] = proto[p + j * this.up] * this.up;
    }
    this.delay = (n - 1) / 2 / this.down;
    this.history = Array.from({ length: channels }, () => new Float32Array(TAPS_PER_PHASE - 1));
    this.inBase = -(TAPS_PER_PHASE - 1);
  }

  /** Resamples one chunk (equal-length channels); returns the output samples that chunk completes. */
  process(planar: Float32Array[]): Float32Array[] {
    const K = TAPS_PER_PHASE;
    const n = planar[0].length;
    const held = this.history[0].length;
    const end = this.inBase + held + n; // absolute index one past the last input sample
    // Output k needs input up to floor(k * down / up); count the outputs this chunk completes.
    let count = 0;
    while (Math.floor(((this.outIndex + count) * this.down) / this.up) < end) count++;
    const out = planar.map(() => new Float32Array(count));
    for (let c = 0; c < planar.length; c++) {
      const joined = new Float32Array(held + n);
      joined.set(this.history[c]);
      joined.set(planar[c], held);
      const y = out[c];
      for (let i = 0; i < count; i++) {
        const k = this.outIndex + i;
        const m = k * this.down;
        const last = Math.floor(m / this.up) - this.inBase; // index of x[n_max] in `joined`
        const p = (m % this.up) * K;
        let acc = 0;
        for (let j = 0; j < K; j++) {
          const at = last - j;
          if (at >= 0) acc += this.taps[p + j] * joined[at];
        }
        y[i] = acc;
      }
      this.history[c] = joined.slice(joined.length - (K - 1));
    }
    this.outIndex += count;
    this.inBase = end - (K - 1);
    return out;
  }
}
