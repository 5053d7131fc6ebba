// Acoustic echo canceller at 16 kHz: removes the far end's signal (the reference: what the loudspeaker played) from
// one or more microphone channels. Per hop of 128 samples: the reference's spectrum goes into a ring (ref-ring.ts);
// the bulk delay between reference and microphone is estimated (delay-estimator.ts) and the adaptive filter reads the
// ring that far back; per channel a partitioned-block frequency-domain Kalman filter (kalman-filter.ts) cancels the
// linear echo, and a residual echo suppressor (suppressor.ts) removes what is left (misadjustment, loudspeaker
// distortion, the room's tail beyond the filter).
//
// Streaming contract (as the chains' stages): process() takes chunks of any length and returns whole hops; output
// index i is input index i − LATENCY (the first LATENCY output samples are zeros), so the output is as long as the
// input whenever the input so far is whole hops. Chunking does not change the output. Until the reference first
// carries signal the output is the microphone itself, delayed, bit for bit.
import { RealFFT } from '../fft';
import { sharedRowFft, type RowFft } from '../fft-pairs';
import { boundSample, SAMPLE_LIMIT } from '../sample-bound';
import { EchoChannel, Scratch } from './channel';
import { FarActivity } from './far-activity';
import { DelayEstimator } from './delay-estimator';
import { JUMP_SPAN, JumpFinder, MIN_JUMP } from './jump-finder';
import { giveSlot, takeSlot, type HeapSlot } from './heap';
import { jsHopPasses } from './hop-passes';
import { AecArena } from './kernel';
import { LoudspeakerModel } from './loudspeaker';
import { NonlinearLearner } from './nl-learner';
import { channelShared, resolveOptions, type EchoCancellerOptions, type EchoCancellerStats, type ResolvedOptions } from './options';
import { StatePrefetch } from './prefetch';
import { PriorScale } from './prior-scale';
import { RefRing } from './ref-ring';
import { cueLagsFor } from './talker-cue';

export const AEC_SAMPLE_RATE = 16000;
// Module-local for the loops: tsc makes the exported one `exports.AEC_HOP`, a load V8 does not fold out of loops.
const HOP = 128;
export const AEC_HOP = HOP;
const M = 2 * HOP;
const BINS = HOP + 1;
/** Output sample i is input sample i − AEC_LATENCY: the suppressor's overlap-add holds one hop. */
export const AEC_LATENCY = AEC_HOP;
export type { EchoCancellerOptions, EchoCancellerStats } from './options';

/** A reference block counts as signal once a sample's magnitude exceeds this (about −78 dBFS: 4 LSB of 16-bit). */
const ACTIVE_PEAK = 4 / 32768;
/** Per-hop energy (frame power sum) below which the reference or microphone counts as silent for adaptation. */
const SILENT_FRAME_POWER = 1e-7;
/** Partitions the bulk delay keeps before the estimated echo onset (estimation error, early reflections). */
const DELAY_MARGIN_HOPS = 4;
/**
 * A found jump's normalised correlation at least this (jump-finder.ts). The 40 generated jumps of docs/echo.md found
 * theirs at 0.74–0.996 (one at 0.57, found again at its next doubt); a double-talk scene whose filter never cancelled
 * peaked at 0.55 at a wrong shift (echo-ab's dt-53302: −0.6 dB, before the mismatch test's `deep` kept it out of doubt).
 */
const JUMP_RHO = 0.65;
/**
 * An early search's (shorter window: chance peaks are higher) least correlation, or EARLY_AGAIN_RHO where the search
 * before it in the same episode found the same shift (one at 0.62–0.74 at every span: the tests' seed 508).
 */
const EARLY_RHO = 0.75;
const EARLY_AGAIN_RHO = 0.6;
const EARLY_MAX = 8;

function sqrtHann(n: number): Float64Array {
  const w = new Float64Array(n);
  for (let i = 0; i < n; i++) w[i] = Math.sqrt(0.5 - 0.5 * Math.cos((2 * Math.PI * i) / n));
  return w;
}

