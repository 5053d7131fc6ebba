// A canceller's state brought into cache before its first hop of a chunk, many lines in flight at once (aec.wasm's
// touch): with a hundred streams a stream's ~200 KB are cold when its turn comes, and the partition loops, which met
// them first, waited for one line after another (docs/echo.md, "Cold state"). Only reads: changes no value.
import { liveSlots } from './heap';
import type { PartitionedKalmanFilter } from './kalman-filter';
import type { AecArena } from './kernel';
import type { NonlinearLearner } from './nl-learner';
import type { RefRing } from './ref-ring';

/** Ranges named at most: 6 of the arena, the ring's reach and its newest entry (re, im, pow, each wrapping). */
const RANGES = 18;
/**
 * Cancellers on the thread from which the prefetch runs: below, their hot state stays in the 2 MB L2 cache from one
 * chunk to the next and the prefetch only costs (one canceller: x 1.05-1.09 with it, echo-ab's single-stream CPU).
 */
const FROM = 8;

export class StatePrefetch {
  private readonly arena: AecArena;
  private readonly ring: RefRing;
  private readonly partitions: number;
  private readonly learner: NonlinearLearner | null;
  /** The ranges (byte address, byte length) in the arena, int32 elements from `list`. */
  private readonly list: number;
  /** Bytes of channel 0's W and P, and of the loudspeaker learner's error ring (0 without it). */
  private readonly wBytes: number;
  private readonly errBytes: number;

  static floats(): number {
    return 2 * RANGES;
  }

  /**
   * Made after every other part of the canceller's arena: `priorAt` and `ringEnd` where the prior scale's sums start and
   * the ring ends. The fixed ranges: the arena before the prior scale (the scratch, the window) and everything after the
   * ring (the delay estimator, the channels' filters and state, the loudspeaker model, the blocks). The prior scale's
   * sums are left out (read in order during the first second only: the hardware prefetches them itself).
   */
  constructor(arena: AecArena, ring: RefRing, main: PartitionedKalmanFilter, learner: NonlinearLearner | null, priorAt: number, ringEnd: number) {
    this.arena = arena;
    this.ring = ring;
    this.partitions = main.partitions;
    this.learner = learner;
    this.list = arena.alloc(2 * RANGES).at;
    const end = arena.used;
    const er = learner?.errorRing ?? { at: end, floats: 0 };
    const wAt = main.wRe.at;
    const wEnd = main.pVar.at + main.stride * main.partitions;
    if (!(wAt > ringEnd && main.wIm.at > wAt && main.pVar.at > main.wIm.at && er.at >= wEnd)) throw new Error('echo canceller: arena layout unexpected');
    // Range 2 (channel 0's W and P) and 5 (the learner's error ring) are set per chunk.
    const fixed = [arena.start, priorAt, ringEnd, wAt, wAt, wEnd, wEnd, er.at, er.at + er.floats, end, er.at, er.at + er.floats];
    for (let r = 0; r < 6; r++) {
      arena.i32[this.list + 2 * r] = fixed[2 * r] * 4;
      arena.i32[this.list + 2 * r + 1] = (fixed[2 * r + 1] - fixed[2 * r]) * 4;
    }
    this.wBytes = (wEnd - wAt) * 4;
    this.errBytes = er.floats * 4;
  }

  /**
   * Before a chunk of `hops` hops (with the bulk delay and the run of zero spectra as they stand). The learner's error
   * ring (38 KB) is read whole on its learning hops only (every 4th): named only when the chunk may have one. Channel
   * 0's W and P (57 KB) and the ring's reach are not read while every spectrum in the reach is digital silence (a voice
   * agent's reference between turns): then only the ring's newest entry.
   */
  run(hops: number, bulk: number, zeroRun: number): void {
    if (liveSlots() < FROM) return;
    const i32 = this.arena.i32;
    const L = this.list;
    const reachZero = zeroRun > bulk + this.partitions;
    i32[L + 5] = reachZero ? 0 : this.wBytes;
    i32[L + 11] = this.learner && this.learner.learnsWithin(hops) ? this.errBytes : 0;
    let n = 0;
    if (!reachZero) n = this.ring.ranges(i32, L + 12, bulk, bulk + this.partitions, 1);
    if (bulk > 0 || reachZero) n += this.ring.ranges(i32, L + 12 + 2 * n, 0, 0, 1);
    this.arena.touch(L, 6 + n);
  }
}
