// Silero VAD on ONNX Runtime: the graph of models/silero_vad.onnx (scripts/vad/silero.ts) runs every frame a chunk
// completes, of one stream or of many at once (the batch dimension), in one session.run; the STFT magnitudes it
// starts from are computed here with the row FFT. VadStream carries a stream's LSTM state and its last samples
// between pushes, so any chunking gives the probabilities of one pass (test/vad-silero.test.ts).
import fs from 'node:fs';
import path from 'node:path';
import * as ort from 'onnxruntime-node';
import { sharedRowFft } from '../dsp/fft-pairs';
import { VAD_BINS, VAD_CONTEXT, VAD_FILE, VAD_FRAME, VAD_PAD, VAD_STFT_FRAMES, VAD_STFT_HOP, VAD_STFT_SIZE, VAD_UNITS, VAD_WINDOW } from './silero-graph';

const SESSION_OPTIONS: ort.InferenceSession.SessionOptions = {
  intraOpNumThreads: 1,
  interOpNumThreads: 1,
  graphOptimizationLevel: 'all',
  executionMode: 'sequential',
};

/** Frames of all streams together per session.run: bounds the tensors when a caller pushes a long chunk. */
const MAX_ROWS_PER_RUN = 512;

/** Periodic Hann of the STFT (the reference graph's basis is this window times a DFT: checked by the conversion). */
const HANN = Float64Array.from({ length: VAD_STFT_SIZE }, (_, i) => 0.5 * (1 - Math.cos((2 * Math.PI * i) / VAD_STFT_SIZE)));

export async function loadVadSession(modelsDir: string): Promise<ort.InferenceSession> {
  const file = path.join(modelsDir, VAD_FILE);
  if (!fs.existsSync(file)) throw new Error(`voice-activity graph ${file} is missing: run "npm run models" first`);
  return ort.InferenceSession.create(file, SESSION_OPTIONS);
}

/**
 * Writes the graph's input for `windows` (VAD_WINDOW samples each, one after another) into `mag` at rows
 * `row0 + k * stride` ([.., 129, 4] per row: bins, then the 4 STFT frames). Synchronous: the shared row FFT is not
 * held across an await.
 */
function magnitudes(windows: Float32Array, count: number, mag: Float32Array, row0: number, stride: number): void {
  const fft = sharedRowFft(VAD_STFT_SIZE);
  fft.reserve(count * VAD_STFT_FRAMES);
  const padded = new Float32Array(VAD_WINDOW + VAD_PAD);
  for (let k = 0; k < count; k++) {
    const w = windows.subarray(k * VAD_WINDOW, (k + 1) * VAD_WINDOW);
    padded.set(w);
    for (let j = 0; j < VAD_PAD; j++) padded[VAD_WINDOW + j] = w[VAD_WINDOW - 2 - j];
    fft.windowRows(padded, 0, VAD_STFT_HOP, VAD_STFT_FRAMES, HANN, false, k * VAD_STFT_FRAMES);
  }
  fft.forward(count * VAD_STFT_FRAMES);
  const { re, im } = fft;
  for (let k = 0; k < count; k++) {
    const base = (row0 + k * stride) * VAD_BINS * VAD_STFT_FRAMES;
    for (let s = 0; s < VAD_STFT_FRAMES; s++) {
      const spec = (k * VAD_STFT_FRAMES + s) * VAD_BINS;
      for (let b = 0; b < VAD_BINS; b++) {
        const r = re[spec + b];
        const i = im[spec + b];
        mag[base + b * VAD_STFT_FRAMES + s] = Math.sqrt(r * r + i * i);
      }
    }
  }
}

/** One stream's part of a joint run: its windows (frames × VAD_WINDOW samples). */
export interface VadPart {
  stream: VadStream;
  windows: Float32Array;
}

/**
 * The speech probabilities of a mono 16 kHz stream, one per VAD_FRAME samples: push any number of samples, get the
 * probabilities of the frames they complete (frame f is input samples f·512 … f·512 + 511).
 */
