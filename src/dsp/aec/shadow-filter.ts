// The two-path structure for echo path changes (Ochiai, Araseki & Ogihara 1977, "Echo canceler with two echo path
// models", IEEE Trans. Commun. 25(6)): beside the main Kalman filter, which adapts carefully (double talk must not
// disturb it), a short shadow filter over the first partitions adapts fast and unprotected (normalised block LMS).
// While the shadow's error stays clearly below the main filter's (the echo path changed and the careful filter has
// not caught up, or it is still converging), its coefficients replace the main filter's first partitions and the
// main filter's uncertainty is reset, so it re-converges at full speed; when the shadow does clearly worse (double
// talk pulled it away), it is reset from the main filter.
import { shiftRows, type AecArena, type Slab } from './kernel';
import type { RefRing } from './ref-ring';

export class ShadowFilter {
  readonly partitions: number;
  readonly bins: number;
  readonly stride: number;
  private readonly arena: AecArena;
  readonly wRe: Slab;
  readonly wIm: Slab;
  readonly yRe: Slab;
  readonly yIm: Slab;
  /** The shadow's own error spectrum, written by the caller before update(). */
  readonly eRe: Slab;
  readonly eIm: Slab;
  private readonly norm: Slab;
  private readonly offs: Slab;
  private readonly step: number;

  static floats(bins: number, partitions: number): number {
    const stride = (bins + 3) & ~3;
    return 2 * stride * partitions + 5 * stride + partitions + 4;
  }

  constructor(arena: AecArena, bins: number, partitions: number, step: number) {
    this.arena = arena;
    this.bins = bins;
    this.stride = (bins + 3) & ~3;
    this.partitions = partitions;
    this.step = step;
    this.wRe = arena.alloc(this.stride * partitions);
    this.wIm = arena.alloc(this.stride * partitions);
    this.yRe = arena.alloc(this.stride);
    this.yIm = arena.alloc(this.stride);
    this.eRe = arena.alloc(this.stride);
    this.eIm = arena.alloc(this.stride);
    this.norm = arena.alloc(this.stride);
    this.offs = arena.alloc(partitions);
  }

  filter(ring: RefRing, lag: number): void {
    const i32 = this.arena.i32;
    for (let p = 0; p < this.partitions; p++) i32[this.offs.at + p] = ring.offset(lag + p);
    this.arena.sfilter(this.partitions, this.offs.at, ring.re.at, ring.im.at, ring.pow.at, this.wRe.at, this.wIm.at, this.yRe.at, this.yIm.at, this.norm.at, this.stride);
  }

  /** W_p += μ X_p* E / (Σ_q |X_q|² / 2 + δ), E in eRe/eIm (the offsets of the last filter() call). */
  update(ring: RefRing, floor: number): void {
    const g = this.norm.a;
    for (let k = 0; k < this.bins; k++) g[k] = this.step / (0.5 * g[k] + floor);
    this.arena.supdate(this.partitions, this.offs.at, ring.re.at, ring.im.at, this.wRe.at, this.wIm.at, this.norm.at, this.eRe.at, this.eIm.at, this.stride);
  }

  /** Copies the first partitions of another filter's coefficients (same row layout) into this one. */
  copyFrom(re: Float32Array, im: Float32Array): void {
    const n = this.stride * this.partitions;
    this.wRe.a.set(re.subarray(0, n));
    this.wIm.a.set(im.subarray(0, n));
  }

  /** Moves the coefficients by `shift` partitions, as the main filter's (zeros come in). */
  shift(shift: number): void {
    shiftRows(this.wRe.a, shift, this.partitions, this.stride);
    shiftRows(this.wIm.a, shift, this.partitions, this.stride);
  }
}
