// The echo canceller's memory and its loops over partitions and bins. One arena per canceller holds every array the
// loops touch (float32, rows padded to a multiple of 4 bins); with the WebAssembly SIMD module (wasm/aec.ts, built by
// `npm run build` to dist/src/dsp/wasm/aec.wasm) the arena is that instance's memory and the loops run there, four
// bins at a time (one instance per thread where the canceller's heap holds the arena, aec/heap.ts, so that every
// canceller calls the same functions); without it (the file missing, or a runtime without WebAssembly SIMD) the same loops run here in
// JavaScript on the same arrays. The two back ends agree to float32 rounding, not bit for bit; one canceller always
// uses one, so its output does not depend on how the input was chunked.
import path from 'node:path';
import { wasmModule } from '../wasm-load';

export const AEC_WASM = path.join(__dirname, '..', 'wasm', 'aec.wasm');
const PAGE = 65536;

/** aec.wasm's functions (byte addresses). */
export interface AecKernels {
  filter(P: number, offs: number, rRe: number, rIm: number, rPow: number, wRe: number, wIm: number, pv: number, yRe: number, yIm: number, phi: number, kp: number): void;
  update(P: number, offs: number, rRe: number, rIm: number, rPow: number, wRe: number, wIm: number, pv: number, inv: number, eRe: number, eIm: number, a2: number, q: number, kp: number): void;
  sfilter(P: number, offs: number, rRe: number, rIm: number, rPow: number, wRe: number, wIm: number, yRe: number, yIm: number, norm: number, kp: number): void;
  supdate(P: number, offs: number, rRe: number, rIm: number, wRe: number, wIm: number, g: number, eRe: number, eIm: number, kp: number): void;
  corr(hist: number, norms: number, head: number, lags: number, mic: number, cxy: number, cxx: number, a: number): void;
  backprop(P: number, offs: number, eRe: number, eIm: number, wRe: number, wIm: number, zRe: number, zIm: number, kp: number): void;
  gram(J: number, re: number, im: number, wt: number, zRe: number, zIm: number, gz: number, out: number, kp: number): void;
  pcross(L: number, head: number, cap: number, rRe: number, rIm: number, rPow: number, dRe: number, dIm: number, re: number, im: number, ch: number, kp: number): void;
  tcue(L: number, head: number, cap: number, rRe: number, rIm: number, rPow: number, stride: number, from: number, dRe: number, dIm: number, cRe: number, cIm: number, xx: number, per: number, B: number, a: number): void;
  touch(list: number, n: number): number;
}

/** The compiled aec.wasm, or null where it is missing or WebAssembly SIMD is not there. */
export function aecModule(): WebAssembly.Module | null {
  return wasmModule(AEC_WASM);
}

/** A float32 array in the arena: its view and its element offset (what the kernels take). */
export interface Slab {
  a: Float32Array;
  at: number;
}

/**
 * Moves the first rows × stride elements of `a` by `shift` rows (positive: toward later rows), zeros coming in: a
 * filter's partitions after a bulk-delay move (shadow-filter.ts), the delay estimator's lags after a jump.
 */
export function shiftRows(a: Float32Array, shift: number, rows: number, stride: number): void {
  const s = Math.max(-rows, Math.min(rows, shift));
  if (s > 0) {
    a.copyWithin(s * stride, 0, (rows - s) * stride);
    a.fill(0, 0, s * stride);
  } else if (s < 0) {
    a.copyWithin(0, -s * stride, rows * stride);
    a.fill(0, (rows + s) * stride, rows * stride);
  }
}

export class AecArena {
  readonly kind: 'wasm' | 'js';
  readonly f32: Float32Array;
  readonly i32: Int32Array;
  private next = 0;
  /** The first float this arena hands out. */
  readonly start: number = 0;
  private readonly k: AecKernels;
  /** One past the last float this arena may hand out. */
  private readonly end: number;

  /** The memory of the WebAssembly back end (null for the JavaScript one). */
  readonly memory: WebAssembly.Memory | null = null;

