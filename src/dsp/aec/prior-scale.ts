// The Kalman filter's prior variances are in units of |W|², the echo path's power gain from reference to microphone,
// which depends on the levels a client sends (a quiet reference or a loud loudspeaker needs a large filter), not only
// on the room. The prior was tuned on the bench's scenes; this estimates the scene's gain once, as microphone over
// reference energy over the first SETTLE_HOPS hops with the reference active, and when it is more than 6 dB above
// theirs multiplies the prior by the whole ratio. Too small a prior stalls learning (a reference 20–35 dB quieter lost 4–18 dB of single-talk ERLE and 12–21 dB after a path
// change); one too large costs little, so the prior is never lowered (lowering it for quiet echo cost 2–3 dB after
// path changes). docs/echo.md, "Levels".

/** Hops of reference activity the estimate runs over (1 s): after that the filter has learnt, and rescaling its variances then would undo it. */
const SETTLE_HOPS = 125;
/** Microphone over reference energy on the bench's scenes in their first 2 s of far-end activity (median −8.4 dB, 126 scenes: −11.4..−5.6). */
const BENCH_GAIN = Math.pow(10, -8.4 / 10);
/** Up to 6 dB above the bench's gain the prior stays as tuned (the estimate's own spread, from the bulk delay and near-end speech in its second, is about as large; and the canceller stays bit for bit what was tuned). */
export const PRIOR_ZONE_DB = 6;
const MAX_SCALE = 1e8;

export class PriorScale {
  private mic = 0;
  private ref = 0;
  private hops = 0;
  private readonly zone: number;

  constructor(zoneDb = PRIOR_ZONE_DB) {
    this.zone = Math.pow(10, zoneDb / 10);
  }

  /** The estimate is made: push() has nothing more to do. */
  get settled(): boolean {
    return this.hops >= SETTLE_HOPS;
  }

  /**
   * One hop with the reference active: its energy and the microphone's (channel 0). Returns the factor the prior and
   * the variances are to be multiplied by: 1 but on the hop the estimate settles.
   */
  push(refEnergy: number, micEnergy: number): number {
    if (this.hops >= SETTLE_HOPS) return 1;
    this.mic += micEnergy;
    this.ref += refEnergy;
    if (++this.hops < SETTLE_HOPS) return 1;
    // The prior then takes the scene's gain as a whole (the bench-relative prior every scene was tuned with): scaling
    // by the excess over the zone only left scenes 4× short of it and 2–6 dB of ERLE behind (docs/echo.md).
    const r = this.mic / (this.ref * BENCH_GAIN);
    return r > this.zone ? Math.min(MAX_SCALE, r) : 1;
  }
}
