// The Kalman filter's prior variances are in units of |W|², the echo path's power gain from reference to microphone,
// which depends on the levels a client sends (a quiet reference or a loud loudspeaker needs a large filter), not only
// on the room. The prior was tuned on the bench's scenes; this estimates the scene's gain once, over the first
// SETTLE_HOPS hops with the reference active, and when it is more than 6 dB above theirs multiplies the prior by the
// whole ratio. Too small a prior stalls learning (a reference 20–35 dB quieter lost 4–18 dB of single-talk ERLE and
// 12–21 dB after a path change); one too large costs little, so the prior is never lowered (lowering it for quiet
// echo cost 2–3 dB after path changes). The gain is the smaller of two estimates: microphone over reference energy,
// which near-end speech inflates (double talk from the first second at +10 dB signal-to-echo lost 4.3 dB of near-end
// SDR to a prior scaled for echo that was not there), and the part of the microphone that correlates with the
// reference (cross-spectra over every lag the filter can reach), which near-end speech cannot inflate. docs/echo.md, "Levels".
import { RealFFT } from '../fft';
import type { AecArena } from './kernel';
import { RefRing } from './ref-ring';

/** Hops of reference activity the estimate runs over (1 s): after that the filter has learnt, and rescaling its variances then would undo it. */
const SETTLE_HOPS = 125;
/** Microphone over reference energy on the bench's scenes in their first 2 s of far-end activity (median −8.4 dB, 126 scenes: −11.4..−5.6). */
const BENCH_GAIN = Math.pow(10, -8.4 / 10);
/**
 * Up to 3 dB above the bench's gain the prior stays as tuned: just over the bench scenes' own spread (+2.8 dB), so each
 * of them stays bit for bit what was tuned. 6 dB until 2026-12-01: a loud echo 3–6 dB above it (off-bench scenes) then
 * learnt slowly, st-97004 10.7 dB of linear ERLE after 12 s (docs/echo.md, "A talker the residual estimate hides").
 */
export const PRIOR_ZONE_DB = 3;
const MAX_SCALE = 1e8;
/**
 * What the cross-spectra's magnitudes owe to chance, Σ_t |X_{t−l}|²|D_t|², counted 1.5 times: consecutive hops' frames
 * share half their samples, so a bin's spectra correlate 0.5 from one hop to the next (reference and microphone alike),
 * and the sum's variance is 1 + 2 · 0.5 · 0.5 = 1.5 times the sum of its terms'. Subtracted over the whole sum, not per term (clipping each
 * term at 0 kept their positive chance: near-end noise 30 dB above the echo then read as 12 dB of excess gain). On 9
 * scenes (seeds 11000..) a reference with no echo behind it then reads below −17 dB (a bench echo: about −8.4), and
 * single talk's estimate is within −4..+6 dB of the energy ratio.
 */
const CHANCE = 1.5;
/**
 * What chance gives beyond that, measured: the reference now against the microphone 3..18 hops before it (an echo
 * cannot come before its reference, so these lags hold chance only), per lag, taken off every causal lag when
 * positive. Two voiced talkers whose harmonics meet stay in phase for many hops, more than CHANCE counts: the
 * service's sample against its own reversal (no echo at all; the microphone 22 dB above the bench's gain) read 10.5 dB
 * without this, and nothing with it; on the 9 scenes it changed only the estimates of echo already present (by −2.2..0 dB).
 */
const ACAUSAL_FROM = 3;
const ACAUSAL_LAGS = 16;

