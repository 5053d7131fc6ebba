// Full band at 48 kHz around any 16 kHz chain (nsm-2-hd, and nsm-1..nsm-4 when the input is above 16 kHz and its
// rate is kept):
//
//   out = up(C(down(x))) + HB(x - up(down(x)), g)
//
// C is the 16 kHz chain on the decimated speech band. The crossover is exact: the high band is the input minus the
// same low-pass path (down then up, delayed like C), so with C and HB the identity, out == x. g is C's own gain in
// 4-7.5 kHz per hop, measured on its aligned input and output (BandGainProbe): it says how much C took out at the top
// of its band, i.e. whether a frame is speech or noise there. HB (highband.ts) filters the input's own high band per
// bin with a noise estimate tracked while g says "noise", limited by the broadband gain g; with `highBand: null` the
// broadband gain alone is applied.
//
// With an echo reference (core: EchoCore, the canceller in front of the 16 kHz chain) the reference is decimated with
// the microphone, g is measured on the canceller's output (the core's input is echo-free), and the high band is first
// scaled by g_aec, what the canceller removed in 4-7.5 kHz (a second probe on its input and output): echoed far-end
// speech above 8 kHz is the same speech it removed below. The echo-free input (the dry signal of an attenuation
// limit) is x - up(r) - (1 - g_aec) HB_in, r what the canceller removed: x itself while it removed nothing.
import { DelayLine, Decimator3, Interpolator3, RESAMPLE_DELAY_48K } from '../../dsp/resample';
import { BLOCK, HOP } from './dtln';
import { sharedRowFft } from '../../dsp/fft-pairs';
import { HighBandFilter, HighBandOptions } from '../../dsp/highband';
import { concat, concatAll } from '../../dsp/concat';
import { ChainProcessor } from './aligned-stream';
import { EchoCore, subtract, type Cancelled } from './echo-front';
import type { EchoReport } from '../types';

/** Band edges of the gain probe at 16 kHz / 512 points (31.25 Hz per bin): 4 to 7.5 kHz (the resampler rolls off above). */
const PROBE_LO = 128;
const PROBE_HI = 240;
/** Frames per fft-pairs batch (two rows each: input and output). */
const PROBE_BATCH = 64;

/**
 * Per hop of the aligned core input x and output y (16 kHz): sqrt(E_y / E_x) in 4-7.5 kHz over Hann-windowed
 * 512-sample frames, capped at 1, averaged over the 4 frames that overlap the hop. Streams: returns the gains of the
 * hops completed so far (hop h needs the samples up to the end of hop h + 3).
 */
export class BandGainProbe {
  private readonly fft = sharedRowFft(BLOCK);
  private readonly window = new Float64Array(BLOCK);
  /** Unframed input / output; both start with the last BLOCK - HOP samples of the previous frame (zeros at first). */
  private xBuf: Float32Array = new Float32Array(BLOCK - HOP);
  private yBuf: Float32Array = new Float32Array(BLOCK - HOP);
  /** Gains of the last 3 frames. */
  private readonly hist = [1, 1, 1];
  private framesSeen = 0;

  /** unity: a frame whose output is its input, sample for sample, gets a gain of exactly 1 (the canceller's probe). */
  constructor(private readonly unity = false) {
    for (let i = 0; i < BLOCK; i++) this.window[i] = 0.5 - 0.5 * Math.cos((2 * Math.PI * i) / BLOCK);
  }

