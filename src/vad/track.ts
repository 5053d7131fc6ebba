// One stream's speech detection up to the network: the denoised output (and, for the gate, the input it lines up with)
// mixed to mono and brought to 16 kHz (48 kHz streams: the 3:1 decimator, its delay compensated in the times), cut
// into 32 ms frames, each frame gated or not (gate.ts); the frames wait here until runTracks() runs the ungated ones
// of many tracks in one batch (silero.ts) and hands every probability to the track's decision rule (detector.ts).
// Used by files (speech-track.ts) and live streams (batch.ts) alike.
import type * as ort from 'onnxruntime-node';
import { Decimator3, RESAMPLE_DELAY_48K } from '../dsp/resample';
import { SpeechDetector } from './detector';
import { gated } from './gate';
import type { VadOptions } from './options';
import { copyState, runSequences, silenceState, VadStream, type VadSequence } from './silero';
import { VAD_FRAME, VAD_FRAME_S, VAD_RATE, VAD_WINDOW } from './silero-graph';

export interface VadTrackOptions {
  vad: VadOptions;
  /** The stream's rate: 16 or 48 kHz. */
  rate: number;
  channels: number;
  /**
   * Whether the aligned input will be given (input()), so that frames are gated on the share of energy the denoiser
   * kept; without it only (near) silent frames are gated.
   */
  withInput: boolean;
  /** The attenuation limit's weight of the input in the output (0 when unlimited): the gate undoes that mix. */
  dryMix?: number;
  /** false: every frame is run (the bench's comparison); default true. */
  gate?: boolean;
}

/** Growable FIFO of mono samples. */
class SampleQueue {
  private buf = new Float32Array(4096);
  private head = 0;
  private tail = 0;

  push(x: Float32Array): void {
    if (this.tail + x.length > this.buf.length) {
      const live = this.tail - this.head;
      if (live + x.length <= this.buf.length) this.buf.copyWithin(0, this.head, this.tail);
      else {
        const grown = new Float32Array(2 * (live + x.length));
        grown.set(this.buf.subarray(this.head, this.tail));
        this.buf = grown;
      }
      this.head = 0;
      this.tail = live;
    }
    this.buf.set(x, this.tail);
    this.tail += x.length;
  }

  /** The first n samples (a view, valid until the next push); fewer if fewer are queued. */
  take(n: number): Float32Array {
    const k = Math.min(n, this.tail - this.head);
    const out = this.buf.subarray(this.head, this.head + k);
    this.head += k;
    return out;
  }
}

export class VadTrack {
  readonly detector: SpeechDetector;
  /** Framing (each frame's window with its 64 samples of context) and the LSTM state. */
  readonly framer: VadStream;
  /** The previous frame was gated: the next ungated frame runs from the silence state. */
  private afterGap = false;
  private readonly ratio: number;
  private readonly delay: number;
  private readonly outDecimator: Decimator3 | null;
  private readonly inDecimator: Decimator3 | null;
  private readonly input: SampleQueue | null;
  private readonly dry: number;
  /** Sums of squares of the frame being filled: denoised output and input, and its samples so far. */
  private eOut = 0;
  private eIn = 0;
  private inFrame = 0;
  /** Frames framed but not run yet: windows (null: gated), oldest first. */
  private readonly waiting: Array<Float32Array | null> = [];
  /** When the oldest waiting ungated frame was framed (the caller's clock, ms); NaN when there is none. */
  waitingSince = NaN;
  /** Frames handed to the detector so far. */
  decided = 0;

  constructor(session: ort.InferenceSession, private readonly opts: VadTrackOptions) {
    if (opts.rate !== VAD_RATE && opts.rate !== 3 * VAD_RATE) throw new Error(`speech detection runs on 16 or 48 kHz streams, not ${opts.rate} Hz`);
    this.framer = new VadStream(session);
    this.detector = new SpeechDetector(opts.vad, VAD_FRAME_S);
    this.ratio = opts.rate / VAD_RATE;
    this.delay = this.ratio === 3 ? RESAMPLE_DELAY_48K : 0;
    this.outDecimator = this.ratio === 3 ? new Decimator3() : null;
    this.inDecimator = this.ratio === 3 && opts.withInput ? new Decimator3() : null;
    this.input = opts.withInput ? new SampleQueue() : null;
    this.dry = opts.dryMix ?? 0;
  }

  get session(): ort.InferenceSession {
    return this.framer.session;
  }

  get rate(): number {
    return this.opts.rate;
  }

  /** Ungated frames waiting for a run. */
  pendingRows = 0;

  get pendingFrames(): number {
    return this.waiting.length;
  }

  /** The stream sample (at its own rate) where frame f begins. */
  sampleAt(frame: number): number {
    return Math.max(0, frame * VAD_FRAME * this.ratio - this.delay);
  }

  /** Input in, before the output it lines up with (planar at the stream's rate; copied). */
  pushInput(planar: Float32Array[]): void {
    if (!this.input) throw new Error('this track was opened without input');
    const m = mono(planar, true);
    this.input.push(this.inDecimator ? this.inDecimator.process(m) : m);
  }

  /** Aligned output in (planar at the stream's rate); the frames it completes wait for runTracks(). */
  pushOutput(planar: Float32Array[], now = NaN): void {
    const m = mono(planar, false);
    this.frame(this.outDecimator ? this.outDecimator.process(m) : m, now);
  }

