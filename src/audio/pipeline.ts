// The file pipeline: any audio → model-rate float32 → DenoiseStream → 16-bit WAV or FLAC.
//
//   source (planar float32 at the model rate, ~1 s chunks) ──▶ DenoiseStream.push (worker thread) ──▶ sink (file)
//
// Sources (sources.ts): an uncompressed WAV at the model's rate is read in-process (wav.ts), with no child process at
// all; a WAV at another rate is read in-process and resampled by an ffmpeg child (soxr) fed through its stdin; anything
// else is decoded (and resampled) by ONE ffmpeg child whose stderr banner and WAV header give what a separate probe
// used to (codec, container, duration, input rate, channel count). Sinks (sinks.ts): 16-bit WAV at the model's rate is
// written in-process; FLAC or another rate goes through an ffmpeg encoder child.
//
// Limits (limits.ts) are checked from the header before any decoding, and the duration again while decoding.
// Non-finite samples (NaN, ±Inf) are silence: float WAVs are cleaned as they are read, other decoders' output here.
//
// Memory stays bounded whatever the duration: one chunk is read only after the previous one went through the engine
// and was accepted by the sink (file write, or the encoder's stdin 'drain'), so a slow engine or encoder pauses the
// decoder instead of buffering audio here.
import fs from 'node:fs';
import path from 'node:path';
import type { Config } from '../config';
import { CHAINS } from '../inference/catalog';
import type { DenoiseStream, InferenceEngine, ModelId } from '../inference/types';
import { AudioAbortedError, AudioInputError } from './errors';
import { checkDecodedDuration, checkInputLimits } from './limits';
import { assertReadableFile } from './probe';
import { openSink, type AudioSink } from './sinks';
import { openSource, type AudioSource } from './sources';

export { AudioAbortedError, AudioInputError, AudioPipelineError, AudioTooLongError } from './errors';

export type OutputFormat = 'wav' | 'flac';

export interface DenoiseFileDeps {
  config: Config;
  engine: InferenceEngine;
}

export interface DenoiseFileOptions {
  model: ModelId;
  attenuationLimitDb: number;
  outputFormat: OutputFormat;
  /** true: output at the input file's sample rate; false: at the model's native rate. */
  keepInputSampleRate: boolean;
  /** Called after each chunk with seconds processed and the container's duration (null if unknown). */
  onProgress?(doneS: number, totalS: number | null): void;
  signal?: AbortSignal;
  /**
   * Seconds of audio per engine call (default DEFAULT_CHUNK_SECONDS, fewer for many channels: at most
   * MAX_CHUNK_SAMPLES samples over all channels per call).
   */
  chunkSeconds?: number;
  /** false: always decode and encode with ffmpeg, even where the in-process WAV path applies (tests, benchmark). */
  inProcessWav?: boolean;
}

export interface DenoiseStats {
  duration_s: number;
  processing_s: number;
  rtf: number;
  model: ModelId;
  input_sample_rate: number;
  output_sample_rate: number;
  model_sample_rate: number;
  channels: number;
  input_codec: string;
  output_format: OutputFormat;
  attenuation_limit_db: number;
}

/**
 * Audio per engine call. Every call has a fixed cost (a message to the worker and back, two ONNX Runtime runs, pipe
 * reads and writes, promise hops, thread switches) and ONNX Runtime's matrix products get more efficient with more
 * frames per run: 8 s (1,000 DTLN frames, within DtlnCore's 1,024 per run) cost measurably less CPU per audio second
 * than 1 s (docs/engine.md, speed). Memory per chunk stays small and bounded: MAX_CHUNK_SAMPLES over all channels.
 */
export const DEFAULT_CHUNK_SECONDS = 8;
/** 8 s of mono 48 kHz: 1.5 MB of float32 per chunk whatever the channel count (16 channels at 16 kHz: 1.5 s). */
export const MAX_CHUNK_SAMPLES = 8 * 48000;

/** FLAC (libFLAC and ffmpeg's encoder) stores at most 8 channels. */
const FLAC_MAX_CHANNELS = 8;

/** The rate the model's chain runs at; audio is decoded to it. */
export function modelRateFor(model: ModelId): number {
  return CHAINS[model].sample_rate;
}

