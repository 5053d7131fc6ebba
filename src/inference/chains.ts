// The five model chains. Each is a ChainProcessor: delayed, hop-quantised output; AlignedStream aligns it.
import { DelayLine, Decimator3, Interpolator3, RESAMPLE_DELAY_48K } from './dsp';
import { DtlnCore, DtlnGraphs, DTLN_LATENCY, HOP } from './dtln';
import { HighBandFilter, HighBandOptions } from './highband';
import { PostFilter, PostFilterOptions } from './postfilter';
import { ChainProcessor, concat } from './stream';
import { ModelId } from './types';

/** nsm-1 (stage 1 only, Hann resynthesis) and nsm-2 (both stages), optionally averaged over shifted frame grids. */
export class Dtln16Chain implements ChainProcessor {
  readonly sampleRate = 16000;
  readonly latency: number;
  private readonly core: DtlnCore;
  private readonly inDelays: DelayLine[][];
  private readonly outDelays: DelayLine[][];

  constructor(
    graphs: DtlnGraphs,
    readonly channels: number,
    useStage2: boolean,
    /** Frame-grid offsets (samples) to average over; [0] = plain DTLN. */
    private readonly offsets: number[] = [0],
  ) {
    const maxOffset = Math.max(...offsets);
    this.core = new DtlnCore(graphs, { batch: channels * offsets.length, useStage2 });
    this.inDelays = offsets.map((s) => Array.from({ length: channels }, () => new DelayLine(s)));
    this.outDelays = offsets.map((s) => Array.from({ length: channels }, () => new DelayLine(maxOffset - s)));
    this.latency = DTLN_LATENCY + maxOffset;
  }

  async process(planar: Float32Array[]): Promise<Float32Array[]> {
    const G = this.offsets.length;
    if (G === 1) return (await this.core.process(planar)).out;
    const batch: Float32Array[] = [];
    for (let g = 0; g < G; g++) for (let c = 0; c < this.channels; c++) batch.push(this.inDelays[g][c].process(planar[c]));
    const { out } = await this.core.process(batch);
    const result: Float32Array[] = [];
    for (let c = 0; c < this.channels; c++) {
      const acc = new Float32Array(out[0].length);
      for (let g = 0; g < G; g++) {
        const y = this.outDelays[g][c].process(out[g * this.channels + c]);
        for (let i = 0; i < acc.length; i++) acc[i] += y[i];
      }
      for (let i = 0; i < acc.length; i++) acc[i] /= G;
      result.push(acc);
    }
    return result;
  }
}

/** A 16 kHz chain followed by the residual-noise post-filter. */
export class PostFilteredChain implements ChainProcessor {
  readonly sampleRate: number;
  readonly channels: number;
  readonly latency: number;
  private readonly filters: PostFilter[];

  constructor(
    readonly inner: ChainProcessor,
    opts: PostFilterOptions,
  ) {
    this.sampleRate = inner.sampleRate;
    this.channels = inner.channels;
    this.filters = Array.from({ length: inner.channels }, () => new PostFilter(opts));
    this.latency = inner.latency + this.filters[0].latency;
  }

  async process(planar: Float32Array[]): Promise<Float32Array[]> {
    const y = await this.inner.process(planar);
    return y.map((ch, c) => this.filters[c].process(ch));
  }
}

/**
 * nsm-2-hd, 48 kHz: the 16 kHz DTLN core on the speech band (decimated), and above the crossover (~7.6 kHz)
 * the input's high band through HighBandFilter: per-bin Wiener gain (noise PSD tracked while DTLN says "noise"),
 * limited by the broadband gain min(1, 2g) from the core's 4-7.5 kHz effective gain g.
 * out = up(PF(DTLN(down(x)))) + HB(x - up(down(x)), g), all delayed to the same point (PF: the residual-noise
 * post-filter at 16 kHz, `postFilter: null` leaves it out). With `highBand: null` the
 * previous chain: out = up(DTLN(down(x))) + min(1, 2g(t)) * (x - up(down(x))).
 */
