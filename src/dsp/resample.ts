// Streaming DSP blocks used by the model chains. Each keeps its own state so any chunking gives the same output.
import { RealFFT } from './fft';
import { PhaseGains } from './bin-gains';
import { sharedRowFft } from './fft-pairs';

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

/**
 * Polyphase FFT convolution shared by the two resamplers. Both work on three 81-tap sub-filters of the 241-tap
 * low-pass, g_p[j] = h[3j + p] (zero past the end), at the 16 kHz rate:
 *   decimation     y[m]        = sum_p sum_j g_p[j] x[3(m - j) - p]   (three inputs, one output)
 *   interpolation  y[3m + p]   = sum_j 3 g_p[j] x[m - j]             (one input, three outputs)
 * Long runs go through overlap-save FFT blocks (FFT_SIZE points at 16 kHz, PHASE_TAPS - 1 samples of history per
 * block); short runs (a few samples per call) are summed directly. Both paths accumulate in float64 and round once to
 * float32, so they agree with the textbook direct form to float32 rounding (test/integration/inference.test.ts compares them) and
 * chunking does not change the output beyond that.
 */
const PHASE_TAPS = Math.ceil(RESAMPLE_TAPS / 3);
const FFT_SIZE = 1024;
/** Outputs (16 kHz) per FFT block. */
const FFT_BLOCK = FFT_SIZE - (PHASE_TAPS - 1);
/** FFT blocks transformed per batch (fft-pairs rows, 4 per block): ~1 MB of FFT memory. */
const FFT_GROUP = 16;
/** Below this many 16 kHz samples per call the direct sums are cheaper than an FFT block. */
const FFT_MIN_RUN = 96;

interface PolyphaseTables {
  /** g_p[j] = h[3j + p], one Float64Array of PHASE_TAPS per phase (decimation). */
  phases: Float64Array[];
  /** 3 g_p[j] (interpolation: the gain of 3 makes up for the zero-stuffing). */
  phases3: Float64Array[];
  /** FFT_SIZE-point spectra of `phases` and `phases3` (bins re, im), for the FFT path. */
  specRe: Float64Array[];
  specIm: Float64Array[];
  spec3Re: Float64Array[];
  spec3Im: Float64Array[];
}
let sharedTables: PolyphaseTables | null = null;
function polyphaseTables(): PolyphaseTables {
  if (sharedTables) return sharedTables;
  const h = resampleLowpass();
  const fft = new RealFFT(FFT_SIZE);
  const spectrum = (g: Float64Array): [Float64Array, Float64Array] => {
    const padded = new Float64Array(FFT_SIZE);
    padded.set(g);
    const re = new Float64Array(fft.bins);
    const im = new Float64Array(fft.bins);
    fft.forward(padded, 0, re, im, 0);
    return [re, im];
  };
  const phases: Float64Array[] = [];
  const phases3: Float64Array[] = [];
  for (let p = 0; p < 3; p++) {
    const g = new Float64Array(PHASE_TAPS);
    const g3 = new Float64Array(PHASE_TAPS);
    for (let j = 0; 3 * j + p < h.length; j++) {
      g[j] = h[3 * j + p];
      g3[j] = 3 * h[3 * j + p];
    }
    phases.push(g);
    phases3.push(g3);
  }
  const s1 = phases.map(spectrum);
  const s3 = phases3.map(spectrum);
  sharedTables = {
    phases,
    phases3,
    specRe: s1.map((v) => v[0]),
    specIm: s1.map((v) => v[1]),
    spec3Re: s3.map((v) => v[0]),
    spec3Im: s3.map((v) => v[1]),
  };
  return sharedTables;
}

/** 48 kHz -> 16 kHz: low-pass then keep every 3rd sample. Output m is input time 3m (minus the filter delay). */
export class Decimator3 {
  private readonly t = polyphaseTables();
  private readonly fft = sharedRowFft(FFT_SIZE);
  private readonly gains = new PhaseGains(this.fft, this.t.specRe, this.t.specIm);
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
    // Index in `all` of input time 3 * nextOut.
    const base = 3 * this.nextOut - this.bufStart;
    if (count >= FFT_MIN_RUN) this.viaFft(all, base, y, count);
    else this.direct(all, base, y, 0, count);
    this.nextOut += count;
    const keepFrom = 3 * this.nextOut - (RESAMPLE_TAPS - 1);
    this.buf = all.slice(keepFrom - this.bufStart);
    this.bufStart = keepFrom;
    return y;
  }

  /** y[j] for j in [from, to): input time 3(nextOut + j) sits at all[base + 3j]. */
  private direct(all: Float32Array, base: number, y: Float32Array, from: number, to: number): void {
    const [g0, g1, g2] = this.t.phases;
    // Phases 1 and 2 have one tap less (241 = 3 x 80 + 1): their last tap is zero and its sample may not exist.
    const L = PHASE_TAPS - 1;
    for (let j = from; j < to; j++) {
      const e = base + 3 * j;
      let a0 = 0;
      let a1 = 0;
      let a2 = 0;
      for (let k = 0, i = e; k < L; k++, i -= 3) {
        a0 += g0[k] * all[i];
        a1 += g1[k] * all[i - 1];
        a2 += g2[k] * all[i - 2];
      }
      y[j] = a0 + g0[L] * all[e - 3 * L] + a1 + a2;
    }
  }

  private viaFft(all: Float32Array, base: number, y: Float32Array, count: number): void {
    const fft = this.fft;
    const H = PHASE_TAPS - 1;
    const N = FFT_SIZE;
    for (let g0 = 0; g0 < count; g0 += FFT_GROUP * FFT_BLOCK) {
      const blocks = Math.min(FFT_GROUP, Math.ceil((count - g0) / FFT_BLOCK));
      // Rows 3b + p: block b's phase-p input, then its spectrum; rows 3 * blocks + b: block b's sum, then its output.
      fft.reserve(4 * blocks);
      const { sig } = fft;
      for (let b = 0; b < blocks; b++) {
        const j0 = g0 + b * FFT_BLOCK;
        const n = Math.min(FFT_BLOCK, count - j0);
        for (let p = 0; p < 3; p++) {
          // Row: phase-p input u_p[j0 - H + i] = all[base + 3(j0 - H + i) - p]; zeros past the block.
          const row = (3 * b + p) * N;
          const first = base + 3 * (j0 - H) - p;
          const len = n + H;
          // first >= -2: for phases 1 and 2 the oldest sample may precede the buffer; its tap is zero.
          const i0 = first < 0 ? 1 : 0;
          sig[row] = 0;
          gatherEvery3(all, first, i0, len, sig, row);
          sig.fill(0, row + len, row + N);
        }
      }
      fft.forward(3 * blocks);
      this.gains.sum(blocks);
      fft.inverse(blocks, 3 * blocks);
      const out = fft.sig; // read again: the kernel's scratch may have grown the memory
      for (let b = 0; b < blocks; b++) {
        const j0 = g0 + b * FFT_BLOCK;
        const n = Math.min(FFT_BLOCK, count - j0);
        const row = (3 * blocks + b) * N + H;
        y.set(out.subarray(row, row + n), j0); // float64 to float32: rounded as an element store would
      }
    }
  }
}