  /**
   * `floats`: the total of every alloc() to come (each rounded up to 4; f64(n) takes 2n). With `host`, the arena lies
   * in that memory from byte `base` on (it must hold `floats` more, and never grow: the views would detach), so that
   * kernels on it (the row FFT's, the hop passes) share it; else it has a memory of its own. With `host.kernels` (an
   * instance of aec.wasm on that memory) it calls those instead of making an instance of its own.
   */
  constructor(floats: number, backend: 'wasm' | 'js' = 'wasm', host?: { memory: WebAssembly.Memory; base: number; kernels?: AecKernels }) {
    const bytes = floats * 4 + 64;
    const mod = backend === 'wasm' ? aecModule() : null;
    if (mod) {
      const memory = host ? host.memory : new WebAssembly.Memory({ initial: Math.ceil(bytes / PAGE) });
      if (host) {
        if (host.base % 16 !== 0 || host.base + bytes > memory.buffer.byteLength) throw new Error('echo canceller arena does not fit its host memory');
        this.next = host.base >> 2;
        this.start = this.next;
      }
      this.memory = memory;
      this.k = host?.kernels ?? aecKernels(mod, memory);
      this.f32 = new Float32Array(memory.buffer);
      this.i32 = new Int32Array(memory.buffer);
      this.kind = 'wasm';
    } else {
      const buf = new ArrayBuffer(Math.ceil(bytes / 16) * 16);
      this.f32 = new Float32Array(buf);
      this.i32 = new Int32Array(buf);
      this.k = jsKernels(this.f32, this.i32);
      this.kind = 'js';
    }
    this.end = host && this.memory ? (host.base + bytes) >> 2 : this.f32.length;
  }

  /** The element offset the next alloc() starts at (to mark regions of the arena). */
  get used(): number {
    return this.next;
  }

  /**
   * Brings `n` ranges of memory into cache (pairs of byte address and byte length from i32 element `list` on, each
   * 16-byte aligned and a multiple of 16 bytes): see aec.ts's touch. Changes nothing; a no-op in JavaScript.
   */
  touch(list: number, n: number): void {
    if (this.kind === 'wasm') this.k.touch(list * 4, n);
  }

  /** n floats (16-byte aligned), zeroed. */
  alloc(n: number): Slab {
    const at = this.next;
    this.next += (n + 3) & ~3;
    if (this.next > this.end) throw new Error('echo canceller arena too small');
    return { a: this.f32.subarray(at, at + n), at };
  }

  /** n float64 values (16-byte aligned), zeroed: a view of the arena. */
  f64(n: number): Float64Array {
    const at = this.alloc(2 * n).at;
    return new Float64Array(this.f32.buffer, at * 4, n);
  }

  /** Element offsets → byte addresses for the kernels. */
  filter(P: number, offs: number, rRe: number, rIm: number, rPow: number, wRe: number, wIm: number, pv: number, yRe: number, yIm: number, phi: number, kp: number): void {
    this.k.filter(P, offs * 4, rRe * 4, rIm * 4, rPow * 4, wRe * 4, wIm * 4, pv * 4, yRe * 4, yIm * 4, phi * 4, kp);
  }

  update(P: number, offs: number, rRe: number, rIm: number, rPow: number, wRe: number, wIm: number, pv: number, inv: number, eRe: number, eIm: number, a2: number, q: number, kp: number): void {
    this.k.update(P, offs * 4, rRe * 4, rIm * 4, rPow * 4, wRe * 4, wIm * 4, pv * 4, inv * 4, eRe * 4, eIm * 4, a2, q, kp);
  }

  sfilter(P: number, offs: number, rRe: number, rIm: number, rPow: number, wRe: number, wIm: number, yRe: number, yIm: number, norm: number, kp: number): void {
    this.k.sfilter(P, offs * 4, rRe * 4, rIm * 4, rPow * 4, wRe * 4, wIm * 4, yRe * 4, yIm * 4, norm * 4, kp);
  }

