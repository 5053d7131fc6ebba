// Streaming DTLN core at 16 kHz: frames pushed audio into 512-sample blocks at hop 128 (nsm-1's stage 1 alone: 256),
// runs stage 1 over all the chunk's frames in one session.run, then (optionally) stage 2 in one session.run, and
// overlap-adds the blocks.
// LSTM states and the framing / overlap-add buffers are carried between calls, so chunking does not change output.
import * as ort from 'onnxruntime-node';
import { borrowStft, returnStft, type StftBackend, type StftBuffers } from '../../dsp/stft';

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
  /**
   * Live streams (live/batching.ts): cores and stage-1 chains built on these graphs hand their chunks to this joiner, which
   * runs those of every stream that pushed in the same turn of the event loop together, on `joiner.graphs`.
   */
  joiner?: CoreJoiner;
}

/** Groups the calls of many streams made in one turn into joint runs (implemented in live/batching.ts). */
export interface CoreJoiner {
  /** The sessions themselves (the joint runs call them directly). */
  readonly graphs: DtlnGraphs;
  /**
   * `parts` (of `rows` batch rows) are run by `run` together with the parts of the other calls of the same `key` made
   * in this turn; resolves with the results of this call's parts, in order. Calls of one key share one `run`.
   */
  join<P, R>(key: string, parts: P[], rows: number, run: (all: P[]) => Promise<R[]>): Promise<R[]>;
}

/** One core's share of a joint run: its chunk for each of its batch streams. */
export interface JointPart {
  core: DtlnCore;
  inputs: Float32Array[];
}

export interface DtlnCoreOptions {
  /** Parallel independent streams (channels x shifted grids), run as the ONNX batch dimension. */
  batch: number;
  /** false: stage 1 only, the masked spectrum resynthesised with a Hann/OLA (nsm-1). */
  useStage2: boolean;
  /**
   * Frame hop (default HOP, DTLN's as trained). Stage 1 alone may run coarser (nsm-1: 256, half the frames, so half
   * the LSTM steps and FFTs); it must divide BLOCK and be at most BLOCK / 2.
   */
  hop?: number;
  /** STFT back end: 'wasm' (default; the JS one where the WebAssembly module cannot be loaded) or 'js' (RealFFT). */
  stft?: 'wasm' | 'js';
}

export interface DtlnOutput {
  /** One array per batch stream, `hop` samples per completed frame. */
  out: Float32Array[];
}

export class DtlnCore {
  private readonly batch: number;
  private readonly stftKind: 'wasm' | 'js';
  private readonly graphs: DtlnGraphs;
  private readonly useStage2: boolean;
  readonly hop: number;
  /**
   * Per stream: unframed input, the first inLen samples (always the last BLOCK - hop samples of the previous frame
   * and less than a hop more: never BLOCK or more, so the buffers are allocated once).
   */
  private readonly inBuf: Float32Array[];
  private inLen: number;
  /** Per stream: overlap-add tail (partial sums of the next BLOCK - hop output samples). */
  private readonly olaTail: Float32Array[];
  private h1: Float32Array;
  private c1: Float32Array;
  private h2: Float32Array;
  private c2: Float32Array;
  private readonly synthWindow: Float32Array;
  private readonly joiner: CoreJoiner | undefined;

