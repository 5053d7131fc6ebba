// Streaming DTLN core at 16 kHz: frames pushed audio into 512-sample blocks at hop 128, runs stage 1 over all the
// chunk's frames in one session.run, then (optionally) stage 2 in one session.run, and overlap-adds the blocks.
// LSTM states and the framing / overlap-add buffers are carried between calls, so chunking does not change output.
import * as ort from 'onnxruntime-node';
import { borrowStft, returnStft, type StftBackend, type StftBuffers } from './stft';

export const BLOCK = 512;
export const HOP = 128;
export const BINS = BLOCK / 2 + 1;
/** LSTM size of both stages: units per layer, layers (their states are [LAYERS, batch, UNITS]). */
export const UNITS = 128;
export const LAYERS = 2;
/** Output sample i of the core stream belongs to input sample i - LATENCY (the reference's 384-sample delay). */
export const DTLN_LATENCY = BLOCK - HOP;
/** Frames per session.run: bounds memory when a caller pushes a very long chunk at once (~8 s of audio). */
const MAX_FRAMES_PER_RUN = 1024;
/** Frames of all batch streams together per session.run (many channels or nsm-4's four grids: fewer per stream). */
const MAX_ROWS_PER_RUN = 1024;

export interface DtlnGraphs {
  stage1: ort.InferenceSession;
  stage2: ort.InferenceSession;
}

export interface DtlnCoreOptions {
  /** Parallel independent streams (channels x shifted grids), run as the ONNX batch dimension. */
  batch: number;
  /** false: stage 1 only, the masked spectrum resynthesised with a Hann/OLA (nsm-1). */
  useStage2: boolean;
  /** STFT back end: 'wasm' (default; the JS one where the WebAssembly module cannot be loaded) or 'js' (RealFFT). */
  stft?: 'wasm' | 'js';
}

export interface DtlnOutput {
  /** One array per batch stream, HOP samples per completed frame. */
  out: Float32Array[];
}

export class DtlnCore {
  private readonly batch: number;
  private readonly stftKind: 'wasm' | 'js';
  private readonly graphs: DtlnGraphs;
  private readonly useStage2: boolean;
  /** Per stream: unframed input; always starts with the last BLOCK-HOP samples of the previous frame. */
  private inBuf: Float32Array[];
  /** Per stream: overlap-add tail (partial sums of the next BLOCK-HOP output samples). */
  private readonly olaTail: Float32Array[];
  private h1: Float32Array;
  private c1: Float32Array;
  private h2: Float32Array;
  private c2: Float32Array;
  private readonly synthWindow: Float32Array;

  constructor(graphs: DtlnGraphs, opts: DtlnCoreOptions) {
    this.graphs = graphs;
    this.batch = opts.batch;
    this.useStage2 = opts.useStage2;
    this.stftKind = opts.stft ?? 'wasm';
    const b = this.batch;
    this.inBuf = Array.from({ length: b }, () => new Float32Array(BLOCK - HOP));
    this.olaTail = Array.from({ length: b }, () => new Float32Array(BLOCK - HOP));
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
    // Stream b's signal is inBuf[b] followed by inputs[b]; frame i covers [i*HOP, i*HOP + BLOCK) of it.
    const held = this.inBuf[0].length;
    const total = held + n;
    const frames = Math.floor((total - (BLOCK - HOP)) / HOP);
    const out = Array.from({ length: this.batch }, () => new Float32Array(frames * HOP));
    // Runs of at most MAX_ROWS_PER_RUN frames over all streams (and MAX_FRAMES_PER_RUN per stream): bounded buffers.
    const perRun = Math.max(1, Math.min(MAX_FRAMES_PER_RUN, Math.floor(MAX_ROWS_PER_RUN / this.batch)));
    if (frames > 0) {
      // The STFT buffers are borrowed for this call only: nothing in them is needed by the next one.
      const stft = borrowStft(this.stftKind);
      try {
        for (let f0 = 0; f0 < frames; f0 += perRun) {
          const t = Math.min(perRun, frames - f0);
          const bufs = stft.prepare(this.batch, t);
          const len = t * HOP + (BLOCK - HOP);
          for (let b = 0; b < this.batch; b++) copyJoined(this.inBuf[b], inputs[b], f0 * HOP, len, bufs.sig[b]);
          await this.runFrames(stft, bufs, f0, t, out);
        }
      } finally {
        returnStft(stft);
      }
    }
    for (let b = 0; b < this.batch; b++) {
      const keep = new Float32Array(total - frames * HOP);
      copyJoined(this.inBuf[b], inputs[b], frames * HOP, keep.length, keep);
      this.inBuf[b] = keep;
    }
    return { out };
  }

  private async runFrames(
    stft: StftBackend,
    bufs: StftBuffers,
    f0: number,
    t: number,
    out: Float32Array[],
  ): Promise<void> {
    const B = this.batch;
    for (let b = 0; b < B; b++) stft.stft(b);
    const rows = B * t;
    const r1 = await this.graphs.stage1.run({
      mag: new ort.Tensor('float32', bufs.mag.subarray(0, rows * BINS), [B, t, BINS]),
      h0: new ort.Tensor('float32', this.h1, [LAYERS, B, UNITS]),
      c0: new ort.Tensor('float32', this.c1, [LAYERS, B, UNITS]),
    });
    bufs.mask.set(r1.mask.data as Float32Array);
    this.h1 = r1.hN.data as Float32Array;
    this.c1 = r1.cN.data as Float32Array;
    stft.istftMasked();
    if (this.useStage2) {
      const r2 = await this.graphs.stage2.run({
        frames: new ort.Tensor('float32', bufs.blocks.subarray(0, rows * BLOCK), [B, t, BLOCK]),
        h0: new ort.Tensor('float32', this.h2, [LAYERS, B, UNITS]),
        c0: new ort.Tensor('float32', this.c2, [LAYERS, B, UNITS]),
      });
      // Stage 2's output blocks take the masked blocks' place (the inputs are no longer needed).
      bufs.blocks.set(r2.out.data as Float32Array);
      this.h2 = r2.hN.data as Float32Array;
      this.c2 = r2.cN.data as Float32Array;
    }
    // Stage 2 output is overlap-added as is (as trained); the stage-1-only chain gets the Hann synthesis window.
    const w = this.useStage2 ? null : this.synthWindow;
    const tailLen = BLOCK - HOP;
    const accLen = t * HOP + tailLen;
    for (let b = 0; b < B; b++) {
      const acc = bufs.acc[b];
      acc.set(this.olaTail[b]);
      acc.fill(0, tailLen, accLen);
      stft.overlapAdd(b, w);
      out[b].set(acc.subarray(0, t * HOP), f0 * HOP);
      this.olaTail[b].set(acc.subarray(t * HOP, accLen));
    }
  }
}

/** dst[0 .. len) = (a followed by b)[from .. from + len). */
function copyJoined(a: Float32Array, b: Float32Array, from: number, len: number, dst: Float32Array): void {
  let o = 0;
  if (from < a.length) {
    const k = Math.min(a.length - from, len);
    dst.set(a.subarray(from, from + k));
    o = k;
  }
  if (o < len) {
    const start = Math.max(0, from - a.length);
    dst.set(b.subarray(start, start + (len - o)), o);
  }
}
