// Real FFTs over rows of frames, for the full-band stages (resamplers, band-gain probe, high-band filter) and the
// post-filter: a
// WebAssembly SIMD kernel (wasm/fft-pairs.ts, compiled by `npm run build`) that transforms two frames at a time and
// is bit-identical to RealFFT (fft.ts); RealFFT itself, row by row, where the .wasm file is missing or the runtime
// has no WebAssembly SIMD. Callers write their frames into `sig` rows, transform, and read the spectra from `re`/`im`
// rows (or the reverse), all in one synchronous stretch: one instance per size serves a whole thread (sharedRowFft),
// its memory growing to the largest batch a caller asks for (callers batch a bounded number of frames).
import path from 'node:path';
import { RealFFT } from './fft';
import { wasmModule, wasmProblem } from './wasm-load';

export interface RowFft {
  readonly kind: 'wasm' | 'js';
  readonly n: number;
  /** n / 2 + 1. */
  readonly bins: number;
  /**
   * Signal rows (n samples each): forward()'s input, inverse()'s output. Views: read them again after reserve(),
   * windowRows() and overlapAddRows(), which may grow the memory behind them.
   */
  sig: Float64Array;
  /** Spectrum rows (bins each). */
  re: Float64Array;
  im: Float64Array;
  /** Makes room for `rows` rows (the views above are replaced when it grows). */
  reserve(rows: number): void;
  /** RealFFT.forward of sig rows first..first+rows-1 into the same re/im rows. */
  forward(rows: number, first?: number): void;
  /** RealFFT.inverse of re/im rows first..first+rows-1 into the same sig rows. */
  inverse(rows: number, first?: number): void;
  /**
   * Windowed frames into sig rows first..first+rows-1: row first + r, sample i = src[srcOff + r * hop + i] * window[i],
   * rounded to float32 first with round32 (for callers whose frames were float32 arrays).
   */
  windowRows(src: Float32Array, srcOff: number, hop: number, rows: number, window: Float64Array, round32: boolean, first?: number): void;
  /**
   * Overlap-add of sig rows 0..rows-1, in order: acc[accOff + r * hop + i] += row r, sample i * window[i] (each row
   * value rounded to float32 first with round32), exactly as that JS statement computes it.
   */
  overlapAddRows(rows: number, hop: number, window: Float64Array, acc: Float32Array, accOff: number, round32: boolean): void;
  /** The rows' WebAssembly memory, for kernels that work on the spectra in place (bin-gains.ts); null for RealFFT. */
  readonly wasm: WasmRows | null;
}

/** Where a WasmRowFft keeps its rows. */
export interface WasmRows {
  readonly memory: WebAssembly.Memory;
  /** Byte addresses of spectrum row r's re and im values. */
  reAt(row: number): number;
  imAt(row: number): number;
  /**
   * `bytes` of scratch after the rows (16-byte aligned); its address. Valid until the next reserve(), windowRows() or
   * overlapAddRows(), which use the same place; may grow the memory (read views again after it).
   */
  scratch(bytes: number): number;
}

interface Kernel {
  init(m: number, odd: number, sp: number, tw: number, rev: number, zr: number, zi: number): void;
  forward(sig: number, rows: number, re: number, im: number): void;
  inverse(re: number, im: number, rows: number, sig: number): void;
  windowRows(src: number, hop: number, rows: number, win: number, round32: number, sig: number): void;
  overlapAddRows(sig: number, rows: number, hop: number, win: number, round32: number, acc: number): void;
}

export const FFT_PAIRS_WASM = path.join(__dirname, 'wasm', 'fft-pairs.wasm');
const PAGE = 65536;
const align16 = (x: number): number => (x + 15) & ~15;

/** The radix-4 twiddles of RealFFT(n), in its order (per pass, per j: W^j, W^2j, W^3j as cos, sin). */
function radix4Twiddles(n: number): number[] {
  const m = n / 2;
  const odd = Math.round(Math.log2(m)) % 2 === 1;
  const tw: number[] = [];
  for (let h = odd ? 2 : 1; 4 * h <= m; h *= 4) {
    for (let j = 0; j < h; j++) {
      for (let p = 1; p <= 3; p++) {
        const a = (-2 * Math.PI * p * j) / (4 * h);
        tw.push(Math.cos(a), Math.sin(a));
      }
    }
  }
  return tw;
}