export class FullBandChain implements ChainProcessor {
  readonly sampleRate = 48000;
  readonly latency: number;
  private readonly core: DtlnCore;
  private readonly down: Decimator3[];
  private readonly upWet: Interpolator3[];
  private readonly upDry: Interpolator3[];
  private readonly dryDelay16: DelayLine[];
  private readonly inDelay48: DelayLine[];
  private readonly gainDelay48: DelayLine[];
  private readonly gainState: number[];
  private readonly mergers: BandMerger[];
  /** Per-bin high-band filters (null: the broadband gain alone) and the low band's matching delay. */
  private readonly highFilters: HighBandFilter[] | null;
  private readonly lowDelay: DelayLine[];
  /** Residual-noise post-filters on the core's 16 kHz output (null: none). */
  private readonly postFilters: PostFilter[] | null;
  /** The high band's low-pass path, delayed like the input (inDelay48) to wait for the post-filter. */
  private readonly lowDryDelay: DelayLine[];
  /** One-pole smoothing of the per-hop gain at 16 kHz (~4 ms). */
  private readonly smooth = Math.exp(-1 / (0.004 * 16000));

  constructor(
    graphs: DtlnGraphs,
    readonly channels: number,
    highBand: HighBandOptions | null = NSM2HD_HIGHBAND,
    postFilter: PostFilterOptions | null = NSM2HD_POSTFILTER,
  ) {
    this.core = new DtlnCore(graphs, { batch: channels, useStage2: true, highBandGain: true });
    const mk = <T>(f: () => T): T[] => Array.from({ length: channels }, f);
    this.down = mk(() => new Decimator3());
    this.upWet = mk(() => new Interpolator3());
    this.upDry = mk(() => new Interpolator3());
    this.dryDelay16 = mk(() => new DelayLine(DTLN_LATENCY));
    const bandLatency = 2 * RESAMPLE_DELAY_48K + 3 * DTLN_LATENCY;
    this.postFilters = postFilter ? mk(() => new PostFilter({ ...postFilter, sampleRate: 16000 })) : null;
    // The post-filter delays the low band and the per-bin filter the high band: the shorter path waits for the
    // longer one, so the chain's delay grows by the larger of the two only.
    const postLatency48 = this.postFilters ? 3 * this.postFilters[0].latency : 0;
    this.highFilters = highBand ? mk(() => new HighBandFilter(highBand)) : null;
    const filterLatency = this.highFilters ? this.highFilters[0].latency : 0;
    const highExtra = Math.max(0, postLatency48 - filterLatency);
    this.inDelay48 = mk(() => new DelayLine(bandLatency + highExtra));
    this.lowDryDelay = mk(() => new DelayLine(highExtra));
    this.gainDelay48 = mk(() => new DelayLine(RESAMPLE_DELAY_48K + highExtra));
    this.gainState = mk(() => 1);
    this.mergers = mk(() => new BandMerger());
    this.lowDelay = mk(() => new DelayLine(Math.max(0, filterLatency - postLatency48)));
    this.latency = bandLatency + Math.max(postLatency48, filterLatency);
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
    // Decimator output counts are identical across channels (same input lengths).
    const { out, highGain } = await this.core.process(x16);
    const mapGain = this.highFilters === null;
    const result: Float32Array[] = [];
    for (let c = 0; c < this.channels; c++) {
      const low = this.upWet[c].process(this.postFilters ? this.postFilters[c].process(out[c]) : out[c]);
      // The dry path must see exactly the samples the core consumed: same delay, same count.
      const dry16 = this.dryDelay16[c].process(x16[c]);
      const lowDryAll = this.lowDryDelay[c].process(this.upDry[c].process(dry16));
      const xd = this.inDelay48[c].process(planar[c]);
      // Gain per 16 kHz sample (held per hop, smoothed), repeated x3 and delayed like the interpolator. The per-bin
      // filter takes DTLN's own gain (it maps it itself); the broadband path gets the mapped gain.
      const hg = mapGain ? highGain![c].map(HIGH_GAIN_MAP) : highGain![c];
      const g48 = new Float32Array(3 * out[c].length);
      let s = this.gainState[c];
      for (let j = 0; j < hg.length; j++) {
        for (let i = 0; i < HOP; i++) {
          s = hg[j] + this.smooth * (s - hg[j]);
          const o = 3 * (j * HOP + i);
          g48[o] = s;
          g48[o + 1] = s;
          g48[o + 2] = s;
        }
      }
      this.gainState[c] = s;
      const g = this.gainDelay48[c].process(g48);
      const bands = this.mergers[c].merge(low, lowDryAll, xd, g);
      if (!this.highFilters) {
        const y = bands.low;
        for (let i = 0; i < y.length; i++) y[i] += bands.gain[i] * bands.high[i];
        result.push(y);
      } else {
        const y = this.lowDelay[c].process(bands.low);
        const h = this.highFilters[c].process(bands.high, bands.gain);
        const sum = new Float32Array(y.length);
        for (let i = 0; i < y.length; i++) sum[i] = y[i] + h[i];
        result.push(sum);
      }
    }
    return result;
  }
}

