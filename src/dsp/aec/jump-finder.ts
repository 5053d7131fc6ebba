// Where an echo whose delay jumped went, to the sample: the main filter's own echo estimate ŷ (what the echo sounded
// like at the old delay) cross-correlated with the microphone. After a jump in the same room the microphone holds the
// same echo, only earlier or later, so the correlation peaks sharply at the jump (the waveform, not band envelopes,
// which a reverberant room smears flat: docs/echo.md, "Finding the jump"). The canceller asks when a channel comes
// into doubt, and before that a few times within a quarter second of a sudden rise of its error, over the microphone
// since the rise (echo-presence.ts, `earlyJump`); it moves the filter by what it finds. An early search continues the
// estimate into the near future from the reference through the filter's taps (`predict`), so that an echo that came
// earlier is found as soon as one that came later. Cost: 3 × 128 samples copied per hop into rings (224 KB); a search
// (three 32768-point FFTs, two more for the future: ~2–4 ms) only in those moments.
import { RealFFT } from '../fft';

/** Microphone samples correlated (the last 0.51 s) and the echo estimate's history (1.02 s: jumps up to ±0.51 s). */
const SPAN = 8192;
const HISTORY = 2 * SPAN;
const SIZE = 4 * SPAN;
/** Fewest overlapping samples for a lag to count (a backward jump overlaps less: the estimate's future is unknown). */
const MIN_OVERLAP = 2048;
/** Shifts this small are not a jump (a path change in the same place moves the peak by a few samples). */
export const MIN_JUMP = 24;
export const JUMP_SPAN = SPAN;
/** The loudspeaker model's reference kept for the estimate's future (an early search's earlier jumps): 1.5 s. */
const REF_HISTORY = 24576;
/** The estimate's future an early search may add after its history (the bulk delay's 0.5 s; within the FFT's size). */
const MAX_FUTURE = SIZE - HISTORY - SPAN;

/** The main filter as the finder needs it to extend the estimate into the future: its taps and bulk delay. */
export interface FilterNow {
  /** Impulse response (PartitionedKalmanFilter.impulse). */
  h: Float64Array;
  /** Bulk delay, samples: ŷ(t) = Σ_k h[k] x(t − lag − k). */
  lag: number;
}

export interface FoundJump {
  /** Samples the echo moved: positive later, negative earlier. */
  shift: number;
  /** Normalised correlation at the peak. */
  rho: number;
}

interface Scratch {
  fft: RealFFT;
  a: Float64Array;
  b: Float64Array;
  aRe: Float64Array;
  aIm: Float64Array;
  bRe: Float64Array;
  bIm: Float64Array;
  /** Prefix sums of ŷ² over the history and of d² over the microphone's span. */
  yPre: Float64Array;
  dPre: Float64Array;
  /** The estimate's predicted future (predict()). */
  fut: Float64Array;
}

let shared: Scratch | null = null;

/** The search's scratch, one per thread (made on the first search: most threads never need it). */
function scratch(): Scratch {
  if (shared) return shared;
  const bins = SIZE / 2 + 1;
  const f64 = (n: number): Float64Array => new Float64Array(n);
  shared = { fft: new RealFFT(SIZE), a: f64(SIZE), b: f64(SIZE), aRe: f64(bins), aIm: f64(bins), bRe: f64(bins), bIm: f64(bins), yPre: f64(HISTORY + MAX_FUTURE + 1), dPre: f64(SPAN + 1), fut: f64(MAX_FUTURE) };
  return shared;
}

/**
 * a ← the inverse FFT of FFT(a) · FFT(b) (a circular convolution), or of FFT(a) · conj(FFT(b)) with `correlate` (a
 * circular correlation), over the scratch's SIZE points.
 */
function product(s: Scratch, correlate: boolean): void {
  s.fft.forward(s.a, 0, s.aRe, s.aIm);
  s.fft.forward(s.b, 0, s.bRe, s.bIm);
  const sign = correlate ? -1 : 1;
  for (let k = 0; k < s.aRe.length; k++) {
    const ar = s.aRe[k];
    const ai = s.aIm[k];
    const br = s.bRe[k];
    const bi = sign * s.bIm[k];
    s.aRe[k] = ar * br - ai * bi;
    s.aIm[k] = ar * bi + ai * br;
  }
  s.fft.inverse(s.aRe, s.aIm, 0, s.a, 0);
}

export class JumpFinder {
  /** The microphone and the echo estimate, rings of HISTORY samples; `head` the next write. */
  private readonly d = new Float32Array(HISTORY);
  private readonly y = new Float32Array(HISTORY);
  private head = 0;
  /** Samples recorded, up to HISTORY. */
  private filled = 0;
  /** Samples recorded since the filter was last moved to a jump (an early search needs a history from after it). */
  private sinceMove = HISTORY;
  /** The reference as the filter reads it (after the loudspeaker model), a ring of REF_HISTORY; its own head. */
  private readonly x = new Float32Array(REF_HISTORY);
  private xHead = 0;
  private xFilled = 0;

  /** One hop of the reference as the filter reads it (the same hops as record()'s). */
  recordRef(x: Float64Array, n: number): void {
    let h = this.xHead;
    for (let i = 0; i < n; i++) {
      this.x[h] = x[i];
      h = h + 1 === REF_HISTORY ? 0 : h + 1;
    }
    this.xHead = h;
    this.xFilled = Math.min(REF_HISTORY, this.xFilled + n);
  }