  supdate(P: number, offs: number, rRe: number, rIm: number, wRe: number, wIm: number, g: number, eRe: number, eIm: number, kp: number): void {
    this.k.supdate(P, offs * 4, rRe * 4, rIm * 4, wRe * 4, wIm * 4, g * 4, eRe * 4, eIm * 4, kp);
  }

  backprop(P: number, offs: number, eRe: number, eIm: number, wRe: number, wIm: number, zRe: number, zIm: number, kp: number): void {
    this.k.backprop(P, offs * 4, eRe * 4, eIm * 4, wRe * 4, wIm * 4, zRe * 4, zIm * 4, kp);
  }

  gram(J: number, re: number, im: number, wt: number, zRe: number, zIm: number, gz: number, out: number, kp: number): void {
    this.k.gram(J, re * 4, im * 4, wt * 4, zRe * 4, zIm * 4, gz * 4, out * 4, kp);
  }

  corr(hist: number, norms: number, head: number, lags: number, mic: number, cxy: number, cxx: number, a: number): void {
    this.k.corr(hist * 4, norms * 4, head, lags, mic * 4, cxy * 4, cxx * 4, a);
  }

  /**
   * The prior scale's cross-spectra (float64, bit-identical in both back ends): ring entries `head`, `head − 1`, … of
   * rows of `kp` floats at the element offsets rRe/rIm/rPow, against D (dRe, dIm), into rows of kp of re, im, ch, one
   * row per lag. The float64 arrays are given by byte address (`byteOffset` of a view from f64(), plus 8 per element).
   */
  pcross(L: number, head: number, cap: number, rRe: number, rIm: number, rPow: number, dRe: number, dIm: number, re: number, im: number, ch: number, kp: number): void {
    this.k.pcross(L, head, cap, rRe * 4, rIm * 4, rPow * 4, dRe, dIm, re, im, ch, kp);
  }

  /**
   * The talker cue's smoothed cross-spectra and per-lag sums (float32, bit-identical in both back ends; aec.ts's tcue
   * says what): every other bin from `from`, ring rows of `stride`; all arrays by element offset.
   */
  tcue(L: number, head: number, cap: number, rRe: number, rIm: number, rPow: number, stride: number, from: number, dRe: number, dIm: number, cRe: number, cIm: number, xx: number, per: number, B: number, a: number): void {
    this.k.tcue(L, head, cap, rRe * 4, rIm * 4, rPow * 4, stride, from, dRe * 4, dIm * 4, cRe * 4, cIm * 4, xx * 4, per * 4, B, a);
  }
}

/** A new instance of aec.wasm on `memory`. */
export function aecKernels(mod: WebAssembly.Module, memory: WebAssembly.Memory): AecKernels {
  return new WebAssembly.Instance(mod, { env: { memory, abort: () => {} } }).exports as unknown as AecKernels;
}