export class PriorScale {
  private mic = 0;
  private ref = 0;
  private hops = 0;
  private readonly zone: number;
  private readonly bins: number;
  /** Row length of the float64 sums: the ring's (bins padded to a multiple of 4; the padding stays 0). */
  private readonly stride: number;
  private readonly lags: number;
  private readonly arena: AecArena;
  /**
   * Per lag (rows of `stride`): Σ X*_{t−l} D_t (re, im) and Σ |X_{t−l}|²|D_t|²; per bin Σ |X_t|². The sums lie in the
   * canceller's arena, where the arena's `pcross` kernel (WebAssembly SIMD in float64, or the same loop in
   * JavaScript: bit-identical either way) adds a hop to every lag at once: in JavaScript this was 5× the cost of the
   * rest of the canceller's hop for its first second, a burst when many streams start together (docs/echo.md,
   * "Levels"). Dropped once settled.
   */
  private cross: {
    re: Float64Array;
    im: Float64Array;
    chance: Float64Array;
    refPow: Float64Array;
    fft: RealFFT;
    frame: Float64Array;
    dRe: Float64Array;
    dIm: Float64Array;
    /** The acausal lags' sums (as re, im, chance) and the microphone spectra of the last hops they reach. */
    aRe: Float64Array;
    aIm: Float64Array;
    aChance: Float64Array;
    histRe: Float64Array;
    histIm: Float64Array;
  } | null;
  /** The previous hop's microphone samples (the frame is two hops, as the reference's in the ring). */
  private readonly micPrev: Float64Array;

  /** Floats of the arena this takes (for hop `hop` and `lags` lags). */
  static floats(hop: number, lags: number): number {
    // float64 rows of `stride` (a multiple of 4, so no alloc() rounds up): the sums of every lag (3), D (2), the
    // acausal sums (3) and the microphone history (2).
    const stride = RefRing.strideOf(hop + 1);
    return 2 * stride * (3 * lags + 2 + 3 * ACAUSAL_LAGS + 2 * (ACAUSAL_FROM + ACAUSAL_LAGS));
  }

  constructor(arena: AecArena, zoneDb = PRIOR_ZONE_DB, hop = 128, lags = 1) {
    this.arena = arena;
    this.zone = Math.pow(10, zoneDb / 10);
    this.bins = hop + 1;
    this.stride = RefRing.strideOf(this.bins);
    this.lags = lags;
    this.micPrev = new Float64Array(hop);
    const n = lags * this.stride;
    const S = this.stride;
    this.cross = {
      re: arena.f64(n),
      im: arena.f64(n),
      chance: arena.f64(n),
      refPow: new Float64Array(this.bins),
      fft: new RealFFT(2 * hop),
      frame: new Float64Array(2 * hop),
      dRe: arena.f64(S),
      dIm: arena.f64(S),
      aRe: arena.f64(ACAUSAL_LAGS * S),
      aIm: arena.f64(ACAUSAL_LAGS * S),
      aChance: arena.f64(ACAUSAL_LAGS * S),
      histRe: arena.f64((ACAUSAL_FROM + ACAUSAL_LAGS) * S),
      histIm: arena.f64((ACAUSAL_FROM + ACAUSAL_LAGS) * S),
    };
  }

  /** The estimate is made: hop() has nothing more to do. */
  get settled(): boolean {
    return this.hops >= SETTLE_HOPS;
  }

  /**
   * One hop, until settled: whether the reference is active, its energy, the microphone's samples (channel 0), and the
   * ring whose newest entry is this hop's reference spectrum. Returns the factor the prior and the variances are to
   * be multiplied by: 1 but on the hop the estimate settles.
   */
  hop(refActive: boolean, refEnergy: number, mic: Float32Array, ring: RefRing): number {
    const f = refActive ? this.push(refEnergy, mic, ring) : 1;
    // The previous hop's microphone block: the frame is two hops, as the reference's in the ring.
    for (let i = 0; i < mic.length; i++) this.micPrev[i] = mic[i];
    return f;
  }

