// Small timers the forwarder uses to tell who stalled: the client (too slow sending its upload, or not reading the
// answer) or the model service (not accepting the upload, silent in the middle of its response).
import type { Readable } from 'node:stream';

/**
 * Progress watch over a stream we are waiting on: every `windowMs` at least `minBytes` must have arrived, or
 * `onStall` fires. It runs only while armed: the forwarder disarms it while it holds the stream back itself.
 */
export class ProgressWatch {
  private timer: NodeJS.Timeout | null = null;
  private bytes = 0;

  constructor(
    private readonly windowMs: number,
    private readonly minBytes: number,
    private readonly onStall: () => void,
  ) {}

  /** (Re)starts a fresh window. */
  arm(): void {
    this.disarm();
    this.bytes = 0;
    this.timer = setTimeout(() => {
      this.timer = null;
      if (this.bytes < this.minBytes && !this.holding?.()) this.onStall();
      else this.arm();
    }, this.windowMs);
  }

  disarm(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
  }

  progress(n: number): void {
    this.bytes += n;
  }

  /**
   * Watches `stream`'s data, with the clock stopped while the stream is paused: a paused stream is held back by us
   * (its pipe's destination is full: a disk write stalled, say), not by the sender. Returns the detach function.
   */
  follow(stream: Readable): () => void {
    const onData = (chunk: Buffer): void => this.progress(chunk.length);
    const onPause = (): void => this.disarm();
    const onResume = (): void => this.arm();
    stream.on('data', onData);
    stream.on('pause', onPause);
    stream.on('resume', onResume);
    this.holding = () => stream.isPaused();
    this.arm();
    return () => {
      this.disarm();
      this.holding = null;
      stream.off('data', onData);
      stream.off('pause', onPause);
      stream.off('resume', onResume);
    };
  }

  /** While this says so, a window short of bytes is not a stall (see follow()). */
  private holding: (() => boolean) | null = null;
}

/** Fires `onIdle` when `touch()` has not been called for `ms` while armed. */
export class IdleTimer {
  private timer: NodeJS.Timeout | null = null;

  constructor(
    private readonly ms: number,
    private readonly onIdle: () => void,
  ) {}

  arm(): void {
    this.disarm();
    this.timer = setTimeout(() => {
      this.timer = null;
      this.onIdle();
    }, this.ms);
  }

  /** Restarts the countdown if armed (the same timer: this runs on every chunk of a streamed answer). */
  touch(): void {
    this.timer?.refresh();
  }

  disarm(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
  }
}