export class EchoCanceller {
  readonly channels: number;
  readonly latency = AEC_LATENCY;
  private readonly opts: ResolvedOptions;
  private readonly partitions: number;
  private readonly maxLagHops: number;
  /**
   * The FFTs, two frames per call where a hop has two: with the WebAssembly back end the row FFT of this thread's
   * canceller heap (WebAssembly SIMD, bit-identical to RealFFT; its rows are scratch within a hop) whose memory also
   * holds the arena, so that the hop passes work on both in place; else this thread's shared one (RealFFT row by row
   * where WebAssembly is missing).
   */
  private readonly fft: RowFft;
  private readonly win: Float64Array;
  private readonly ring: RefRing;
  private readonly far: FarActivity;
  readonly delay: DelayEstimator;
  readonly chans: EchoChannel[];
  /** Input not yet a whole hop. */
  private readonly micIn: Float32Array[];
  private readonly refIn: Float32Array;
  private pending = 0;
  private readonly refPrev: Float64Array;
  /** Whether refPrev is all zeros, and how many of the ring's newest spectra are (digital silence in the reference). */
  private prevZero = true;
  private zeroRun = 0;
  private active = false;
  private bulk = 0;
  /** Bulk-delay moves so far. */
  private moves = 0;
  private lastLag = -1;
  /** The FFT a found jump moves the filters with (made on the first one). */
  private jumpFft: RealFFT | null = null;
  /** Channel 0's jump finder where early searches run (they extend the estimate into the future from the reference). */
  private earlyRef: JumpFinder | null = null;
  /** The shift the last early search found (NaN: none). */
  private earlyShift = NaN;
  /** Hops the window was moved earlier than the estimate's margin (see applyDelay). */
  private early = 0;
  private hops = 0;
  /**
   * The last hop whose reference block could not be audio (over HOP in energy: more than every sample at full scale; a
   * bounded hostile sample). The residual slope learns nothing while it is within the filter's reach (the channel
   * watches its microphone blocks alike).
   */
  private wildRefHop = -1e9;
  private readonly priorScale: PriorScale;
  private echoIn = 0;
  private echoOut = 0;
  /** Microphone energy of the previous hop while the reference was active (its output comes a hop later). */
  private prevMicEnergy = -1;
  private readonly dPow: Float64Array;
  private readonly scratch: Scratch;
  readonly arena: AecArena;
  /** The loudspeaker's distortion (null when off): the ring holds the spectra of x_eff = x + its distortion. */
  readonly model: LoudspeakerModel | null = null;
  private readonly xEff: Float64Array;
  /** Whether the row FFT and the arena share one memory. */
  private readonly oneMemory: boolean = false;
  /** The heap slot the arena lies in (WebAssembly back end), and the figures kept when it was given back. */
  private readonly slot: HeapSlot | null;
  // A boolean, not the snapshot, is what process() tests: a field that goes from null to an object changes its
  // field type on the map all cancellers share and would deoptimise every running canceller's code once.
  private released = false;
  private final: EchoCancellerStats | null = null;
  /** Brings the state into cache before a chunk's first hop (null with the JavaScript back end). */
  private readonly prefetch: StatePrefetch | null;

