// Contract between the audio pipeline and the inference engine.
// Audio crosses it as float32 samples in [-1, 1] at the stream's rate, planar (one array per channel); a
// PcmDenoiseStream takes and returns interleaved PCM bytes instead, converted on the engine's side.
import type { ThreadPriority } from './runtime/thread-priority';
import type { WavSampleFormat } from '../dsp/pcm';
import type { VadEvent } from '../vad/batch';
import type { SpeechReport, SpeechRequest, VadOptions } from '../vad/options';

/** How one frequency band of the output was processed (reported in X-NS-Stats `bands`). */
export interface BandProcessing {
  from_hz: number;
  to_hz: number;
  /**
   * `denoised_16k`: the model's 16 kHz chain ran on this band; `guided_high_band`: the input's own band above the
   * crossover, filtered per frequency bin under the guidance of the 16 kHz chain's speech/noise decision.
   */
  processing: 'denoised_16k' | 'guided_high_band';
}

export type ModelId = 'nsm-1' | 'nsm-2' | 'nsm-3' | 'nsm-4' | 'nsm-2-hd';

export const MODEL_IDS: readonly ModelId[] = ['nsm-1', 'nsm-2', 'nsm-3', 'nsm-4', 'nsm-2-hd'];
export const DEFAULT_MODEL: ModelId = 'nsm-2';

/** One entry of models/manifest.json's `models` array (ONNX graph files are listed per model). */
export interface ModelManifestEntry {
  id: ModelId;
  label: string;
  sample_rate: number;
  description: string;
  /** Graph files (relative to models/) this model's chain uses. */
  files: string[];
  size_mb: number;
  /** sha256 of the model's graph files concatenated in `files` order (`cat FILES | sha256sum`); per-file digests are in the manifest's `graphs`. */
  sha256: string;
}

export interface DenoiseOptions {
  model: ModelId;
  channels: number;
  /** 0 = as much removal as possible; L > 0 = never attenuate more than L dB. */
  attenuationLimitDb: number;
  /**
   * 16 kHz models: run full band at 48 kHz (the model's chain below 8 kHz, the input's own high band filtered under
   * its guidance above), for inputs above 16 kHz whose rate is kept. nsm-2-hd is always full band.
   */
  fullBand?: boolean;
  /**
   * 16 kHz models: run at 8 kHz (the model's chain between the 2:1 resamplers of dsp/halfband.ts, in the worker), for
   * 8 kHz inputs whose rate is kept: the same chain an 8 kHz live stream runs.
   */
  narrowBand?: boolean;
  /**
   * Meter the stream's input and output (BS.1770 block powers at sampleRate, src/dsp/loudness.ts) in the worker, next
   * to the chain, instead of on the caller's thread: read them with loudness() once end() has resolved.
   */
  measureLoudness?: boolean;
  /** Speech detection on the output in the worker (speech_segments, trim_silence: src/vad); read speech() after end(). */
  speech?: SpeechRequest | null;
  /**
   * Echo cancellation before the model (echo-front.ts, docs/echo.md): every push carries `channels` microphone
   * channels and the echo reference as one more, last; the output has the microphone channels. Read echo() after end().
   * Not with PCM edges (openPcmStream).
   */
  echoReference?: boolean;
}

/** What the echo canceller of a stream reported (src/dsp/aec's stats). */
export interface EchoReport {
  /** The bulk delay it estimated between reference and microphone, ms; null before a confident estimate. */
  delayMs: number | null;
  /** Echo return loss enhancement: microphone over output energy while the reference was active, dB. */
  erleDb: number | null;
  /** Whether the reference ever carried signal (before that, the output is the input). */
  referenceActive: boolean;
}

/** A stream's loudness measurements: the weighted mean square of each 400 ms block (hop 100 ms), in order. */
export interface StreamLoudness {
  input: Float64Array;
  output: Float64Array;
  /** With trim_silence: the output's blocks before the pauses were shortened (aligned with the input's). */
  alignedOutput?: Float64Array;
}

/** What every stream has besides its push/end. */
export interface StreamControl {
  readonly sampleRate: number;
  /** What the stream does to each band up to sampleRate / 2 (models.ts streamLayout). */
  readonly bands: BandProcessing[];
  /** With measureLoudness, after end() resolved: the block powers of all input pushed and all output returned; else null. */
  loudness(): StreamLoudness | null;
  /** With speech detection, after end() resolved: the segments and what trimming removed; else null. */
  speech?(): SpeechReport | null;
  /** With echoReference, after end() resolved: the canceller's figures; else null. */
  echo?(): EchoReport | null;
  /** Frees worker state without flushing (on errors/aborts). */
  abort(): void;
}

