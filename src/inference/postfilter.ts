// Residual-noise post-filter for the DTLN output at 16 kHz: STFT (512, hop 128, sqrt-Hann analysis and synthesis),
// a per-bin noise-floor estimate (minimum tracking of the smoothed power), and a decision-directed Wiener gain with a
// floor. DTLN leaves a low, fairly stationary residual; this takes it down further without touching speech peaks.
import { RealFFT } from './fft';

export interface PostFilterOptions {
  /** Noise over-estimation factor (1 = plain Wiener). */
  overSubtract: number;
  /** Lowest gain in dB (keeps some room tone, avoids musical noise). */
  floorDb: number;
}

const N = 512;
const HOP = 128;
const BINS = N / 2 + 1;
const FRAMES_PER_S = 16000 / HOP;
// Power smoothing, how fast the noise floor may rise (dB/s), decision-directed weight.
const POWER_SMOOTH = 0.6;
const FLOOR_RISE = Math.pow(10, 4 / 10 / FRAMES_PER_S);
const DD_ALPHA = 0.92;

export class PostFilter {
  readonly latency = N - HOP;
  private readonly fft = new RealFFT(N);
  private readonly window = new Float32Array(N);
  private readonly floorGain: number;
  private readonly beta: number;
  /** Unframed input; starts with the last N - HOP samples of the previous frame. */
  private inBuf = new Float32Array(N - HOP);
  private olaTail = new Float32Array(N - HOP);
  private readonly smoothPow = new Float64Array(BINS);
  private readonly noise = new Float64Array(BINS);
  private readonly prevClean = new Float64Array(BINS);
  private frames = 0;
  private readonly re = new Float64Array(BINS);
  private readonly im = new Float64Array(BINS);
  private readonly frame = new Float64Array(N);
  private readonly block = new Float64Array(N);

  constructor(opts: PostFilterOptions) {
    this.floorGain = Math.pow(10, opts.floorDb / 20);
    this.beta = opts.overSubtract;
    // sqrt of periodic Hann on both sides: the product (Hann) sums to 2 at hop N/4, hence the 1/sqrt(2) each side.
    for (let i = 0; i < N; i++) this.window[i] = Math.sqrt(0.5 * (1 - Math.cos((2 * Math.PI * i) / N))) / Math.SQRT2;
  }

  process(x: Float32Array): Float32Array {
    const all = new Float32Array(this.inBuf.length + x.length);
    all.set(this.inBuf);
    all.set(x, this.inBuf.length);
    const frames = Math.floor((all.length - (N - HOP)) / HOP);
    const acc = new Float32Array(frames * HOP + N - HOP);
    acc.set(this.olaTail);
    const { re, im, frame, block, window: w } = this;
    for (let f = 0; f < frames; f++) {
      const off = f * HOP;
      for (let i = 0; i < N; i++) frame[i] = all[off + i] * w[i];
      this.fft.forward(frame, 0, re, im, 0);
      this.gain(re, im);
      this.fft.inverse(re, im, 0, block, 0);
      for (let i = 0; i < N; i++) acc[off + i] += block[i] * w[i];
    }
    this.inBuf = all.slice(frames * HOP);
    this.olaTail = acc.slice(frames * HOP);
    return acc.subarray(0, frames * HOP);
  }

  private gain(re: Float64Array, im: Float64Array): void {
    const first = this.frames++ === 0;
    for (let k = 0; k < BINS; k++) {
      const p = re[k] * re[k] + im[k] * im[k];
      const sp = first ? p : POWER_SMOOTH * this.smoothPow[k] + (1 - POWER_SMOOTH) * p;
      this.smoothPow[k] = sp;
      // Minimum tracking: follow drops at once, rise slowly.
      let nz = first ? sp : Math.min(sp, this.noise[k] * FLOOR_RISE);
      if (nz < 1e-12) nz = 1e-12;
      this.noise[k] = nz;
      const noiseEst = this.beta * nz;
      const post = p / noiseEst;
      const prior = DD_ALPHA * (this.prevClean[k] / noiseEst) + (1 - DD_ALPHA) * Math.max(post - 1, 0);
      let g = prior / (1 + prior);
      if (g < this.floorGain) g = this.floorGain;
      this.prevClean[k] = g * g * p;
      re[k] *= g;
      im[k] *= g;
    }
  }
}
