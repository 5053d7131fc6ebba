// Where a live stream stands, as both ends see it (the gateway's session, the model service's connection), and the
// moves allowed between those phases, all in this one table:
//
//   opening ──▶ live ──▶ ending ──▶ flushing ──▶ done
//   opening ──▶ ending                    (`end` before the denoising side is up)
//   any phase but done and failed ──▶ done (the client left) or failed (a fault)
//
// opening   the upgrade is accepted, the denoising side is not up yet: audio and `end` are kept, in order
// live      audio goes to the denoising side as it comes
// ending    `end` came (or the credits ran out): no more audio is taken; the flush starts once the denoising side
//           is up and nothing waits for a credit hold
// flushing  the denoising side is flushing; then `done` and close 1000 (or, credits out, the error and 4402)
// done      settled without a fault (closed normally, or the client left)
// failed    settled with a fault (an error message and its close code, or the WebSocket layer's own close)
// What is not a phase stays beside it: whether the client's socket is read (flow control) and audio waiting for a
// credit hold. A move the table does not allow is a defect: to() throws, which ends that stream only (1011).

export type LivePhase = 'opening' | 'live' | 'ending' | 'flushing' | 'done' | 'failed';

const NEXT: Readonly<Record<LivePhase, readonly LivePhase[]>> = {
  opening: ['live', 'ending', 'done', 'failed'],
  live: ['ending', 'done', 'failed'],
  ending: ['flushing', 'done', 'failed'],
  flushing: ['done', 'failed'],
  done: [],
  failed: [],
};

export class LivePhases {
  private phase: LivePhase = 'opening';

  get now(): LivePhase {
    return this.phase;
  }

  /** Audio (and `end`) from the client is still taken. */
  get takesAudio(): boolean {
    return this.phase === 'opening' || this.phase === 'live';
  }

  /** `end` came (or the credits ran out) and the stream is not over: ending or flushing. */
  get closing(): boolean {
    return this.phase === 'ending' || this.phase === 'flushing';
  }

  /** Settled: done or failed. */
  get over(): boolean {
    return this.phase === 'done' || this.phase === 'failed';
  }

  to(next: LivePhase): void {
    if (!NEXT[this.phase].includes(next)) throw new Error(`a live stream cannot go from ${this.phase} to ${next}`);
    this.phase = next;
  }
}