  process(x: Float32Array, y: Float32Array): Float32Array {
    this.xBuf = concat(this.xBuf, x);
    this.yBuf = concat(this.yBuf, y);
    const avail = Math.min(this.xBuf.length, this.yBuf.length);
    const frames = Math.max(0, Math.floor((avail - (BLOCK - HOP)) / HOP));
    const gains: number[] = [];
    const w = this.window;
    const fft = this.fft;
    const K = fft.bins;
    for (let f0 = 0; f0 < frames; f0 += PROBE_BATCH) {
      const count = Math.min(PROBE_BATCH, frames - f0);
      // Rows r and count + r: frame f0 + r of the input and of the output, windowed.
      fft.reserve(2 * count);
      fft.windowRows(this.xBuf, f0 * HOP, HOP, count, w, false);
      fft.windowRows(this.yBuf, f0 * HOP, HOP, count, w, false, count);
      fft.forward(2 * count);
      const { re, im } = fft;
      for (let r = 0; r < count; r++) {
        const ein = 1e-9 + bandEnergy(re, im, r * K);
        const eout = bandEnergy(re, im, (count + r) * K);
        const g = this.unity && sameFrame(this.xBuf, this.yBuf, (f0 + r) * HOP) ? 1 : Math.min(1, Math.sqrt(eout / ein));
        // Frame k (on the zero-padded stream) ends with hop k: hop k - 3 is now covered by all 4 of its frames.
        if (this.framesSeen++ >= 3) gains.push(0.25 * (g + this.hist[0] + this.hist[1] + this.hist[2]));
        this.hist[2] = this.hist[1];
        this.hist[1] = this.hist[0];
        this.hist[0] = g;
      }
    }
    this.xBuf = this.xBuf.slice(frames * HOP);
    this.yBuf = this.yBuf.slice(frames * HOP);
    return Float32Array.from(gains);
  }
}

/** Whether the BLOCK samples of a and b from `at` are the same. */
function sameFrame(a: Float32Array, b: Float32Array, at: number): boolean {
  for (let i = at; i < at + BLOCK; i++) if (a[i] !== b[i]) return false;
  return true;
}

/** Energy in PROBE_LO..PROBE_HI of the spectrum row starting at `row`. */
function bandEnergy(re: Float64Array, im: Float64Array, row: number): number {
  let e = 0;
  for (let k = PROBE_LO; k < PROBE_HI; k++) e += re[row + k] * re[row + k] + im[row + k] * im[row + k];
  return e;
}

export interface FullBandOptions {
  /** Per-bin high-band filter; null: the broadband gain g alone. */
  highBand: HighBandOptions | null;
}

export class FullBandChain implements ChainProcessor {
  readonly sampleRate = 48000;
  readonly latency: number;
  readonly holdback: number;
  readonly channels: number;
  /** More than `channels` when the core takes extra inputs (the echo reference: echo-front.ts): resampled, not output. */
  readonly inputChannels: number;
  private readonly down: Decimator3[];
  private readonly upWet: Interpolator3[];
  private readonly upDry: Interpolator3[];
  /** The core's input delayed by the core's latency: the probe's reference and the dry low band. */
  private readonly coreInDelay: DelayLine[];
  private readonly probes: BandGainProbe[];
  private readonly inDelay48: DelayLine[];
  private readonly gainDelay48: DelayLine[];
  private readonly gainState: number[];
  private readonly mergers: StreamMerger[];
  private readonly highFilters: HighBandFilter[] | null;
  private readonly lowDelay: DelayLine[];
  /** One-pole smoothing of the per-hop gain at 16 kHz (~4 ms). */
  private readonly smooth = Math.exp(-1 / (0.004 * 16000));
  private readonly echo: EchoPaths | null;
  readonly takeEchoFree?: () => Float32Array[];
  readonly echoStats?: () => EchoReport;
  readonly release?: () => void;

  constructor(
    /** The 16 kHz chain for the speech band. */
    readonly core: ChainProcessor,
    opts: FullBandOptions,
  ) {
    if (core.sampleRate !== 16000) throw new Error('the full-band chain needs a 16 kHz core');
    const channels = (this.channels = core.channels);
    const mk = <T>(f: () => T): T[] => Array.from({ length: channels }, f);
    this.inputChannels = core.inputChannels ?? channels;
    this.down = Array.from({ length: this.inputChannels }, () => new Decimator3());
    this.upWet = mk(() => new Interpolator3());
    this.upDry = mk(() => new Interpolator3());
    this.coreInDelay = mk(() => new DelayLine(core.latency));
    this.probes = mk(() => new BandGainProbe());
    // Output of the up-sampled core at index i is input index i - (decimator + core + interpolator delays).
    const bandLatency = 2 * RESAMPLE_DELAY_48K + 3 * core.latency;
    this.inDelay48 = mk(() => new DelayLine(bandLatency));
    this.gainDelay48 = mk(() => new DelayLine(RESAMPLE_DELAY_48K));
    this.gainState = mk(() => 1);
    this.mergers = mk(() => new StreamMerger());
    this.highFilters = opts.highBand ? mk(() => new HighBandFilter(opts.highBand!)) : null;
    const filterLatency = this.highFilters ? this.highFilters[0].latency : 0;
    this.lowDelay = mk(() => new DelayLine(filterLatency));
    this.latency = bandLatency + filterLatency;
    // The band-gain probe frames the low band in BLOCK windows: a hop's gain (and so its output) comes BLOCK - HOP
    // samples at 16 kHz after the hop itself.
    // The core's own holdback (the canceller's hop) delays its output, and so the probe, as much again.
    this.holdback = 3 * (BLOCK - HOP) + 3 * (core.holdback ?? 0);
    this.echo = core instanceof EchoCore ? new EchoPaths(core, channels, core.latency, bandLatency, this.smooth) : null;
    if (this.echo) {
      const echo = this.echo;
      this.takeEchoFree = () => echo.takeFree();
      this.echoStats = () => echo.core.echoStats();
      this.release = () => echo.core.release();
    }
  }

