// A stream's speech events (vad=true) on their way to the client: each waits until the output up to its time (at_ms,
// on the input timeline, which the output's follows sample for sample) has been sent, so an event never runs ahead
// of the audio it describes; and what was sent adds up to the `done` stats (speech_s, speech_segment_count, as a
// file's stats say them).
import type { VadEvent } from '../vad/batch';

export class SpeechEvents {
  private waiting: VadEvent[] = [];
  private openAt = -1;
  private speechMs = 0;
  private segments = 0;

  add(e: VadEvent): void {
    this.waiting.push(e);
  }

  /** The waiting events at or before `upToMs`, in order (they come in order), counted as sent. */
  due(upToMs: number): VadEvent[] {
    let n = 0;
    while (n < this.waiting.length && this.waiting[n].at_ms <= upToMs) n++;
    if (n === 0) return [];
    const out = this.waiting.slice(0, n);
    this.waiting = this.waiting.slice(n);
    for (const e of out) {
      if (e.type === 'speech_start') this.openAt = e.at_ms;
      else if (this.openAt >= 0) {
        this.speechMs += e.at_ms - this.openAt;
        this.segments++;
        this.openAt = -1;
      }
    }
    return out;
  }

  stats(): { speech_s: number; speech_segment_count: number } {
    return { speech_s: Math.round(this.speechMs) / 1000, speech_segment_count: this.segments };
  }
}
