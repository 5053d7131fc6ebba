// Silero VAD on ONNX Runtime: the graph of models/silero_vad.onnx (scripts/vad/silero.ts) runs the frames of one
// sequence or of many at once (the batch dimension) in one session.run; the STFT magnitudes it starts from are
// computed here with the row FFT, all rows of a run in one pass. A sequence is a run of frames from an LSTM state;
// VadStream carries one stream's state and its last samples between pushes, so any chunking gives the probabilities
// of one pass, and a stream batched with others gets what it gets alone, bit for bit (test/vad-silero.test.ts).
import fs from 'node:fs';
import path from 'node:path';
import * as ort from 'onnxruntime-node';
import { sharedRowFft } from '../dsp/fft-pairs';
import { VAD_BINS, VAD_CONTEXT, VAD_FILE, VAD_FRAME, VAD_PAD, VAD_STFT_FRAMES, VAD_STFT_HOP, VAD_STFT_SIZE, VAD_UNITS, VAD_WINDOW } from './silero-graph';

// Measured alternatives (docs/speech.md, "Cost"): without the memory arena or memory patterns, or at the 'basic' or
// 'extended' optimisation level, a run costs the same within ±5 %.
const SESSION_OPTIONS: ort.InferenceSession.SessionOptions = {
  intraOpNumThreads: 1,
  interOpNumThreads: 1,
  graphOptimizationLevel: 'all',
  executionMode: 'sequential',
};

/** Frames of all sequences together per session.run: bounds the tensors when a caller pushes a long chunk. */
const MAX_ROWS_PER_RUN = 512;
/** Values per frame of the graph's input: 129 bins × 4 STFT frames. */
const MAG_ROW = VAD_BINS * VAD_STFT_FRAMES;
/** A window reflect-padded for the STFT: 576 + 64 samples, exactly 5 hops. */
const PADDED = VAD_WINDOW + VAD_PAD;

/** Periodic Hann of the STFT (the reference graph's basis is this window times a DFT: checked by the conversion). */
const HANN = Float64Array.from({ length: VAD_STFT_SIZE }, (_, i) => 0.5 * (1 - Math.cos((2 * Math.PI * i) / VAD_STFT_SIZE)));

export async function loadVadSession(modelsDir: string): Promise<ort.InferenceSession> {
  const file = path.join(modelsDir, VAD_FILE);
  if (!fs.existsSync(file)) throw new Error(`voice-activity graph ${file} is missing: run "npm run models" first`);
  return ort.InferenceSession.create(file, SESSION_OPTIONS);
}

/** The LSTM's memory: 128 values of h and of c. */
export interface LstmState {
  h: Float32Array;
  c: Float32Array;
}

export function initialState(): LstmState {
  return { h: new Float32Array(VAD_UNITS), c: new Float32Array(VAD_UNITS) };
}

export function copyState(s: LstmState): LstmState {
  return { h: s.h.slice(), c: s.c.slice() };
}

/** Frames of digital silence that define the silence state (3.2 s). */
const SILENCE_FRAMES = 100;
const silence = new WeakMap<ort.InferenceSession, Promise<LstmState>>();

/**
 * The state the network is left in by 3.2 s of digital silence from its initial state: where a stream's frames were
 * not run (the gate, gate.ts), the next run starts from it, as if the network had heard silence meanwhile.
 */
export function silenceState(session: ort.InferenceSession): Promise<LstmState> {
  let s = silence.get(session);
  if (!s) {
    const seq: VadSequence = { windows: new Float32Array(SILENCE_FRAMES * VAD_WINDOW), state: initialState() };
    s = runSequences(session, [seq]).then(() => seq.state);
    silence.set(session, s);
  }
  return s;
}

/** Padded windows of the rows being transformed (grown as needed; used synchronously only). */
let padded = new Float32Array(0);

/**
 * The graph's input for `rows` windows into `mag` (MAG_ROW values per row: bins, then the 4 STFT frames): each window
 * reflect-padded, windowed and transformed in one pass of the row FFT. `windowAt(r)` gives row r's window as an array
 * and the offset of its first sample. Synchronous: the shared row FFT is not held across an await.
 */