/** 16 kHz -> 48 kHz: zero-stuff by 3 and low-pass (polyphase). Output length = 3 x input length. */
export class Interpolator3 {
  private readonly t = polyphaseTables();
  private readonly fft = sharedRowFft(FFT_SIZE);
  private readonly gains = new PhaseGains(this.fft, this.t.spec3Re, this.t.spec3Im);
  private readonly histLen = PHASE_TAPS;
  private hist: Float32Array;

  constructor() {
    this.hist = new Float32Array(this.histLen - 1);
  }

  process(x: Float32Array): Float32Array {
    const all = new Float32Array(this.hist.length + x.length);
    all.set(this.hist);
    all.set(x, this.hist.length);
    const y = new Float32Array(3 * x.length);
    if (x.length >= FFT_MIN_RUN) this.viaFft(all, y, x.length);
    else this.direct(all, y, x.length);
    this.hist = all.slice(all.length - (this.histLen - 1));
    return y;
  }

  private direct(all: Float32Array, y: Float32Array, count: number): void {
    const [g0, g1, g2] = this.t.phases3;
    const L = this.histLen;
    const H = L - 1;
    for (let m = 0; m < count; m++) {
      const cur = H + m; // index of x[m] in `all`
      let a0 = 0;
      let a1 = 0;
      let a2 = 0;
      for (let j = 0; j < L; j++) {
        const v = all[cur - j];
        a0 += g0[j] * v;
        a1 += g1[j] * v;
        a2 += g2[j] * v;
      }
      y[3 * m] = a0;
      y[3 * m + 1] = a1;
      y[3 * m + 2] = a2;
    }
  }

  private viaFft(all: Float32Array, y: Float32Array, count: number): void {
    const fft = this.fft;
    const H = this.histLen - 1;
    const N = FFT_SIZE;
    for (let g0 = 0; g0 < count; g0 += FFT_GROUP * FFT_BLOCK) {
      const blocks = Math.min(FFT_GROUP, Math.ceil((count - g0) / FFT_BLOCK));
      // Rows b: block b's input, then its spectrum; rows blocks + 3b + p: its phase-p product, then phase-p output.
      fft.reserve(4 * blocks);
      const { sig } = fft;
      for (let b = 0; b < blocks; b++) {
        const m0 = g0 + b * FFT_BLOCK;
        const n = Math.min(FFT_BLOCK, count - m0);
        // Row: x[m0 - H + i] = all[m0 + i]; zeros past the block.
        const row = b * N;
        sig.set(all.subarray(m0, m0 + n + H), row);
        sig.fill(0, row + n + H, row + N);
      }
      fft.forward(blocks);
      this.gains.products(blocks);
      fft.inverse(3 * blocks, blocks);
      const out = fft.sig; // read again: the kernel's scratch may have grown the memory
      for (let b = 0; b < blocks; b++) {
        const m0 = g0 + b * FFT_BLOCK;
        const n = Math.min(FFT_BLOCK, count - m0);
        interleave3(out, (blocks + 3 * b) * N + H, N, n, y, 3 * m0);
      }
    }
  }
}

// The resamplers' strided copies, in small functions of their own: viaFft runs once per chunk, so loops inside it ran
// in V8's unoptimised tiers until on-stack replacement; these are optimised after a few calls.

/** to[at + i] = from[first + 3i] for i in [i0, len). */
function gatherEvery3(from: Float32Array, first: number, i0: number, len: number, to: Float64Array, at: number): void {
  for (let i = i0; i < len; i++) to[at + i] = from[first + 3 * i];
}

/** to[at + 3i + p] = from[row + p * stride + i] for i < n, p < 3 (float64 to float32): three rows interleaved. */
function interleave3(from: Float64Array, row: number, stride: number, n: number, to: Float32Array, at: number): void {
  for (let i = 0, r1 = row + stride, r2 = row + 2 * stride, o = at; i < n; i++, o += 3) {
    to[o] = from[row + i];
    to[o + 1] = from[r1 + i];
    to[o + 2] = from[r2 + i];
  }
}