/** Byte sizes of the three tables writeFftTables writes for size n. */
export function fftTableBytes(n: number): { sp: number; tw: number; rev: number } {
  return { sp: (n / 4 + 1) * 32, tw: radix4Twiddles(n).length * 16, rev: (n / 2) * 4 };
}

/**
 * Writes RealFFT(n)'s tables the way the WebAssembly kernels (wasm/fft-pairs.ts, wasm/dtln-dsp.ts) read them, at byte
 * offsets of `mem`: split twiddles e^{-2πik/n} for k = 0..n/4 as (re, re), (im, im); the radix-4 twiddles with every
 * double written twice (one per lane); the bit reversal of 0..n/2-1 as int32. The values are computed exactly as
 * RealFFT's constructor computes them.
 */
export function writeFftTables(mem: ArrayBuffer, n: number, at: { sp: number; tw: number; rev: number }): void {
  const m = n / 2;
  const bits = Math.round(Math.log2(m));
  const f64 = new Float64Array(mem);
  for (let k = 0; k <= m / 2; k++) {
    const wr = Math.cos((-2 * Math.PI * k) / n);
    const wi = Math.sin((-2 * Math.PI * k) / n);
    const o = (at.sp >> 3) + 4 * k;
    f64[o] = wr;
    f64[o + 1] = wr;
    f64[o + 2] = wi;
    f64[o + 3] = wi;
  }
  radix4Twiddles(n).forEach((v, i) => {
    f64[(at.tw >> 3) + 2 * i] = v;
    f64[(at.tw >> 3) + 2 * i + 1] = v;
  });
  const rev = new Int32Array(mem, at.rev, m);
  for (let i = 0; i < m; i++) {
    let r = 0;
    for (let b = 0; b < bits; b++) if (i & (1 << b)) r |= 1 << (bits - 1 - b);
    rev[i] = r;
  }
}

class JsRowFft implements RowFft {
  readonly kind = 'js' as const;
  readonly wasm = null;
  readonly bins: number;
  sig = new Float64Array(0);
  re = new Float64Array(0);
  im = new Float64Array(0);
  private readonly fft: RealFFT;
  private rows = 0;

  constructor(readonly n: number) {
    this.fft = new RealFFT(n);
    this.bins = this.fft.bins;
  }

  reserve(rows: number): void {
    if (rows <= this.rows) return;
    this.rows = rows;
    this.sig = new Float64Array(rows * this.n);
    this.re = new Float64Array(rows * this.bins);
    this.im = new Float64Array(rows * this.bins);
  }

  forward(rows: number, first = 0): void {
    for (let r = first; r < first + rows; r++) this.fft.forward(this.sig, r * this.n, this.re, this.im, r * this.bins);
  }

  inverse(rows: number, first = 0): void {
    for (let r = first; r < first + rows; r++) this.fft.inverse(this.re, this.im, r * this.bins, this.sig, r * this.n);
  }

  windowRows(src: Float32Array, srcOff: number, hop: number, rows: number, window: Float64Array, round32: boolean, first = 0): void {
    const { n, sig } = this;
    for (let r = 0; r < rows; r++) {
      const off = srcOff + r * hop;
      const row = (first + r) * n;
      if (round32) for (let i = 0; i < n; i++) sig[row + i] = Math.fround(src[off + i] * window[i]);
      else for (let i = 0; i < n; i++) sig[row + i] = src[off + i] * window[i];
    }
  }

  overlapAddRows(rows: number, hop: number, window: Float64Array, acc: Float32Array, accOff: number, round32: boolean): void {
    const { n, sig } = this;
    for (let r = 0; r < rows; r++) {
      const off = accOff + r * hop;
      if (round32) for (let i = 0; i < n; i++) acc[off + i] += Math.fround(sig[r * n + i]) * window[i];
      else for (let i = 0; i < n; i++) acc[off + i] += sig[r * n + i] * window[i];
    }
  }
}

