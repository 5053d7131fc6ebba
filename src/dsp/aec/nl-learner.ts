// Channel 0's part in learning the loudspeaker model (loudspeaker.ts): keeps the error spectra of the last P hops
// (P: the main filter's partitions), each weighted by how much the hop looks like far-end single talk, and every few
// hops (the canceller's nlEvery) propagates them back through the filter to the reference frame they all saw
// (Z = Σ_p conj(W_p) E, one pass over the partitions: `backprop` in the kernels) and hands Z to the model.
//
// The weight of a hop: the error's share of the echo estimate, against its minimum over the last ~1.5 s: in far-end
// single talk the share sits near its minimum (what the filter and the model cannot explain yet), near-end speech
// raises it, and the weight falls as 1 / share.
import type { PartitionedKalmanFilter } from './kalman-filter';
import type { AecArena, Slab } from './kernel';
import { NL_FORGET, type LoudspeakerModel } from './loudspeaker';

/** Far-end hops before the first learning step (the linear filter's first convergence). */
const START = 250;
const SUB = 32;
const SUBS = 6;

export class NonlinearLearner {
  readonly model: LoudspeakerModel;
  private readonly arena: AecArena;
  private readonly P: number;
  private readonly R: number;
  private readonly bins: number;
  private readonly stride: number;
  private readonly eRe: Slab;
  private readonly eIm: Slab;
  private readonly offs: Slab;
  private readonly zRe: Slab;
  private readonly zIm: Slab;
  private readonly w: Float64Array;
  /** Hops between learning steps, and the statistics' forgetting per step (the same ~4 s whatever the interval). */
  private readonly every: number;
  private readonly decay: number;
  private n = 0;
  private lastLag = -1;
  private sinceShift = 0;
  private curMin = Infinity;
  private readonly mins = new Float64Array(SUBS).fill(Infinity);
  private sub = 0;
  private subPos = 0;
  powerSet = false;
  private noiseSum = 0;
  private noiseW = 0;
  private active = 0;
  /** The main filter's power response Σ_p |W_p|² per bin (set by the channel now and then). */
  readonly power: Float64Array;

  static floats(stride: number, partitions: number): number {
    return 2 * stride * partitions + 2 * stride + partitions + 12;
  }

  /**
   * `stride`: the model's rows (Z's); `band`: the main filter's bins and rows (fewer where the canceller's band is
   * limited, options.ts `bins`: Z is 0 above them).
   */
  constructor(arena: AecArena, model: LoudspeakerModel, hop: number, partitions: number, stride: number, every: number, band = { bins: hop + 1, stride }) {
    this.arena = arena;
    this.every = every;
    this.decay = Math.pow(NL_FORGET, every);
    this.model = model;
    this.P = partitions;
    this.R = hop;
    this.bins = band.bins;
    this.stride = band.stride;
    this.eRe = arena.alloc(band.stride * partitions);
    this.eIm = arena.alloc(band.stride * partitions);
    this.offs = arena.alloc(partitions);
    this.zRe = arena.alloc(stride);
    this.zIm = arena.alloc(stride);
    this.w = new Float64Array(partitions);
    this.power = new Float64Array(hop + 1);
  }

  /** The error spectra's ring in the arena (element offset and floats: eRe, then eIm), read whole on learning hops only. */
  get errorRing(): { at: number; floats: number } {
    return { at: this.eRe.at, floats: this.eIm.at + this.stride * this.P - this.eRe.at };
  }

  /** Whether one of the next `hops` hops may take a learning step (the interval only: a prefetch's guess, never short). */
  learnsWithin(hops: number): boolean {
    return (this.n % this.every) + hops >= this.every;
  }

  /**
   * Back to the start, the model with it: the filter starts from nothing again (echo-presence.ts), so the model waits
   * for its first convergence (START far-end hops) as at a call's start, with none of the weights or errors of before.
   */
  reset(): void {
    // The model: no distortion (its coefficients apply again after its next learning step) and no statistics; the
    // history of reference blocks and the unit stay (they are the reference's, not learnt).
    const m = this.model;
    for (const a of [m.c, m.b, m.G]) a.fill(0);
    m.steps = 0;
    if (m.knot) Object.assign(m.knot, { level: 0, xo: 0, proj: 0, stable: 0 });
    m.search?.reset();
    this.active = 0;
    this.curMin = Infinity;
    this.mins.fill(Infinity);
    this.noiseSum = 0;
    this.noiseW = 0;
    this.w.fill(0);
    this.eRe.a.fill(0);
    this.eIm.a.fill(0);
    this.powerSet = false;
  }

  /**
   * One hop: E the error spectrum FFT([0, e]) (null while the far end is silent within the filter's reach), the error's
   * and the echo estimate's energy over the hop, the bulk lag the filter used.
   */
  step(main: PartitionedKalmanFilter, lag: number, eRe: Float32Array | null, eIm: Float32Array | null, errEnergy: number, echoEnergy: number): void {
    const P = this.P;
    const S = this.stride;
    const slot = this.n % P;
    this.n++;
    if (lag !== this.lastLag) {
      this.lastLag = lag;
      this.sinceShift = 0;
    }
    this.sinceShift++;
    let wt = 0;
    if (eRe && eIm && echoEnergy > 1e-12) {
      const share = errEnergy / echoEnergy;
      if (share < this.curMin) this.curMin = share;
      let m = this.curMin;
      for (let s = 0; s < SUBS; s++) if (this.mins[s] < m) m = this.mins[s];
      wt = Math.min(1, m / (share + 1e-20));
      this.noiseSum = 0.98 * this.noiseSum + wt * (errEnergy / this.R);
      this.noiseW = 0.98 * this.noiseW + wt;
      this.active++;
    }
    if (++this.subPos === SUB) {
      this.subPos = 0;
      this.mins[this.sub] = this.curMin;
      this.sub = (this.sub + 1) % SUBS;
      this.curMin = Infinity;
    }
    this.w[slot] = wt;
    const re = this.eRe.a;
    const im = this.eIm.a;
    const o = slot * S;
    if (wt > 0) {
      for (let k = 0; k < this.bins; k++) {
        re[o + k] = wt * eRe![k];
        im[o + k] = wt * eIm![k];
      }
    } else {
      re.fill(0, o, o + S);
      im.fill(0, o, o + S);
    }
    if (this.n % this.every !== 0 || this.sinceShift < P || !this.powerSet || this.active < START) return;
    // Partition p pairs with the error of hop n − P + p (oldest first): the frame all of them saw is the one the
    // newest hop's last partition reads, lag + P − 1 blocks back.
    const i32 = this.arena.i32;
    let wSum = 0;
    for (let p = 0; p < P; p++) {
      const s = (this.n + p) % P;
      i32[this.offs.at + p] = s * S;
      wSum += this.w[s];
    }
    if (wSum <= 0) return;
    this.arena.backprop(P, this.offs.at, this.eRe.at, this.eIm.at, main.wRe.at, main.wIm.at, this.zRe.at, this.zIm.at, S);
    this.model.learn(lag + P - 1, this.zRe, this.zIm, wSum / P, this.power, this.noiseSum / Math.max(this.noiseW, 1e-9), this.decay);
  }
}
