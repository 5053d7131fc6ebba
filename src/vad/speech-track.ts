// Speech detection on one file stream, in the worker next to its chain: the aligned output (what the file gets) is
// mixed to mono, brought to 16 kHz (full-band streams: the 3:1 decimator; 8 kHz ones: the 2:1 interpolator; their
// delays compensated), run through Silero
// (silero.ts) and the decision rule (detector.ts); the segments are collected, and with trim_silence the output is
// shortened as it goes (trim.ts). Without trimming the output passes unchanged.
import type * as ort from 'onnxruntime-node';
import { HALF_BAND_DELAY, Interpolator2 } from '../dsp/halfband';
import { Decimator3, RESAMPLE_DELAY_48K } from '../dsp/resample';
import { SpeechDetector } from './detector';
import { TRIM_FADE_S, type SpeechReport, type SpeechRequest } from './options';
import { VadStream } from './silero';
import { VAD_FRAME, VAD_FRAME_S, VAD_RATE } from './silero-graph';
import { SilenceTrimmer } from './trim';

export class SpeechTrack {
  private readonly vad: VadStream;
  private readonly detector: SpeechDetector;
  private readonly trimmer: SilenceTrimmer | null;
  private readonly decimator: Decimator3 | null;
  private readonly interpolator: Interpolator2 | null;
  /** Output samples per VAD sample, and the output sample VAD sample 0 stands for (minus: the decimator's delay). */
  private readonly ratio: number;
  private readonly delay: number;
  private readonly segments: number[] = [];
  private openStart = -1;
  private samplesIn = 0;

  constructor(
    session: ort.InferenceSession,
    private readonly request: SpeechRequest,
    private readonly rate: number,
    private readonly channels: number,
  ) {
    if (rate !== VAD_RATE / 2 && rate !== VAD_RATE && rate !== 3 * VAD_RATE) throw new Error(`speech detection runs on 8, 16 or 48 kHz streams, not ${rate} Hz`);
    this.vad = new VadStream(session);
    this.detector = new SpeechDetector(request.vad, VAD_FRAME_S);
    this.trimmer = request.trimMaxPauseS === null ? null : new SilenceTrimmer(channels, rate, request.trimMaxPauseS, TRIM_FADE_S);
    this.ratio = rate / VAD_RATE;
    this.decimator = this.ratio === 3 ? new Decimator3() : null;
    this.interpolator = this.ratio === 0.5 ? new Interpolator2() : null;
    this.delay = this.ratio === 3 ? RESAMPLE_DELAY_48K : this.ratio === 0.5 ? HALF_BAND_DELAY / 2 : 0;
  }

  /** The output sample where VAD frame f begins. */
  private at(frame: number): number {
    return Math.max(0, Math.round(frame * VAD_FRAME * this.ratio - this.delay));
  }

  /** An aligned output chunk in; the chunk to write out (the same arrays without trimming). */
  async process(out: Float32Array[]): Promise<Float32Array[]> {
    const n = out[0].length;
    if (n === 0) return out;
    this.samplesIn += n;
    this.trimmer?.pushAudio(out);
    await this.analyse(this.mono(out), false);
    return this.trimmer ? this.trimmer.take() : out;
  }

  /** After the last chunk: decides the rest and returns what trimming still held. */
  async finish(): Promise<Float32Array[]> {
    // The resampler's delay in zeros, so that the last output samples reach the VAD; the last frame is zero-padded.
    await this.analyse(this.delay > 0 ? new Float32Array(Math.ceil(this.delay) + 3) : new Float32Array(0), true);
    if (!this.trimmer) return Array.from({ length: this.channels }, () => new Float32Array(0));
    return this.trimmer.finish();
  }

  report(): SpeechReport {
    const removed = this.trimmer ? this.trimmer.removed : 0;
    return { segments: Float64Array.from(this.segments), removedS: removed / this.rate, outputFrames: this.samplesIn - removed };
  }

  private mono(out: Float32Array[]): Float32Array {
    if (out.length === 1) return out[0];
    const n = out[0].length;
    const m = new Float32Array(n);
    for (const ch of out) for (let i = 0; i < n; i++) m[i] += ch[i];
    const k = 1 / out.length;
    for (let i = 0; i < n; i++) m[i] *= k;
    return m;
  }

  private async analyse(x: Float32Array, last: boolean): Promise<void> {
    const x16 = this.decimator ? this.decimator.process(x) : this.interpolator ? this.interpolator.process(x) : x;
    const probs = await this.vad.push(x16);
    this.detector.push(probs);
    if (last) {
      this.detector.push(await this.vad.flush());
      this.detector.finish();
    }
    const { events, spans } = this.detector.drain();
    const end = this.samplesIn / this.rate;
    for (const e of events) {
      const t = Math.min(end, this.at(e.frame) / this.rate);
      if (e.type === 'speech_start') this.openStart = t;
      else if (this.openStart >= 0) {
        if (t > this.openStart) this.segments.push(this.openStart, t);
        this.openStart = -1;
      }
    }
    if (this.trimmer) for (const s of spans) this.trimmer.label(this.at(s.to), s.speech);
  }
}
