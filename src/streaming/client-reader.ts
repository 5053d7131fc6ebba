// Reading one stream's client (session.ts): the socket is not read while more than maxInsideBytes of the stream are
// inside the server (received, not yet sent back), so TCP pushes back on the client; it is read again once a quarter
// of that is left. And the idle clock: no audio for idleMs while audio is expected ends the stream (4408); not being
// read is not the client's silence, so the clock stops while the socket is paused.
import type WebSocket from 'ws';

export interface ReaderLimits {
  idleMs: number;
  maxInsideBytes: number;
}

export class ClientReader {
  private paused = false;
  private idleTimer: NodeJS.Timeout | null = null;
  private lastAudioAt = 0;

  constructor(
    private readonly ws: WebSocket,
    private readonly limits: ReaderLimits,
    /** No audio for idleMs. */
    private readonly onIdle: () => void,
  ) {}

  /**
   * Bytes inside the server changed: pauses or resumes reading. `expectingAudio`: the stream still takes audio (the
   * idle clock restarts on resuming).
   */
  update(inside: number, expectingAudio: boolean): void {
    if (!this.paused && inside > this.limits.maxInsideBytes) {
      this.paused = true;
      this.ws.pause();
      this.stopIdle();
    } else if (this.paused && inside < this.limits.maxInsideBytes / 4) {
      this.paused = false;
      this.ws.resume();
      if (expectingAudio) this.audioCame();
    }
  }

  /**
   * (Re)starts the idle clock. Called for every message (50 a second per stream), so it only notes the time; the one
   * timer, when it fires, looks at when audio last came and sleeps again for the rest (a timer per message cost the
   * HTTP thread a clearTimeout and a setTimeout each, with hundreds of streams open).
   */
  audioCame(): void {
    this.lastAudioAt = performance.now();
    if (this.idleTimer) return;
    const sleep = (ms: number): void => {
      this.idleTimer = setTimeout(check, ms);
      this.idleTimer.unref();
    };
    const check = (): void => {
      const quiet = performance.now() - this.lastAudioAt;
      if (quiet < this.limits.idleMs) return sleep(Math.max(1, this.limits.idleMs - quiet));
      this.idleTimer = null;
      this.onIdle();
    };
    sleep(this.limits.idleMs);
  }

  stopIdle(): void {
    if (this.idleTimer) clearTimeout(this.idleTimer);
    this.idleTimer = null;
  }

  /** The stream is over: no idle clock, and the socket read again (the close handshake needs it). */
  release(): void {
    this.stopIdle();
    if (this.paused) this.ws.resume();
  }
}
