// DTLN's stage 1 (the magnitude mask) alone at a coarser frame hop, for the fastest model (nsm-1): 512-sample frames
// every `hop` samples (256: half the frames of DTLN's 128, so half the LSTM steps and FFTs), the mask applied to the
// complex spectrum, inverse FFT, periodic Hann synthesis scaled to sum to 1 at that hop, overlap-add. The stage-1
// graph runs over all the chunk's frames of all streams in one session.run; LSTM states and the framing and
// overlap-add buffers are carried between calls, so chunking does not change the output. The STFT is dsp/stft.ts's
// back end (WebAssembly SIMD, bit-identical to RealFFT): in a live worker at 300 streams the JS FFT was a quarter of
// its time.
import * as ort from 'onnxruntime-node';
import { BINS, BLOCK, LAYERS, UNITS, joinLstmStates, splitLstmStates, type DtlnGraphs } from './dtln';
import { borrowStft, returnStft } from '../dsp/stft';
import { ChainProcessor } from './stream';

/** Frames per stream per session.run: bounds the buffers whatever the chunk length. */
const MAX_FRAMES_PER_RUN = 512;

export class Stage1Chain implements ChainProcessor {
  readonly sampleRate = 16000;
  readonly latency: number;
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
    // The STFT back end (WebAssembly SIMD where it loads, bit-identical to RealFFT), lent for this call: its buffers
    // hold each row's frames, spectra, masked blocks and overlap-add accumulator.
    const stft = borrowStft();
    try {
      for (let f0 = 0; f0 < frames; f0 += MAX_FRAMES_PER_RUN) {
        const t = Math.min(MAX_FRAMES_PER_RUN, frames - f0);
        const bufs = stft.prepare(rows, t, hop);
        const sigLen = t * hop + tailLen;
        let row = 0;
        for (const [k, { chain }] of parts.entries()) {
          for (let b = 0; b < chain.channels; b++, row++) {
            bufs.sig[row].set(sigs[k][b].subarray(f0 * hop, f0 * hop + sigLen));
            stft.stft(row);
          }
        }
        const batches = parts.map((p) => p.chain.channels);
        const r = await graphs.stage1.run({
          mag: new ort.Tensor('float32', bufs.mag.subarray(0, rows * t * BINS), [rows, t, BINS]),
          h0: new ort.Tensor('float32', joinLstmStates(parts.map((p) => p.chain.h), batches, rows), [LAYERS, rows, UNITS]),
          c0: new ort.Tensor('float32', joinLstmStates(parts.map((p) => p.chain.c), batches, rows), [LAYERS, rows, UNITS]),
        });
        bufs.mask.set(r.mask.data as Float32Array);
        stft.istftMasked();
        const h = splitLstmStates(r.hN.data as Float32Array, batches, rows, parts.map((p) => p.chain.h));
        const c = splitLstmStates(r.cN.data as Float32Array, batches, rows, parts.map((p) => p.chain.c));
        row = 0;
        for (const [k, { chain }] of parts.entries()) {
          chain.h = h[k];
          chain.c = c[k];
          for (let b = 0; b < chain.channels; b++, row++) {
            const acc = bufs.acc[row];
            acc.set(chain.olaTail[b]);
            acc.fill(0, tailLen, sigLen);
            stft.overlapAdd(row, chain.window);
            outs[k][b].set(acc.subarray(0, t * hop), f0 * hop);
            chain.olaTail[b].set(acc.subarray(t * hop, sigLen));
          }
        }
      }
    } finally {
      returnStft(stft);
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

/** One chain's share of a joint run: its chunk, one array per channel. */
interface Stage1Part {
  chain: Stage1Chain;
  planar: Float32Array[];
}
