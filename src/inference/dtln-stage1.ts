// DTLN's stage 1 (the magnitude mask) alone at a coarser frame hop, for the fastest model (nsm-1): 512-sample frames
// every `hop` samples (256: half the frames of DTLN's 128, so half the LSTM steps and FFTs), the mask applied to the
// complex spectrum, inverse FFT, periodic Hann synthesis scaled to sum to 1 at that hop, overlap-add. The stage-1
// graph runs over all the chunk's frames of all streams in one session.run; LSTM states and the framing and
// overlap-add buffers are carried between calls, so chunking does not change the output. JS FFT (fft.ts): with half
// the frames, the STFT is a small share of the cost.
import * as ort from 'onnxruntime-node';
import { BINS, BLOCK, LAYERS, UNITS, type DtlnGraphs } from './dtln';
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
    const B = this.channels;
    const hop = this.hop;
    const tailLen = BLOCK - hop;
    const sig = planar.map((x, b) => concat(this.inBuf[b], x));
    const frames = Math.max(0, Math.floor((sig[0].length - tailLen) / hop));
    const out = Array.from({ length: B }, () => new Float32Array(frames * hop));
    for (let f0 = 0; f0 < frames; f0 += MAX_FRAMES_PER_RUN) {
      const t = Math.min(MAX_FRAMES_PER_RUN, frames - f0);
      const rows = B * t;
      const re = new Float64Array(rows * BINS);
      const im = new Float64Array(rows * BINS);
      const mag = new Float32Array(rows * BINS);
      for (let b = 0; b < B; b++) {
        for (let i = 0; i < t; i++) this.fft.forwardMag(sig[b], (f0 + i) * hop, re, im, mag, (b * t + i) * BINS);
      }
      const r = await this.graphs.stage1.run({
        mag: new ort.Tensor('float32', mag, [B, t, BINS]),
        h0: new ort.Tensor('float32', this.h, [LAYERS, B, UNITS]),
        c0: new ort.Tensor('float32', this.c, [LAYERS, B, UNITS]),
      });
      const mask = r.mask.data as Float32Array;
      this.h = r.hN.data as Float32Array;
      this.c = r.cN.data as Float32Array;
      const accLen = t * hop + tailLen;
      for (let b = 0; b < B; b++) {
        const acc = new Float32Array(accLen);
        acc.set(this.olaTail[b]);
        for (let i = 0; i < t; i++) {
          const row = (b * t + i) * BINS;
          this.fft.inverseMaskedOverlapAdd(re, im, mask, row, acc, i * hop, this.window);
        }
        out[b].set(acc.subarray(0, t * hop), f0 * hop);
        this.olaTail[b].set(acc.subarray(t * hop, accLen));
      }
    }
    this.inBuf = sig.map((s) => s.slice(frames * hop));
    return out;
  }
}