  constructor(opts: EchoCancellerOptions) {
    if (!(opts.channels >= 1)) throw new Error('the echo canceller needs at least one microphone channel');
    this.channels = opts.channels;
    this.opts = resolveOptions(opts);
    this.partitions = Math.ceil((this.opts.filterMs * AEC_SAMPLE_RATE) / 1000 / HOP);
    this.maxLagHops = Math.ceil((this.opts.maxDelayMs * AEC_SAMPLE_RATE) / 1000 / HOP);
    const o = this.opts;
    const capacity = this.maxLagHops + this.partitions + 1;
    // The shadow filter's coefficients replace the main filter's first partitions: it can have no more than it.
    const shadowPartitions = Math.min(o.shadowPartitions, this.partitions);
    const chan = { hop: HOP, partitions: this.partitions, shadowPartitions, cueLags: o.terms & 128 ? cueLagsFor(this.maxLagHops, capacity) : 0, slope: o.residualSlope > 0 };
    const stride = RefRing.strideOf(BINS);
    const floats =
      RefRing.floats(BINS, capacity) +
      DelayEstimator.floats(this.maxLagHops) +
      PriorScale.floats(HOP, capacity) +
      opts.channels * EchoChannel.floats(chan) +
      (o.nonlinear ? NonlinearLearner.floats(stride, this.partitions) + LoudspeakerModel.floats(stride, o.clipKnot) : 0) +
      Scratch.floats(HOP) +
      2 * M + // the window, float64
      StatePrefetch.floats() + // the prefetch's ranges, int32
      HOP + 2 * (2 * HOP + BINS + 3) + // the reference block, its previous one, x_eff, the delay estimator's microphone power
      opts.channels * HOP; // the microphone blocks, float32
    // With the WebAssembly back end the arena is a slot of this thread's canceller heap, whose row FFT, partition
    // loops and hop passes every canceller shares (heap.ts); else a memory of its own and the JavaScript passes.
    const slot = (this.slot = o.backend === 'wasm' ? takeSlot(this, floats * 4 + 64) : null);
    let passes = jsHopPasses;
    if (slot) {
      const heap = slot.heap;
      this.fft = heap.fft;
      this.oneMemory = true;
      this.arena = new AecArena(floats, o.backend, { memory: heap.memory, base: slot.base, kernels: heap.kernels });
      passes = heap.passes;
    } else {
      this.fft = sharedRowFft(M);
      this.arena = new AecArena(floats, o.backend);
    }
    this.scratch = new Scratch(this.arena, HOP);
    this.win = this.arena.f64(M);
    this.win.set(sqrtHann(M));
    const priorAt = this.arena.used;
    this.priorScale = new PriorScale(this.arena, this.opts.priorZoneDb, HOP, capacity);
    this.ring = new RefRing(this.arena, BINS, capacity);
    this.far = new FarActivity(this.ring, SILENT_FRAME_POWER);
    const ringEnd = this.arena.used;
    this.delay = new DelayEstimator(this.arena, { maxLag: this.maxLagHops, firstBin: 4, binsPerBand: 3 });
    const shared = channelShared(o);
    this.chans = Array.from(
      { length: opts.channels },
      // Only channel 0's microphone feeds the delay estimator.
      (_, c) =>
        new EchoChannel(this.arena, {
          ...chan,
          ...shared,
          presenceRestart: opts.presenceRestart ?? true,
          delayFromMic: o.delayFromMic && c === 0,
          findJump: o.findJump && o.delayDoubt,
        }),
    );
    if (o.nonlinear) {
      this.model = new LoudspeakerModel(this.arena, HOP, capacity + 2, stride, o.clipKnot);
      const main = this.chans[0].main;
      this.chans[0].learner = new NonlinearLearner(this.arena, this.model, HOP, this.partitions, stride, o.nlEvery, { bins: main.bins, stride: main.stride });
    }
    for (const ch of this.chans) {
      ch.passes = passes;
      ch.sup.kernel = passes.suppress;
      ch.sup.terms = this.opts.terms;
      ch.presence?.watch(this.delay, ch === this.chans[0]);
      ch.constrainEvery = this.opts.constrainEvery;
      ch.shadowEvery = this.opts.shadowEvery;
    }
    if (o.findJump && o.delayDoubt && o.presence) {
      this.chans[0].jumps = new JumpFinder();
      if (o.earlyJump > 0 && o.earlyFuture) this.earlyRef = this.chans[0].jumps;
    }
    this.micIn = Array.from({ length: opts.channels }, () => this.arena.alloc(HOP).a);
    // In the arena, where the prefetch reaches them (in the JavaScript heap they were cold at every hop's first loop).
    this.refIn = this.arena.alloc(HOP).a;
    this.refPrev = this.arena.f64(HOP);
    this.xEff = this.arena.f64(HOP);
    this.dPow = this.arena.f64(BINS);
    this.prefetch = this.oneMemory ? new StatePrefetch(this.arena, this.ring, this.chans[0].main, this.chans[0].learner, priorAt, ringEnd) : null;
  }

  stats(): EchoCancellerStats {
    if (this.released && this.final) return this.final;
    const lag = this.delay.lag;
    return {
      delayMs: this.active && lag >= 0 ? (lag * HOP * 1000) / AEC_SAMPLE_RATE : null,
      erleDb: this.echoOut > 0 && this.echoIn > 0 ? 10 * Math.log10(this.echoIn / this.echoOut) : null,
      referenceActive: this.active,
    };
  }

  /**
   * The stream is over: its heap slot goes back to the thread's heap now, for the next canceller, instead of when this
   * one is garbage-collected. stats() keeps answering with the figures as they were; process() throws from now on
   * (the slot's memory may already be another canceller's). Idempotent.
   */
  release(): void {
    if (this.released) return;
    this.final = this.stats();
    this.released = true;
    if (this.slot) giveSlot(this.slot);
  }