/**
 * The four 48 kHz paths of FullBandChain are aligned in stream time but arrive in different amounts per call (the
 * core emits whole hops, the dry paths follow the input), so each keeps its surplus until the others catch up.
 * Returns equal-length low band, high band (input minus the same low-pass path: the crossover is exact) and gain.
 */
class BandMerger {
  private low: Float32Array = new Float32Array(0);
  private lowDry: Float32Array = new Float32Array(0);
  private dry: Float32Array = new Float32Array(0);
  private gain: Float32Array = new Float32Array(0);

  merge(low: Float32Array, lowDry: Float32Array, dry: Float32Array, gain: Float32Array): { low: Float32Array; high: Float32Array; gain: Float32Array } {
    this.low = concat(this.low, low);
    this.lowDry = concat(this.lowDry, lowDry);
    this.dry = concat(this.dry, dry);
    this.gain = concat(this.gain, gain);
    const n = Math.min(this.low.length, this.lowDry.length, this.dry.length, this.gain.length);
    const high = new Float32Array(n);
    for (let i = 0; i < n; i++) high[i] = this.dry[i] - this.lowDry[i];
    const res = { low: this.low.slice(0, n), high, gain: this.gain.slice(0, n) };
    this.low = this.low.slice(n);
    this.lowDry = this.lowDry.slice(n);
    this.dry = this.dry.slice(n);
    this.gain = this.gain.slice(n);
    return res;
  }
}

/**
 * Maps the core's 4-7.5 kHz gain to the gain applied above the crossover. The plain gain took 7 dB off speech above
 * 8 kHz on fullband/ (noise dominates 4-8 kHz during speech); twice the gain, capped at 1, keeps speech within ~2 dB
 * while still taking 8 dB of noise off at 0 dB SNR (docs/engine.md).
 */
const HIGH_GAIN_MAP = (g: number): number => Math.min(1, 2 * g);

export function createChain(model: ModelId, channels: number, graphs: DtlnGraphs): ChainProcessor {
  switch (model) {
    case 'nsm-1':
      return new Dtln16Chain(graphs, channels, false);
    case 'nsm-2':
      return new Dtln16Chain(graphs, channels, true);
    case 'nsm-3':
      return new PostFilteredChain(new Dtln16Chain(graphs, channels, true), NSM3_POSTFILTER);
    case 'nsm-4':
      return new PostFilteredChain(new Dtln16Chain(graphs, channels, true, [0, 32, 64, 96]), NSM4_POSTFILTER);
    case 'nsm-2-hd':
      return new FullBandChain(graphs, channels);
    default:
      throw new Error(`unknown model ${String(model)}`);
  }
}

/** nsm-2-hd's per-bin high-band filter: HighBandFilter's defaults, tuned on fullband/ (docs/engine.md). */
export const NSM2HD_HIGHBAND: HighBandOptions = {};
/**
 * nsm-2-hd's post-filter on the 16 kHz core output (docs/engine.md). Windowed-minimum noise floor: the core's first
 * output hops are digital zeros, from which the rise-limited floor of nsm-3/nsm-4 would take tens of seconds to climb.
 */
export const NSM2HD_POSTFILTER: PostFilterOptions | null = { overSubtract: 4, floorDb: -10, noiseWindowS: 1.5 };

/**
 * nsm-3 / nsm-4 post-filters: the rise-limited noise tracker, lifted to the 1.5 s windowed minimum so that it is not
 * stuck near zero after digital silence or DTLN's leading zeros (it used to stay idle for the first seconds of every
 * file, and for ~13 s after 1 s of leading silence). Settings re-tuned with the lift (docs/engine.md).
 */
export const NSM3_POSTFILTER: PostFilterOptions = { overSubtract: 4, floorDb: -15, noiseWindowS: 1.5, noiseMode: 'lift' };
export const NSM4_POSTFILTER: PostFilterOptions = { overSubtract: 8, floorDb: -15, noiseWindowS: 1.5, noiseMode: 'lift' };