class WasmRowFft implements RowFft {
  readonly kind = 'wasm' as const;
  readonly bins: number;
  sig = new Float64Array(0);
  re = new Float64Array(0);
  im = new Float64Array(0);
  private readonly memory: WebAssembly.Memory;
  private readonly k: Kernel;
  /** First byte after the tables and the work arrays. */
  private readonly heap: number;
  private rows = 0;
  private ptr = { sig: 0, re: 0, im: 0, end: 0 };
  readonly wasm: WasmRows;

  constructor(
    module: WebAssembly.Module,
    readonly n: number,
    memory?: WebAssembly.Memory,
  ) {
    this.bins = n / 2 + 1;
    this.memory = memory ?? new WebAssembly.Memory({ initial: 1 });
    this.wasm = {
      memory: this.memory,
      reAt: (row) => this.ptr.re + row * this.bins * 8,
      imAt: (row) => this.ptr.im + row * this.bins * 8,
      scratch: (bytes) => {
        const at = this.ptr.end;
        const before = this.memory.buffer;
        this.grow(at + bytes);
        if (this.memory.buffer !== before) this.views();
        return at;
      },
    };
    this.k = new WebAssembly.Instance(module, { env: { memory: this.memory } }).exports as unknown as Kernel;
    const m = n / 2;
    const sizes = fftTableBytes(n);
    const sp = 0;
    const twAt = align16(sp + sizes.sp);
    const revAt = align16(twAt + sizes.tw);
    const zr = align16(revAt + sizes.rev);
    const zi = zr + m * 16;
    this.heap = align16(zi + m * 16);
    this.grow(this.heap);
    writeFftTables(this.memory.buffer, n, { sp, tw: twAt, rev: revAt });
    const odd = Math.round(Math.log2(m)) % 2 === 1;
    this.k.init(m, odd ? 1 : 0, sp, twAt, revAt, zr, zi);
  }

  private grow(bytes: number): void {
    const need = Math.ceil(bytes / PAGE);
    const have = this.memory.buffer.byteLength / PAGE;
    if (need > have) this.memory.grow(need - have);
  }

  reserve(rows: number): void {
    if (rows <= this.rows) return;
    this.rows = rows;
    const sig = this.heap;
    const re = align16(sig + rows * this.n * 8);
    const im = align16(re + rows * this.bins * 8);
    const end = align16(im + rows * this.bins * 8);
    this.ptr = { sig, re, im, end };
    this.grow(end);
    this.views();
  }

  /** (Re)creates the row views: after reserve(), and after the memory grew (which detaches the old buffer). */
  private views(): void {
    const buf = this.memory.buffer;
    const { sig, re, im } = this.ptr;
    this.sig = new Float64Array(buf, sig, this.rows * this.n);
    this.re = new Float64Array(buf, re, this.rows * this.bins);
    this.im = new Float64Array(buf, im, this.rows * this.bins);
  }

  /** Scratch after the rows: the window (n float64) then `samples` float32; returns both addresses. */
  private scratch(samples: number, window: Float64Array): { win: number; data: number } {
    const win = this.ptr.end;
    const data = align16(win + this.n * 8);
    const before = this.memory.buffer;
    this.grow(data + samples * 4);
    if (this.memory.buffer !== before) this.views();
    new Float64Array(this.memory.buffer, win, this.n).set(window.subarray(0, this.n));
    return { win, data };
  }

  windowRows(src: Float32Array, srcOff: number, hop: number, rows: number, window: Float64Array, round32: boolean, first = 0): void {
    this.check(rows, first);
    if (rows <= 0) return;
    const span = (rows - 1) * hop + this.n;
    const { win, data } = this.scratch(span, window);
    new Float32Array(this.memory.buffer, data, span).set(src.subarray(srcOff, srcOff + span));
    this.k.windowRows(data, hop, rows, win, round32 ? 1 : 0, this.ptr.sig + first * this.n * 8);
  }

  overlapAddRows(rows: number, hop: number, window: Float64Array, acc: Float32Array, accOff: number, round32: boolean): void {
    this.check(rows, 0);
    if (rows <= 0) return;
    const span = (rows - 1) * hop + this.n;
    const { win, data } = this.scratch(span, window);
    const inWasm = new Float32Array(this.memory.buffer, data, span);
    inWasm.set(acc.subarray(accOff, accOff + span));
    this.k.overlapAddRows(this.ptr.sig, rows, hop, win, round32 ? 1 : 0, data);
    acc.set(inWasm, accOff);
  }