  constructor(graphs: DtlnGraphs, opts: DtlnCoreOptions) {
    this.joiner = graphs.joiner;
    this.graphs = graphs.joiner ? graphs.joiner.graphs : graphs;
    this.batch = opts.batch;
    this.useStage2 = opts.useStage2;
    this.stftKind = opts.stft ?? 'wasm';
    const hop = (this.hop = opts.hop ?? HOP);
    if (BLOCK % hop !== 0 || hop > BLOCK / 2) throw new Error(`the frame hop must divide ${BLOCK} and be at most ${BLOCK / 2}`);
    if (hop !== HOP && opts.useStage2) throw new Error(`stage 2 runs at hop ${HOP} only`);
    const b = this.batch;
    this.inBuf = Array.from({ length: b }, () => new Float32Array(BLOCK));
    this.inLen = BLOCK - hop;
    this.olaTail = Array.from({ length: b }, () => new Float32Array(BLOCK - hop));
    const stateLen = LAYERS * b * UNITS;
    this.h1 = new Float32Array(stateLen);
    this.c1 = new Float32Array(stateLen);
    this.h2 = new Float32Array(stateLen);
    this.c2 = new Float32Array(stateLen);
    // Periodic Hann sums to BLOCK / (2 hop) at this hop: scaled so that the stage-1-only resynthesis has unit gain
    // (hop 128: Hann / 2; the scalings are powers of two, so exact).
    this.synthWindow = new Float32Array(BLOCK);
    for (let i = 0; i < BLOCK; i++) this.synthWindow[i] = ((0.5 * (1 - Math.cos((2 * Math.PI * i) / BLOCK))) * 2 * hop) / BLOCK;
  }


  /** Parts whose cores have equal keys can run together in processJoint. */
  joinKey(inputs: Float32Array[]): string {
    return `${this.useStage2 ? 2 : 1}/${this.stftKind}/${this.hop}/${this.inLen}/${inputs[0]?.length ?? 0}`;
  }

  get rows(): number {
    return this.batch;
  }

  /** Push equal-length chunks (one per batch stream); returns the completed output hops. */
  async process(inputs: Float32Array[]): Promise<DtlnOutput> {
    return (await DtlnCore.processJoint([{ core: this, inputs }]))[0];
  }

  /**
   * process() for several cores at once: their streams are rows of one batch, so each graph runs once per run of
   * frames for all of them (ONNX Runtime's recurrent matrix products then read the weights once for all rows, which
   * is where batching saves time). Each core keeps its own states and buffers, and every row's output is what the core
   * would give alone (the rows of a batch are computed independently: checked bit for bit in the tests). The cores
   * must agree on stage 2 and STFT back end, hold the same number of samples, and get chunks of the same length.
   */
  static processJoint(parts: JointPart[]): Promise<DtlnOutput[]> {
    const joiner = parts[0].core.joiner;
    if (!joiner) return DtlnCore.runJoint(parts);
    const rows = parts.reduce((n, p) => n + p.core.rows, 0);
    return joiner.join(parts[0].core.joinKey(parts[0].inputs), parts, rows, (all) => DtlnCore.runJoint(all));
  }