  /**
   * Microphone channels and the reference, equal lengths, any length. Returns the output of every hop completed by
   * this chunk (a multiple of AEC_HOP samples per channel), delayed by AEC_LATENCY.
   */
  process(mic: Float32Array[], ref: Float32Array): Float32Array[] {
    if (this.released) throw new Error('echo canceller used after release()');
    if (mic.length !== this.channels) throw new Error(`expected ${this.channels} microphone channels, got ${mic.length}`);
    const n = ref.length;
    for (const c of mic) if (c.length !== n) throw new Error('microphone and reference chunks must have equal length');
    const hops = Math.floor((this.pending + n) / HOP);
    // Built by push, not map(): map's result has another elements kind once TurboFan inlines it, and hop(), optimised
    // for one, deoptimised ("wrong map") on the other again and again.
    const out: Float32Array[] = [];
    for (let c = 0; c < this.channels; c++) out.push(new Float32Array(hops * HOP));
    if (hops > 0 && this.active && this.prefetch) this.prefetch.run(hops, this.bulk, this.zeroRun);
    let pos = 0;
    // Copied by loops, not set(subarray()): two to four views per hop were most of process()'s own time.
    for (let h = 0; h < hops; h++) {
      const take = HOP - this.pending;
      this.take(mic, ref, pos, take);
      pos += take;
      this.pending = 0;
      this.hop(out, h * HOP);
    }
    const rest = n - pos;
    this.take(mic, ref, pos, rest);
    this.pending += rest;
    return out;
  }

  /** Input samples pos..pos+count-1 into the blocks from `pending` on, bounded (1e30 once killed the filter; the compare
   * first: boundSample's call per sample cost ×1.03). */
  private take(mic: Float32Array[], ref: Float32Array, pos: number, count: number): void {
    const at = this.pending;
    const r = this.refIn;
    for (let i = 0, x = 0; i < count; i++) r[at + i] = (x = ref[pos + i]) <= SAMPLE_LIMIT && x >= -SAMPLE_LIMIT ? x : boundSample(x);
    for (let c = 0; c < this.channels; c++) {
      const d = this.micIn[c];
      const m = mic[c];
      for (let i = 0, x = 0; i < count; i++) d[at + i] = (x = m[pos + i]) <= SAMPLE_LIMIT && x >= -SAMPLE_LIMIT ? x : boundSample(x);
    }
  }

