// Per-bin gains on spectra in WebAssembly SIMD (wasm/bin-gains.ts, compiled by `npm run build`), two bins at a time
// and bit-identical to the JS loops they stand for, which run instead where the rows are RealFFT's (no WebAssembly)
// or the .wasm file is missing: the post-filter's and the high-band filter's Wiener gains, and the resamplers' phase
// filters (complex gains). The kernel works on the spectra where a WasmRowFft
// keeps them (one instance per row-FFT memory); a filter's state is copied into that memory's scratch for a batch of
// frames and back after it (BatchState), since the memory is shared by every stage of the thread using that size.
import path from 'node:path';
import type { RowFft, WasmRows } from './fft-pairs';
import { wasmModule } from './wasm-load';

export interface BinGainKernel {
  postFilterFrame(
    re: number, im: number, bins: number, state: number, stride: number,
    first: number, windowed: number, lift: number, ps: number, rise: number, beta: number, dd: number, floorGain: number,
  ): void;
  highBandFrame(
    re: number, im: number, bins: number, state: number, stride: number, first: number, kStart: number, hold: number,
    an: number, ps: number, beta: number, dd: number, kPerBin: number, smoothBins: number, floorGain: number,
    combine: number, bb: number,
  ): void;
  phaseSum(re: number, im: number, bins: number, blocks: number, spec: number, stride: number): void;
  phaseProducts(re: number, im: number, bins: number, blocks: number, spec: number, stride: number): void;
}

export const BIN_GAINS_WASM = path.join(__dirname, 'wasm', 'bin-gains.wasm');

const kernels = new WeakMap<WebAssembly.Memory, BinGainKernel>();

/** The kernel on fft's memory; null where fft is RealFFT's or bin-gains.wasm does not load. */
export function binGainKernel(fft: RowFft): BinGainKernel | null {
  if (!fft.wasm) return null;
  const module = wasmModule(BIN_GAINS_WASM);
  if (!module) return null;
  const memory = fft.wasm.memory;
  let k = kernels.get(memory);
  if (!k) {
    k = new WebAssembly.Instance(module, { env: { memory } }).exports as unknown as BinGainKernel;
    kernels.set(memory, k);
  }
  return k;
}

/** A filter's float64 state arrays (all the same length), held in the rows' memory for one batch of frames. */
export class BatchState {
  /** Bytes from one array to the next in the memory. */
  readonly stride: number;
  private views: Float64Array[] = [];

  constructor(private readonly arrays: Float64Array[]) {
    this.stride = (arrays[0].length * 8 + 15) & ~15;
  }

  /** Copies the arrays into rows' scratch; returns the first one's address (the others follow, stride bytes apart). */
  enter(rows: WasmRows): number {
    const at = rows.scratch(this.stride * this.arrays.length);
    const buf = rows.memory.buffer;
    this.views = this.arrays.map((a, i) => {
      const v = new Float64Array(buf, at + i * this.stride, a.length);
      v.set(a);
      return v;
    });
    return at;
  }

  /** Array i as it is in the memory, during a batch (for JS between kernel calls). */
  view(i: number): Float64Array {
    return this.views[i];
  }

  /** Copies the arrays back. */
  leave(): void {
    this.arrays.forEach((a, i) => a.set(this.views[i]));
    this.views = [];
  }
}

/**
 * The resamplers' three phase filters as per-bin complex gains on the spectra in a row FFT (Decimator3 and
 * Interpolator3 in dsp.ts): in the kernel where there is one, else in the JS loops below (the same bits). After a call,
 * read the row FFT's views again (the kernel's scratch may have grown its memory).
 */
export class PhaseGains {
  private readonly kernel: BinGainKernel | null;
  private readonly spec: BatchState;

  constructor(
    private readonly fft: RowFft,
    private readonly specRe: Float64Array[],
    private readonly specIm: Float64Array[],
  ) {
    this.kernel = binGainKernel(fft);
    this.spec = new BatchState([...specRe, ...specIm]);
  }

  /** Runs `call` on the rows (from row 0) and the phase spectra in the kernel's memory; false where there is no kernel. */
  private inKernel(call: (kernel: BinGainKernel, re: number, im: number, spec: number, stride: number) => void): boolean {
    const wasm = this.fft.wasm;
    if (!this.kernel || !wasm) return false;
    const spec = this.spec.enter(wasm);
    call(this.kernel, wasm.reAt(0), wasm.imAt(0), spec, this.spec.stride);
    return true;
  }

  /** Decimator3: row 3 blocks + b = the sum over phases p of row 3b + p times phase p's spectrum. */
  sum(blocks: number): void {
    if (this.inKernel((k, re, im, spec, stride) => k.phaseSum(re, im, this.fft.bins, blocks, spec, stride))) return;
    const { fft, specRe, specIm } = this;
    const K = fft.bins;
    const { re, im } = fft;
    for (let b = 0; b < blocks; b++) {
      const acc = (3 * blocks + b) * K;
      for (let k = 0; k < K; k++) {
        let ar = 0;
        let ai = 0;
        for (let p = 0; p < 3; p++) {
          const q = (3 * b + p) * K + k;
          ar += re[q] * specRe[p][k] - im[q] * specIm[p][k];
          ai += re[q] * specIm[p][k] + im[q] * specRe[p][k];
        }
        re[acc + k] = ar;
        im[acc + k] = ai;
      }
    }
  }

  /** Interpolator3: row blocks + 3b + p = row b times phase p's spectrum. */
  products(blocks: number): void {
    if (this.inKernel((k, re, im, spec, stride) => k.phaseProducts(re, im, this.fft.bins, blocks, spec, stride))) return;
    const { fft, specRe, specIm } = this;
    const K = fft.bins;
    const { re, im } = fft;
    for (let b = 0; b < blocks; b++) {
      for (let p = 0; p < 3; p++) {
        const gr = specRe[p];
        const gi = specIm[p];
        const src = b * K;
        const dst = (blocks + 3 * b + p) * K;
        for (let k = 0; k < K; k++) {
          re[dst + k] = re[src + k] * gr[k] - im[src + k] * gi[k];
          im[dst + k] = re[src + k] * gi[k] + im[src + k] * gr[k];
        }
      }
    }
  }
}
