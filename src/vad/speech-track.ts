// Speech detection on one file stream, in the worker next to its chain: the stream's input (for the gate) and its
// aligned output (what the file gets) go to a VadTrack (track.ts: mono, 16 kHz, 32 ms frames, the gate), whose frames
// run through Silero and the decision rule after every chunk; the segments are collected, and with trim_silence the
// output is shortened as it goes (trim.ts). Without trimming the output passes unchanged.
import type * as ort from 'onnxruntime-node';
import { TRIM_FADE_S, type SpeechReport, type SpeechRequest } from './options';
import { runTracks, VadTrack } from './track';
import { SilenceTrimmer } from './trim';

export class SpeechTrack {
  private readonly track: VadTrack;
  private readonly trimmer: SilenceTrimmer | null;
  private readonly segments: number[] = [];
  private openStart = -1;
  private samplesIn = 0;

  /**
   * `dryMix`: the attenuation limit's weight of the input in the output (0 when unlimited). Without `withInput` the
   * gate has only the output's level to go by.
   */
  constructor(
    session: ort.InferenceSession,
    request: SpeechRequest,
    private readonly rate: number,
    private readonly channels: number,
    opts: { withInput?: boolean; dryMix?: number } = {},
  ) {
    this.track = new VadTrack(session, { vad: request.vad, rate, channels, withInput: opts.withInput ?? false, dryMix: opts.dryMix });
    this.trimmer = request.trimMaxPauseS === null ? null : new SilenceTrimmer(channels, rate, request.trimMaxPauseS, TRIM_FADE_S);
  }

  /** An input chunk, before the chain (which may reuse its arrays) sees it; only with `withInput`. */
  input(planar: Float32Array[]): void {
    this.track.pushInput(planar);
  }

  /** An aligned output chunk in; the chunk to write out (the same arrays without trimming). */
  async process(out: Float32Array[]): Promise<Float32Array[]> {
    const n = out[0].length;
    if (n === 0) return out;
    this.samplesIn += n;
    this.trimmer?.pushAudio(out);
    this.track.pushOutput(out);
    await this.decide(false);
    return this.trimmer ? this.trimmer.take() : out;
  }

  /** After the last chunk: decides the rest and returns what trimming still held. */
  async finish(): Promise<Float32Array[]> {
    this.track.endOutput();
    await this.decide(true);
    if (!this.trimmer) return Array.from({ length: this.channels }, () => new Float32Array(0));
    return this.trimmer.finish();
  }

  report(): SpeechReport {
    const removed = this.trimmer ? this.trimmer.removed : 0;
    return { segments: Float64Array.from(this.segments), removedS: removed / this.rate, outputFrames: this.samplesIn - removed };
  }

  private async decide(last: boolean): Promise<void> {
    await runTracks([this.track]);
    const detector = this.track.detector;
    if (last) detector.finish();
    const { events, spans } = detector.drain();
    const end = this.samplesIn / this.rate;
    for (const e of events) {
      const t = Math.min(end, this.track.sampleAt(e.frame) / this.rate);
      if (e.type === 'speech_start') this.openStart = t;
      else if (this.openStart >= 0) {
        if (t > this.openStart) this.segments.push(this.openStart, t);
        this.openStart = -1;
      }
    }
    if (this.trimmer) for (const s of spans) this.trimmer.label(this.track.sampleAt(s.to), s.speech);
  }
}
