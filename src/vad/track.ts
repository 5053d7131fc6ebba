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
import { copyState, initialState, runSequences, silenceState, type LstmState, type VadSequence } from './silero';
import { VAD_CONTEXT, VAD_FRAME, VAD_FRAME_S, VAD_RATE, VAD_WINDOW } from './silero-graph';

export interface VadTrackOptions {
  vad: VadOptions;
  /** The stream's rate: 16 or 48 kHz. */
  rate: number;
  channels: number;
  /**
   * Whether the aligned input will be given (pushInput()), so that frames are gated on the share of energy the denoiser
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
  readonly session: ort.InferenceSession;
  /** The LSTM state the next ungated frame starts from, unless it follows a gated one. */
  state: LstmState = initialState();
  /** The previous frame was gated: the next ungated frame runs from the silence state. */
  private afterGap = false;
  private readonly ratio: number;
  private readonly delay: number;
  private readonly outDecimator: Decimator3 | null;
  private readonly inDecimator: Decimator3 | null;
  private readonly input: SampleQueue | null;
  private readonly dry: number;
  /** The window being filled: VAD_CONTEXT samples of the previous frame (zeros at first), then `inFrame` of this one. */
  private readonly window = new Float32Array(VAD_WINDOW);
  private inFrame = 0;
  /** Sums of squares of the frame being filled: denoised output and input. */
  private eOut = 0;
  private eIn = 0;
  /** Frames framed but not run yet, oldest first: gated or not; the ungated ones' windows one after another. */
  private readonly waiting: boolean[] = [];
  private windows = new Float32Array(4 * VAD_WINDOW);
  /** Ungated frames waiting for a run. */
  pendingRows = 0;
  /** When the oldest waiting ungated frame was framed (the caller's clock, ms); NaN when there is none. */
  waitingSince = NaN;
  /** Frames handed to the detector so far. */
  decided = 0;

  constructor(session: ort.InferenceSession, private readonly opts: VadTrackOptions) {
    if (opts.rate !== VAD_RATE && opts.rate !== 3 * VAD_RATE) throw new Error(`speech detection runs on 16 or 48 kHz streams, not ${opts.rate} Hz`);
    this.session = session;
    this.detector = new SpeechDetector(opts.vad, VAD_FRAME_S);
    this.ratio = opts.rate / VAD_RATE;
    this.delay = this.ratio === 3 ? RESAMPLE_DELAY_48K : 0;
    this.outDecimator = this.ratio === 3 ? new Decimator3() : null;
    this.inDecimator = this.ratio === 3 && opts.withInput ? new Decimator3() : null;
    this.input = opts.withInput ? new SampleQueue() : null;
    this.dry = opts.dryMix ?? 0;
  }

  get rate(): number {
    return this.opts.rate;
  }

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
    const m = mono(planar);
    this.input.push(this.inDecimator ? this.inDecimator.process(m) : m);
  }

  /** Aligned output in (planar at the stream's rate); the frames it completes wait for runTracks(). */
  pushOutput(planar: Float32Array[], now = NaN): void {
    const m = mono(planar);
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
    const dry = this.dry;
    const wet = 1 - dry;
    const w = this.window;
    let eOut = this.eOut;
    let eIn = this.eIn;
    for (let i = 0; i < y.length; ) {
      // The rest of the frame being filled, or of y.
      const end = Math.min(y.length, i + VAD_FRAME - this.inFrame);
      w.set(y.subarray(i, end), VAD_CONTEXT + this.inFrame);
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
        this.waiting.push(skip);
        if (!skip) {
          if ((this.pendingRows + 1) * VAD_WINDOW > this.windows.length) {
            const grown = new Float32Array(2 * this.windows.length);
            grown.set(this.windows);
            this.windows = grown;
          }
          this.windows.set(w, this.pendingRows * VAD_WINDOW);
          if (this.pendingRows++ === 0) this.waitingSince = now;
        }
        w.copyWithin(0, VAD_FRAME, VAD_WINDOW); // the frame's last 64 samples: the next one's context
        eOut = 0;
        eIn = 0;
        this.inFrame = 0;
      }
    }
    this.eOut = eOut;
    this.eIn = eIn;
  }

  /**
   * The waiting frames (for runTracks): whether each is gated, and the ungated ones' windows (a view, valid until
   * settle(); no frames may be added meanwhile).
   */
  waitingFrames(): { gated: readonly boolean[]; windows: Float32Array } {
    return { gated: this.waiting, windows: this.windows.subarray(0, this.pendingRows * VAD_WINDOW) };
  }

  /** After a run: the probabilities of the waiting frames, and the state the next frame starts from. */
  settle(probs: Float32Array, lastState: LstmState | null): void {
    const n = this.waiting.length;
    if (n > 0) this.afterGap = this.waiting[n - 1];
    if (lastState) this.state = lastState;
    this.waiting.length = 0;
    this.pendingRows = 0;
    this.waitingSince = NaN;
    this.decided += probs.length;
    this.detector.push(probs);
  }

  /** Whether the next ungated frame starts from the silence state. */
  get startsAfterGap(): boolean {
    return this.afterGap;
  }
}

/** The channels' mean (the one channel itself: its users copy what they keep). */
function mono(planar: Float32Array[]): Float32Array {
  if (planar.length === 1) return planar[0];
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
  const silence = tracks.some((t) => t.pendingRows > 0) ? await silenceState(session) : null;
  const seqs: VadSequence[] = [];
  /** Per track: its frames, and where each of its sequences starts (frame index) in `seqs` order. */
  const plans = tracks.map((t) => {
    const { gated: frames, windows } = t.waitingFrames();
    const starts: Array<{ seq: number; from: number }> = [];
    let afterGap = t.startsAfterGap;
    let row = 0;
    for (let f = 0; f < frames.length; ) {
      if (frames[f]) {
        afterGap = true;
        f++;
        continue;
      }
      let g = f;
      while (g < frames.length && !frames[g]) g++;
      // Consecutive ungated frames are consecutive windows.
      starts.push({ seq: seqs.length, from: f });
      seqs.push({ windows: windows.subarray(row * VAD_WINDOW, (row + g - f) * VAD_WINDOW), state: afterGap ? copyState(silence!) : t.state });
      row += g - f;
      afterGap = false;
      f = g;
    }
    counts.rows += row;
    counts.gated += frames.length - row;
    return { t, frames: frames.length, starts };
  });
  const probs = seqs.length > 0 ? await runSequences(session, seqs, counts) : [];
  for (const { t, frames, starts } of plans) {
    const p = new Float32Array(frames);
    for (const s of starts) p.set(probs[s.seq], s.from);
    const last = starts.length > 0 ? seqs[starts[starts.length - 1].seq].state : null;
    t.settle(p, last);
  }
  return counts;
}
