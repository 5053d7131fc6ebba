// The echo reference of a file run (echo_reference: docs/echo.md): a second source, decoded at the run's rate by its own
// reader (in-process WAV, or an ffmpeg child) and read in step with the input, chunk for chunk, so memory stays bounded
// whatever the length; mixed down to mono, padded with silence past its end and cut at the input's end. Its timeline
// starts with the input's. Its length is checked against the input's: from the headers before anything is decoded,
// and exactly once the input is read through (then at most REFERENCE_MAX_EXTRA_S more is decoded to tell).
import { AudioInputError, AudioTooLongError } from '../audio/errors';
import { assertReadableFile } from '../audio/probe';
import { openSource, type AudioSource, type SourceInput, type SourceOptions } from '../audio/sources';
import type { Config } from '../config';

/** The reference may run past the input's end by this much (a far-end track that goes on after the call's recording). */
export const REFERENCE_MAX_EXTRA_S = 10;
/** ... and must cover at least this share of the input (a shorter one is a different recording). */
export const REFERENCE_MIN_SHARE = 0.5;
/** Container durations (an MP3's estimate) may be off by this much: the check before decoding allows it. */
const HEADER_SLACK_S = 1;

/** An error of the reference's, said to be the reference's: the client sent two files. */
export function referenceError(err: unknown): unknown {
  if (err instanceof AudioTooLongError) return new AudioTooLongError(`echo_reference: ${err.message}`);
  if (err instanceof AudioInputError) return new AudioInputError(`echo_reference: ${err.message}`, err.status);
  return err;
}

const seconds = (s: number): string => `${Math.round(s * 100) / 100} s`;

/** 400: a reference whose length does not go with the input's (both in seconds; `cut`: decoding stopped, it is longer). */
function checkLengths(referenceS: number, inputS: number, slack: number, cut = false): void {
  if (referenceS > inputS + REFERENCE_MAX_EXTRA_S + slack) {
    const length = cut ? `more than ${seconds(inputS + REFERENCE_MAX_EXTRA_S)}` : seconds(referenceS);
    throw new AudioInputError(
      `echo_reference is longer than the file by more than ${REFERENCE_MAX_EXTRA_S} s (${length} against ${seconds(inputS)}); ` +
        `its timeline starts with the file's: send the far end's track of the same call`,
      400,
    );
  }
  if (referenceS < REFERENCE_MIN_SHARE * inputS - slack) {
    throw new AudioInputError(
      `echo_reference is shorter than half of the file (${seconds(referenceS)} against ${seconds(inputS)}); ` +
        `its timeline starts with the file's: send the far end's track of the same call`,
      400,
    );
  }
}

export class ReferenceTrack {
  /** Decoded frames so far (at the run's rate). */
  private decoded = 0;
  private ended = false;
  /** Decoded, mixed down, not yet taken. */
  private held: Float32Array = new Float32Array(0);
  private closed = false;

  private constructor(
    private readonly source: AudioSource,
    readonly rate: number,
  ) {}

  /**
   * Opens the reference at `rate` (the rate the input is decoded to) and checks its length against the input's
   * duration when both headers give one. Its own errors say they are the reference's.
   */
  static async open(config: Config, input: SourceInput, rate: number, inputS: number | null, opts: SourceOptions): Promise<ReferenceTrack> {
    let source: AudioSource;
    try {
      if (typeof input === 'string') await assertReadableFile(input);
      else if (input.file.size === 0) throw new AudioInputError('file is empty');
      source = await openSource(config, input, rate, { ...opts, onFailure: (e) => opts.onFailure(referenceError(e) as Error) });
    } catch (err) {
      throw referenceError(err);
    }
    const track = new ReferenceTrack(source, rate);
    if (inputS !== null && source.durationS !== null) {
      try {
        checkLengths(source.durationS, inputS, HEADER_SLACK_S);
      } catch (err) {
        await track.abort();
        throw err;
      }
    }
    return track;
  }

  /** Reads more of the reference (mixed down) until `want` frames are held or it ended. */
  private async fill(want: number): Promise<void> {
    while (this.held.length < want && !this.ended) {
      let planar: Float32Array[] | null;
      try {
        planar = await this.source.read(Math.max(1024, want - this.held.length));
      } catch (err) {
        throw referenceError(err);
      }
      if (planar === null) {
        this.ended = true;
        break;
      }
      const mono = mixDown(planar);
      this.decoded += mono.length;
      const joined = new Float32Array(this.held.length + mono.length);
      joined.set(this.held);
      joined.set(mono, this.held.length);
      this.held = joined;
    }
  }

  /** The next `n` frames of the reference (silence past its end). */
  async take(n: number): Promise<Float32Array> {
    await this.fill(n);
    const out = new Float32Array(n);
    const k = Math.min(n, this.held.length);
    out.set(this.held.subarray(0, k));
    this.held = this.held.slice(k);
    return out;
  }

  /** `chunk` (the input's next chunk) with the reference's frames for it as one more channel, last. */
  async alongside(chunk: Promise<Float32Array[] | null>): Promise<Float32Array[] | null> {
    const planar = await chunk;
    if (planar === null || planar[0].length === 0) return planar;
    return [...planar, await this.take(planar[0].length)];
  }

  /**
   * The input was read through (`inputFrames` frames): decodes what is left of the reference up to
   * REFERENCE_MAX_EXTRA_S past the input's end, refuses a reference too long or too short (400), closes it.
   */
  async finish(inputFrames: number): Promise<void> {
    const limit = inputFrames + REFERENCE_MAX_EXTRA_S * this.rate;
    while (!this.ended && this.decoded <= limit) {
      this.held = new Float32Array(0); // past the input: only counted
      await this.fill(Math.min(limit + 1 - this.decoded, this.rate));
    }
    const tooLong = this.decoded > limit;
    if (tooLong) await this.abort();
    else {
      try {
        await this.source.finish();
      } catch (err) {
        throw referenceError(err);
      }
      this.closed = true;
    }
    checkLengths(this.decoded / this.rate, inputFrames / this.rate, 0, tooLong);
  }

  /** Stops its decoder; safe to call repeatedly. */
  async abort(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    await this.source.abort();
  }
}

/** One channel: the mean of the channels (a mono reference as it is). */
function mixDown(planar: Float32Array[]): Float32Array {
  if (planar.length === 1) return planar[0];
  const n = planar[0].length;
  const out = new Float32Array(n);
  for (const ch of planar) for (let i = 0; i < n; i++) out[i] += ch[i];
  const g = 1 / planar.length;
  for (let i = 0; i < n; i++) out[i] *= g;
  return out;
}
