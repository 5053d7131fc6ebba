// trim_silence: shortens every pause longer than a bound to that bound, streaming. Audio comes in order (planar, from
// sample 0) and so do the final labels (detector.ts spans, in samples); a pause's first half of the bound goes out at
// once, its last half waits in a ring buffer (memory: the bound, whatever the pause), and when the pause ends the two
// halves are joined with an equal-power crossfade of TRIM_FADE_S, so the cut does not click. Pauses up to the bound
// plus one fade are left as they are.
import { concatAll } from '../dsp/concat';

export class SilenceTrimmer {
  /** Samples of a shortened pause: `head` kept from its start (the last `fade` of them held back), `ringCap` from its end. */
  private readonly head: number;
  private readonly fade: number;
  private readonly ringCap: number;
  /** Audio not yet labelled, from sample `pos`. */
  private pending: Float32Array[][] = [];
  private pos = 0;
  private audioEnd = 0;
  /** Label runs not yet applied: [to, speech], contiguous from `pos`. */
  private readonly labels: Array<{ to: number; speech: boolean }> = [];
  /** The pause in progress: samples so far, the held-back end of its head, and its last samples. */
  private pauseLen = 0;
  private readonly held: Float32Array[];
  private readonly ring: Float32Array[];
  private ringWrite = 0;
  private out: Float32Array[][] = [];
  /** Samples removed so far. */
  removed = 0;

  constructor(
    private readonly channels: number,
    rate: number,
    maxPauseS: number,
    fadeS: number,
  ) {
    const max = Math.round(maxPauseS * rate);
    this.fade = Math.max(1, Math.round(fadeS * rate));
    this.head = Math.max(this.fade, Math.floor(max / 2));
    this.ringCap = max - this.head + this.fade;
    this.held = Array.from({ length: channels }, () => new Float32Array(this.fade));
    this.ring = Array.from({ length: channels }, () => new Float32Array(this.ringCap));
  }

  pushAudio(planar: Float32Array[]): void {
    if (planar[0].length === 0) return;
    this.pending.push(planar.map((ch) => ch.slice())); // held across calls: the chain may reuse its arrays
    this.audioEnd += planar[0].length;
    this.run();
  }

  /** Samples up to `to` (exclusive) are speech or not, for good. */
  label(to: number, speech: boolean): void {
    const last = this.labels[this.labels.length - 1];
    if (to <= (last ? last.to : this.pos)) return;
    if (last && last.speech === speech) last.to = to;
    else this.labels.push({ to, speech });
    this.run();
  }

  /** The output ready so far. */
  take(): Float32Array[] {
    const parts = this.out;
    this.out = [];
    if (parts.length === 1) return parts[0];
    return Array.from({ length: this.channels }, (_, c) => concatAll(parts.map((p) => p[c])));
  }

  /** The end: what is not labelled is a pause; the pause in progress is closed. */
  finish(): Float32Array[] {
    this.label(this.audioEnd, false);
    this.closePause();
    return this.take();
  }

  private run(): void {
    while (this.labels.length > 0 && this.pos < this.audioEnd) {
      const run = this.labels[0];
      const n = Math.min(run.to, this.audioEnd) - this.pos;
      const piece = this.takePending(n);
      if (run.speech) {
        this.closePause();
        this.out.push(piece);
      } else this.feedPause(piece);
      if (this.pos >= run.to) this.labels.shift();
    }
  }

  /** The next n pending samples (n ≤ what is pending). */
  private takePending(n: number): Float32Array[] {
    const parts: Float32Array[][] = [];
    let left = n;
    while (left > 0) {
      const first = this.pending[0];
      const len = first[0].length;
      if (len <= left) {
        parts.push(first);
        this.pending.shift();
        left -= len;
      } else {
        parts.push(first.map((ch) => ch.subarray(0, left)));
        this.pending[0] = first.map((ch) => ch.subarray(left));
        left = 0;
      }
    }
    this.pos += n;
    return parts.length === 1 ? parts[0] : Array.from({ length: this.channels }, (_, c) => concatAll(parts.map((p) => p[c])));
  }

  private feedPause(piece: Float32Array[]): void {
    const n = piece[0].length;
    const direct = this.head - this.fade;
    let i = 0;
    if (this.pauseLen < direct) {
      const k = Math.min(n, direct - this.pauseLen);
      this.out.push(piece.map((ch) => ch.slice(0, k)));
      i = k;
    }
    if (i < n && this.pauseLen + i < this.head) {
      const k = Math.min(n - i, this.head - (this.pauseLen + i));
      const at = this.pauseLen + i - direct;
      for (let c = 0; c < this.channels; c++) this.held[c].set(piece[c].subarray(i, i + k), at);
      i += k;
    }
    // The rest goes into the ring, which keeps the pause's last ringCap samples.
    if (n - i > this.ringCap) i = n - this.ringCap;
    while (i < n) {
      const k = Math.min(n - i, this.ringCap - this.ringWrite);
      for (let c = 0; c < this.channels; c++) this.ring[c].set(piece[c].subarray(i, i + k), this.ringWrite);
      this.ringWrite = (this.ringWrite + k) % this.ringCap;
      i += k;
    }
    this.pauseLen += n;
  }

  private closePause(): void {
    const len = this.pauseLen;
    if (len === 0) return;
    this.pauseLen = 0;
    const direct = this.head - this.fade;
    if (len <= direct) return;
    const heldLen = Math.min(len, this.head) - direct;
    const tailLen = Math.max(0, len - this.head);
    if (tailLen <= this.ringCap) {
      // Short enough: what was held back goes out as it was.
      this.out.push(this.held.map((h) => h.slice(0, heldLen)));
      if (tailLen > 0) this.out.push(this.ring.map((r) => r.slice(0, tailLen)));
      this.ringWrite = 0;
      return;
    }
    // Cut: the held-back head end fades out over the ring's oldest `fade` samples fading in, then the rest of the ring.
    const F = this.fade;
    const joined = Array.from({ length: this.channels }, () => new Float32Array(this.ringCap));
    for (let c = 0; c < this.channels; c++) {
      const r = this.ring[c];
      const o = joined[c];
      for (let j = 0; j < this.ringCap; j++) o[j] = r[(this.ringWrite + j) % this.ringCap];
      const h = this.held[c];
      for (let j = 0; j < F; j++) {
        const a = (Math.PI / 2) * ((j + 0.5) / F);
        o[j] = h[j] * Math.cos(a) + o[j] * Math.sin(a);
      }
    }
    this.out.push(joined);
    this.removed += len - (this.head + this.ringCap - F);
    this.ringWrite = 0;
  }
}
