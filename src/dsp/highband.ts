// Per-bin noise suppression of the 48 kHz high band (above the nsm-2-hd crossover). One broadband gain per hop cannot
// remove noise that sits under speech; here the high band gets its own STFT (sqrt-Hann, 1024 / hop 512), a per-bin
// noise PSD tracked with DTLN's speech/noise decision, a decision-directed Wiener gain with a floor, smoothed over
// frequency. With all gains 1 the STFT reconstructs its input exactly (delayed by `latency`).
import { BatchState, binGainKernel, type BinGainKernel } from './bin-gains';
import { filterFrames, sharedRowFft, sqrtHannWindow, type RowFft } from './fft-pairs';

export interface HighBandOptions {
  /** STFT size at 48 kHz (power of two). */
  fftSize?: number;
  /**
   * Frames per window length: 2 (hop N/2, the default) or 4 (hop N/4, as first tuned: twice the work). The per-frame
   * smoothing constants are scaled so that their time constants stay the same.
   */
  overlap?: 2 | 4;
  /** Lowest per-bin gain, dB. */
  floorDb?: number;
  /** Noise over-estimation factor in the Wiener gain. */
  overSubtract?: number;
  /** Decision-directed weight (higher = smoother, less musical noise). */
  ddAlpha?: number;
  /** Noise-PSD time constant (s) while DTLN says "noise". */
  noiseTau?: number;
  /**
   * The 16 kHz chain's 4-7.5 kHz gain (output vs input energy, BandGainProbe) at or below which a frame counts as
   * noise, and at or above which as speech.
   */
  noiseGain?: number;
  speechGain?: number;
  /** How to combine with the broadband gain min(1, g) (default 'min': the lower of the two). */
  combine?: 'product' | 'min' | 'none';
  /** Bins either side for the frequency smoothing of the gain. */
  smoothBins?: number;
  /** Evaluation only: apply these per-frame gains instead of computing them (frozen-gain measurement). */
  replay?: Float32Array[];
}

const SAMPLE_RATE = 48000;
/** Recursive smoothing of the per-bin power for the falling-noise check, per 256-sample hop (5.3 ms). */
const POWER_SMOOTH = 0.7;
/** The hop the per-frame constants (POWER_SMOOTH, ddAlpha) were set for. */
const REFERENCE_HOP = 256;

export class HighBandFilter {
  /** Output sample i is input sample i - latency; output length == input length on every call. */
  readonly latency: number;
  /** Evaluation only: when an array, every frame's gain vector is pushed to it. */
  recorded: Float32Array[] | null = null;
  private readonly n: number;
  private readonly hop: number;
  private readonly bins: number;
  private readonly fft: RowFft;
  private readonly window: Float64Array;
  private readonly floorGain: number;
  private readonly beta: number;
  private readonly ddAlpha: number;
  private readonly powerSmooth: number;
  private readonly noiseAlpha: number;
  private readonly gNoise: number;
  private readonly gSpeech: number;
  private readonly combine: 'product' | 'min' | 'none';
  private readonly smoothBins: number;
  private readonly kPerBin: number;
  /** The first bin of the per-bin loop (the smoothing reach below kPerBin); combine as a number (0 none, 1 product, 2 min). */
  private readonly kStart: number;
  private readonly combineCode: 0 | 1 | 2;
  private readonly replay: Float32Array[] | null;
  /** Unframed input and its DTLN gain; both start with the last N - hop samples of the previous frame. */
  private inBuf: Float32Array;
  private gBuf: Float32Array;
  private olaTail: Float32Array;
  /** Filtered samples not yet emitted (to keep output length == input length). */
  private ready: Float32Array;
  private readonly noise: Float64Array;
  private readonly smoothPow: Float64Array;
  private readonly prevClean: Float64Array;
  private readonly rawGain: Float64Array;
  private frames = 0;
  /** The WebAssembly per-bin loops and the state they work on (null: the JS loops, applyGain()). */
  private readonly kernel: BinGainKernel | null;
  private readonly state: BatchState;

