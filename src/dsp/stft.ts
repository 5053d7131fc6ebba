// DTLN's STFT work (512-point frames every `hop` samples: 128 for DTLN, 256 for nsm-1's stage 1): magnitudes for
// stage 1, the masked inverse for stage 2, overlap-add.
// Two interchangeable back ends with bit-identical results:
//   WasmStft  WebAssembly SIMD (wasm/dtln-dsp.ts, compiled by `npm run build` to dist/.../wasm/dtln-dsp.wasm), two
//             frames per SIMD lane pair; each DtlnCore run borrows one instance and its memory, so the
//             buffers ORT reads (magnitudes, blocks) are views on that memory and nothing is copied out;
//   JsStft    RealFFT (fft.ts) over JS typed arrays: the fallback where the .wasm file is missing or the runtime has no
//             WebAssembly SIMD, and the reference the tests hold the WebAssembly code to.
// Layout per run of B streams x t frames: rows r = b*t + i (257 bins for spectra, magnitudes and masks; 512 samples
// for blocks); per stream a signal buffer of t*hop + 512 - hop samples and an overlap-add accumulator as long.
import path from 'node:path';
import { RealFFT } from './fft';
import { writeFftTables } from './fft-pairs';
import { wasmModule, wasmProblem } from './wasm-load';

export const STFT_BLOCK = 512;
export const STFT_HOP = 128;
export const STFT_BINS = STFT_BLOCK / 2 + 1;

export interface StftBuffers {
  /** Float64 spectra, rows of STFT_BINS (the stage-1 input spectra; the masked inverse leaves them as they are). */
  re: Float64Array;
  im: Float64Array;
  /** Magnitude rows (stage 1's input). */
  mag: Float32Array;
  /** Gain rows for the masked inverse (stage 1's mask is copied here). */
  mask: Float32Array;
  /** 512-sample blocks: the masked inverse writes them (stage 2's input); overlapAdd reads them. */
  blocks: Float32Array;
  /** Per stream: the signal of this run's frames, t*hop + 512 - hop samples. */
  sig: Float32Array[];
  /** Per stream: overlap-add accumulator, t*hop + 512 - hop samples. */
  acc: Float32Array[];
}

export interface StftBackend {
  readonly kind: 'wasm' | 'js';
  /**
   * Buffers for B streams x t frames every `hop` samples (STFT_HOP, DTLN's; nsm-1's stage 1 runs at 256), valid until
   * the next call of prepare. A stream's signal and accumulator buffers hold t*hop + 512 - hop samples.
   */
  prepare(streams: number, frames: number, hop?: number): StftBuffers;
  /** Spectra and magnitudes of stream b's t frames from its signal buffer, into rows b*t .. b*t+t-1. */
  stft(b: number): void;
  /** Masked inverse of every row into blocks. */
  istftMasked(): void;
  /** acc[b][i*hop + s] += blocks[(b*t + i)*512 + s] (times window[s] with a window). */
  overlapAdd(b: number, window: Float32Array | null): void;
}

class JsStft implements StftBackend {
  readonly kind = 'js' as const;
  private readonly fft = new RealFFT(STFT_BLOCK);
  private bufs: StftBuffers | null = null;
  private rowsCap = 0;
  private sigCap = 0;
  private streams = 0;
  private frames = 0;
  private hop = STFT_HOP;

  prepare(streams: number, frames: number, hop = STFT_HOP): StftBuffers {
    const rows = streams * frames;
    const sigLen = frames * hop + STFT_BLOCK - hop;
    if (!this.bufs || rows > this.rowsCap || streams !== this.bufs.sig.length || sigLen > this.sigCap) {
      this.rowsCap = Math.max(rows, this.rowsCap);
      this.sigCap = Math.max(sigLen, this.sigCap);
      this.bufs = {
        re: new Float64Array(this.rowsCap * STFT_BINS),
        im: new Float64Array(this.rowsCap * STFT_BINS),
        mag: new Float32Array(this.rowsCap * STFT_BINS),
        mask: new Float32Array(this.rowsCap * STFT_BINS),
        blocks: new Float32Array(this.rowsCap * STFT_BLOCK),
        sig: Array.from({ length: streams }, () => new Float32Array(this.sigCap)),
        acc: Array.from({ length: streams }, () => new Float32Array(this.sigCap)),
      };
    }
    this.streams = streams;
    this.frames = frames;
    this.hop = hop;
    return this.bufs;
  }

