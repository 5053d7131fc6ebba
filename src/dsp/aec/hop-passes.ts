// The per-bin and per-sample passes of one channel hop (channel.ts), between its FFTs: in WebAssembly
// (wasm/aec-hop.ts, bit-identical to the loops here) where the canceller's arena and its row FFT share one memory
// (the thread's canceller heap, heap.ts: one instance of these passes for all its cancellers), else these JavaScript
// loops. Every array handed to the WebAssembly passes lies in that memory.
import path from 'node:path';
import { wasmModule } from '../wasm-load';

export const AEC_HOP_WASM = path.join(__dirname, '..', 'wasm', 'aec-hop.wasm');

export interface HopPasses {
  /**
   * Ŷ into spectrum row 0 of re/im, |Ŷ|² / 2 into yPow; with the shadow's Ŷ (sRe non-null) into row 1. Rows of K bins,
   * the first n written (n < K where the canceller's band is limited: options.ts `bins`).
   */
  echoRows(K: number, n: number, yRe: Float32Array, yIm: Float32Array, sRe: Float32Array | null, sIm: Float32Array | null, re: Float64Array, im: Float64Array, yPow: Float64Array): void;
  /**
   * e = d − ŷ (row 0's second half of t) and the shadow's (row 1's), their energies into res[0..2] (main error, echo
   * estimate, shadow error); then the forward rows of t: row 0 the windowed [ePrev, e], row 1 [0, e] (mode ≥ 1), row 2
   * [0, e_shadow] (mode 2); ePrev ← e.
   */
  errorRows(R: number, t: Float64Array, d: Float32Array, ePrev: Float64Array, win: Float64Array, mode: number, res: Float64Array): void;
  /**
   * Row 0's spectrum into aRe/aIm, its power into ePow; with `far`, row 1 (the main filter's E) into mRe/mIm and the
   * near-end power Ψ_S updated (the part of |E|² that Φ does not explain: rises at once, falls smoothly); with
   * `shadow`, row 2 into sRe/sIm. Row 0 over all K bins, rows 1 and 2 over the first n (the filters' band).
   */
  spectra(K: number, n: number, re: Float64Array, im: Float64Array, aRe: Float64Array, aIm: Float64Array, ePow: Float64Array, far: boolean, phi: Float32Array, psi: Float64Array, mRe: Float32Array, mIm: Float32Array, shadow: boolean, sRe: Float32Array, sIm: Float32Array): void;
  /** re/im row 0 = a · g. */
  applyGains(K: number, aRe: Float64Array, aIm: Float64Array, g: Float64Array, re: Float64Array, im: Float64Array): void;
  /** out[at + i] = ola + row 0 windowed; ola ← the row's windowed second half; micPrev ← d. */
  overlapAdd(R: number, t: Float64Array, win: Float64Array, ola: Float64Array, d: Float32Array, micPrev: Float64Array, out: Float32Array, at: number): void;
  /** out = a · b, per bin. */
  mulInto(K: number, a: Float64Array, b: Float64Array, out: Float64Array): void;
  /** EchoSuppressor.compute's loops after its first call, in WebAssembly; null: the suppressor's own. */
  readonly suppress: SuppressKernel | null;
}

/** The arrays and constants of EchoSuppressor.compute (suppressor.ts), in the order of wasm/aec-hop.ts's suppress. */
export type SuppressKernel = (
  K: number, ePow: Float64Array, yPow: Float64Array, phi: Float32Array, beta: Float64Array, tailIn: Float64Array, tailDecay: Float64Array, nl: Float64Array,
  g: Float64Array, prevClean: Float64Array, noise: Float64Array, smoothPow: Float64Array, tail: Float64Array, resid: Float64Array,
  wPhi: number, wLeak: number, wTail: number, wNl: number, over: number, rise: number, overdrive: number, dd: number, floor: number,
  binOd: number, odHi: number, odLo: number,
) => void;

