// Streaming DTLN core at 16 kHz: frames pushed audio into 512-sample blocks at hop 128, runs stage 1 over all the
// chunk's frames in one session.run, then (optionally) stage 2 in one session.run, and overlap-adds the blocks.
// LSTM states and the framing / overlap-add buffers are carried between calls, so chunking does not change output.
import * as ort from 'onnxruntime-node';
import { RealFFT } from './fft';

export const BLOCK = 512;
export const HOP = 128;
export const BINS = BLOCK / 2 + 1;
const UNITS = 128;
const LAYERS = 2;
/** Output sample i of the core stream belongs to input sample i - LATENCY (the reference's 384-sample delay). */
export const DTLN_LATENCY = BLOCK - HOP;
/** Frames per session.run: bounds memory when a caller pushes a very long chunk at once (~8 s of audio). */
const MAX_FRAMES_PER_RUN = 1024;

export interface DtlnGraphs {
  stage1: ort.InferenceSession;
  stage2: ort.InferenceSession;
}

export interface DtlnCoreOptions {
  /** Parallel independent streams (channels x shifted grids), run as the ONNX batch dimension. */
  batch: number;
  /** false: stage 1 only, the masked spectrum resynthesised with a Hann/OLA (nsm-1). */
  useStage2: boolean;
  /** Also report, per emitted hop, the core's effective gain in 4-8 kHz (used to extend the gain above 8 kHz). */
  highBandGain?: boolean;
}

export interface DtlnOutput {
  /** One array per batch stream, HOP samples per completed frame. */
  out: Float32Array[];
  /** Per batch stream, one gain per emitted hop (only with highBandGain). */
  highGain?: Float32Array[];
}

// Bins 4-8 kHz at 16 kHz / 512: 31.25 Hz per bin. Stop at 7.5 kHz: the resampler rolls off above that.
const HG_LO = 128;
const HG_HI = 240;

export class DtlnCore {
  private readonly batch: number;
  private readonly fft = new RealFFT(BLOCK);
  private readonly graphs: DtlnGraphs;
  private readonly useStage2: boolean;
  private readonly wantHighGain: boolean;
  /** Per stream: unframed input; always starts with the last BLOCK-HOP samples of the previous frame. */
  private inBuf: Float32Array[];
  /** Per stream: overlap-add tail (partial sums of the next BLOCK-HOP output samples). */
  private readonly olaTail: Float32Array[];
  /** Per stream: per-frame high-band gains of the last 3 frames (their blocks overlap the next hop). */
  private gainHist: Float32Array[];
  private h1: Float32Array;
  private c1: Float32Array;
  private h2: Float32Array;
  private c2: Float32Array;
  private readonly synthWindow: Float32Array;

  constructor(graphs: DtlnGraphs, opts: DtlnCoreOptions) {
    this.graphs = graphs;
    this.batch = opts.batch;
    this.useStage2 = opts.useStage2;
    this.wantHighGain = !!opts.highBandGain;
    const b = this.batch;
    this.inBuf = Array.from({ length: b }, () => new Float32Array(BLOCK - HOP));
    this.olaTail = Array.from({ length: b }, () => new Float32Array(BLOCK - HOP));
    this.gainHist = Array.from({ length: b }, () => new Float32Array(3).fill(1));
    const stateLen = LAYERS * b * UNITS;
    this.h1 = new Float32Array(stateLen);
    this.c1 = new Float32Array(stateLen);
    this.h2 = new Float32Array(stateLen);
    this.c2 = new Float32Array(stateLen);
    // Periodic Hann / 2 sums to exactly 1 at hop BLOCK/4: unity-gain resynthesis for the stage-1-only chain.
    this.synthWindow = new Float32Array(BLOCK);
    for (let i = 0; i < BLOCK; i++) this.synthWindow[i] = 0.25 * (1 - Math.cos((2 * Math.PI * i) / BLOCK));
  }

  /** Push equal-length chunks (one per batch stream); returns the completed output hops. */
  async process(inputs: Float32Array[]): Promise<DtlnOutput> {
    if (inputs.length !== this.batch) throw new Error(`expected ${this.batch} streams, got ${inputs.length}`);
    const n = inputs[0].length;
    for (const x of inputs) if (x.length !== n) throw new Error('all streams of a chunk must have the same length');
    // Append the new samples to each stream's unframed buffer.
    const buffered = this.inBuf[0].length - (BLOCK - HOP);
    const frames = Math.floor((buffered + n) / HOP);
    const combined = inputs.map((x, b) => {
      const c = new Float32Array(this.inBuf[b].length + n);
      c.set(this.inBuf[b]);
      c.set(x, this.inBuf[b].length);
      return c;
    });
    const out = Array.from({ length: this.batch }, () => new Float32Array(frames * HOP));
    const highGain = this.wantHighGain ? Array.from({ length: this.batch }, () => new Float32Array(frames)) : undefined;
    for (let f0 = 0; f0 < frames; f0 += MAX_FRAMES_PER_RUN) {
      const t = Math.min(MAX_FRAMES_PER_RUN, frames - f0);
      await this.runFrames(combined, f0, t, out, highGain);
    }
    for (let b = 0; b < this.batch; b++) this.inBuf[b] = combined[b].slice(frames * HOP);
    return { out, highGain };
  }