export async function denoiseFile(
  deps: DenoiseFileDeps,
  inputPath: string,
  outputPath: string,
  opts: DenoiseFileOptions,
): Promise<DenoiseStats> {
  const started = process.hrtime.bigint();
  if (opts.signal?.aborted) throw new AudioAbortedError();
  await assertReadableFile(inputPath);
  // Absolute paths: ffmpeg reads names like "concat:a|b" as protocol URLs.
  const run = new PipelineRun(deps, path.resolve(inputPath), path.resolve(outputPath), opts);
  try {
    const { frames, source, stream } = await run.execute();
    const processingS = Number(process.hrtime.bigint() - started) / 1e9;
    const durationS = frames / stream.sampleRate;
    return {
      duration_s: round(durationS, 3),
      processing_s: round(processingS, 3),
      rtf: round(durationS > 0 ? processingS / durationS : 0, 4),
      model: opts.model,
      input_sample_rate: source.inputRate,
      output_sample_rate: run.outputRate,
      model_sample_rate: stream.sampleRate,
      channels: source.channels,
      input_codec: source.codec,
      output_format: opts.outputFormat,
      attenuation_limit_db: opts.attenuationLimitDb,
    };
  } catch (err) {
    await run.teardown();
    await fs.promises.rm(outputPath, { force: true }).catch(() => undefined);
    throw err;
  } finally {
    run.dispose();
  }
}

/** State of one denoiseFile call: source, engine stream, sink, abort wiring. */
class PipelineRun {
  outputRate = 0;
  private source: AudioSource | null = null;
  private sink: AudioSink | null = null;
  private stream: DenoiseStream | null = null;
  private aborted = false;
  /** Set once the signal fires or a child dies early; every await in the loop is guarded by it. */
  private failedWith: Error | null = null;
  /** Rejecters of the guard() calls in flight. (Not Promise.race against one long-lived promise: every race would
   * leave a reaction on it that keeps the chunk it resolved with alive, i.e. the whole file's audio.) */
  private readonly waiting = new Set<(err: Error) => void>();
  private readonly onAbort = (): void => {
    this.aborted = true;
    void this.teardown();
    this.fail(new AudioAbortedError());
  };

  constructor(
    private readonly deps: DenoiseFileDeps,
    private readonly inputPath: string,
    private readonly outputPath: string,
    private readonly opts: DenoiseFileOptions,
  ) {
    opts.signal?.addEventListener('abort', this.onAbort, { once: true });
  }

  private fail(err: Error): void {
    if (this.failedWith) return;
    this.failedWith = err;
    for (const reject of this.waiting) reject(err);
    this.waiting.clear();
  }

  private throwIfFailed(): void {
    if (this.failedWith) throw this.failedWith;
  }

  /** Resolves like `p`, or rejects as soon as the run fails (abort, child death), whichever comes first. */
  guard<T>(p: Promise<T>): Promise<T> {
    if (this.failedWith) {
      p.catch(() => undefined);
      return Promise.reject(this.failedWith);
    }
    return new Promise<T>((resolve, reject) => {
      this.waiting.add(reject);
      p.then(
        (v) => {
          this.waiting.delete(reject);
          resolve(v);
        },
        (e: unknown) => {
          this.waiting.delete(reject);
          reject(e);
        },
      );
    });
  }

  /**
   * guard() for a promise that yields a resource (source with its ffmpeg child, engine stream, sink): if the run
   * fails (abort) before it arrives, the resource is released when it does, instead of being left open.
   */
  private acquire<T>(p: Promise<T>, release: (v: T) => unknown): Promise<T> {
    p.then(
      (v) => {
        if (this.failedWith) void Promise.resolve(release(v)).catch(() => undefined);
      },
      () => undefined,
    );
    return this.guard(p);
  }

