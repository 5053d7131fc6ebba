// The reference's spectra of the last `capacity` hops (frame of 2R samples ending at each hop), computed once per hop
// and shared by the delay estimator, every channel's filters and suppressors: a bulk delay of d hops is just reading
// d entries further back, so changing it costs nothing. Rows of `stride` floats (the bins padded to a multiple of 4)
// in the canceller's arena, so the WebAssembly loops read them in place.
//
// With the canceller's `ring16` the partition loops read a 16-bit copy instead (block floating point: per 4 bins, 4 re
// and 4 im int16 and one float32 scale, 20 bytes against 48 of re, im and |X|²; decoded in aec.ts's *q loops): at a
// hundred streams the loops and the prefetch are bound by a stream's bytes (docs/echo.md, "CPU"). The float32 rows
// stay for the rest (the delay estimator, the prior scale, the tail and wideband terms).
import type { AecArena, Slab } from './kernel';

/** Largest int16 of the 16-bit copy (symmetric: −32767..32767). */
const Q_MAX = 32767;

export class RefRing {
  readonly bins: number;
  readonly stride: number;
  readonly capacity: number;
  readonly re: Slab;
  readonly im: Slab;
  /** |X(k)|². */
  readonly pow: Slab;
  /** The 16-bit copy (null without ring16): entries of qstride floats, 20 bytes per 4 bins (see above). */
  readonly q: Slab | null;
  readonly qstride: number;
  private readonly q16: Int16Array | null;
  /** Entry of the newest hop. */
  private head = 0;

  static floats(bins: number, capacity: number, packed = false): number {
    return (3 * RefRing.strideOf(bins) + (packed ? RefRing.qstrideOf(bins) : 0)) * capacity;
  }

  /** Floats of an entry of the 16-bit copy: 5 per 4 bins, rounded up to 16 bytes. */
  static qstrideOf(bins: number): number {
    return ((5 * RefRing.strideOf(bins)) / 4 + 3) & ~3;
  }

  static strideOf(bins: number): number {
    return (bins + 3) & ~3;
  }

  constructor(arena: AecArena, bins: number, capacity: number, packed = false) {
    this.bins = bins;
    this.stride = RefRing.strideOf(bins);
    this.capacity = capacity;
    this.re = arena.alloc(this.stride * capacity);
    this.im = arena.alloc(this.stride * capacity);
    this.pow = arena.alloc(this.stride * capacity);
    this.qstride = RefRing.qstrideOf(bins);
    this.q = packed ? arena.alloc(this.qstride * capacity) : null;
    this.q16 = packed ? new Int16Array(arena.f32.buffer, arena.f32.byteOffset, arena.f32.length * 2) : null;
  }

  /** Element offset (within q) of the 16-bit entry `lag` hops before the newest. */
  qoffset(lag: number): number {
    let i = this.head - lag;
    if (i < 0) i += this.capacity;
    return i * this.qstride;
  }

  /**
   * The 16-bit copy of the entry at float32 offset `o` (just written): per 4 bins the scale is their largest |re| or
   * |im| over Q_MAX, so each group keeps ~90 dB of range below its own peak.
   */
  pack(o: number): void {
    const q = this.q!;
    const s16 = this.q16!;
    const f = q.a;
    const re = this.re.a;
    const im = this.im.a;
    const e = (o / this.stride) * this.qstride;
    for (let g = 0; g < this.stride; g += 4) {
      let m = 0;
      for (let l = 0; l < 4; l++) {
        const a = Math.abs(re[o + g + l]);
        const b = Math.abs(im[o + g + l]);
        if (a > m) m = a;
        if (b > m) m = b;
      }
      const at = e + (g / 4) * 5;
      const sc = Math.fround(m / Q_MAX);
      f[at + 4] = sc;
      const i16 = (q.at + at) * 2;
      const inv = sc > 0 ? 1 / sc : 0;
      for (let l = 0; l < 4; l++) {
        s16[i16 + l] = Math.max(-Q_MAX, Math.min(Q_MAX, Math.round(re[o + g + l] * inv)));
        s16[i16 + 4 + l] = Math.max(-Q_MAX, Math.min(Q_MAX, Math.round(im[o + g + l] * inv)));
      }
    }
  }

  /** Element offset (within re/im/pow) of the entry `lag` hops before the newest (0 ≤ lag < capacity). */
  offset(lag: number): number {
    let i = this.head - lag;
    if (i < 0) i += this.capacity;
    return i * this.stride;
  }

  /** Makes room for a new newest entry and returns its offset (the caller writes re/im/pow there). */
  advance(): number {
    this.head = this.head + 1 === this.capacity ? 0 : this.head + 1;
    return this.head * this.stride;
  }

  /**
   * The byte ranges of the entries `from`..`to` hops before the entry that is newest after `ahead` more advance()s, in
   * each of re, im and pow (two ranges a row where they wrap), as (address, length) pairs into i32[at..]; returns how
   * many ranges. For a prefetch (AecArena.touch). With `packed`, of the 16-bit copy instead.
   */
  ranges(i32: Int32Array, at: number, from: number, to: number, ahead: number, packed = false): number {
    const C = this.capacity;
    const S = packed ? this.qstride : this.stride;
    let first = (this.head + ahead - to) % C;
    if (first < 0) first += C;
    const count = Math.min(C, to - from + 1);
    const one = Math.min(count, C - first);
    const two = count - one;
    let n = 0;
    for (let r = packed ? 2 : 0; r < 3; r++) {
      const row = packed ? this.q!.at : r === 0 ? this.re.at : r === 1 ? this.im.at : this.pow.at;
      i32[at + 2 * n] = (row + first * S) * 4;
      i32[at + 2 * n + 1] = one * S * 4;
      n++;
      if (two > 0) {
        i32[at + 2 * n] = row * 4;
        i32[at + 2 * n + 1] = two * S * 4;
        n++;
      }
    }
    return n;
  }

  clear(): void {
    this.re.a.fill(0);
    this.im.a.fill(0);
    this.pow.a.fill(0);
    this.q?.a.fill(0);
  }
}
