// Whether the reference is active within the filter's reach: the filters adapt only then. Decided by the whole power
// of every 4th partition's ring entry, summed once per hop where the FFT loop writes |X|² (one add per partition here).
// It used to sample every 8th bin of those entries, which missed a reference whose power sits only between them: a
// tone on bin 8, 16 or 32 (500 Hz, 1 kHz, 2 kHz at 16 kHz; hold music, ring-back) never counted as active and the
// filter never adapted (linear ERLE 0 dB on a 1 kHz tone, 36 dB at 1031 Hz). Speech, noise and digital silence decide
// as they did (the golden hashes).
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

  /** Active within partitions 0..partitions-1 after the bulk delay (in hops): every 4th one's whole power. */
  active(bulk: number, partitions: number): boolean {
    const ring = this.ring;
    let whole = 0;
    for (let p = 0; p < partitions; p += 4) whole += this.total[ring.offset(bulk + p) / ring.stride];
    return whole > this.threshold;
  }
}
