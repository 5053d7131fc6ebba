// The reference's spectra of the last `capacity` hops (frame of 2R samples ending at each hop), computed once per hop
// and shared by the delay estimator, every channel's filters and suppressors: a bulk delay of d hops is just reading
// d entries further back, so changing it costs nothing. Rows of `stride` floats (the bins padded to a multiple of 4)
// in the canceller's arena, so the WebAssembly loops read them in place.
import type { AecArena, Slab } from './kernel';

export class RefRing {
  readonly bins: number;
  readonly stride: number;
  readonly capacity: number;
  readonly re: Slab;
  readonly im: Slab;
  /** |X(k)|². */
  readonly pow: Slab;
  /** Entry of the newest hop. */
  private head = 0;

  static floats(bins: number, capacity: number): number {
    return 3 * RefRing.strideOf(bins) * capacity;
  }

  static strideOf(bins: number): number {
    return (bins + 3) & ~3;
  }

  constructor(arena: AecArena, bins: number, capacity: number) {
    this.bins = bins;
    this.stride = RefRing.strideOf(bins);
    this.capacity = capacity;
    this.re = arena.alloc(this.stride * capacity);
    this.im = arena.alloc(this.stride * capacity);
    this.pow = arena.alloc(this.stride * capacity);
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
   * many ranges. For a prefetch (AecArena.touch).
   */
  ranges(i32: Int32Array, at: number, from: number, to: number, ahead: number): number {
    const C = this.capacity;
    const S = this.stride;
    let first = (this.head + ahead - to) % C;
    if (first < 0) first += C;
    const count = Math.min(C, to - from + 1);
    const one = Math.min(count, C - first);
    const two = count - one;
    let n = 0;
    for (let r = 0; r < 3; r++) {
      const row = r === 0 ? this.re.at : r === 1 ? this.im.at : this.pow.at;
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
  }
}