function magnitudes(rows: number, windowAt: (r: number) => [Float32Array, number], mag: Float32Array): void {
  if (padded.length < rows * PADDED) padded = new Float32Array(rows * PADDED);
  const fft = sharedRowFft(VAD_STFT_SIZE);
  fft.reserve(rows * VAD_STFT_FRAMES);
  for (let r = 0; r < rows; r++) {
    const [src, at] = windowAt(r);
    const o = r * PADDED;
    padded.set(src.subarray(at, at + VAD_WINDOW), o);
    for (let j = 0; j < VAD_PAD; j++) padded[o + VAD_WINDOW + j] = src[at + VAD_WINDOW - 2 - j];
    fft.windowRows(padded, o, VAD_STFT_HOP, VAD_STFT_FRAMES, HANN, false, r * VAD_STFT_FRAMES);
  }
  fft.forward(rows * VAD_STFT_FRAMES);
  const { re, im } = fft;
  for (let r = 0; r < rows; r++) {
    const base = r * MAG_ROW;
    for (let s = 0; s < VAD_STFT_FRAMES; s++) {
      const spec = (r * VAD_STFT_FRAMES + s) * VAD_BINS;
      for (let b = 0; b < VAD_BINS; b++) {
        const x = re[spec + b];
        const y = im[spec + b];
        mag[base + b * VAD_STFT_FRAMES + s] = Math.sqrt(x * x + y * y);
      }
    }
  }
}

/** Frames to run from a state: `windows` holds VAD_WINDOW samples per frame; `state` is replaced by the final state. */
export interface VadSequence {
  windows: Float32Array;
  state: LstmState;
}

/**
 * Runs sequences of frames on one session, their frames rows of one batch: as many frames per run as the sequence
 * with the fewest, all stepping together; a sequence with more frames goes on in the next run. Every row is computed
 * independently, so each sequence gets what it would alone. Returns each sequence's probabilities; counts the runs
 * made in `stats`.
 */
export async function runSequences(session: ort.InferenceSession, seqs: readonly VadSequence[], stats?: { runs: number }): Promise<Float32Array[]> {
  const results = seqs.map((s) => new Float32Array(s.windows.length / VAD_WINDOW));
  /** Frames every sequence still running has had. */
  let done = 0;
  for (;;) {
    const live: number[] = [];
    let fewest = Infinity;
    for (let i = 0; i < seqs.length; i++) {
      const left = results[i].length - done;
      if (left > 0) {
        live.push(i);
        fewest = Math.min(fewest, left);
      }
    }
    if (live.length === 0) return results;
    const B = live.length;
    const T = Math.max(1, Math.min(fewest, Math.floor(MAX_ROWS_PER_RUN / B)));
    const mag = new Float32Array(T * B * MAG_ROW);
    const h0 = new Float32Array(B * VAD_UNITS);
    const c0 = new Float32Array(B * VAD_UNITS);
    // Row t·B + b: frame done + t of live sequence b.
    magnitudes(T * B, (r) => [seqs[live[r % B]].windows, (done + Math.floor(r / B)) * VAD_WINDOW], mag);
    live.forEach((i, b) => {
      h0.set(seqs[i].state.h, b * VAD_UNITS);
      c0.set(seqs[i].state.c, b * VAD_UNITS);
    });
    const out = await session.run({
      mag: new ort.Tensor('float32', mag, [T, B, VAD_BINS, VAD_STFT_FRAMES]),
      h0: new ort.Tensor('float32', h0, [1, B, VAD_UNITS]),
      c0: new ort.Tensor('float32', c0, [1, B, VAD_UNITS]),
    });
    if (stats) stats.runs++;
    const prob = out.prob.data as Float32Array;
    const hN = out.hN.data as Float32Array;
    const cN = out.cN.data as Float32Array;
    live.forEach((i, b) => {
      for (let t = 0; t < T; t++) results[i][done + t] = prob[t * B + b];
      seqs[i].state.h.set(hN.subarray(b * VAD_UNITS, (b + 1) * VAD_UNITS));
      seqs[i].state.c.set(cN.subarray(b * VAD_UNITS, (b + 1) * VAD_UNITS));
    });
    done += T;
  }
}

const NO_WINDOWS = new Float32Array(0);

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
  state: LstmState = initialState();
  /** The next window: VAD_CONTEXT samples of the previous frame (zeros at first), then `filled` of the current one. */
  private readonly pending = new Float32Array(VAD_WINDOW);
  private filled = 0;
  /** Frames run so far. */
  frames = 0;

  constructor(readonly session: ort.InferenceSession) {}

  /** Samples waiting for the rest of their frame. */
  get buffered(): number {
    return this.filled;
  }

  /** The windows of the frames `x` completes (consumes x; the rest waits for the next push). */
  windowsFor(x: Float32Array): Float32Array {
    const count = Math.floor((this.filled + x.length) / VAD_FRAME);
    const out = count > 0 ? new Float32Array(count * VAD_WINDOW) : NO_WINDOWS;
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

  /** Runs the parts of several streams together (runSequences from each stream's state); each part's probabilities. */
  static async runJoint(parts: VadPart[]): Promise<Float32Array[]> {
    if (parts.length === 0) return [];
    const out = await runSequences(
      parts[0].stream.session,
      parts.map((p) => ({ windows: p.windows, state: p.stream.state })),
    );
    parts.forEach((p, i) => (p.stream.frames += out[i].length));
    return out;
  }
}