  stft(b: number): void {
    const { re, im, mag, sig } = this.bufs!;
    const t = this.frames;
    const x = sig[b];
    for (let i = 0; i < t; i++) this.fft.forwardMag(x, i * this.hop, re, im, mag, (b * t + i) * STFT_BINS);
  }

  istftMasked(): void {
    const { re, im, mask, blocks } = this.bufs!;
    const rows = this.streams * this.frames;
    for (let r = 0; r < rows; r++) this.fft.inverseMasked(re, im, mask, r * STFT_BINS, blocks, r * STFT_BLOCK);
  }

  overlapAdd(b: number, window: Float32Array | null): void {
    const { blocks, acc } = this.bufs!;
    const t = this.frames;
    const a = acc[b];
    for (let i = 0; i < t; i++) {
      const src = (b * t + i) * STFT_BLOCK;
      const dst = i * this.hop;
      if (window) for (let s = 0; s < STFT_BLOCK; s++) a[dst + s] += blocks[src + s] * window[s];
      else for (let s = 0; s < STFT_BLOCK; s++) a[dst + s] += blocks[src + s];
    }
  }
}

interface DspExports {
  stftMag(sig: number, frames: number, hop: number, re: number, im: number, mag: number): void;
  istftMasked(re: number, im: number, gain: number, frames: number, out: number): void;
  overlapAdd(blocks: number, frames: number, hop: number, acc: number): void;
  overlapAddWindowed(blocks: number, frames: number, hop: number, acc: number, window: number): void;
}

// Table layout of wasm/dtln-dsp.ts (bytes).
const SP = 0;
const TW = 4224;
const REV = 12416;
/** First byte after the tables and the kernel's work arrays. */
const HEAP = 65536;
const PAGE = 65536;

/** Twiddles and bit reversal exactly as RealFFT(512) computes them, laid out for the kernel. */
function writeTables(mem: ArrayBuffer): void {
  writeFftTables(mem, STFT_BLOCK, { sp: SP, tw: TW, rev: REV });
}

export const WASM_FILE = path.join(__dirname, 'wasm', 'dtln-dsp.wasm');

function loadModule(): WebAssembly.Module | null {
  return wasmModule(WASM_FILE);
}

class WasmStft implements StftBackend {
  readonly kind = 'wasm' as const;
  private readonly memory: WebAssembly.Memory;
  private readonly k: DspExports;
  private bufs: StftBuffers | null = null;
  private ptr = { re: 0, im: 0, mag: 0, mask: 0, blocks: 0, sig: [] as number[], acc: [] as number[], win: 0 };
  private streams = 0;
  private frames = 0;
  private hop = STFT_HOP;
  private layoutKey = '';
  private windowSet: Float32Array | null = null;

  constructor(module: WebAssembly.Module) {
    this.memory = new WebAssembly.Memory({ initial: 2 });
    const instance = new WebAssembly.Instance(module, { env: { memory: this.memory } });
    this.k = instance.exports as unknown as DspExports;
    writeTables(this.memory.buffer);
  }

