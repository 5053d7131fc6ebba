// The decision rule on per-frame speech probabilities: hysteresis (speech starts at `threshold`, continues down to
// threshold − VAD_HYSTERESIS), a minimum speech duration, and a hangover (speech ends after that long below the lower
// threshold, so a short pause does not split a turn). Works in frames; it reports the events with the frame they are
// about and the frame that decided them, and the labels it will not change any more (spans), in order, as it goes.
//
// Decision latency (from the end of the frame that decides, on top of the 32 ms frame itself):
//   speech_start at the first frame of the run, decided once the run spans max(1 frame, min speech duration);
//   speech_end at the end of the run's last frame at or above the lower threshold, decided `hangover` later.
// Durations are rounded up to whole 32 ms frames.
import { VAD_HYSTERESIS, type VadOptions } from './options';

export interface FrameEvent {
  type: 'speech_start' | 'speech_end';
  /** Frame index the event is about: the first speech frame (start), or the frame after the last one (end). */
  frame: number;
  /** Frame index whose probability decided it (the event is known once this frame has been seen). */
  decidedAt: number;
}

/** Frames [from, to) are speech or not, for good. Spans come contiguous from frame 0. */
export interface FrameSpan {
  from: number;
  to: number;
  speech: boolean;
}

export class SpeechDetector {
  private readonly threshold: number;
  private readonly lower: number;
  private readonly minFrames: number;
  private readonly hangFrames: number;
  private state: 'silence' | 'candidate' | 'speech' = 'silence';
  /** First frame of the current run, and its last frame at or above the lower threshold. */
  private start = 0;
  private last = 0;
  /** Next frame index. */
  private f = 0;
  /** Frames before this are labelled for good. */
  private finalTo = 0;
  readonly events: FrameEvent[] = [];
  readonly spans: FrameSpan[] = [];

  constructor(opts: VadOptions, frameS: number) {
    this.threshold = opts.threshold;
    this.lower = Math.max(0.01, opts.threshold - VAD_HYSTERESIS);
    this.minFrames = Math.max(1, Math.ceil(opts.minSpeechMs / 1000 / frameS - 1e-9));
    this.hangFrames = Math.max(1, Math.ceil(opts.hangoverMs / 1000 / frameS - 1e-9));
  }

  /** Frames seen so far. */
  get frames(): number {
    return this.f;
  }

  push(probs: ArrayLike<number>): void {
    for (let i = 0; i < probs.length; i++) this.step(probs[i]);
  }

  private step(p: number): void {
    const f = this.f++;
    switch (this.state) {
      case 'silence':
        if (p >= this.threshold) {
          this.state = 'candidate';
          this.start = f;
          this.last = f;
          if (this.minFrames <= 1) this.confirm(f);
        } else this.label(f + 1, false);
        return;
      case 'candidate':
        if (p >= this.lower) {
          this.last = f;
          if (f - this.start + 1 >= this.minFrames) this.confirm(f);
        } else if (f - this.last >= this.hangFrames) {
          // Too short: the run was not speech.
          this.state = 'silence';
          this.label(f + 1, false);
        }
        return;
      case 'speech':
        if (p >= this.lower) {
          this.last = f;
          this.label(f + 1, true);
        } else if (f - this.last >= this.hangFrames) {
          this.events.push({ type: 'speech_end', frame: this.last + 1, decidedAt: f });
          this.label(this.last + 1, true);
          this.label(f + 1, false);
          this.state = 'silence';
        }
    }
  }

  private confirm(f: number): void {
    this.events.push({ type: 'speech_start', frame: this.start, decidedAt: f });
    this.state = 'speech';
    this.label(this.start, false);
    this.label(this.last + 1, true);
  }

  private label(to: number, speech: boolean): void {
    if (to <= this.finalTo) return;
    const prev = this.spans[this.spans.length - 1];
    if (prev && prev.speech === speech && prev.to === this.finalTo) prev.to = to;
    else this.spans.push({ from: this.finalTo, to, speech });
    this.finalTo = to;
  }

  /** The stream ended after the frames seen: speech in progress ends with its last speech frame; a shorter run is dropped. */
  finish(): void {
    if (this.state === 'speech') {
      this.events.push({ type: 'speech_end', frame: this.last + 1, decidedAt: Math.max(0, this.f - 1) });
      this.label(this.last + 1, true);
    }
    this.state = 'silence';
    this.label(this.f, false);
  }

  /** Takes the events and spans found since the last call. */
  drain(): { events: FrameEvent[]; spans: FrameSpan[] } {
    return { events: this.events.splice(0), spans: this.spans.splice(0) };
  }
}