  /**
   * Evaluation only, per-bin chain: keep every STFT frame's gain vector, per channel. Frozen-gain measurement: run a
   * signal's high band, delayed by `latency - highBandLatency`, through `new HighBandFilter({ replay: frames })`.
   */
  recordHighBandFrames(): Float32Array[][] {
    if (!this.highFilters) throw new Error('this chain has no per-bin high-band filter (highBand: null)');
    return this.highFilters.map((f) => (f.recorded = []));
  }

  /** Delay of the per-bin high-band filter (0 without it); the rest of `latency` comes before it. */
  get highBandLatency(): number {
    return this.highFilters ? this.highFilters[0].latency : 0;
  }

  async process(planar: Float32Array[]): Promise<Float32Array[]> {
    const x16 = planar.map((x, c) => this.down[c].process(x));
    const y16 = await this.core.process(x16);
    const echo = this.echo;
    const cancelled = echo ? echo.core.takeCancelled() : null;
    const result: Float32Array[] = [];
    for (let c = 0; c < this.channels; c++) {
      const xd16 = this.coreInDelay[c].process(x16[c]);
      // With the canceller, the model's gain is measured on its own input: the echo-free band.
      const hg = this.probes[c].process(cancelled ? echo!.cleanDelay[c].process(cancelled.clean[c]) : xd16, y16[c]);
      const low = this.upWet[c].process(y16[c]);
      const lowDry = this.upDry[c].process(xd16);
      const xd = this.inDelay48[c].process(planar[c]);
      // Gain per 16 kHz sample (held per hop, smoothed), repeated x3 and delayed like the interpolator.
      const g48 = new Float32Array(3 * HOP * hg.length);
      this.gainState[c] = spreadGains(hg, this.smooth, this.gainState[c], g48);
      const parts = [low, lowDry, xd, this.gainDelay48[c].process(g48)];
      if (cancelled) parts.push(...echo!.paths(c, cancelled));
      const merged = this.mergers[c].merge(parts);
      const n = merged[0].length;
      const bands = { low: merged[0], high: subtract(merged[2], merged[1], n), gain: merged[3] };
      if (cancelled) bands.high = echo!.scaleHigh(c, merged[2], bands.high, merged[4], merged[5]);
      if (!this.highFilters) {
        const y = bands.low;
        addProduct(y, bands.gain, bands.high);
        result.push(y);
      } else {
        const y = this.lowDelay[c].process(bands.low);
        const h = this.highFilters[c].process(bands.high, bands.gain);
        addProduct(h, null, y);
        result.push(h);
      }
    }
    return result;
  }
}

/**
 * The 48 kHz paths of FullBandChain are aligned in stream time but arrive in different amounts per call (the core
 * emits whole hops, the probe a hop 3 hops later, the dry paths follow the input), so each keeps its surplus until the
 * others catch up. Returns them at equal lengths.
 */
class StreamMerger {
  private held: Float32Array[] = [];

  merge(parts: Float32Array[]): Float32Array[] {
    if (this.held.length === 0) this.held = parts.map(() => new Float32Array(0));
    this.held = this.held.map((h, i) => concat(h, parts[i]));
    const n = Math.min(...this.held.map((h) => h.length));
    const out = this.held.map((h) => h.slice(0, n));
    this.held = this.held.map((h) => h.slice(n));
    return out;
  }
}

/**
 * The canceller's paths in FullBandChain: g_aec (what it removed in 4-7.5 kHz, per hop, smoothed as g is) and its
 * removal r, both at 48 kHz in the high band's timeline (bandLatency behind the input), and the echo-free input.
 */