export class VadStream {
  private h = new Float32Array(VAD_UNITS);
  private c = new Float32Array(VAD_UNITS);
  /** The next window: VAD_CONTEXT samples of the previous frame (zeros at first), then `filled` of the current one. */
  private readonly pending = new Float32Array(VAD_WINDOW);
  private filled = 0;
  /** Frames decided so far. */
  frames = 0;

  constructor(readonly session: ort.InferenceSession) {}

  /** Samples waiting for the rest of their frame. */
  get buffered(): number {
    return this.filled;
  }

  /** The windows of the frames `x` completes (consumes x; the rest waits for the next push). */
  windowsFor(x: Float32Array): Float32Array {
    const count = Math.floor((this.filled + x.length) / VAD_FRAME);
    const out = new Float32Array(count * VAD_WINDOW);
    let used = 0;
    for (let k = 0; k < count; k++) {
      const take = VAD_FRAME - this.filled;
      this.pending.set(x.subarray(used, used + take), VAD_CONTEXT + this.filled);
      used += take;
      out.set(this.pending, k * VAD_WINDOW);
      this.pending.copyWithin(0, VAD_FRAME, VAD_WINDOW); // the frame's last 64 samples: the next one's context
      this.filled = 0;
    }
    this.pending.set(x.subarray(used), VAD_CONTEXT + this.filled);
    this.filled += x.length - used;
    return out;
  }

  /** The rest of the stream (its last, partial frame completed with zeros). */
  flushWindows(): Float32Array {
    if (this.filled === 0) return new Float32Array(0);
    return this.windowsFor(new Float32Array(VAD_FRAME - this.filled));
  }

  async push(x: Float32Array): Promise<Float32Array> {
    return (await VadStream.runJoint([{ stream: this, windows: this.windowsFor(x) }]))[0];
  }

  async flush(): Promise<Float32Array> {
    return (await VadStream.runJoint([{ stream: this, windows: this.flushWindows() }]))[0];
  }

  /**
   * Runs the parts of several streams on one session: their frames are rows of one batch (as many frames per run as
   * the part with the fewest, all parts stepping together; a part with more frames goes on alone after). Every row is
   * computed independently, so each stream gets what it would alone. Returns each part's probabilities.
   */
  static async runJoint(parts: VadPart[]): Promise<Float32Array[]> {
    const results = parts.map((p) => new Float32Array(p.windows.length / VAD_WINDOW));
    /** Frames every part still running has had. */
    let done = 0;
    for (;;) {
      const live = parts.map((p, i) => ({ p, i, left: results[i].length - done })).filter((x) => x.left > 0);
      if (live.length === 0) return results;
      const B = live.length;
      const T = Math.max(1, Math.min(Math.min(...live.map((x) => x.left)), Math.floor(MAX_ROWS_PER_RUN / B)));
      const mag = new Float32Array(T * B * VAD_BINS * VAD_STFT_FRAMES);
      const h0 = new Float32Array(B * VAD_UNITS);
      const c0 = new Float32Array(B * VAD_UNITS);
      live.forEach(({ p }, b) => {
        magnitudes(p.windows.subarray(done * VAD_WINDOW, (done + T) * VAD_WINDOW), T, mag, b, B);
        h0.set(p.stream.h, b * VAD_UNITS);
        c0.set(p.stream.c, b * VAD_UNITS);
      });
      const session = live[0].p.stream.session;
      const out = await session.run({
        mag: new ort.Tensor('float32', mag, [T, B, VAD_BINS, VAD_STFT_FRAMES]),
        h0: new ort.Tensor('float32', h0, [1, B, VAD_UNITS]),
        c0: new ort.Tensor('float32', c0, [1, B, VAD_UNITS]),
      });
      const prob = out.prob.data as Float32Array;
      const hN = out.hN.data as Float32Array;
      const cN = out.cN.data as Float32Array;
      live.forEach(({ p, i }, b) => {
        for (let t = 0; t < T; t++) results[i][done + t] = prob[t * B + b];
        p.stream.h = hN.slice(b * VAD_UNITS, (b + 1) * VAD_UNITS);
        p.stream.c = cN.slice(b * VAD_UNITS, (b + 1) * VAD_UNITS);
        p.stream.frames += T;
      });
      // Parts with more frames than T go on in the next run, together from `done`.
      done += T;
    }
  }
}
