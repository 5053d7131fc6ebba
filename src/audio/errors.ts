// Error classes of the audio pipeline. Callers map AudioInputError to a client error (400/422),
// AudioAbortedError to "request cancelled", and anything else to an internal error.

/** The input file is not usable audio: empty, not audio, no audio stream, undecodable. */
export class AudioInputError extends Error {
  override readonly name = 'AudioInputError';
  constructor(message: string) {
    super(message);
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