  private hop(out: Float32Array[], at: number): void {
    const x = this.refIn;
    if (!this.active) {
      let peak = 0;
      for (let i = 0; i < HOP; i++) peak = Math.max(peak, Math.abs(x[i]));
      if (peak > ACTIVE_PEAK) this.start();
    }
    if (!this.active) {
      // Identity: the previous microphone block, as it came in.
      for (let c = 0; c < this.channels; c++) {
        const ch = this.chans[c];
        for (let i = 0; i < HOP; i++) out[c][at + i] = ch.micPrev[i];
        for (let i = 0; i < HOP; i++) ch.micPrev[i] = this.micIn[c][i];
      }
      return;
    }
    this.hops++;
    // Reference spectrum of [previous block, this block] into the ring.
    const fft = this.fft;
    fft.reserve(1);
    // A memory that grew detached the arena's views (length 0): cheaper to test than comparing the views' buffers.
    if (this.oneMemory && this.arena.f32.length === 0) throw new Error("the echo canceller's row FFT memory grew under its arena");
    const f = fft.sig;
    let refEnergy = 0;
    const xe = this.xEff;
    if (this.model) this.model.distort(x, xe);
    else for (let i = 0; i < HOP; i++) xe[i] = x[i];
    let blockZero = true;
    for (let i = 0; i < HOP; i++) {
      f[i] = this.refPrev[i];
      f[HOP + i] = xe[i];
      refEnergy += x[i] * x[i];
      this.refPrev[i] = xe[i];
      if (xe[i] !== 0) blockZero = false;
    }
    const ring = this.ring;
    const ro = ring.advance();
    const rRe = ring.re.a;
    const rIm = ring.im.a;
    const rPow = ring.pow.a;
    let refPowSum = 0;
    if (blockZero && this.prevZero) {
      // A frame of digital silence (a voice agent's reference whenever it is not speaking): its spectrum is 0, no FFT.
      rRe.fill(0, ro, ro + BINS);
      rIm.fill(0, ro, ro + BINS);
      rPow.fill(0, ro, ro + BINS);
      this.zeroRun++;
    } else {
      fft.forward(1);
      const xRe = fft.re;
      const xIm = fft.im;
      for (let k = 0; k < BINS; k++) {
        const re = xRe[k];
        const im = xIm[k];
        const p = re * re + im * im;
        rRe[ro + k] = re;
        rIm[ro + k] = im;
        rPow[ro + k] = p;
        refPowSum += p;
      }
      this.zeroRun = 0;
    }
    this.prevZero = blockZero;
    const refActive = refPowSum > SILENT_FRAME_POWER;
    // Far-end activity for adaptation: the reference within the filter's reach.
    // Every spectrum the filter reads (and the tail past it) is exactly 0: its echo estimate is 0 without reading them.
    const reachZero = this.zeroRun > this.bulk + this.partitions;
    this.far.record(ro, refPowSum);
    const farActive = !reachZero && this.far.active(this.bulk, this.partitions);
    if (!this.priorScale.settled) {
      const f = this.priorScale.hop(refActive, refEnergy, this.micIn[0], ring);
      if (f !== 1) for (const ch of this.chans) ch.main.scalePrior(f);
    }

    // The reference as the filter reads it, for the jump finder's estimate of the near future (`earlyJump`).
    if (this.earlyRef) this.earlyRef.recordRef(xe, HOP);
    // Written on every hop, not in a branch (see applyDelay: a rare branch's first run deoptimised hop()).
    this.wildRefHop = refEnergy > HOP ? this.hops : this.wildRefHop;
    const refWild = this.hops - this.wildRefHop <= this.bulk + this.partitions + 1;
    for (let c = 0; c < this.channels; c++) {
      const ch = this.chans[c];
      ch.refWild = refWild;
      ch.run(this.fft, this.win, ring, this.bulk, this.micIn[c], farActive, reachZero, this.scratch, out[c], at);
      if (c === 0) {
        // The delay estimator's microphone power: error plus echo estimate (uncorrelated enough for band energies).
        const sc = this.scratch;
        let micPowSum = 0;
        for (let k = 0; k < BINS; k++) {
          const p = sc.ePow[k] + sc.yPow[k];
          this.dPow[k] = p;
          micPowSum += p;
        }
        this.delay.push(rPow, ro, refActive, this.dPow, 0, micPowSum > SILENT_FRAME_POWER, this.zeroRun > 0);
        this.account(refEnergy, ch.micPrev, out[c], at);
      }
    }
    const pr0 = this.chans[0].presence;
    if (pr0 && (pr0.doubtNow || pr0.searchNow) && this.chans[0].jumps) this.findJump(this.chans[0].jumps, pr0.doubtNow ? JUMP_SPAN : pr0.searchSpan, pr0.searchFirst);
    this.applyDelay();
  }

  /**
   * A channel came into doubt: where did its echo go? A clear peak of the echo estimate's correlation with the
   * microphone away from 0 is the same echo, moved (jump-finder.ts): the bulk delay moves by its whole hops, every
   * channel's filter by the rest within its window, and the delay estimator takes the new lag.
   */
  private findJump(finder: JumpFinder, span: number, first = true): void {
    const maxEarlier = (this.bulk + DELAY_MARGIN_HOPS) * HOP;
    const maxLater = Math.max(0, this.maxLagHops - DELAY_MARGIN_HOPS - this.bulk) * HOP;
    const fft = (this.jumpFft ??= new RealFFT(M));
    const early = span < JUMP_SPAN;
    const filter = early && this.earlyRef ? { h: this.chans[0].main.impulse(fft), lag: this.bulk * HOP } : null;
    const found = finder.find(maxEarlier, maxLater, span, filter);
    const again = early && !first && found !== null && found.shift === this.earlyShift;
    if (early) this.earlyShift = found === null ? NaN : found.shift;
    if (found === null || found.rho < (early ? (again ? EARLY_AGAIN_RHO : EARLY_RHO) : JUMP_RHO) || Math.abs(found.shift) < MIN_JUMP) return;
    const bulk = Math.max(0, Math.min(this.maxLagHops - DELAY_MARGIN_HOPS, this.bulk + Math.floor(found.shift / HOP)));
    const rest = found.shift - (bulk - this.bulk) * HOP;
    for (const ch of this.chans) {
      ch.main.moveSamples(rest, fft);
      // The variances reopened: the filter unlearnt part of its echo during the doubt (without: ERLE 2–4 s after
      // the jumps 44.8 / 39.6 / 45.9 dB on the three sets, with: 49.1 / 43.9 / 50.2).
      ch.main.reopen();
      ch.shadow.copyFrom(ch.main.wRe.a, ch.main.wIm.a);
      ch.shifted(Math.floor(rest / HOP));
    }
    finder.moved();
    this.bulk = bulk;
    this.early = 0;
    this.delay.setLag(bulk + DELAY_MARGIN_HOPS, Math.round(found.shift / HOP));
    this.lastLag = this.delay.lag;
    for (const ch of this.chans) ch.presence?.jumped();
  }

