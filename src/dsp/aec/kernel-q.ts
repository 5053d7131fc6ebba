// The JavaScript back end's partition loops on the reference ring's 16-bit copy (ref-ring.ts, option ring16): each
// bin decoded as aec.ts's filterq/updateq/sfilterq/supdateq decode it (float32), then the float32 loops of kernel.ts.
import type { AecKernels } from './kernel';

type QuantLoops = Pick<AecKernels, 'filterq' | 'updateq' | 'sfilterq' | 'supdateq'>;

/** The four loops over the arena's arrays `f` / `i32` (byte addresses, as the WebAssembly functions take them). */
export function jsQuantLoops(f: Float32Array, i32: Int32Array): QuantLoops {
  const s16 = new Int16Array(f.buffer, f.byteOffset, f.length * 2);
  // The 16-bit ring (ref-ring.ts): bin k of the entry at byte e as aec.ts decodes it (float32), |X|² from it.
  const xq = new Float32Array(3);
  const dq = (e: number, k: number): Float32Array => {
    const g = e + (k >> 2) * 20;
    const sc = f[(g + 16) >> 2];
    const re = Math.fround(s16[(g >> 1) + (k & 3)] * sc);
    const im = Math.fround(s16[(g >> 1) + 4 + (k & 3)] * sc);
    xq[0] = re;
    xq[1] = im;
    xq[2] = Math.fround(Math.fround(re * re) + Math.fround(im * im));
    return xq;
  };
  return {
    filterq(P, offs, ring, wRe, wIm, pv, yRe, yIm, phi, kp) {
      const [o, wr, wi, v, yr, yi, ph] = [offs, wRe, wIm, pv, yRe, yIm, phi].map((b) => b >> 2);
      for (let k = 0; k < kp; k++) {
        f[yr + k] = 0;
        f[yi + k] = 0;
        f[ph + k] = 0;
      }
      for (let p = 0; p < P; p++) {
        const e = ring + (i32[o + p] << 2);
        const w = p * kp;
        for (let k = 0; k < kp; k++) {
          const [ar, ai, ap] = dq(e, k);
          const br = f[wr + w + k];
          const bi = f[wi + w + k];
          f[yr + k] += ar * br - ai * bi;
          f[yi + k] += ar * bi + ai * br;
          f[ph + k] += ap * f[v + w + k];
        }
      }
    },
    updateq(P, offs, ring, wRe, wIm, pv, inv, eRe, eIm, a2, q, kp) {
      const [o, wr, wi, v, iv, er, ei] = [offs, wRe, wIm, pv, inv, eRe, eIm].map((b) => b >> 2);
      for (let p = 0; p < P; p++) {
        const e = ring + (i32[o + p] << 2);
        const w = p * kp;
        for (let k = 0; k < kp; k++) {
          const [ar, ai, ap] = dq(e, k);
          const pk = f[v + w + k];
          const g = pk * f[iv + k];
          const nr = f[wr + w + k] + g * (ar * f[er + k] + ai * f[ei + k]);
          const ni = f[wi + w + k] + g * (ar * f[ei + k] - ai * f[er + k]);
          f[wr + w + k] = nr;
          f[wi + w + k] = ni;
          f[v + w + k] = a2 * (1 - 0.5 * g * ap) * pk + q * (nr * nr + ni * ni);
        }
      }
    },
    sfilterq(P, offs, ring, wRe, wIm, yRe, yIm, norm, kp) {
      const [o, wr, wi, yr, yi, nm] = [offs, wRe, wIm, yRe, yIm, norm].map((b) => b >> 2);
      for (let k = 0; k < kp; k++) {
        f[yr + k] = 0;
        f[yi + k] = 0;
        f[nm + k] = 0;
      }
      for (let p = 0; p < P; p++) {
        const e = ring + (i32[o + p] << 2);
        const w = p * kp;
        for (let k = 0; k < kp; k++) {
          const [ar, ai, ap] = dq(e, k);
          const br = f[wr + w + k];
          const bi = f[wi + w + k];
          f[yr + k] += ar * br - ai * bi;
          f[yi + k] += ar * bi + ai * br;
          f[nm + k] += ap;
        }
      }
    },
    supdateq(P, offs, ring, wRe, wIm, g, eRe, eIm, kp) {
      const [o, wr, wi, gg, er, ei] = [offs, wRe, wIm, g, eRe, eIm].map((b) => b >> 2);
      for (let p = 0; p < P; p++) {
        const e = ring + (i32[o + p] << 2);
        const w = p * kp;
        for (let k = 0; k < kp; k++) {
          const [ar, ai] = dq(e, k);
          const a = f[gg + k] * f[er + k];
          const b = f[gg + k] * f[ei + k];
          f[wr + w + k] += ar * a + ai * b;
          f[wi + w + k] += ar * b - ai * a;
        }
      }
    },
  };
}