/** The same loops in JavaScript over the arena's arrays (byte addresses, as the WebAssembly functions take them). */
function jsKernels(f: Float32Array, i32: Int32Array): AecKernels {
  const d = new Float64Array(f.buffer, f.byteOffset, f.length >> 1);
  return {
    filter(P, offs, rRe, rIm, rPow, wRe, wIm, pv, yRe, yIm, phi, kp) {
      const [o, xr, xi, xp, wr, wi, v, yr, yi, ph] = [offs, rRe, rIm, rPow, wRe, wIm, pv, yRe, yIm, phi].map((b) => b >> 2);
      for (let k = 0; k < kp; k++) {
        f[yr + k] = 0;
        f[yi + k] = 0;
        f[ph + k] = 0;
      }
      for (let p = 0; p < P; p++) {
        const base = i32[o + p];
        const w = p * kp;
        for (let k = 0; k < kp; k++) {
          const ar = f[xr + base + k];
          const ai = f[xi + base + k];
          const br = f[wr + w + k];
          const bi = f[wi + w + k];
          f[yr + k] += ar * br - ai * bi;
          f[yi + k] += ar * bi + ai * br;
          f[ph + k] += f[xp + base + k] * f[v + w + k];
        }
      }
    },
    update(P, offs, rRe, rIm, rPow, wRe, wIm, pv, inv, eRe, eIm, a2, q, kp) {
      const [o, xr, xi, xp, wr, wi, v, iv, er, ei] = [offs, rRe, rIm, rPow, wRe, wIm, pv, inv, eRe, eIm].map((b) => b >> 2);
      for (let p = 0; p < P; p++) {
        const base = i32[o + p];
        const w = p * kp;
        for (let k = 0; k < kp; k++) {
          const pk = f[v + w + k];
          const g = pk * f[iv + k];
          const ar = f[xr + base + k];
          const ai = f[xi + base + k];
          const nr = f[wr + w + k] + g * (ar * f[er + k] + ai * f[ei + k]);
          const ni = f[wi + w + k] + g * (ar * f[ei + k] - ai * f[er + k]);
          f[wr + w + k] = nr;
          f[wi + w + k] = ni;
          f[v + w + k] = a2 * (1 - 0.5 * g * f[xp + base + k]) * pk + q * (nr * nr + ni * ni);
        }
      }
    },
    sfilter(P, offs, rRe, rIm, rPow, wRe, wIm, yRe, yIm, norm, kp) {
      const [o, xr, xi, xp, wr, wi, yr, yi, nm] = [offs, rRe, rIm, rPow, wRe, wIm, yRe, yIm, norm].map((b) => b >> 2);
      for (let k = 0; k < kp; k++) {
        f[yr + k] = 0;
        f[yi + k] = 0;
        f[nm + k] = 0;
      }
      for (let p = 0; p < P; p++) {
        const base = i32[o + p];
        const w = p * kp;
        for (let k = 0; k < kp; k++) {
          const ar = f[xr + base + k];
          const ai = f[xi + base + k];
          const br = f[wr + w + k];
          const bi = f[wi + w + k];
          f[yr + k] += ar * br - ai * bi;
          f[yi + k] += ar * bi + ai * br;
          f[nm + k] += f[xp + base + k];
        }
      }
    },
    supdate(P, offs, rRe, rIm, wRe, wIm, g, eRe, eIm, kp) {
      const [o, xr, xi, wr, wi, gg, er, ei] = [offs, rRe, rIm, wRe, wIm, g, eRe, eIm].map((b) => b >> 2);
      for (let p = 0; p < P; p++) {
        const base = i32[o + p];
        const w = p * kp;
        for (let k = 0; k < kp; k++) {
          const ar = f[xr + base + k];
          const ai = f[xi + base + k];
          const a = f[gg + k] * f[er + k];
          const b = f[gg + k] * f[ei + k];
          f[wr + w + k] += ar * a + ai * b;
          f[wi + w + k] += ar * b - ai * a;
        }
      }
    },
    backprop(P, offs, eRe, eIm, wRe, wIm, zRe, zIm, kp) {
      const [o, er, ei, wr, wi, zr, zi] = [offs, eRe, eIm, wRe, wIm, zRe, zIm].map((b) => b >> 2);
      for (let k = 0; k < kp; k++) {
        f[zr + k] = 0;
        f[zi + k] = 0;
      }
      for (let p = 0; p < P; p++) {
        const base = i32[o + p];
        const w = p * kp;
        for (let k = 0; k < kp; k++) {
          const br = f[wr + w + k];
          const bi = f[wi + w + k];
          const xr = f[er + base + k];
          const xi = f[ei + base + k];
          f[zr + k] += br * xr + bi * xi;
          f[zi + k] += br * xi - bi * xr;
        }
      }
    },
    gram(J, re, im, wt, zRe, zIm, gz, out, kp) {
      const [r, i, w, zr, zi, gzz, g] = [re, im, wt, zRe, zIm, gz, out].map((b) => b >> 2);
      for (let j = 0; j < J; j++) {
        let zacc = 0;
        for (let k = 0; k < kp; k++) zacc += f[r + j * kp + k] * f[zr + k] + f[i + j * kp + k] * f[zi + k];
        f[gzz + j] = zacc;
        for (let k = 0; k < kp; k++) {
          f[r + j * kp + k] *= f[w + k];
          f[i + j * kp + k] *= f[w + k];
        }
      }
      for (let j = 0; j < J; j++) {
        for (let l = j; l < J; l++) {
          let acc = 0;
          for (let k = 0; k < kp; k++) acc += f[r + j * kp + k] * f[r + l * kp + k] + f[i + j * kp + k] * f[i + l * kp + k];
          f[g + j * J + l] = acc;
          f[g + l * J + j] = acc;
        }
      }
    },
    corr(hist, norms, head, lags, mic, cxy, cxx, a) {
      const [h, n, m, cy, cx] = [hist, norms, mic, cxy, cxx].map((b) => b >> 2);
      for (let l = 0, i = head; l < lags; l++) {
        let xy = 0;
        for (let b = 0; b < 32; b++) xy += f[h + i * 32 + b] * f[m + b];
        f[cy + l] += a * (xy - f[cy + l]);
        f[cx + l] += a * (f[n + i] - f[cx + l]);
        i = i === 0 ? lags - 1 : i - 1;
      }
    },
    touch() {
      return 0;
    },
    pcross(L, head, cap, rRe, rIm, rPow, dRe, dIm, re, im, ch, kp) {
      const [xr, xi, xp] = [rRe, rIm, rPow].map((b) => b >> 2);
      const [dr, di, sr, si, sc] = [dRe, dIm, re, im, ch].map((b) => b >> 3);
      for (let l = 0, i = head; l < L; l++) {
        const x = i * kp;
        const o = l * kp;
        for (let k = 0; k < kp; k++) {
          const ar = f[xr + x + k];
          const ai = f[xi + x + k];
          const br = d[dr + k];
          const bi = d[di + k];
          d[sr + o + k] += ar * br + ai * bi;
          d[si + o + k] += ar * bi - ai * br;
          d[sc + o + k] += f[xp + x + k] * (br * br + bi * bi);
        }
        i = i === 0 ? cap - 1 : i - 1;
      }
    },
    tcue(L, head, cap, rRe, rIm, rPow, stride, from, dRe, dIm, cRe, cIm, xx, per, B, a) {
      const [xr, xi, xp, dr, di, sr, si, sx, pl] = [rRe, rIm, rPow, dRe, dIm, cRe, cIm, xx, per].map((b) => b >> 2);
      const r = Math.fround;
      const lane = new Float64Array(4);
      for (let l = 0, i = head; l < L; l++) {
        const o = i * stride + from;
        lane.fill(0);
        // Each operation rounded to float32 as the kernel's lanes do (bin j in lane j mod 4).
        for (let j = 0; j < B; j++) {
          const x = o + 2 * j;
          const ar = f[xr + x];
          const ai = f[xi + x];
          const br = f[dr + j];
          const bi = f[di + j];
          const re = r(r(ar * br) + r(ai * bi));
          const im = r(r(ar * bi) - r(ai * br));
          const n = l * B + j;
          f[sr + n] = r(f[sr + n] + r(a * r(re - f[sr + n])));
          f[si + n] = r(f[si + n] + r(a * r(im - f[si + n])));
          f[sx + n] = r(f[sx + n] + r(a * r(f[xp + x] - f[sx + n])));
          const s = f[sx + n];
          if (s > 0) lane[j & 3] = r(lane[j & 3] + r(r(r(f[sr + n] * f[sr + n]) + r(f[si + n] * f[si + n])) / s));
        }
        f[pl + l] = r(r(lane[0] + lane[1]) + r(lane[2] + lane[3]));
        i = i === 0 ? cap - 1 : i - 1;
      }
    },
  };
}