/**
 * A stateful denoising stream for one file: push planar chunks of any length, get back planar chunks.
 * Output is delayed internally; `end()` flushes the tail so total output length equals total input length.
 */
export interface DenoiseStream extends StreamControl {
  push(planar: Float32Array[]): Promise<Float32Array[]>;
  end(): Promise<Float32Array[]>;
}

/**
 * The same stream with interleaved PCM at its edges, converted where the chain runs (the worker thread) rather than
 * on the caller's thread: push() takes the bytes of whole frames in `input` (a WAV sample format, decoded as
 * wav.ts decodeFrames does), and the output comes back dithered (dither.ts) and rounded to 16-bit little-endian
 * PCM: the bytes the in-process WAV sink writes for the planar output of a DenoiseStream.
 */
export interface PcmDenoiseStream extends StreamControl {
  push(bytes: Uint8Array): Promise<Uint8Array>;
  end(): Promise<Uint8Array>;
}

export interface PoolState {
  size: number;
  busy: number;
  queued: number;
  streams: number;
  restarts: number;
}

/** A live stream's sample encoding, both ways: 16-bit or float PCM, or G.711 μ-law / A-law (one byte per sample). */
export type LiveEncoding = 'pcm_s16le' | 'pcm_f32le' | 'mulaw' | 'alaw';

export const LIVE_ENCODINGS: readonly LiveEncoding[] = ['pcm_s16le', 'pcm_f32le', 'mulaw', 'alaw'];

/** Bytes of one sample of each live encoding (a frame is channels times this). */
export const LIVE_SAMPLE_BYTES: Record<LiveEncoding, number> = { pcm_s16le: 2, pcm_f32le: 4, mulaw: 1, alaw: 1 };

export interface LiveOptions {
  model: ModelId;
  /** Channels of the client's input frames (with echoReference, the reference included). */
  channels: number;
  sampleRate: number;
  encoding: LiveEncoding;
  attenuationLimitDb: number;
  /** Speech events (vad=true) with these settings; absent: none. */
  vad?: VadOptions;
  /** The last input channel is the echo reference (echo_reference=last): cancelled before the model, not output. */
  echoReference?: boolean;
}

/** Where a live stream's output goes, in order. */
export interface LiveSink {
  output(bytes: Uint8Array): void;
  /** A speech event (vad=true), after the output of the tick that decided it; times on the input timeline. */
  event?(e: VadEvent): void;
  /** The stream failed (worker lost, bad input); nothing more comes. */
  error(err: Error): void;
}

export interface LiveStream {
  readonly id: number;
  /** Samples at the stream's rate from input sample n to when output sample n can be computed (the model's delay). */
  readonly latencySamples: number;
  /** Interleaved PCM of whole frames; its output comes to the sink. */
  push(bytes: Uint8Array): void;
  /** Flushes; resolves after the last output went to the sink (total output = total input). */
  end(): Promise<void>;
  abort(): void;
  /** With echoReference, after end() resolved: the canceller's figures; else null. */
  echo?(): EchoReport | null;
}

/** Counters for metrics and the bench. */
export interface LiveState {
  streams: number;
  ticks: number;
  items: number;
  /** Live streams pinned to each live worker, in the workers' order. */
  perWorker: number[];
}

export interface InferenceEngine {
  openStream(opts: DenoiseOptions): Promise<DenoiseStream>;
  /** A live stream (live/pool.ts): batched with the other live streams, ahead of file work. */
  openLive?(opts: LiveOptions, sink: LiveSink): Promise<LiveStream>;
  liveState?(): LiveState;
  /** Each worker thread's kernel id and priority (file workers lowered: FILE_WORK_NICE, FILE_WORK_IDLE). */
  workerPriorities?(): { live: boolean; priority: ThreadPriority | null }[];
  /** A stream with PCM edges (PcmDenoiseStream); engines without it are used through openStream. */
  openPcmStream?(opts: DenoiseOptions, input: WavSampleFormat): Promise<PcmDenoiseStream>;
  state(): PoolState;
  close(): Promise<void>;
}
