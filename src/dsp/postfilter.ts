// Residual-noise post-filter for the DTLN output at 16 kHz: STFT (512, hop 128, sqrt-Hann analysis and synthesis),
// a per-bin noise-floor estimate (minimum tracking of the smoothed power), and a decision-directed Wiener gain with a
// floor. DTLN leaves a low, fairly stationary residual; this takes it down further without touching speech peaks.
import { BatchState, binGainKernel, type BinGainKernel } from './bin-gains';
import { filterFrames, sharedRowFft, sqrtHannWindow, type RowFft } from './fft-pairs';

export interface PostFilterOptions {
  /** Noise over-estimation factor (1 = plain Wiener). */
  overSubtract: number;
  /** Lowest gain in dB (keeps some room tone, avoids musical noise). */
  floorDb: number;
  /** STFT size / hop / sample rate; default 512 / 128 / 16000. */
  fftSize?: number;
  hop?: number;
  sampleRate?: number;
  /**
   * When set: the noise floor is the minimum of the smoothed power over the last this many seconds (8 sub-windows)
   * instead of a floor that follows drops at once and rises 4 dB/s. The slow rise leaves the filter idle for
   * tens of seconds after digital silence (e.g. a resampler's or DTLN's leading zeros); the window recovers in its
   * own length.
   */
  noiseWindowS?: number;
  /**
   * With noiseWindowS: 'window' (default) uses the windowed minimum alone; 'lift' keeps the slow-rise tracker and
   * only lifts it to the windowed minimum when it has fallen below it (digital silence at the start of a file), so
   * the tracker's behaviour is kept once it has found the noise level.
   */
  noiseMode?: 'window' | 'lift';
}

const WINDOW_PARTS = 8;

// Power smoothing, how fast the noise floor may rise (4 dB/s), decision-directed weight.
const POWER_SMOOTH = 0.6;
const FLOOR_RISE_DB_PER_S = 4;
const DD_ALPHA = 0.92;

export class PostFilter {
  readonly latency: number;
  private readonly n: number;
  private readonly hop: number;
  private readonly bins: number;
  private readonly floorRise: number;
  private readonly fft: RowFft;
  private readonly window: Float64Array;
  private readonly floorGain: number;
  private readonly beta: number;
  /** Unframed input; starts with the last N - HOP samples of the previous frame. */
  private inBuf: Float32Array;
  private olaTail: Float32Array;
  private readonly smoothPow: Float64Array;
  private readonly noise: Float64Array;
  private readonly prevClean: Float64Array;
  private frames = 0;
  /** Windowed minimum (noiseWindowS): per sub-window minima, bins * WINDOW_PARTS, and the running one. */
  private readonly partLen: number;
  private readonly partMins: Float64Array | null;
  private readonly lift: boolean;
  private readonly curMin: Float64Array;
  /** Minimum over the closed sub-windows, refreshed when one closes (so each frame compares once, not 8 times). */
  private readonly closedMin: Float64Array;
  private partFrames = 0;
  private part = 0;
  /** The WebAssembly per-bin loop and the state it works on (null: the JS loop, gain()). */
  private readonly kernel: BinGainKernel | null;
  private readonly state: BatchState;

  /** `fft`: the row FFT of fftSize points to use (tests); default this thread's shared one. */
  constructor(opts: PostFilterOptions, fft?: RowFft) {
    const N = (this.n = opts.fftSize ?? 512);
    this.hop = opts.hop ?? N / 4;
    if (this.hop !== N / 4) throw new Error('post-filter hop must be fftSize / 4 (sqrt-Hann overlap-add)');
    this.bins = N / 2 + 1;
    this.latency = N - this.hop;
    this.floorRise = Math.pow(10, FLOOR_RISE_DB_PER_S / 10 / ((opts.sampleRate ?? 16000) / this.hop));
    this.fft = fft ?? sharedRowFft(N);
    if (this.fft.n !== N) throw new Error(`post-filter needs a ${N}-point row FFT, got ${this.fft.n}`);
    this.inBuf = new Float32Array(N - this.hop);
    this.olaTail = new Float32Array(N - this.hop);
    this.smoothPow = new Float64Array(this.bins);
    this.noise = new Float64Array(this.bins);
    this.prevClean = new Float64Array(this.bins);
    const rate = opts.sampleRate ?? 16000;
    this.partLen = opts.noiseWindowS ? Math.max(1, Math.round((opts.noiseWindowS * rate) / this.hop / WINDOW_PARTS)) : 0;
    this.partMins = opts.noiseWindowS ? new Float64Array(this.bins * WINDOW_PARTS).fill(Infinity) : null;
    this.curMin = new Float64Array(this.bins).fill(Infinity);
    this.closedMin = new Float64Array(this.bins).fill(Infinity);
    this.lift = opts.noiseMode === 'lift';
    this.floorGain = Math.pow(10, opts.floorDb / 20);
    this.beta = opts.overSubtract;
    // sqrt of periodic Hann on both sides: the product (Hann) sums to 2 at hop N/4, hence the 1/sqrt(2) each side.
    this.window = sqrtHannWindow(N, Math.SQRT2);
    this.kernel = binGainKernel(this.fft);
    this.state = new BatchState([this.smoothPow, this.noise, this.prevClean, this.curMin, this.closedMin]);
  }