  private async runFrames(
    combined: Float32Array[],
    f0: number,
    t: number,
    out: Float32Array[],
    highGain: Float32Array[] | undefined,
  ): Promise<void> {
    const B = this.batch;
    const fft = this.fft;
    // Float64 spectra and Float32 signals everywhere keeps the FFT's loops monomorphic (measurably faster).
    const { re, im, mag, blocks } = this.scratchFor(B * t);
    for (let b = 0; b < B; b++) {
      const src = combined[b];
      for (let i = 0; i < t; i++) fft.forwardMag(src, (f0 + i) * HOP, re, im, mag, (b * t + i) * BINS);
    }
    const r1 = await this.graphs.stage1.run({
      mag: new ort.Tensor('float32', mag.subarray(0, B * t * BINS), [B, t, BINS]),
      h0: new ort.Tensor('float32', this.h1, [LAYERS, B, UNITS]),
      c0: new ort.Tensor('float32', this.c1, [LAYERS, B, UNITS]),
    });
    const mask = r1.mask.data as Float32Array;
    this.h1 = r1.hN.data as Float32Array;
    this.c1 = r1.cN.data as Float32Array;
    // Overlap-add: frame i's block covers positions [i*HOP, i*HOP + BLOCK) of the run's accumulator (tail first).
    // Loop bounds are locals: the exported constants compile to property loads on `exports`.
    const blockLen = BLOCK;
    const hop = HOP;
    const tailLen = BLOCK - HOP;
    const accLen = t * hop + tailLen;
    const acc = this.olaScratch(accLen);
    if (!this.useStage2 && !highGain) {
      // Stage-1-only chain: each inverse FFT adds its Hann-windowed block straight into the accumulator.
      const w = this.synthWindow;
      for (let b = 0; b < B; b++) {
        acc.set(this.olaTail[b]);
        acc.fill(0, tailLen, accLen);
        for (let i = 0; i < t; i++) fft.inverseMaskedOverlapAdd(re, im, mask, (b * t + i) * BINS, acc, i * hop, w);
        out[b].set(acc.subarray(0, t * hop), f0 * hop);
        this.olaTail[b].set(acc.subarray(t * hop, accLen));
      }
      return;
    }
    for (let j = 0; j < B * t; j++) fft.inverseMasked(re, im, mask, j * BINS, blocks, j * BLOCK);
    let outBlocks: Float32Array = blocks;
    if (this.useStage2) {
      const r2 = await this.graphs.stage2.run({
        frames: new ort.Tensor('float32', blocks.subarray(0, B * t * BLOCK), [B, t, BLOCK]),
        h0: new ort.Tensor('float32', this.h2, [LAYERS, B, UNITS]),
        c0: new ort.Tensor('float32', this.c2, [LAYERS, B, UNITS]),
      });
      outBlocks = r2.out.data as Float32Array;
      this.h2 = r2.hN.data as Float32Array;
      this.c2 = r2.cN.data as Float32Array;
    }
    if (highGain) this.highBandGains(f0, t, re, im, outBlocks, highGain);
    // Stage 2 output is overlap-added as is (as trained); the stage-1-only chain gets the Hann synthesis window.
    const w = this.useStage2 ? null : this.synthWindow;
    for (let b = 0; b < B; b++) {
      acc.set(this.olaTail[b]);
      acc.fill(0, tailLen, accLen);
      for (let i = 0; i < t; i++) {
        const src = (b * t + i) * blockLen;
        const dst = i * hop;
        if (w) for (let s = 0; s < blockLen; s++) acc[dst + s] += outBlocks[src + s] * w[s];
        else for (let s = 0; s < blockLen; s++) acc[dst + s] += outBlocks[src + s];
      }
      out[b].set(acc.subarray(0, t * hop), f0 * hop);
      this.olaTail[b].set(acc.subarray(t * hop, accLen));
    }
  }

  private olaAcc = new Float32Array(0);
  private olaScratch(len: number): Float32Array {
    if (this.olaAcc.length < len) this.olaAcc = new Float32Array(len);
    return this.olaAcc;
  }

  /** Per-run work arrays, reused across runs (grown when a run has more frames): less garbage per chunk. */
  private scratch = { re: new Float64Array(0), im: new Float64Array(0), mag: new Float32Array(0), blocks: new Float32Array(0) };
  private scratchFor(frames: number): { re: Float64Array; im: Float64Array; mag: Float32Array; blocks: Float32Array } {
    if (this.scratch.mag.length < frames * BINS) {
      this.scratch = {
        re: new Float64Array(frames * BINS),
        im: new Float64Array(frames * BINS),
        mag: new Float32Array(frames * BINS),
        blocks: new Float32Array(frames * BLOCK),
      };
    }
    return this.scratch;
  }

  /**
   * Effective 4-7.5 kHz gain per frame (output vs input block energy), averaged over the 4 blocks of each hop. The
   * input blocks' spectra are the run's own (`inRe`/`inIm`, from forwardMag: the masked inverse does not write them).
   */
  private highBandGains(f0: number, t: number, inRe: Float64Array, inIm: Float64Array, outBlocks: Float32Array, highGain: Float32Array[]): void {
    const re = new Float64Array(BINS);
    const im = new Float64Array(BINS);
    for (let b = 0; b < this.batch; b++) {
      const hist = this.gainHist[b];
      for (let i = 0; i < t; i++) {
        const o = (b * t + i) * BINS;
        let ein = 1e-9;
        for (let k = HG_LO; k < HG_HI; k++) ein += inRe[o + k] * inRe[o + k] + inIm[o + k] * inIm[o + k];
        this.fft.forward(outBlocks, (b * t + i) * BLOCK, re, im, 0);
        let eout = 0;
        for (let k = HG_LO; k < HG_HI; k++) eout += re[k] * re[k] + im[k] * im[k];
        const g = Math.min(1, Math.sqrt(eout / ein));
        highGain[b][f0 + i] = 0.25 * (g + hist[0] + hist[1] + hist[2]);
        hist[2] = hist[1];
        hist[1] = hist[0];
        hist[0] = g;
      }
    }
  }
}