  /** ERLE bookkeeping on channel 0: the output block is the previous microphone block's. */
  private account(refEnergy: number, mic: Float64Array, o: Float32Array, at: number): void {
    if (this.prevMicEnergy >= 0) {
      let eo = 0;
      for (let i = 0; i < HOP; i++) eo += o[at + i] * o[at + i];
      this.echoIn += this.prevMicEnergy;
      this.echoOut += eo;
    }
    if (refEnergy > 1e-6) {
      let em = 0;
      for (let i = 0; i < HOP; i++) em += mic[i] * mic[i];
      this.prevMicEnergy = em;
    } else this.prevMicEnergy = -1;
  }

  /**
   * The filter starts DELAY_MARGIN_HOPS before the estimated lag. Reverberation can bias the estimate late by more
   * than that; when channel 0's filter has its strongest partition at the very start (the direct sound may be cut
   * off), the window moves 2 hops earlier (at most EARLY_MAX in all, until the estimator moves).
   */
  private applyDelay(): void {
    const lag = this.delay.lag;
    if (lag < 0) return;
    // The fields are read and written, and the comparisons made, on every call, not in the rare branches: an operation
    // first met in a stream's rare branch deoptimised hop() ("insufficient type feedback") each time that branch ran
    // (640 times in 6 s of 40 cancellers, ~1 ms each), for every canceller of the thread.
    let early = lag !== this.lastLag ? 0 : this.early;
    this.lastLag = lag;
    const mayMove = early < EARLY_MAX && lag - DELAY_MARGIN_HOPS - early > 0;
    const ch0 = this.chans[0];
    if (ch0.peakFresh) {
      ch0.peakFresh = false;
      if (ch0.peak === 0 && mayMove) early += 2;
    }
    this.early = early;
    const bulk = Math.max(0, lag - DELAY_MARGIN_HOPS - early);
    if (bulk === this.bulk) return;
    // A filter that is cancelling (EchoChannel.vetoes) knows where the echo is better than the envelopes do: the
    // estimator's lag moved by near-end speech (or its end) would push the strongest partition out of the window and
    // throw the converged filter away (docs/echo.md, "A delay move in double talk"); in a long reverberant room the
    // estimate drifts late along its correlation's plateau ("The delay guard on by default").
    if (this.opts.delayGuard && ch0.vetoes(this.bulk - bulk)) return;
    const o = this.opts.reopen;
    const reopen = o === 'always' || (o === 'first' && this.moves === 0);
    this.moves++;
    // A move made in doubt (echo-presence.ts) follows an echo whose delay jumped, the room's response with it: the
    // coefficients stay where they are relative to the window, their variances raised to the prior's (the new lag is
    // a few hops off the old one's alignment as often as not: without that, 1.3 s more to cancel again). Otherwise the
    // estimate was wrong and the echo stayed: they keep their absolute lags.
    const pr = ch0.presence;
    if (pr !== null && pr.doubt) {
      for (const ch of this.chans) {
        ch.main.reopen();
        ch.presence?.moved();
      }
    } else {
      const shift = this.bulk - bulk;
      for (const ch of this.chans) {
        ch.main.shift(shift, reopen);
        ch.shadow.shift(shift);
        ch.shifted(shift);
      }
    }
    this.bulk = bulk;
  }

  /** The reference carried signal for the first time: prime the overlap-add with the previous frame (gain 1). */
  private start(): void {
    this.active = true;
    this.ring.clear();
    for (const ch of this.chans) {
      // Frame [?, micPrev] at gain 1: its second half is what the next output block overlaps with. The half before
      // micPrev has already been output as it was, so only the windowed tail matters: w[M/2 + i]² · micPrev[i].
      for (let i = 0; i < HOP; i++) ch.ola[i] = ch.micPrev[i] * this.win[HOP + i] * this.win[HOP + i];
    }
  }
}
