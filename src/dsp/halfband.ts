// 8 kHz <-> 16 kHz for telephony audio: a 2:1 interpolator and decimator on one linear-phase half-band FIR, run inside
// the inference worker around the 16 kHz chains (inference/narrowband.ts), by files and live streams alike, so that an
// 8 kHz stream's output equals /denoise of the same 8 kHz file byte for byte.
//
// The filter: a Kaiser-windowed sinc with its cutoff at 4 kHz (a quarter of 16 kHz), HALF_BAND_TAPS long. Every
// second tap of a half-band filter is zero and its centre tap is 1/2, so
//   - interpolating, one of each two outputs is an input sample itself, delayed (no arithmetic at all), and
//   - each output of either direction costs ODD_TAPS / 2 multiplies (the taps are symmetric: pairs summed first).
// Each direction delays by HALF_BAND_DELAY samples at 16 kHz, odd; both together, with a 16 kHz chain of even latency
// between them, make a whole number of 8 kHz samples (NarrowBandChain picks the decimator's phase so): nothing sits
// half a sample off. Response (16 kHz, each filter): within 0.1 dB to ~3.64 kHz, -6 dB at 4 kHz, at least 71 dB down
// above 4.5 kHz (test/unit/dsp-halfband.test.ts measures it).
//
// Outputs are summed in float64 in a fixed order and rounded once to float32, from the same input samples whatever the
// chunking: any chunking gives the same bits (a live stream's 20 ms chunks, a file's 8 s ones). The loops run in
// WebAssembly SIMD (wasm/halfband.ts, two outputs a step, the same float64 operations per lane: bit-identical), and in
// the JS below where the .wasm file is missing.
import path from 'node:path';
import { wasmModule } from './wasm-load';

/** Taps of the filter (4k + 3: the centre tap is on an odd index, the zero taps on the others). */
export const HALF_BAND_TAPS = 79;
const KAISER_BETA = 7;
/** Delay of either direction in 16 kHz samples (odd). */
export const HALF_BAND_DELAY = (HALF_BAND_TAPS - 1) / 2;
/** Nonzero taps besides the centre, at odd distances 1, 3, ... from it: ODD_TAPS / 2 on each side. */
const ODD_TAPS = HALF_BAND_DELAY + 1;
/** Symmetric pairs of nonzero taps (a multiple of 4: the loops take four a turn). */
const PAIRS = ODD_TAPS / 2;
if (PAIRS % 4 !== 0) throw new Error(`half-band pairs (${PAIRS}) must be a multiple of 4`);

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

/**
 * c[j] = h at distance 2j + 1 from the centre, j < PAIRS (the same on both sides). The centre is 1/2; the taps at
 * even distances are exactly 0 (not the window's rounding of 0), and the odd taps are scaled to sum to 1/2 on each
 * side's total, so the DC gain is exactly 1 and the zero-stuffed interpolator's even phase is the input itself.
 */
function designPairs(): Float64Array {
  const c = new Float64Array(PAIRS);
  const i0b = besselI0(KAISER_BETA);
  let sum = 0;
  for (let j = 0; j < PAIRS; j++) {
    const t = 2 * j + 1;
    const r = t / HALF_BAND_DELAY;
    const sinc = Math.sin((Math.PI * t) / 2) / (Math.PI * t);
    c[j] = sinc * (besselI0(KAISER_BETA * Math.sqrt(Math.max(0, 1 - r * r))) / i0b);
    sum += 2 * c[j];
  }
  for (let j = 0; j < PAIRS; j++) c[j] *= 0.5 / sum;
  return c;
}

const C = designPairs();
/** The interpolator's taps: twice the filter's, making up for the zero-stuffing. */
const C2 = C.map((v) => 2 * v);

/** The whole filter (HALF_BAND_TAPS taps), for measuring its response. */
export function halfBandTaps(): Float64Array {
  const h = new Float64Array(HALF_BAND_TAPS);
  h[HALF_BAND_DELAY] = 0.5;
  for (let j = 0; j < PAIRS; j++) {
    h[HALF_BAND_DELAY - (2 * j + 1)] = C[j];
    h[HALF_BAND_DELAY + (2 * j + 1)] = C[j];
  }
  return h;
}

