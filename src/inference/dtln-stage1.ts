// DTLN's stage 1 (the magnitude mask) alone at a coarser frame hop, for the fastest model (nsm-1): 512-sample frames
// every `hop` samples (256: half the frames of DTLN's 128, so half the LSTM steps and FFTs), the mask applied to the
// complex spectrum, inverse FFT, periodic Hann synthesis scaled to sum to 1 at that hop, overlap-add. The stage-1
// graph runs over all the chunk's frames of all streams in one session.run; LSTM states and the framing and
// overlap-add buffers are carried between calls, so chunking does not change the output. JS FFT (fft.ts): with half
// the frames, the STFT is a small share of the cost.
import * as ort from 'onnxruntime-node';
import { BINS, BLOCK, LAYERS, UNITS, joinLstmStates, splitLstmStates, type DtlnGraphs } from './dtln';
import { RealFFT } from '../dsp/fft';
import { concat } from '../dsp/concat';
import { ChainProcessor } from './stream';

/** Frames per stream per session.run: bounds the buffers whatever the chunk length. */
const MAX_FRAMES_PER_RUN = 512;

export class Stage1Chain implements ChainProcessor {
  readonly sampleRate = 16000;
  readonly latency: number;
  private readonly fft = new RealFFT(BLOCK);
  private readonly window = new Float32Array(BLOCK);
  /** Per channel: unframed input, starting with the last BLOCK - hop samples of the previous frame. */
  private inBuf: Float32Array[];
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
    this.olaTail = Array.from({ length: channels }, () => new Float32Array(BLOCK - hop));
    this.h = new Float32Array(LAYERS * channels * UNITS);
    this.c = new Float32Array(LAYERS * channels * UNITS);
  }

  async process(planar: Float32Array[]): Promise<Float32Array[]> {
    const joiner = this.graphs.joiner;
    if (!joiner) return (await Stage1Chain.runJoint([{ chain: this, planar }]))[0];
    // A live stream: run with the other live streams' chains that push in this turn (batching.ts).
    const key = `s1/${this.hop}/${this.inBuf[0].length}/${planar[0]?.length ?? 0}`;
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
    const sigs = parts.map(({ chain, planar }) => planar.map((x, b) => concat(chain.inBuf[b], x)));
    const frames = Math.max(0, Math.floor((sigs[0][0].length - tailLen) / hop));
    let rows = 0;
    for (const [k, { chain, planar }] of parts.entries()) {
      if (chain.hop !== hop || planar.length !== chain.channels || sigs[k][0].length !== sigs[0][0].length) {
        throw new Error('stage-1 chains run together must have the same hop, channels as given and samples');
      }
      rows += chain.channels;
    }
    const outs = parts.map(({ chain }) => Array.from({ length: chain.channels }, () => new Float32Array(frames * hop)));
    for (let f0 = 0; f0 < frames; f0 += MAX_FRAMES_PER_RUN) {
      const t = Math.min(MAX_FRAMES_PER_RUN, frames - f0);
      const re = new Float64Array(rows * t * BINS);
      const im = new Float64Array(rows * t * BINS);
      const mag = new Float32Array(rows * t * BINS);
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
      const h = splitLstmStates(r.hN.data as Float32Array, batches, rows);
      const c = splitLstmStates(r.cN.data as Float32Array, batches, rows);
      const accLen = t * hop + tailLen;
      row = 0;
      for (const [k, { chain }] of parts.entries()) {
        chain.h = h[k];
        chain.c = c[k];
        for (let b = 0; b < chain.channels; b++, row++) {
          const acc = new Float32Array(accLen);
          acc.set(chain.olaTail[b]);
          for (let i = 0; i < t; i++) first.fft.inverseMaskedOverlapAdd(re, im, mask, (row * t + i) * BINS, acc, i * hop, chain.window);
          outs[k][b].set(acc.subarray(0, t * hop), f0 * hop);
          chain.olaTail[b].set(acc.subarray(t * hop, accLen));
        }
      }
    }
    for (const [k, { chain }] of parts.entries()) chain.inBuf = sigs[k].map((x) => x.slice(frames * hop));
    return outs;
  }
}

/** One chain's share of a joint run: its chunk, one array per channel. */
interface Stage1Part {
  chain: Stage1Chain;
  planar: Float32Array[];
}
