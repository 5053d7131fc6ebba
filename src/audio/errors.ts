// Error classes of the audio pipeline. Callers map AudioInputError to a client error (400/422),
// AudioAbortedError to "request cancelled", and anything else to an internal error.

/** The input file is not usable audio: empty, not audio, no audio stream, undecodable, out of the accepted limits. */
export class AudioInputError extends Error {
  override readonly name: string = 'AudioInputError';
  /**
   * HTTP status for the client: 422 (unprocessable audio), 413 for audio longer than the service accepts, 400 for
   * files that do not go together (an echo reference whose length does not match the input's).
   */
  readonly status: 400 | 413 | 422;
  constructor(message: string, status: 400 | 413 | 422 = 422) {
    super(message);
    this.status = status;
  }
}

/** The audio is longer than MAX_AUDIO_SECONDS (found from the header, or while decoding when the header lied). */
export class AudioTooLongError extends AudioInputError {
  override readonly name = 'AudioTooLongError';
  constructor(message: string) {
    super(message, 413);
  }
}

/** The file's container is not one the decoder may open (its demuxer is not on the whitelist: AVI, MPEG-TS, FLV, …). */
export class UnsupportedFormatError extends AudioInputError {
  override readonly name = 'UnsupportedFormatError';
  /** ffmpeg's name for the container ("avi", "mpegts"). */
  readonly format: string;
  constructor(format: string) {
    super(`unsupported input format "${format}": send WAV, FLAC, OGG, Opus, MP3, M4A, WebM or another audio file`);
    this.format = format;
  }
}

/** ffmpeg could not be started, the encoder failed, or another internal step broke. */
export class AudioPipelineError extends Error {
  override readonly name = 'AudioPipelineError';
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
  }
}

/** Processing was cancelled through the AbortSignal. `name` is 'AbortError' like DOM aborts. */
export class AudioAbortedError extends Error {
  override readonly name = 'AbortError';
  readonly code = 'ABORT_ERR';
  constructor(message = 'audio processing was aborted') {
    super(message);
  }
}