  /** processJoint's work, run now (the joiner calls it for the parts of many streams at once). */
  static async runJoint(parts: JointPart[]): Promise<DtlnOutput[]> {
    const first = parts[0].core;
    const n = parts[0].inputs[0]?.length ?? 0;
    const hop = first.hop;
    const held = first.inLen;
    let rowsTotal = 0;
    for (const { core, inputs } of parts) {
      if (inputs.length !== core.batch) throw new Error(`expected ${core.batch} streams, got ${inputs.length}`);
      for (const x of inputs) if (x.length !== n) throw new Error('all streams of a chunk must have the same length');
      if (core.useStage2 !== first.useStage2 || core.stftKind !== first.stftKind || core.hop !== hop || core.inLen !== held) {
        throw new Error('cores run together must have the same stages, STFT back end, hop and buffered samples');
      }
      rowsTotal += core.batch;
    }
    // Stream b's signal is inBuf[b][0 .. held) followed by inputs[b]; frame i covers [i*hop, i*hop + BLOCK) of it.
    const total = held + n;
    const frames = Math.floor((total - (BLOCK - hop)) / hop);
    // One output array for the call, each stream's output a view of it (a live tick joins hundreds of streams).
    const all = new Float32Array(rowsTotal * frames * hop);
    let o = 0;
    const outs = parts.map(({ core }) =>
      Array.from({ length: core.batch }, () => {
        o += frames * hop;
        return all.subarray(o - frames * hop, o);
      }),
    );
    // Runs of at most MAX_ROWS_PER_RUN frames over all streams (and MAX_FRAMES_PER_RUN per stream): bounded buffers.
    const perRun = Math.max(1, Math.min(MAX_FRAMES_PER_RUN, Math.floor(MAX_ROWS_PER_RUN / rowsTotal)));
    if (frames > 0) {
      // The STFT buffers are borrowed for this call only: nothing in them is needed by the next one.
      const stft = borrowStft(first.stftKind);
      // Several runs (a long chunk): the states as they were, put back if a later run fails.
      const saved = frames > perRun ? parts.map(({ core }) => core.saveState()) : null;
      try {
        for (let f0 = 0; f0 < frames; f0 += perRun) {
          const t = Math.min(perRun, frames - f0);
          const bufs = stft.prepare(rowsTotal, t, hop);
          const len = t * hop + (BLOCK - hop);
          let row = 0;
          for (const { core, inputs } of parts) {
            for (let b = 0; b < core.batch; b++) copyJoined(core.inBuf[b].subarray(0, held), inputs[b], f0 * hop, len, bufs.sig[row++]);
          }
          await DtlnCore.runFrames(parts.map((p) => p.core), rowsTotal, stft, bufs, f0, t, outs);
        }
      } catch (err) {
        saved?.forEach((state, i) => parts[i].core.restoreState(state));
        throw err;
      } finally {
        returnStft(stft);
      }
    }
    // What is left (less than BLOCK samples) moves to the front of the same buffers.
    const from = frames * hop;
    for (const { core, inputs } of parts) {
      for (let b = 0; b < core.batch; b++) {
        const buf = core.inBuf[b];
        let kept = 0;
        if (from < held) {
          buf.copyWithin(0, from, held);
          kept = held - from;
        }
        const start = Math.max(0, from - held);
        buf.set(inputs[b].subarray(start, start + (total - from - kept)), kept);
      }
      core.inLen = total - from;
    }
    return outs.map((out) => ({ out }));
  }

  /** A copy of what runFrames changes (LSTM states, overlap-add tails). */
  private saveState(): Float32Array[] {
    return [this.h1, this.c1, this.h2, this.c2, ...this.olaTail].map((x) => x.slice());
  }

  private restoreState([h1, c1, h2, c2, ...tails]: Float32Array[]): void {
    this.h1 = h1;
    this.c1 = c1;
    this.h2 = h2;
    this.c2 = c2;
    tails.forEach((tail, b) => this.olaTail[b].set(tail));
  }

  /** The cores' states ([LAYERS, batch, UNITS] each) as one [LAYERS, rows, UNITS] state (as is for a single core). */
  private static joinStates(cores: DtlnCore[], rows: number, pick: (c: DtlnCore) => Float32Array): Float32Array {
    return joinLstmStates(cores.map(pick), cores.map((c) => c.batch), rows);
  }

  /** joinStates' inverse: each core's rows of a [LAYERS, rows, UNITS] state, written into `pick`'s arrays. */
  private static splitStates(cores: DtlnCore[], rows: number, joined: Float32Array, pick: (c: DtlnCore) => Float32Array): Float32Array[] {
    return splitLstmStates(joined, cores.map((c) => c.batch), rows, cores.map(pick));
  }