  process(x: Float32Array): Float32Array {
    const all = new Float32Array(this.inBuf.length + x.length);
    all.set(this.inBuf);
    all.set(x, this.inBuf.length);
    const N = this.n;
    const HOP = this.hop;
    const frames = Math.floor((all.length - (N - HOP)) / HOP);
    const acc = new Float32Array(frames * HOP + N - HOP);
    acc.set(this.olaTail);
    // Its frames and blocks were float32 arrays: round32.
    filterFrames(this.fft, all, HOP, frames, this.window, true, acc, (rows) => this.gains(rows));
    this.inBuf = all.slice(frames * HOP);
    this.olaTail = acc.slice(frames * HOP);
    return acc.subarray(0, frames * HOP);
  }

  /** The gains of the frames in the row FFT's rows 0..rows-1, in order. */
  private gains(rows: number): void {
    const K = this.bins;
    const wasm = this.fft.wasm;
    if (!this.kernel || !wasm) {
      const { re, im } = this.fft;
      for (let r = 0; r < rows; r++) {
        this.gain(re.subarray(r * K, r * K + K), im.subarray(r * K, r * K + K));
        this.closeSubWindow(this.curMin, this.closedMin);
      }
      return;
    }
    const at = this.state.enter(wasm);
    const windowed = this.partMins !== null ? 1 : 0;
    for (let r = 0; r < rows; r++) {
      const first = this.frames++ === 0 ? 1 : 0;
      this.kernel.postFilterFrame(wasm.reAt(r), wasm.imAt(r), K, at, this.state.stride, first, windowed, this.lift ? 1 : 0,
        POWER_SMOOTH, this.floorRise, this.beta, DD_ALPHA, this.floorGain);
      this.closeSubWindow(this.state.view(3), this.state.view(4));
    }
    this.state.leave();
  }

  /** One frame's per-bin gain, in JS (wasm/bin-gains.ts postFilterFrame does the same, two bins at a time). */
  private gain(re: Float64Array, im: Float64Array): void {
    const first = this.frames++ === 0;
    // Locals for the per-bin loop (fields and module constants read once).
    const bins = this.bins;
    const smoothPow = this.smoothPow;
    const noise = this.noise;
    const prevClean = this.prevClean;
    const curMin = this.curMin;
    const closedMin = this.closedMin;
    const windowed = this.partMins !== null;
    const lift = this.lift;
    const rise = this.floorRise;
    const beta = this.beta;
    const floorGain = this.floorGain;
    const ps = POWER_SMOOTH;
    const dd = DD_ALPHA;
    for (let k = 0; k < bins; k++) {
      const p = re[k] * re[k] + im[k] * im[k];
      const sp = first ? p : ps * smoothPow[k] + (1 - ps) * p;
      smoothPow[k] = sp;
      let nz: number;
      if (windowed) {
        let cm = curMin[k];
        if (sp < cm) curMin[k] = cm = sp;
        const closed = closedMin[k];
        nz = cm < closed ? cm : closed;
        if (lift) {
          // Minimum tracking as below, but never under the windowed minimum.
          const up = noise[k] * rise;
          const tracked = first || sp < up ? sp : up;
          if (tracked > nz) nz = tracked;
        }
      } else {
        // Minimum tracking: follow drops at once, rise slowly.
        const up = noise[k] * rise;
        nz = first || sp < up ? sp : up;
      }
      if (nz < 1e-12) nz = 1e-12;
      noise[k] = nz;
      const noiseEst = beta * nz;
      const post = p / noiseEst;
      const prior = dd * (prevClean[k] / noiseEst) + (1 - dd) * (post > 1 ? post - 1 : 0);
      let g = prior / (1 + prior);
      if (g < floorGain) g = floorGain;
      prevClean[k] = g * g * p;
      re[k] *= g;
      im[k] *= g;
    }
  }

  /** After each frame: when a sub-window is complete, it replaces the oldest one (curMin / closedMin: where they are). */
  private closeSubWindow(curMin: Float64Array, closedMin: Float64Array): void {
    if (!this.partMins || ++this.partFrames !== this.partLen) return;
    this.partFrames = 0;
    for (let k = 0; k < this.bins; k++) {
      const o = k * WINDOW_PARTS;
      this.partMins[o + this.part] = curMin[k];
      curMin[k] = Infinity;
      let m = Infinity;
      for (let u = 0; u < WINDOW_PARTS; u++) if (this.partMins[o + u] < m) m = this.partMins[o + u];
      closedMin[k] = m;
    }
    this.part = (this.part + 1) % WINDOW_PARTS;
  }
}