  prepare(streams: number, frames: number, hop = STFT_HOP): StftBuffers {
    this.streams = streams;
    this.frames = frames;
    this.hop = hop;
    // The layout is exact for this shape (streams x frames) and reused while the shape stays the same (a stream's
    // runs are all full-size but its last); the module's memory only grows, as WebAssembly memory cannot shrink.
    const rows = streams * frames;
    const key = `${streams}:${frames}:${hop}`;
    if (this.bufs && key === this.layoutKey) return this.bufs;
    const sigLen = frames * hop + STFT_BLOCK - hop;
    const specBytes = rows * STFT_BINS * 8;
    const rowBytes32 = rows * STFT_BINS * 4;
    const align = (x: number): number => (x + 15) & ~15;
    let p = HEAP;
    const take = (bytes: number): number => {
      const at = p;
      p = align(p + bytes);
      return at;
    };
    const ptr = {
      re: take(specBytes),
      im: take(specBytes),
      mag: take(rowBytes32),
      mask: take(rowBytes32),
      blocks: take(rows * STFT_BLOCK * 4),
      win: take(STFT_BLOCK * 4),
      sig: Array.from({ length: streams }, () => take(sigLen * 4)),
      acc: Array.from({ length: streams }, () => take(sigLen * 4)),
    };
    const need = Math.ceil(p / PAGE);
    const have = this.memory.buffer.byteLength / PAGE;
    if (need > have) this.memory.grow(need - have);
    const buf = this.memory.buffer;
    this.ptr = ptr;
    this.windowSet = null;
    this.layoutKey = key;
    this.bufs = {
      re: new Float64Array(buf, ptr.re, rows * STFT_BINS),
      im: new Float64Array(buf, ptr.im, rows * STFT_BINS),
      mag: new Float32Array(buf, ptr.mag, rows * STFT_BINS),
      mask: new Float32Array(buf, ptr.mask, rows * STFT_BINS),
      blocks: new Float32Array(buf, ptr.blocks, rows * STFT_BLOCK),
      sig: ptr.sig.map((q) => new Float32Array(buf, q, sigLen)),
      acc: ptr.acc.map((q) => new Float32Array(buf, q, sigLen)),
    };
    return this.bufs;
  }

  stft(b: number): void {
    const t = this.frames;
    const r = b * t;
    const p = this.ptr;
    this.k.stftMag(p.sig[b], t, this.hop, p.re + r * STFT_BINS * 8, p.im + r * STFT_BINS * 8, p.mag + r * STFT_BINS * 4);
  }

  istftMasked(): void {
    const p = this.ptr;
    this.k.istftMasked(p.re, p.im, p.mask, this.streams * this.frames, p.blocks);
  }

  overlapAdd(b: number, window: Float32Array | null): void {
    const t = this.frames;
    const p = this.ptr;
    const blocks = p.blocks + b * t * STFT_BLOCK * 4;
    if (!window) {
      this.k.overlapAdd(blocks, t, this.hop, p.acc[b]);
      return;
    }
    if (this.windowSet !== window) {
      new Float32Array(this.memory.buffer, p.win, STFT_BLOCK).set(window);
      this.windowSet = window;
    }
    this.k.overlapAddWindowed(blocks, t, this.hop, p.acc[b], p.win);
  }
}

/** The WebAssembly back end when it can be loaded (always after `npm run build`), else the JS one. */
export function createStft(prefer: 'wasm' | 'js' = 'wasm'): StftBackend {
  if (prefer === 'wasm') {
    const mod = loadModule();
    if (mod) return new WasmStft(mod);
  }
  return new JsStft();
}

/**
 * Back ends lent for one DtlnCore.process() call and given back at its end (their buffers hold nothing between
 * calls), per thread: a worker that serves stream after stream keeps reusing one instance and its memory instead of
 * allocating ~10 MB per stream (page faults, and major GCs driven by external memory). The pool only holds what was
 * in use at the same time (one per concurrent process() call on this thread).
 */
const idle: Record<'wasm' | 'js', StftBackend[]> = { wasm: [], js: [] };

export function borrowStft(prefer: 'wasm' | 'js' = 'wasm'): StftBackend {
  const kind = prefer === 'wasm' && loadModule() ? 'wasm' : 'js';
  return idle[kind].pop() ?? createStft(kind);
}

export function returnStft(backend: StftBackend): void {
  idle[backend.kind].push(backend);
}

/** null when the WebAssembly kernels load; else why not (the JS back end is used then). */
export function wasmStftProblem(): string | null {
  loadModule();
  return wasmProblem(WASM_FILE);
}
