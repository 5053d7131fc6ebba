// Whether the reference is active within the filter's reach: the filters adapt only then. A sparse sample of the
// ring (every 8th bin of every 4th partition) is cheap and enough for speech and noise, but it misses a reference whose
// power sits only between those bins: a tone on bin 8, 16 or 32 (500 Hz, 1 kHz, 2 kHz at 16 kHz; hold music, ring-back
// and other tones) never counted as active, so the filter never adapted (linear ERLE 0 dB on a 1 kHz tone, 36 dB at
// 1031 Hz). When the sample finds nothing, the same entries' whole power (kept per hop) decides.
import type { RefRing } from './ref-ring';

export class FarActivity {
  /** Per ring entry: |X(k)|² summed over its bins. */
  private readonly total: Float64Array;

  constructor(
    private readonly ring: RefRing,
    private readonly threshold: number,
  ) {
    this.total = new Float64Array(ring.capacity);
  }

  /** The newest entry (at element offset `ro`) holds `pow` in all. */
  record(ro: number, pow: number): void {
    this.total[ro / this.ring.stride] = pow;
  }

  /** Active within partitions 0..partitions-1 after the bulk delay (in hops). */
  active(bulk: number, partitions: number): boolean {
    const ring = this.ring;
    const rPow = ring.pow.a;
    let sampled = 0;
    for (let p = 0; p < partitions; p += 4) {
      const o = ring.offset(bulk + p);
      for (let k = 2; k < ring.bins; k += 8) sampled += rPow[o + k];
    }
    if (sampled * 16 > this.threshold) return true;
    let whole = 0;
    // The same partitions as the sample (all of them would start adaptation a few hops earlier at a talk spurt's onset,
    // which changed every voice agent's output a little): only the bins differ.
    for (let p = 0; p < partitions; p += 4) whole += this.total[ring.offset(bulk + p) / ring.stride];
    return whole > this.threshold;
  }
}