  /** One run of t frames for all the cores' rows: stage 1, the masked inverse, stage 2, overlap-add into `outs`. */
  private static async runFrames(
    cores: DtlnCore[],
    rows: number,
    stft: StftBackend,
    bufs: StftBuffers,
    f0: number,
    t: number,
    outs: Float32Array[][],
  ): Promise<void> {
    const first = cores[0];
    const graphs = first.graphs;
    for (let r = 0; r < rows; r++) stft.stft(r);
    const r1 = await graphs.stage1.run({
      mag: new ort.Tensor('float32', bufs.mag.subarray(0, rows * t * BINS), [rows, t, BINS]),
      h0: new ort.Tensor('float32', DtlnCore.joinStates(cores, rows, (c) => c.h1), [LAYERS, rows, UNITS]),
      c0: new ort.Tensor('float32', DtlnCore.joinStates(cores, rows, (c) => c.c1), [LAYERS, rows, UNITS]),
    });
    bufs.mask.set(r1.mask.data as Float32Array);
    stft.istftMasked();
    const r2 = first.useStage2
      ? await graphs.stage2.run({
          frames: new ort.Tensor('float32', bufs.blocks.subarray(0, rows * t * BLOCK), [rows, t, BLOCK]),
          h0: new ort.Tensor('float32', DtlnCore.joinStates(cores, rows, (c) => c.h2), [LAYERS, rows, UNITS]),
          c0: new ort.Tensor('float32', DtlnCore.joinStates(cores, rows, (c) => c.c2), [LAYERS, rows, UNITS]),
        })
      : null;
    // The states move on only once every run went through: a run that fails leaves the cores as they were, so the
    // joiner can run their calls again one by one (live/batching.ts).
    const h1 = DtlnCore.splitStates(cores, rows, r1.hN.data as Float32Array, (c) => c.h1);
    const c1 = DtlnCore.splitStates(cores, rows, r1.cN.data as Float32Array, (c) => c.c1);
    cores.forEach((core, i) => {
      core.h1 = h1[i];
      core.c1 = c1[i];
    });
    if (r2) {
      // Stage 2's output blocks take the masked blocks' place (the inputs are no longer needed).
      bufs.blocks.set(r2.out.data as Float32Array);
      const h2 = DtlnCore.splitStates(cores, rows, r2.hN.data as Float32Array, (c) => c.h2);
      const c2 = DtlnCore.splitStates(cores, rows, r2.cN.data as Float32Array, (c) => c.c2);
      cores.forEach((core, i) => {
        core.h2 = h2[i];
        core.c2 = c2[i];
      });
    }
    // Stage 2 output is overlap-added as is (as trained); the stage-1-only chain gets the Hann synthesis window.
    const hop = first.hop;
    const tailLen = BLOCK - hop;
    const accLen = t * hop + tailLen;
    let row = 0;
    cores.forEach((core, i) => {
      const w = first.useStage2 ? null : core.synthWindow;
      for (let b = 0; b < core.batch; b++, row++) {
        const acc = bufs.acc[row];
        const tail = core.olaTail[b];
        acc.set(tail);
        acc.fill(0, tailLen, accLen);
        stft.overlapAdd(row, w);
        outs[i][b].set(acc.subarray(0, t * hop), f0 * hop);
        tail.set(acc.subarray(t * hop, accLen));
      }
    });
  }
}

/** LSTM states ([LAYERS, batch_i, UNITS] each) as one [LAYERS, rows, UNITS] state (as is when there is one). */
function joinLstmStates(states: Float32Array[], batches: number[], rows: number): Float32Array {
  if (states.length === 1) return states[0];
  const joined = new Float32Array(LAYERS * rows * UNITS);
  for (let l = 0; l < LAYERS; l++) {
    let row = 0;
    states.forEach((state, i) => {
      const b = batches[i];
      joined.set(state.subarray(l * b * UNITS, (l + 1) * b * UNITS), (l * rows + row) * UNITS);
      row += b;
    });
  }
  return joined;
}

/**
 * joinLstmStates' inverse, written into each part's own state array (`into`, [LAYERS, batch_i, UNITS] each): no
 * allocation per stream per run (a live tick splits hundreds). With one part, the joined state is that part's.
 */
function splitLstmStates(joined: Float32Array, batches: number[], rows: number, into: Float32Array[]): Float32Array[] {
  if (batches.length === 1) return [joined];
  let row = 0;
  batches.forEach((b, i) => {
    const own = into[i];
    for (let l = 0; l < LAYERS; l++) {
      own.set(joined.subarray((l * rows + row) * UNITS, (l * rows + row + b) * UNITS), l * b * UNITS);
    }
    row += b;
  });
  return into;
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