  /** `fft`: the row FFT of fftSize points to use (tests); default this thread's shared one. */
  constructor(opts: HighBandOptions = {}, fft?: RowFft) {
    const N = (this.n = opts.fftSize ?? 1024);
    const overlap = opts.overlap ?? 2;
    if (overlap !== 2 && overlap !== 4) throw new Error('high-band overlap must be 2 or 4');
    this.hop = N / overlap;
    this.bins = N / 2 + 1;
    this.latency = N;
    this.fft = fft ?? sharedRowFft(N);
    if (this.fft.n !== N) throw new Error(`high-band filter needs a ${N}-point row FFT, got ${this.fft.n}`);
    // sqrt of periodic Hann on both sides: the product (Hann) sums to overlap / 2 (1 at hop N/2, 2 at hop N/4), hence
    // 1 / sqrt(overlap / 2) on each side.
    this.window = sqrtHannWindow(N, overlap === 4 ? Math.SQRT2 : 1);
    this.floorGain = Math.pow(10, (opts.floorDb ?? -15) / 20);
    this.beta = opts.overSubtract ?? 3;
    // Per-frame recursions keep their time constants whatever the hop.
    const hops = this.hop / REFERENCE_HOP;
    this.ddAlpha = Math.pow(opts.ddAlpha ?? 0.98, hops);
    this.powerSmooth = Math.pow(POWER_SMOOTH, hops);
    this.noiseAlpha = Math.exp(-this.hop / (SAMPLE_RATE * (opts.noiseTau ?? 0.1)));
    this.gNoise = opts.noiseGain ?? 0.5;
    this.gSpeech = opts.speechGain ?? 1;
    this.combine = opts.combine ?? 'min';
    this.smoothBins = opts.smoothBins ?? 3;
    this.kPerBin = Math.ceil((8000 * N) / SAMPLE_RATE);
    this.kStart = Math.max(0, this.kPerBin - this.smoothBins);
    this.combineCode = this.combine === 'product' ? 1 : this.combine === 'min' ? 2 : 0;
    this.replay = opts.replay ?? null;
    this.inBuf = new Float32Array(N - this.hop);
    this.gBuf = new Float32Array(N - this.hop).fill(1);
    this.olaTail = new Float32Array(N - this.hop);
    // The STFT itself delays by N - hop; one more hop of zeros makes the delay N (see process()).
    this.ready = new Float32Array(this.hop);
    this.noise = new Float64Array(this.bins);
    this.smoothPow = new Float64Array(this.bins);
    this.prevClean = new Float64Array(this.bins);
    this.rawGain = new Float64Array(this.bins);
    this.kernel = binGainKernel(this.fft);
    this.state = new BatchState([this.smoothPow, this.noise, this.prevClean, this.rawGain]);
  }

  /**
   * `x`: high band; `g`: the 16 kHz chain's 4-7.5 kHz gain for the same samples (0..1).
   * Returns as many samples as given, delayed by `latency`.
   */
  process(x: Float32Array, g: Float32Array): Float32Array {
    const N = this.n;
    const H = this.hop;
    const all = new Float32Array(this.inBuf.length + x.length);
    all.set(this.inBuf);
    all.set(x, this.inBuf.length);
    const gAll = new Float32Array(this.gBuf.length + g.length);
    gAll.set(this.gBuf);
    gAll.set(g, this.gBuf.length);
    const frames = Math.floor((all.length - (N - H)) / H);
    const acc = new Float32Array(frames * H + N - H);
    acc.set(this.olaTail);
    filterFrames(this.fft, all, H, frames, this.window, false, acc, (rows, f0) => this.gains(rows, gAll, f0 * H));
    this.inBuf = all.slice(frames * H);
    this.gBuf = gAll.slice(frames * H);
    this.olaTail = acc.slice(frames * H);
    // Completed samples so far always exceed (input so far) - N, so a fixed delay of N keeps lengths equal.
    const done = new Float32Array(this.ready.length + frames * H);
    done.set(this.ready);
    done.set(acc.subarray(0, frames * H), this.ready.length);
    const out = done.slice(0, x.length);
    this.ready = done.slice(x.length);
    return out;
  }