/**
 * 8 kHz -> 16 kHz, two outputs per input. With u the input zero-stuffed to 16 kHz (u[2m] = x[m]) and h the filter,
 * y[n] = sum_k 2 h[k] u[n - k]: output 2m + 1 is x[m - (HALF_BAND_DELAY - 1) / 2] itself, output 2m sums PAIRS pairs.
 * Output n stands for 16 kHz time n - HALF_BAND_DELAY (input m for time 2m).
 */
export class Interpolator2 {
  /** The last HIST inputs before the current chunk (zeros at first), then the chunk: reused from call to call. */
  private buf: Float32Array = new Float32Array(HIST + 320);

  process(x: Float32Array): Float32Array {
    const n = x.length;
    if (this.buf.length < HIST + n) this.buf = grow(this.buf, HIST, HIST + n);
    const buf = this.buf;
    buf.set(x, HIST);
    const y = new Float32Array(2 * n);
    const k = kernel();
    if (k) {
      k.interpolate(buf, n, y);
      buf.copyWithin(0, n, n + HIST);
      return y;
    }
    // Input m sits at buf[HIST + m]. Output 2m: taps at 16 kHz distances 2j + 1 either side of centre 2m - DELAY, i.e.
    // inputs m - PAIRS + 1 + j and m - PAIRS - j (j < PAIRS): the pairs around lo = HIST + m - PAIRS and lo + 1.
    // Output 2m + 1: the centre tap on input m - (DELAY - 1) / 2 = m - PAIRS + 1 (DELAY = 2 PAIRS - 1).
    for (let m = 0; m < n; m++) {
      const lo = HIST + m - PAIRS;
      let acc = 0;
      // Four pairs a turn (PAIRS is a multiple of 4), in the same order: 28 % less time than one a turn.
      for (let j = 0; j < PAIRS; j += 4) {
        acc += C2[j] * (buf[lo - j] + buf[lo + 1 + j]);
        acc += C2[j + 1] * (buf[lo - j - 1] + buf[lo + 2 + j]);
        acc += C2[j + 2] * (buf[lo - j - 2] + buf[lo + 3 + j]);
        acc += C2[j + 3] * (buf[lo - j - 3] + buf[lo + 4 + j]);
      }
      y[2 * m] = acc;
      y[2 * m + 1] = buf[lo + 1];
    }
    buf.copyWithin(0, n, n + HIST);
    return y;
  }
}

/** Inputs an interpolator's output needs before the newest: 2 PAIRS - 1. */
const HIST = 2 * PAIRS - 1;

/** A larger buffer holding `keep` samples of `old` at its start. */
function grow(old: Float32Array, keep: number, need: number): Float32Array {
  const b = new Float32Array(Math.max(need, 2 * old.length));
  b.set(old.subarray(0, keep));
  return b;
}

/**
 * 16 kHz -> 8 kHz: v[n] = sum_k h[k] w[n - k], keeping v at even n (phase 0) or odd n (phase 1) of the absolute
 * input index. Output i is v[2i + phase] and stands for 16 kHz time 2i + phase - HALF_BAND_DELAY; it is out once
 * input 2i + phase is in.
 */
export class Decimator2 {
  /** Inputs from absolute index `start` on (the first `held` of them are real), reused from call to call. */
  private buf: Float32Array = new Float32Array(HALF_BAND_TAPS + 640);
  private start = -(HALF_BAND_TAPS - 1);
  private held = HALF_BAND_TAPS - 1;
  /** Index of the next output. */
  private next = 0;

  constructor(private readonly phase: 0 | 1 = 0) {}