export const jsHopPasses: HopPasses = {
  echoRows(K, n, yRe, yIm, sRe, sIm, re, im, yPow) {
    for (let k = 0; k < n; k++) {
      re[k] = yRe[k];
      im[k] = yIm[k];
      yPow[k] = 0.5 * (yRe[k] * yRe[k] + yIm[k] * yIm[k]);
    }
    // Above the band the rows are 0 (the filters have nothing there).
    if (n < K) {
      re.fill(0, n, K);
      im.fill(0, n, K);
    }
    if (!sRe || !sIm) return;
    for (let k = 0; k < n; k++) {
      re[K + k] = sRe[k];
      im[K + k] = sIm[k];
    }
    if (n < K) {
      re.fill(0, K + n, 2 * K);
      im.fill(0, K + n, 2 * K);
    }
  },
  errorRows(R, t, d, ePrev, win, mode, res) {
    const M = 2 * R;
    let errMain = 0;
    let echoEnergy = 0;
    let errShadow = 0;
    // Each sample's values are read before its row slots are overwritten; the sums run in sample order.
    for (let i = 0; i < R; i++) {
      const y = t[R + i];
      const v = d[i] - y;
      errMain += v * v;
      echoEnergy += y * y;
      if (mode === 2) {
        const u = d[i] - t[M + R + i];
        errShadow += u * u;
        t[2 * M + i] = 0;
        t[2 * M + R + i] = u;
      }
      t[i] = ePrev[i] * win[i];
      t[R + i] = v * win[R + i];
      ePrev[i] = v;
      if (mode >= 1) {
        t[M + i] = 0;
        t[M + R + i] = v;
      }
    }
    res[0] = errMain;
    res[1] = echoEnergy;
    res[2] = errShadow;
  },
  spectra(K, n, re, im, aRe, aIm, ePow, far, phi, psi, mRe, mIm, shadow, sRe, sIm) {
    for (let k = 0; k < K; k++) {
      const r0 = re[k];
      const i0 = im[k];
      aRe[k] = r0;
      aIm[k] = i0;
      ePow[k] = r0 * r0 + i0 * i0;
    }
    if (!far) return;
    for (let k = 0; k < n; k++) {
      const r1 = re[K + k];
      const i1 = im[K + k];
      mRe[k] = r1;
      mIm[k] = i1;
      const pe = r1 * r1 + i1 * i1;
      const inst = Math.max(pe - phi[k], 1e-3 * pe);
      psi[k] = inst > psi[k] ? inst : 0.9 * psi[k] + 0.1 * inst;
    }
    if (!shadow) return;
    for (let k = 0; k < n; k++) {
      sRe[k] = re[2 * K + k];
      sIm[k] = im[2 * K + k];
    }
  },
  applyGains(K, aRe, aIm, g, re, im) {
    for (let k = 0; k < K; k++) {
      re[k] = aRe[k] * g[k];
      im[k] = aIm[k] * g[k];
    }
  },
  overlapAdd(R, t, win, ola, d, micPrev, out, at) {
    for (let i = 0; i < R; i++) {
      out[at + i] = ola[i] + t[i] * win[i];
      ola[i] = t[R + i] * win[R + i];
      micPrev[i] = d[i];
    }
  },
  mulInto(K, a, b, out) {
    for (let k = 0; k < K; k++) out[k] = a[k] * b[k];
  },
  suppress: null,
};

