// DTLN's stage 1 (the magnitude mask) alone at a coarser frame hop, for the fastest model (nsm-1): 512-sample frames
// every `hop` samples (256: half the frames of DTLN's 128, so half the LSTM steps and FFTs), the mask applied to the
// complex spectrum, inverse FFT, periodic Hann synthesis scaled to sum to 1 at that hop, overlap-add. The stage-1
// graph runs over all the chunk's frames of all streams in one session.run; LSTM states and the framing and
// overlap-add buffers are carried between calls, so chunking does not change the output. JS FFT (fft.ts): with half
// the frames, the STFT is a small share of the cost.
import * as ort from 'onnxruntime-node';
import { BINS, BLOCK, LAYERS, UNITS, joinLstmStates, splitLstmStates, type DtlnGraphs } from './dtln';
import { RealFFT } from '../dsp/fft';
import { ChainProcessor } from './stream';

/** Frames per stream per session.run: bounds the buffers whatever the chunk length. */
const MAX_FRAMES_PER_RUN = 512;

export class Stage1Chain implements ChainProcessor {
  readonly sampleRate = 16000;
  readonly latency: number;
  private readonly fft = new RealFFT(BLOCK);
  private readonly window = new Float32Array(BLOCK);
  /**
   * Per channel: unframed input (the first inLen samples), starting with the last BLOCK - hop samples of the previous
   * frame. Grown to the largest chunk seen and reused: a live stream pushes 50 chunks a second.
   */
  private inBuf: Float32Array[];
  private inLen: number;
  private readonly olaTail: Float32Array[];
  private h: Float32Array;
  private c: Float32Array;

  constructor(
    private readonly graphs: DtlnGraphs,
    readonly channels: number,
    private readonly hop: number,
  ) {
    if (BLOCK % hop !== 0 || hop > BLOCK / 2) throw new Error(`stage-1 hop must divide ${BLOCK} and be at most ${BLOCK / 2}`);
    this.latency = BLOCK - hop;
    // Periodic Hann sums to BLOCK / (2 hop) at this hop: scaled so that the synthesis has unit gain.
    for (let i = 0; i < BLOCK; i++) this.window[i] = ((0.5 * (1 - Math.cos((2 * Math.PI * i) / BLOCK))) * 2 * hop) / BLOCK;
    this.inBuf = Array.from({ length: channels }, () => new Float32Array(BLOCK - hop));
    this.inLen = BLOCK - hop;
    this.olaTail = Array.from({ length: channels }, () => new Float32Array(BLOCK - hop));
    this.h = new Float32Array(LAYERS * channels * UNITS);
    this.c = new Float32Array(LAYERS * channels * UNITS);
  }

  async process(planar: Float32Array[]): Promise<Float32Array[]> {
    const joiner = this.graphs.joiner;
    if (!joiner) return (await Stage1Chain.runJoint([{ chain: this, planar }]))[0];
    // A live stream: run with the other live streams' chains that push in this turn (batching.ts).
    const key = `s1/${this.hop}/${this.inLen}/${planar[0]?.length ?? 0}`;
    return (await joiner.join(key, [{ chain: this, planar }], this.channels, (all) => Stage1Chain.runJoint(all, joiner.graphs)))[0];
  }