  async execute(): Promise<{ frames: number; source: AudioSource; stream: DenoiseStream }> {
    const { config, engine } = this.deps;
    const opts = this.opts;
    const modelRate = modelRateFor(opts.model);
    const inProcess = opts.inProcessWav !== false;

    const source = await this.acquire(
      openSource(config, this.inputPath, modelRate, { inProcessWav: inProcess, onFailure: (e) => this.fail(e) }),
      (s) => s.abort(),
    );
    this.source = source;
    this.throwIfFailed();
    checkInputLimits(config, { sampleRate: source.inputRate, channels: source.channels, durationS: source.durationS });
    if (opts.outputFormat === 'flac' && source.channels > FLAC_MAX_CHANNELS) {
      throw new AudioInputError(`FLAC output supports at most ${FLAC_MAX_CHANNELS} channels; the input has ${source.channels} (use wav)`);
    }

    const stream = await this.acquire(
      engine.openStream({ model: opts.model, channels: source.channels, attenuationLimitDb: opts.attenuationLimitDb }),
      (st) => st.abort(),
    );
    this.stream = stream;
    if (stream.sampleRate !== modelRate) throw new Error(`engine runs ${opts.model} at ${stream.sampleRate} Hz, expected ${modelRate}`);
    this.outputRate = opts.keepInputSampleRate ? source.inputRate : modelRate;

    const sink = await this.acquire(
      openSink(config, this.outputPath, {
        format: opts.outputFormat,
        channels: source.channels,
        modelRate,
        outputRate: this.outputRate,
        inProcessWav: inProcess,
        onFailure: (e) => this.fail(e),
      }),
      (k) => k.abort(),
    );
    this.sink = sink;

    const chunkFrames = Math.max(
      256,
      Math.round(Math.min(modelRate * (opts.chunkSeconds ?? DEFAULT_CHUNK_SECONDS), MAX_CHUNK_SAMPLES / source.channels)),
    );
    const total = source.durationS;
    let framesIn = 0;
    for (;;) {
      this.throwIfFailed();
      const planar = await this.guard(source.read(chunkFrames));
      if (planar === null) break;
      const n = planar[0].length;
      if (n === 0) continue;
      framesIn += n;
      checkDecodedDuration(config, framesIn / modelRate);
      const out = await this.guard(stream.push(planar));
      await this.guard(sink.write(out));
      opts.onProgress?.(framesIn / modelRate, total);
    }
    if (this.aborted) throw new AudioAbortedError();
    await this.guard(source.finish());
    if (framesIn === 0) throw new AudioInputError('could not decode: no audio samples in the file');

    this.throwIfFailed(); // end() cannot be aborted once sent, so do not send it for a run that already failed
    const tail = await this.guard(stream.end());
    this.stream = null; // flushed: nothing to abort any more
    await this.guard(sink.write(tail));
    await this.guard(sink.close());
    this.sink = null;
    return { frames: framesIn, source, stream };
  }

  /** Stops the children, frees the engine stream, closes files; safe to call repeatedly. */
  async teardown(): Promise<void> {
    const source = this.source;
    const sink = this.sink;
    this.source = null;
    this.sink = null;
    if (this.stream) {
      try {
        this.stream.abort();
      } catch {
        /* engine already released it */
      }
      this.stream = null;
    }
    await Promise.all([source?.abort(), sink?.abort()]);
  }

  dispose(): void {
    this.opts.signal?.removeEventListener('abort', this.onAbort);
  }
}

/** f32le interleaved bytes (whole frames) → one Float32Array per channel. */
export function deinterleave(bytes: Buffer, channels: number): Float32Array[] {
  const frames = Math.floor(bytes.length / (4 * channels));
  // Copy into a fresh, aligned buffer: pipe Buffers may start at any byte offset.
  const interleaved = new Float32Array(frames * channels);
  new Uint8Array(interleaved.buffer).set(bytes.subarray(0, frames * channels * 4));
  if (channels === 1) return [interleaved];
  const planar: Float32Array[] = [];
  for (let c = 0; c < channels; c++) planar.push(new Float32Array(frames));
  for (let i = 0, k = 0; i < frames; i++) {
    for (let c = 0; c < channels; c++, k++) planar[c][i] = interleaved[k];
  }
  return planar;
}

/** One Float32Array per channel → f32le interleaved bytes. */
export function interleave(planar: Float32Array[]): Buffer {
  const channels = planar.length;
  const frames = planar[0].length;
  // Always a copy: the engine may reuse its output arrays while the pipe still holds our bytes.
  if (channels === 1) return Buffer.from(planar[0].slice().buffer);
  const out = new Float32Array(frames * channels);
  for (let i = 0, k = 0; i < frames; i++) {
    for (let c = 0; c < channels; c++, k++) out[k] = planar[c][i];
  }
  return Buffer.from(out.buffer);
}

/** Replaces non-finite samples (NaN, ±Inf) with 0 in place; true when there were any. */
export function silenceNonFinite(planar: Float32Array[]): boolean {
  let found = false;
  for (const ch of planar) {
    for (let i = 0; i < ch.length; i++) {
      // x - x is 0 for finite x and NaN for NaN and ±Inf: one comparison per sample.
      if (ch[i] - ch[i] !== 0) {
        ch[i] = 0;
        found = true;
      }
    }
  }
  return found;
}

function round(x: number, digits: number): number {
  const f = 10 ** digits;
  return Math.round(x * f) / f;
}