class EchoPaths {
  readonly cleanDelay: DelayLine[];
  private readonly probes: BandGainProbe[];
  private readonly gainState: number[];
  private readonly gainDelay48: DelayLine[];
  private readonly removalDelay: DelayLine[];
  private readonly upRemoval: Interpolator3[];
  private free: Float32Array[][];
  /** Echo-free samples still to drop (bandLatency: the high band's delay). */
  private toSkip: number;

  constructor(
    readonly core: EchoCore,
    channels: number,
    coreLatency: number,
    bandLatency: number,
    private readonly smooth: number,
  ) {
    const mk = <T>(f: () => T): T[] => Array.from({ length: channels }, f);
    this.cleanDelay = mk(() => new DelayLine(coreLatency));
    this.probes = mk(() => new BandGainProbe(true));
    this.gainState = mk(() => 1);
    // The probe's gains are on the core input's timeline: the decimator's delay and the core's (x3) to the high band.
    // Ones first, not zeros: before its first hop the canceller has removed nothing, and the high band stays as it is.
    const gainDelay = RESAMPLE_DELAY_48K + 3 * coreLatency;
    this.gainDelay48 = mk(() => {
      const d = new DelayLine(gainDelay);
      d.process(new Float32Array(gainDelay).fill(1));
      return d;
    });
    this.removalDelay = mk(() => new DelayLine(coreLatency));
    this.upRemoval = mk(() => new Interpolator3());
    this.free = mk(() => []);
    this.toSkip = bandLatency;
  }

  /** g_aec and r at 48 kHz, from what the canceller took and gave on channel c. */
  paths(c: number, { mic, clean }: Cancelled): Float32Array[] {
    const ga = this.probes[c].process(mic[c], clean[c]);
    const g48 = new Float32Array(3 * HOP * ga.length);
    this.gainState[c] = spreadGains(ga, this.smooth, this.gainState[c], g48);
    const removed = this.upRemoval[c].process(this.removalDelay[c].process(subtract(mic[c], clean[c], mic[c].length)));
    return [this.gainDelay48[c].process(g48), removed];
  }

  /** Keeps the echo-free input x - r - (1 - g_aec) high and returns the high band scaled by g_aec. */
  scaleHigh(c: number, x: Float32Array, high: Float32Array, gAec: Float32Array, removed: Float32Array): Float32Array {
    const n = high.length;
    const free = new Float32Array(n);
    const scaled = new Float32Array(n);
    for (let i = 0; i < n; i++) {
      free[i] = x[i] - removed[i] - (1 - gAec[i]) * high[i];
      scaled[i] = gAec[i] * high[i];
    }
    this.free[c].push(free);
    return scaled;
  }

  takeFree(): Float32Array[] {
    let out = this.free.map((parts) => concatAll(parts));
    this.free = this.free.map(() => []);
    const skip = Math.min(this.toSkip, out[0].length);
    this.toSkip -= skip;
    if (skip > 0) out = out.map((x) => x.subarray(skip));
    return out;
  }
}

// The per-sample loops of FullBandChain.process, each in a small function of its own: process runs once per chunk,
// so loops inside it ran in V8's unoptimised tiers until on-stack replacement; these are optimised after a few calls.

/**
 * The probe's gain per hop (hg) held for the hop's 16 kHz samples, smoothed sample by sample from `state`, each value
 * written three times (48 kHz) into g48; returns the new state.
 */
function spreadGains(hg: Float32Array, smooth: number, state: number, g48: Float32Array): number {
  let s = state;
  for (let j = 0; j < hg.length; j++) {
    const h = hg[j];
    for (let i = 0; i < HOP; i++) {
      s = h + smooth * (s - h);
      const o = 3 * (j * HOP + i);
      g48[o] = s;
      g48[o + 1] = s;
      g48[o + 2] = s;
    }
  }
  return s;
}

/** y[i] += gain[i] * x[i] (gain null: y[i] += x[i]). */
function addProduct(y: Float32Array, gain: Float32Array | null, x: Float32Array): void {
  if (gain) for (let i = 0; i < y.length; i++) y[i] += gain[i] * x[i];
  else for (let i = 0; i < y.length; i++) y[i] += x[i];
}