  /**
   * process() for several chains at once: their channels are rows of one batch, so the graph runs once per run of
   * frames for all of them; each chain keeps its own states and buffers, and every row's output is what the chain
   * would give alone. The chains must have the same hop, hold the same samples and get chunks of the same length.
   */
  static async runJoint(parts: Stage1Part[], graphs: DtlnGraphs = parts[0].chain.graphs): Promise<Float32Array[][]> {
    const first = parts[0].chain;
    const hop = first.hop;
    const tailLen = BLOCK - hop;
    const len = first.inLen + (parts[0].planar[0]?.length ?? 0);
    let rows = 0;
    for (const { chain, planar } of parts) {
      if (chain.hop !== hop || planar.length !== chain.channels || chain.inLen + (planar[0]?.length ?? 0) !== len) {
        throw new Error('stage-1 chains run together must have the same hop, channels as given and samples');
      }
      rows += chain.channels;
    }
    // Each chain's input: what it held, then the chunk (sigs[k][b][0 .. len)).
    const sigs = parts.map(({ chain, planar }) => chain.append(planar, len));
    const frames = Math.max(0, Math.floor((len - tailLen) / hop));
    // One output array for all rows of the call (each part's channels are views into it).
    const all = new Float32Array(rows * frames * hop);
    let o = 0;
    const outs = parts.map(({ chain }) =>
      Array.from({ length: chain.channels }, () => {
        const v = all.subarray(o, o + frames * hop);
        o += frames * hop;
        return v;
      }),
    );
    const acc = scratch(frames > 0 ? Math.min(MAX_FRAMES_PER_RUN, frames) * hop + tailLen : 0);
    for (let f0 = 0; f0 < frames; f0 += MAX_FRAMES_PER_RUN) {
      const t = Math.min(MAX_FRAMES_PER_RUN, frames - f0);
      const spectra = takeSpectra(rows * t * BINS);
      const { re, im, mag } = spectra;
      let row = 0;
      for (const [k, { chain }] of parts.entries()) {
        for (let b = 0; b < chain.channels; b++, row++) {
          for (let i = 0; i < t; i++) first.fft.forwardMag(sigs[k][b], (f0 + i) * hop, re, im, mag, (row * t + i) * BINS);
        }
      }
      const batches = parts.map((p) => p.chain.channels);
      const r = await graphs.stage1.run({
        mag: new ort.Tensor('float32', mag, [rows, t, BINS]),
        h0: new ort.Tensor('float32', joinLstmStates(parts.map((p) => p.chain.h), batches, rows), [LAYERS, rows, UNITS]),
        c0: new ort.Tensor('float32', joinLstmStates(parts.map((p) => p.chain.c), batches, rows), [LAYERS, rows, UNITS]),
      });
      const mask = r.mask.data as Float32Array;
      const h = splitLstmStates(r.hN.data as Float32Array, batches, rows, parts.map((p) => p.chain.h));
      const c = splitLstmStates(r.cN.data as Float32Array, batches, rows, parts.map((p) => p.chain.c));
      const accLen = t * hop + tailLen;
      row = 0;
      for (const [k, { chain }] of parts.entries()) {
        chain.h = h[k];
        chain.c = c[k];
        for (let b = 0; b < chain.channels; b++, row++) {
          acc.set(chain.olaTail[b]);
          acc.fill(0, tailLen, accLen);
          for (let i = 0; i < t; i++) first.fft.inverseMaskedOverlapAdd(re, im, mask, (row * t + i) * BINS, acc, i * hop, chain.window);
          outs[k][b].set(acc.subarray(0, t * hop), f0 * hop);
          chain.olaTail[b].set(acc.subarray(t * hop, accLen));
        }
      }
      releaseSpectra(spectra);
    }
    for (const { chain } of parts) chain.consume(frames * hop, len);
    return outs;
  }

  /** Appends a chunk to the held input (growing the buffers when needed); the input, len samples per channel. */
  private append(planar: Float32Array[], len: number): Float32Array[] {
    if (this.inBuf[0].length < len) {
      this.inBuf = this.inBuf.map((old) => {
        const grown = new Float32Array(len);
        grown.set(old.subarray(0, this.inLen));
        return grown;
      });
    }
    for (let b = 0; b < this.channels; b++) this.inBuf[b].set(planar[b], this.inLen);
    this.inLen = len;
    return this.inBuf;
  }

  /** Drops the first `used` samples (framed already); what is left starts the next call's input. */
  private consume(used: number, len: number): void {
    for (const x of this.inBuf) x.copyWithin(0, used, len);
    this.inLen = len - used;
  }
}

/**
 * The spectra of a run (every row's frames: re, im for the inverse, mag for the graph), reused from run to run: a live
 * worker makes hundreds of runs a second, and fresh arrays cost more than the FFTs (zeroing, then GC). Taken for the
 * length of one run (it spans an await: runs of different groups may overlap), then given back.
 */
interface Spectra {
  re: Float64Array;
  im: Float64Array;
  mag: Float32Array;
}
const spareSpectra: Spectra[] = [];
function takeSpectra(n: number): Spectra {
  const s = spareSpectra.pop();
  if (s && s.re.length >= n) return { re: s.re.subarray(0, n), im: s.im.subarray(0, n), mag: s.mag.subarray(0, n) };
  return { re: new Float64Array(n), im: new Float64Array(n), mag: new Float32Array(n) };
}
function releaseSpectra(s: Spectra): void {
  // The whole arrays again (subarray's buffer), biggest kept: a few at most (one per run in flight).
  const whole = (x: Float64Array): Float64Array => new Float64Array(x.buffer);
  if (spareSpectra.length < 4) spareSpectra.push({ re: whole(s.re), im: whole(s.im), mag: new Float32Array(s.mag.buffer) });
}

/**
 * The overlap-add accumulator, shared by every chain of this thread: only used between awaits (a joint run's
 * synchronous part), so concurrent runs cannot interleave on it.
 */
let accScratch = new Float32Array(0);
function scratch(n: number): Float32Array {
  if (accScratch.length < n) accScratch = new Float32Array(n);
  return accScratch.subarray(0, n);
}

/** One chain's share of a joint run: its chunk, one array per channel. */
interface Stage1Part {
  chain: Stage1Chain;
  planar: Float32Array[];
}