  /** After the last output: the decimators' delay is carried through, and the last partial frame is completed with zeros. */
  endOutput(now = NaN): void {
    if (this.outDecimator) {
      const pad = new Float32Array(this.delay + 3);
      if (this.inDecimator) this.input!.push(this.inDecimator.process(pad));
      this.frame(this.outDecimator.process(pad), now);
    }
    const rest = this.inFrame > 0 ? VAD_FRAME - this.inFrame : 0;
    if (rest > 0) {
      if (this.input) this.input.push(new Float32Array(rest));
      this.frame(new Float32Array(rest), now);
    }
  }

  private frame(y: Float32Array, now: number): void {
    if (y.length === 0) return;
    const x = this.input ? this.input.take(y.length) : null;
    const windows = this.framer.windowsFor(y);
    const dry = this.dry;
    const wet = 1 - dry;
    let eOut = this.eOut;
    let eIn = this.eIn;
    let k = 0;
    for (let i = 0; i < y.length; ) {
      // The rest of the frame being filled, or of y.
      const end = Math.min(y.length, i + VAD_FRAME - this.inFrame);
      if (x === null) {
        for (let j = i; j < end; j++) eOut += y[j] * y[j];
      } else if (dry > 0) {
        for (let j = i; j < end; j++) {
          const xi = j < x.length ? x[j] : 0;
          const d = (y[j] - dry * xi) / wet;
          eOut += d * d;
          eIn += xi * xi;
        }
      } else {
        for (let j = i; j < end; j++) {
          const xi = j < x.length ? x[j] : 0;
          eOut += y[j] * y[j];
          eIn += xi * xi;
        }
      }
      this.inFrame += end - i;
      i = end;
      if (this.inFrame === VAD_FRAME) {
        const skip = this.opts.gate !== false && gated(eOut, x ? eIn : null, VAD_FRAME);
        this.waiting.push(skip ? null : windows.subarray(k * VAD_WINDOW, (k + 1) * VAD_WINDOW));
        if (!skip && this.pendingRows++ === 0) this.waitingSince = now;
        k++;
        eOut = 0;
        eIn = 0;
        this.inFrame = 0;
      }
    }
    this.eOut = eOut;
    this.eIn = eIn;
  }

  /** Takes the waiting frames (for runTracks). */
  takeWaiting(): Array<Float32Array | null> {
    this.waitingSince = NaN;
    this.pendingRows = 0;
    return this.waiting.splice(0);
  }

  /** Afterwards: the probabilities of frames taken, and the state the next frame starts from. */
  settle(probs: Float32Array, lastGated: boolean, lastState: VadSequence['state'] | null): void {
    if (lastState) this.framer.state = lastState;
    this.afterGap = lastGated;
    this.decided += probs.length;
    this.detector.push(probs);
  }

  /** Whether the next ungated frame starts from the silence state. */
  get startsAfterGap(): boolean {
    return this.afterGap;
  }
}

/** The channels' mean; a copy when `copy` (a single channel may be an array its owner reuses). */
function mono(planar: Float32Array[], copy: boolean): Float32Array {
  if (planar.length === 1) return copy ? planar[0].slice() : planar[0];
  const n = planar[0].length;
  const m = new Float32Array(n);
  for (const ch of planar) for (let i = 0; i < n; i++) m[i] += ch[i];
  const k = 1 / planar.length;
  for (let i = 0; i < n; i++) m[i] *= k;
  return m;
}

/** What runTracks did: session.runs, frames run (rows), frames gated. */
export interface RunCounts {
  runs: number;
  rows: number;
  gated: number;
}

/**
 * Runs every waiting frame of `tracks` (each track at most once in the list, none in another run meanwhile): the
 * ungated frames of all of them in one batch (runs of consecutive ungated frames as sequences; one that follows a
 * gated frame starts from the silence state), gated frames at probability 0; each track's detector gets its frames in
 * order. A track whose frames are all gated needs no run.
 */
export async function runTracks(tracks: readonly VadTrack[]): Promise<RunCounts> {
  const counts: RunCounts = { runs: 0, rows: 0, gated: 0 };
  if (tracks.length === 0) return counts;
  const session = tracks[0].session;
  const silence = await silenceState(session);
  const seqs: VadSequence[] = [];
  /** Per track: its frames, and where each of its sequences starts (frame index) in `seqs` order. */
  const plans = tracks.map((t) => {
    const frames = t.takeWaiting();
    const starts: Array<{ seq: number; from: number; count: number }> = [];
    let afterGap = t.startsAfterGap;
    for (let f = 0; f < frames.length; ) {
      if (!frames[f]) {
        afterGap = true;
        f++;
        continue;
      }
      let g = f;
      while (g < frames.length && frames[g]) g++;
      const windows = new Float32Array((g - f) * VAD_WINDOW);
      for (let j = f; j < g; j++) windows.set(frames[j]!, (j - f) * VAD_WINDOW);
      starts.push({ seq: seqs.length, from: f, count: g - f });
      seqs.push({ windows, state: afterGap ? copyState(silence) : t.framer.state });
      afterGap = false;
      f = g;
    }
    return { t, frames, starts };
  });
  const probs = seqs.length > 0 ? await runSequences(session, seqs, counts) : [];
  for (const { t, frames, starts } of plans) {
    const p = new Float32Array(frames.length);
    for (const s of starts) p.set(probs[s.seq], s.from);
    const lastGated = frames.length > 0 ? frames[frames.length - 1] === null : t.startsAfterGap;
    const last = starts.length > 0 ? seqs[starts[starts.length - 1].seq].state : null;
    const ran = starts.reduce((a, s) => a + s.count, 0);
    counts.rows += ran;
    counts.gated += frames.length - ran;
    t.settle(p, lastGated, lastGated ? null : last);
  }
  return counts;
}
