// Streaming DSP blocks used by the model chains. Each keeps its own state so any chunking gives the same output.

/** Delays a stream by a fixed number of samples (zeros first). Output length == input length. */
export class DelayLine {
  private buf: Float32Array;
  constructor(readonly delay: number) {
    this.buf = new Float32Array(delay);
  }
  process(x: Float32Array): Float32Array {
    if (this.delay === 0) return x;
    const all = new Float32Array(this.buf.length + x.length);
    all.set(this.buf);
    all.set(x, this.buf.length);
    this.buf = all.slice(x.length);
    return all.subarray(0, x.length);
  }
}

function besselI0(x: number): number {
  let sum = 1;
  let term = 1;
  for (let k = 1; k < 50; k++) {
    term *= (x / (2 * k)) ** 2;
    sum += term;
    if (term < 1e-12 * sum) break;
  }
  return sum;
}

/** Kaiser-windowed sinc low-pass; cutoff as a fraction of the sample rate (0..0.5). Unity DC gain. */
export function designLowpass(taps: number, cutoff: number, beta: number): Float64Array {
  const h = new Float64Array(taps);
  const mid = (taps - 1) / 2;
  const i0b = besselI0(beta);
  let sum = 0;
  for (let i = 0; i < taps; i++) {
    const t = i - mid;
    const sinc = t === 0 ? 2 * cutoff : Math.sin(2 * Math.PI * cutoff * t) / (Math.PI * t);
    const r = t / mid;
    h[i] = sinc * (besselI0(beta * Math.sqrt(Math.max(0, 1 - r * r))) / i0b);
    sum += h[i];
  }
  for (let i = 0; i < taps; i++) h[i] /= sum;
  return h;
}

// 48 kHz <-> 16 kHz: pass band to ~7.2 kHz, stop band from ~8 kHz (about 60 dB). 241 taps, 120-sample delay at 48 kHz.
const RESAMPLE_TAPS = 241;
let sharedLowpass: Float64Array | null = null;
function resampleLowpass(): Float64Array {
  if (!sharedLowpass) sharedLowpass = designLowpass(RESAMPLE_TAPS, 7600 / 48000, 6);
  return sharedLowpass;
}
/** Delay of each resampling filter, in 48 kHz samples. */
export const RESAMPLE_DELAY_48K = (RESAMPLE_TAPS - 1) / 2;

/** 48 kHz -> 16 kHz: low-pass then keep every 3rd sample. Output m is input time 3m (minus the filter delay). */
export class Decimator3 {
  private readonly h = resampleLowpass();
  /** Input samples from absolute index bufStart onwards. */
  private buf = new Float32Array(RESAMPLE_TAPS - 1);
  private bufStart = -(RESAMPLE_TAPS - 1);
  private total = 0;
  private nextOut = 0;

  process(x: Float32Array): Float32Array {
    const all = new Float32Array(this.buf.length + x.length);
    all.set(this.buf);
    all.set(x, this.buf.length);
    this.total += x.length;
    const count = Math.max(0, Math.floor((this.total - 1) / 3) - this.nextOut + 1);
    const y = new Float32Array(count);
    const h = this.h;
    const taps = h.length;
    for (let j = 0; j < count; j++) {
      const end = 3 * (this.nextOut + j) - this.bufStart; // index in `all` of input time 3m
      let acc = 0;
      for (let k = 0; k < taps; k++) acc += h[k] * all[end - k];
      y[j] = acc;
    }
    this.nextOut += count;
    const keepFrom = 3 * this.nextOut - (taps - 1);
    this.buf = all.slice(keepFrom - this.bufStart);
    this.bufStart = keepFrom;
    return y;
  }
}

/** 16 kHz -> 48 kHz: zero-stuff by 3 and low-pass (polyphase). Output length = 3 x input length. */
export class Interpolator3 {
  private readonly phases: Float64Array[];
  private readonly histLen: number;
  private hist: Float32Array;

  constructor() {
    const h = resampleLowpass();
    this.histLen = Math.ceil(h.length / 3);
    this.phases = [0, 1, 2].map((p) => {
      const ph = new Float64Array(this.histLen);
      for (let j = 0; 3 * j + p < h.length; j++) ph[j] = 3 * h[3 * j + p];
      return ph;
    });
    this.hist = new Float32Array(this.histLen - 1);
  }

  process(x: Float32Array): Float32Array {
    const all = new Float32Array(this.hist.length + x.length);
    all.set(this.hist);
    all.set(x, this.hist.length);
    const y = new Float32Array(3 * x.length);
    const L = this.histLen;
    for (let m = 0; m < x.length; m++) {
      const cur = this.hist.length + m; // index of x[m] in `all`
      for (let p = 0; p < 3; p++) {
        const ph = this.phases[p];
        let acc = 0;
        for (let j = 0; j < L; j++) acc += ph[j] * all[cur - j];
        y[3 * m + p] = acc;
      }
    }
    this.hist = all.slice(all.length - (L - 1));
    return y;
  }
}