interface Exports {
  echoRows(K: number, n: number, yRe: number, yIm: number, sRe: number, sIm: number, shadow: number, re: number, im: number, yPow: number): void;
  errorRows(R: number, sig: number, d: number, ePrev: number, win: number, mode: number, res: number): void;
  spectra(K: number, n: number, re: number, im: number, aRe: number, aIm: number, ePow: number, far: number, phi: number, psi: number, mRe: number, mIm: number, shadow: number, sRe: number, sIm: number): void;
  applyGains(K: number, aRe: number, aIm: number, g: number, re: number, im: number): void;
  overlapAdd(R: number, sig: number, win: number, ola: number, d: number, micPrev: number, out: number): void;
  mulInto(K: number, a: number, b: number, out: number): void;
  suppress(
    K: number, ePow: number, yPow: number, phi: number, beta: number, tailIn: number, tailDecay: number, nl: number,
    g: number, prevClean: number, noise: number, smoothPow: number, tail: number, resid: number, par: number,
  ): void;
}

/** The compiled module, or null where the .wasm file is missing or does not compile. */
export function hopModule(): WebAssembly.Module | null {
  return wasmModule(AEC_HOP_WASM);
}

/**
 * The WebAssembly passes on `memory`. Arrays are passed by their byte offsets: the caller guarantees they are views of
 * that memory. The output block goes through `outBlock` (R float32 in the memory) and is copied to the caller's array.
 */
export function wasmHopPasses(mod: WebAssembly.Module, memory: WebAssembly.Memory, outBlock: Float32Array, par: Float64Array): HopPasses {
  const k = new WebAssembly.Instance(mod, { env: { memory, abort: () => {} } }).exports as unknown as Exports;
  return {
    echoRows: (K, n, yRe, yIm, sRe, sIm, re, im, yPow) =>
      k.echoRows(K, n, yRe.byteOffset, yIm.byteOffset, sRe ? sRe.byteOffset : 0, sIm ? sIm.byteOffset : 0, sRe && sIm ? 1 : 0, re.byteOffset, im.byteOffset, yPow.byteOffset),
    errorRows: (R, t, d, ePrev, win, mode, res) => k.errorRows(R, t.byteOffset, d.byteOffset, ePrev.byteOffset, win.byteOffset, mode, res.byteOffset),
    spectra: (K, n, re, im, aRe, aIm, ePow, far, phi, psi, mRe, mIm, shadow, sRe, sIm) =>
      k.spectra(K, n, re.byteOffset, im.byteOffset, aRe.byteOffset, aIm.byteOffset, ePow.byteOffset, far ? 1 : 0, phi.byteOffset, psi.byteOffset, mRe.byteOffset, mIm.byteOffset, shadow ? 1 : 0, sRe.byteOffset, sIm.byteOffset),
    applyGains: (K, aRe, aIm, g, re, im) => k.applyGains(K, aRe.byteOffset, aIm.byteOffset, g.byteOffset, re.byteOffset, im.byteOffset),
    overlapAdd: (R, t, win, ola, d, micPrev, out, at) => {
      k.overlapAdd(R, t.byteOffset, win.byteOffset, ola.byteOffset, d.byteOffset, micPrev.byteOffset, outBlock.byteOffset);
      out.set(outBlock, at);
    },
    mulInto: (K, a, b, out) => k.mulInto(K, a.byteOffset, b.byteOffset, out.byteOffset),
    suppress: (K, ePow, yPow, phi, beta, tailIn, tailDecay, nl, g, prevClean, noise, smoothPow, tail, resid, wPhi, wLeak, wTail, wNl, over, rise, overdrive, dd, floor, binOd, odHi, odLo) => {
      par[0] = wPhi;
      par[1] = wLeak;
      par[2] = wTail;
      par[3] = wNl;
      par[4] = over;
      par[5] = rise;
      par[6] = overdrive;
      par[7] = dd;
      par[8] = floor;
      par[9] = binOd;
      par[10] = odHi;
      par[11] = odLo;
      k.suppress(K, ePow.byteOffset, yPow.byteOffset, phi.byteOffset, beta.byteOffset, tailIn.byteOffset, tailDecay.byteOffset, nl.byteOffset,
        g.byteOffset, prevClean.byteOffset, noise.byteOffset, smoothPow.byteOffset, tail.byteOffset, resid.byteOffset, par.byteOffset);
    },
  };
}