  /**
   * The echo estimate the filter `f` gives at times now + from .. now + to − 1 (to ≤ f.lag: the reference it needs has
   * come), into out[at..], by one FFT convolution over the reference ring; false where the ring does not reach back.
   */
  predict(f: FilterNow, from: number, to: number, out: Float64Array, at: number): boolean {
    const L = f.h.length;
    const n = to - from;
    // The reference from now + from − lag − (L − 1) to now + to − lag − 1.
    const len = n + L - 1;
    const back = f.lag - from + L - 1;
    if (to > f.lag || back > this.xFilled || n <= 0) return false;
    const s = scratch();
    if (len + L > SIZE) return false;
    const { a, b } = s;
    a.fill(0);
    b.fill(0);
    for (let i = 0, k = (this.xHead - back + 2 * REF_HISTORY) % REF_HISTORY; i < len; i++, k = k + 1 === REF_HISTORY ? 0 : k + 1) a[i] = this.x[k];
    for (let i = 0; i < L; i++) b[i] = f.h[i];
    product(s, false);
    // Output sample L − 1 + i is ŷ at now + from + i (the full convolution's first L − 1 lack their past).
    for (let i = 0; i < n; i++) out[at + i] = a[L - 1 + i];
    return true;
  }

  /** One hop: the microphone block d and the main filter's error e on it (ŷ = d − e). */
  record(d: Float32Array, e: Float64Array, n: number): void {
    let h = this.head;
    for (let i = 0; i < n; i++) {
      this.d[h] = d[i];
      this.y[h] = d[i] - e[i];
      h = h + 1 === HISTORY ? 0 : h + 1;
    }
    this.head = h;
    this.filled = Math.min(HISTORY, this.filled + n);
    this.sinceMove = Math.min(HISTORY, this.sinceMove + n);
  }

  /**
   * The filter was moved to a jump found here: the estimate's history before the move still shows the same jump, so an
   * early search (a span shorter than SPAN) waits until the history is all from after it.
   */
  moved(): void {
    this.sinceMove = 0;
  }

  /**
   * The shift within [−maxEarlier, maxLater] samples at which the last `span` samples (at least MIN_OVERLAP, at most
   * SPAN) of the microphone best match the echo estimate's history, or null before a full history (for a shorter span,
   * one wholly from after the last move) or where the estimate is silent.
   */
  find(maxEarlier: number, maxLater: number, span = SPAN, filter: FilterNow | null = null): FoundJump | null {
    if (this.filled < HISTORY || (span < SPAN && this.sinceMove < HISTORY)) return null;
    const s = scratch();
    const { a, b, yPre, dPre } = s;
    const base = HISTORY - SPAN;
    // With the filter: the estimate continued into the near future from the reference (an echo now earlier than the
    // estimate matches what the estimate will be), as far as the reference has come and the search reaches.
    let fut = filter === null ? 0 : Math.min(MAX_FUTURE, filter.lag, maxEarlier);
    if (fut > 0 && !this.predict(filter!, 0, fut, s.fut, 0)) fut = 0;
    // a: the estimate's history, oldest first; b: the microphone's last SPAN samples; both zero-padded to SIZE. Their
    // prefix sums of squares give each lag's energies over its overlap.
    for (let i = 0, h = this.head; i < HISTORY; i++, h = h + 1 === HISTORY ? 0 : h + 1) {
      a[i] = this.y[h];
      yPre[i + 1] = yPre[i] + a[i] * a[i];
      if (i >= base) b[i - base] = this.d[h];
    }
    // Only the microphone's last `span` samples count (an early search, soon after a jump: the samples before it
    // match the estimate at 0).
    const cut = SPAN - Math.max(MIN_OVERLAP, Math.min(SPAN, span));
    b.fill(0, 0, cut);
    dPre.fill(0, 0, cut + 1);
    for (let i = cut; i < SPAN; i++) dPre[i + 1] = dPre[i] + b[i] * b[i];
    if (!(dPre[SPAN] > 0)) return null;
    for (let i = 0; i < fut; i++) {
      a[HISTORY + i] = s.fut[i];
      yPre[HISTORY + i + 1] = yPre[HISTORY + i] + s.fut[i] * s.fut[i];
    }
    const A = HISTORY + fut;
    a.fill(0, A);
    b.fill(0, SPAN);
    // c[j] = Σ_n b[n] a[n + j]: conj(B) · A.
    product(s, true);
    // Microphone sample n (time now − SPAN + n) against the estimate at j + n: a shift of Δ = (HISTORY − SPAN) − j.
    let best: FoundJump | null = null;
    const jFrom = Math.max(0, base - maxLater);
    const jTo = Math.min(A - MIN_OVERLAP, base + maxEarlier);
    for (let j = jFrom; j <= jTo; j++) {
      const over = Math.min(SPAN, A - j);
      if (over - cut < MIN_OVERLAP) continue;
      const ed = dPre[over];
      const ey = yPre[j + over] - yPre[j + cut];
      if (!(ed > 0 && ey > 0)) continue;
      const rho = a[j] / Math.sqrt(ed * ey);
      if (best === null || rho > best.rho) best = { shift: base - j, rho };
    }
    return best;
  }
}