  forward(rows: number, first = 0): void {
    this.check(rows, first);
    if (rows > 0) this.k.forward(this.ptr.sig + first * this.n * 8, rows, this.ptr.re + first * this.bins * 8, this.ptr.im + first * this.bins * 8);
  }

  inverse(rows: number, first = 0): void {
    this.check(rows, first);
    if (rows > 0) this.k.inverse(this.ptr.re + first * this.bins * 8, this.ptr.im + first * this.bins * 8, rows, this.ptr.sig + first * this.n * 8);
  }

  private check(rows: number, first: number): void {
    if (first < 0 || first + rows > this.rows) throw new Error(`rows ${first}..${first + rows - 1} past the ${this.rows} reserved`);
  }
}

/** Frames per batch of filterFrames: about 1 MB of rows at 1024 points. */
const FILTER_BATCH = 64;

/**
 * Short-time filtering (window, FFT, gain, inverse FFT, windowed overlap-add) of frames 0..frames-1 of `src` (frame f
 * at f * hop) into `acc` (frame f added at f * hop), in batches through `fft`: gains(rows, f0) gets frames f0..f0 +
 * rows - 1 as the spectra in fft's rows 0..rows-1 (fft.re / fft.im, or fft.wasm's addresses) and scales them in place,
 * in frame order. With round32 the windowed frames and the inverse blocks are rounded to float32 (as where they were
 * float32 arrays). The arithmetic is that of frame by frame.
 */
export function filterFrames(
  fft: RowFft,
  src: Float32Array,
  hop: number,
  frames: number,
  window: Float64Array,
  round32: boolean,
  acc: Float32Array,
  gains: (rows: number, firstFrame: number) => void,
): void {
  for (let f0 = 0; f0 < frames; f0 += FILTER_BATCH) {
    const count = Math.min(FILTER_BATCH, frames - f0);
    fft.reserve(count);
    fft.windowRows(src, f0 * hop, hop, count, window, round32);
    fft.forward(count);
    gains(count, f0);
    fft.inverse(count);
    fft.overlapAddRows(count, hop, window, acc, f0 * hop, round32);
  }
}

/**
 * The square root of the periodic Hann window of n points, divided by `divisor`, each value rounded to float32 (the
 * stages' windows were float32 arrays) and held as float64 for fft-pairs.
 */
export function sqrtHannWindow(n: number, divisor: number): Float64Array {
  return Float64Array.from({ length: n }, (_, i) => Math.fround(Math.sqrt(0.5 * (1 - Math.cos((2 * Math.PI * i) / n))) / divisor));
}

function loadModule(): WebAssembly.Module | null {
  return wasmModule(FFT_PAIRS_WASM);
}

/**
 * A new instance for size n (a power of two, 16 to 4096): WebAssembly when it loads, else RealFFT. With `memory` (a
 * new, empty one) the WebAssembly instance puts its tables and rows at the start of that memory, for a caller that
 * places more after them (the echo canceller's heap, aec/heap.ts).
 */
export function createRowFft(n: number, prefer: 'wasm' | 'js' = 'wasm', memory?: WebAssembly.Memory): RowFft {
  if (n < 16 || n > 4096 || (n & (n - 1)) !== 0) throw new Error(`row FFT size must be a power of two from 16 to 4096, got ${n}`);
  const mod = prefer === 'wasm' ? loadModule() : null;
  return mod ? new WasmRowFft(mod, n, memory) : new JsRowFft(n);
}

const shared = new Map<number, RowFft>();

/**
 * This thread's instance for size n. Safe to share because every user fills, transforms and reads its rows within one
 * synchronous call (no await, no other stage's FFT in between), so nothing is left in the rows between calls.
 */
export function sharedRowFft(n: number): RowFft {
  let fft = shared.get(n);
  if (!fft) shared.set(n, (fft = createRowFft(n)));
  return fft;
}

/** null when the WebAssembly kernel loads; else why not (RealFFT is used then). */
export function rowFftWasmProblem(): string | null {
  loadModule();
  return wasmProblem(FFT_PAIRS_WASM);
}