  process(w: Float32Array): Float32Array {
    if (this.buf.length < this.held + w.length) this.buf = grow(this.buf, this.held, this.held + w.length);
    const buf = this.buf;
    buf.set(w, this.held);
    this.held += w.length;
    const end = this.start + this.held; // one past the newest input
    const count = Math.max(0, Math.floor((end - 1 - this.phase) / 2) - this.next + 1);
    const y = new Float32Array(count);
    // v[n], n = 2(next + i) + phase: centre on input n - DELAY, pairs at odd distances around it.
    let centre = 2 * this.next + this.phase - HALF_BAND_DELAY - this.start;
    const k = count > 0 ? kernel() : null;
    if (k) k.decimate(buf, this.held, centre, y);
    else for (let i = 0; i < count; i++, centre += 2) {
      let acc = 0.5 * buf[centre];
      for (let j = 0; j < PAIRS; j += 4) {
        acc += C[j] * (buf[centre - 2 * j - 1] + buf[centre + 2 * j + 1]);
        acc += C[j + 1] * (buf[centre - 2 * j - 3] + buf[centre + 2 * j + 3]);
        acc += C[j + 2] * (buf[centre - 2 * j - 5] + buf[centre + 2 * j + 5]);
        acc += C[j + 3] * (buf[centre - 2 * j - 7] + buf[centre + 2 * j + 7]);
      }
      y[i] = acc;
    }
    this.next += count;
    // Keep what the next output needs: from input 2 next + phase - (HALF_BAND_TAPS - 1) on.
    const keepFrom = 2 * this.next + this.phase - (HALF_BAND_TAPS - 1);
    const drop = keepFrom - this.start;
    buf.copyWithin(0, drop, this.held);
    this.held -= drop;
    this.start = keepFrom;
    return y;
  }
}

export const HALF_BAND_WASM = path.join(__dirname, 'wasm', 'halfband.wasm');

interface HalfBandExports {
  interpolate(coef: number, pairs: number, src: number, hist: number, n: number, dst: number): void;
  decimate(coef: number, pairs: number, src: number, centre: number, count: number, dst: number): void;
}

/** Bytes at the start of the kernel's memory: the two tap sets (C2, then C). */
const COEF_BYTES = 2 * 8 * PAIRS;

/**
 * The WebAssembly loops on one memory per thread (the calls are synchronous): the taps copied in once, then each
 * call's samples copied in after them and its outputs copied out.
 */
class HalfBandKernel {
  private readonly memory = new WebAssembly.Memory({ initial: 1 });
  private readonly k: HalfBandExports;

  constructor(module: WebAssembly.Module) {
    this.k = new WebAssembly.Instance(module, { env: { memory: this.memory } }).exports as unknown as HalfBandExports;
    new Float64Array(this.memory.buffer, 0, PAIRS).set(C2);
    new Float64Array(this.memory.buffer, 8 * PAIRS, PAIRS).set(C);
  }

  /** The whole memory as float32, kept from call to call. */
  private f32 = new Float32Array(this.memory.buffer);

  /** Room for `len` samples of `src` (16 bytes over: the decimator reads four at a time) and `out` outputs, the samples copied in; their addresses. */
  private place(src: Float32Array, len: number, out: number): [number, number] {
    const at = COEF_BYTES;
    const dst = at + ((len * 4 + 16 + 15) & ~15);
    const need = dst + out * 4;
    if (need > this.f32.byteLength) {
      this.memory.grow(Math.ceil((need - this.f32.byteLength) / 65536));
      this.f32 = new Float32Array(this.memory.buffer); // the old view is detached by the growth
    }
    this.f32.set(len === src.length ? src : src.subarray(0, len), at >> 2);
    return [at, dst];
  }

  private out(dst: number, y: Float32Array): void {
    y.set(this.f32.subarray(dst >> 2, (dst >> 2) + y.length));
  }

  interpolate(src: Float32Array, n: number, y: Float32Array): void {
    const [at, dst] = this.place(src, HIST + n, 2 * n);
    this.k.interpolate(0, PAIRS, at, HIST, n, dst);
    this.out(dst, y);
  }

  decimate(src: Float32Array, len: number, centre: number, y: Float32Array): void {
    const [at, dst] = this.place(src, len, y.length);
    this.k.decimate(8 * PAIRS, PAIRS, at, centre, y.length, dst);
    this.out(dst, y);
  }
}

let loaded: HalfBandKernel | null | undefined;
/** Tests: force the JS loops (false) or the WebAssembly ones (true, when the file loads). */
let useWasm = true;

function kernel(): HalfBandKernel | null {
  if (!useWasm) return null;
  if (loaded === undefined) {
    const m = wasmModule(HALF_BAND_WASM);
    loaded = m ? new HalfBandKernel(m) : null;
  }
  return loaded;
}

/** Whether the WebAssembly loops run (false: the JS ones); `set` switches them for comparisons. */
export function halfBandWasm(set?: boolean): boolean {
  if (set !== undefined) useWasm = set;
  return useWasm && kernel() !== null;
}