  /** The gains of the frames in the row FFT's rows 0..rows-1 (frame r's DTLN gain from gAll[off0 + r * hop]). */
  private gains(rows: number, gAll: Float32Array, off0: number): void {
    const K = this.bins;
    const H = this.hop;
    const wasm = this.fft.wasm;
    if (!this.kernel || !wasm || this.replay || this.recorded) {
      const { re, im } = this.fft;
      for (let r = 0; r < rows; r++) this.applyGain(re.subarray(r * K, r * K + K), im.subarray(r * K, r * K + K), gAll, off0 + r * H);
      return;
    }
    const at = this.state.enter(wasm);
    for (let r = 0; r < rows; r++) {
      const { gm, speech, first, an } = this.decide(gAll, off0 + r * H);
      this.kernel.highBandFrame(wasm.reAt(r), wasm.imAt(r), K, at, this.state.stride, first ? 1 : 0, this.kStart, speech > 0.5 ? 1 : 0,
        an, this.powerSmooth, this.beta, this.ddAlpha, this.kPerBin, this.smoothBins, this.floorGain, this.combineCode, Math.min(1, gm));
    }
    this.state.leave();
  }

  /** Per frame: DTLN's gain over the frame's central half (gm), speech presence, first frame, the noise PSD's weight. */
  private decide(gAll: Float32Array, off: number): { gm: number; speech: number; first: boolean; an: number } {
    const N = this.n;
    let gm = 0;
    for (let i = N / 4; i < (3 * N) / 4; i++) gm += gAll[off + i];
    gm /= N / 2;
    const speech = Math.min(1, Math.max(0, (gm - this.gNoise) / (this.gSpeech - this.gNoise)));
    const first = this.frames++ === 0;
    return { gm, speech, first, an: this.noiseAlpha + (1 - this.noiseAlpha) * speech };
  }

  /** One frame's per-bin gain, in JS (wasm/bin-gains.ts highBandFrame does the same, two bins at a time). */
  private applyGain(re: Float64Array, im: Float64Array, gAll: Float32Array, off: number): void {
    const K = this.bins;
    if (this.replay) {
      const r = this.replay[this.frames++];
      for (let k = 0; k < K; k++) {
        re[k] *= r[k];
        im[k] *= r[k];
      }
      return;
    }
    const { gm, speech, first, an } = this.decide(gAll, off);
    const raw = this.rawGain;
    // Fields in locals: the loops below run per bin of every frame.
    const smoothPow = this.smoothPow;
    const noise = this.noise;
    const prevClean = this.prevClean;
    const beta = this.beta;
    const ddAlpha = this.ddAlpha;
    const ps = this.powerSmooth;
    // Bins below the smoothing reach of the first per-bin bin are never used (they keep the broadband gain).
    for (let k = this.kStart; k < K; k++) {
      const p = re[k] * re[k] + im[k] * im[k];
      const sp = first ? p : ps * smoothPow[k] + (1 - ps) * p;
      smoothPow[k] = sp;
      let nz = first ? p : an * noise[k] + (1 - an) * p;
      // While speech holds the estimate, a smoothed power below it means the noise fell: follow it down.
      if (speech > 0.5 && sp < nz) nz = sp;
      if (nz < 1e-14) nz = 1e-14;
      noise[k] = nz;
      const ne = beta * nz;
      const post = p / ne;
      const prior = ddAlpha * (prevClean[k] / ne) + (1 - ddAlpha) * Math.max(post - 1, 0);
      const gk = prior / (1 + prior);
      raw[k] = gk;
      prevClean[k] = gk * gk * p;
    }
    const bb = Math.min(1, gm);
    const gains = this.recorded ? new Float32Array(K) : null;
    const S = this.smoothBins;
    const kPerBin = this.kPerBin;
    const floorGain = this.floorGain;
    const combine = this.combineCode;
    for (let k = 0; k < K; k++) {
      let gk = 1;
      // Below 8 kHz (the crossover's transition band) keep the broadband gain: that part reaches the 16 kHz band.
      if (k >= kPerBin) {
        const lo = k > S ? k - S : 0;
        const hi = k + S < K - 1 ? k + S : K - 1;
        let s = 0;
        for (let j = lo; j <= hi; j++) s += raw[j];
        gk = s / (hi - lo + 1);
      }
      // The floor bounds the per-bin gain only: where DTLN says "noise" the broadband gain may go lower.
      if (gk < floorGain) gk = floorGain;
      if (combine === 1) gk *= bb;
      else if (combine === 2) gk = Math.min(gk, bb);
      if (gk > 1) gk = 1;
      if (gains) gains[k] = gk;
      re[k] *= gk;
      im[k] *= gk;
    }
    if (this.recorded && gains) this.recorded.push(gains);
  }
}