  private push(refEnergy: number, mic: Float32Array, ring: RefRing): number {
    const c = this.cross;
    if (this.hops >= SETTLE_HOPS || !c) return 1;
    if (ring.stride !== this.stride || ring.capacity < this.lags) throw new Error('prior scale: the ring does not match');
    let micEnergy = 0;
    for (let i = 0; i < mic.length; i++) micEnergy += mic[i] * mic[i];
    this.mic += micEnergy;
    this.ref += refEnergy;
    const hop = this.micPrev.length;
    for (let i = 0; i < hop; i++) {
      c.frame[i] = this.micPrev[i];
      c.frame[hop + i] = mic[i];
    }
    c.fft.forward(c.frame, 0, c.dRe, c.dIm);
    const rPow = ring.pow.a;
    const o0 = ring.offset(0);
    for (let k = 0; k < this.bins; k++) c.refPow[k] += rPow[o0 + k];
    const head = o0 / this.stride;
    this.arena.pcross(this.lags, head, ring.capacity, ring.re.at, ring.im.at, ring.pow.at, c.dRe.byteOffset, c.dIm.byteOffset, c.re.byteOffset, c.im.byteOffset, c.chance.byteOffset, this.stride);
    this.acausal(ring, head);
    if (++this.hops < SETTLE_HOPS) return 1;
    const gain = Math.min(this.mic / this.ref, this.correlated());
    this.cross = null;
    // The prior then takes the scene's gain as a whole (the bench-relative prior every scene was tuned with): scaling
    // by the excess over the zone only left scenes 4× short of it and 2–6 dB of ERLE behind (docs/echo.md).
    const r = gain / BENCH_GAIN;
    return r > this.zone ? Math.min(MAX_SCALE, r) : 1;
  }

  /** This hop's reference (ring entry `head`) against the microphone of earlier hops; then keeps this hop's. */
  private acausal(ring: RefRing, head: number): void {
    const { aRe, aIm, aChance, histRe, histIm, dRe, dIm } = this.cross!;
    const S = this.stride;
    const row = 8 * S; // bytes
    const span = ACAUSAL_FROM + ACAUSAL_LAGS;
    for (let a = 0; a < ACAUSAL_LAGS && ACAUSAL_FROM + a <= this.hops; a++) {
      const h = ((this.hops - ACAUSAL_FROM - a) % span) * row;
      this.arena.pcross(1, head, ring.capacity, ring.re.at, ring.im.at, ring.pow.at, histRe.byteOffset + h, histIm.byteOffset + h, aRe.byteOffset + a * row, aIm.byteOffset + a * row, aChance.byteOffset + a * row, S);
    }
    const mine = (this.hops % span) * S;
    histRe.set(dRe, mine);
    histIm.set(dIm, mine);
  }

  /**
   * The echo's share of the microphone over the reference's energy: Σ_k Σ_l (|C_l(k)|² − chance) / P(k) over Σ_k P(k),
   * less the acausal lags' excess over chance times the number of causal lags.
   */
  private correlated(): number {
    const c = this.cross!;
    const S = this.stride;
    let num = 0;
    let den = 0;
    let nul = 0;
    for (let k = 0; k < this.bins; k++) {
      const p = c.refPow[k];
      den += p;
      if (!(p > 0)) continue;
      let s = 0;
      for (let l = 0; l < this.lags; l++) s += excess(c.re, c.im, c.chance, l * S + k);
      num += s / p;
      let z = 0;
      for (let a = 0; a < ACAUSAL_LAGS; a++) {
        const n = SETTLE_HOPS - ACAUSAL_FROM - a; // the hops this lag summed
        z += excess(c.aRe, c.aIm, c.aChance, a * S + k) / (n * n);
      }
      nul += z / p;
    }
    // In phase hop after hop, that excess grows with the square of the hops summed: a causal lag l summed
    // SETTLE_HOPS − l of them (the ring was empty before the reference started).
    let weight = 0;
    for (let l = 0; l < this.lags; l++) weight += Math.max(0, SETTLE_HOPS - l) ** 2;
    num -= Math.max(0, (nul * weight) / ACAUSAL_LAGS);
    return den > 0 ? Math.max(0, num) / den : 0;
  }
}

/** A lag's |C|² beyond what chance explains (CHANCE × its chance sum), at `at`. */
function excess(re: Float64Array, im: Float64Array, chance: Float64Array, at: number): number {
  return re[at] * re[at] + im[at] * im[at] - CHANCE * chance[at];
}
