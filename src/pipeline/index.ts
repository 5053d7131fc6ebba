// The file pipeline: any audio → model-rate float32 → DenoiseStream → WAV, FLAC, MP3, Opus or M4A (formats.ts).
//
//   source (planar float32 at the model rate, ~8 s chunks) ──▶ DenoiseStream.push (worker thread) ──▶ sink (file)
//
// Sources (sources.ts): an uncompressed WAV at the model's rate is read in-process (wav.ts), with no child process at
// all; a WAV at another rate is read in-process and resampled by an ffmpeg child (soxr) fed through its stdin; anything
// else is decoded (and resampled) by ONE ffmpeg child whose stderr banner and WAV header give what a separate probe
// used to (codec, container, duration, input rate, channel count). Sinks (sinks.ts): 16-bit WAV at the model's rate is
// written in-process; FLAC or another rate goes through an ffmpeg encoder child. A small upload can come from memory
// (denoise(), memory-file.ts); when it is such a WAV and so is the output, the output is written into memory too.
//
// PCM edges: when a WAV is read as it is (in-process) and the output is the in-process 16-bit WAV, the source's bytes
// go to the engine undecoded and come back as the 16-bit PCM the sink writes (PcmDenoiseStream): decoding, dither and
// rounding run in the worker thread with the chain, so this thread (the server's one main thread, which every request
// shares) only moves bytes. The bytes are those of the float path (test/audio-pipeline.test.ts, "PCM edges").
//
// Loudness (loudness.ts): the input and the cleaned audio are metered on the way (BS.1770 at the model's rate) for
// the stats, by the engine's worker thread (measureLoudness), which takes that work off the server's main thread.
// With a loudness target the cleaned audio first goes to a spool file (spool.ts) while it is metered, then is
// replayed through a gain and a true-peak limiter (normalize.ts) into the sink: two passes, memory still bounded.
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
import { type BandProcessing } from '../inference/types';
import { bandsUpTo, MODELS } from '../inference/models';
import type { DenoiseOptions, DenoiseStream, InferenceEngine, ModelId, PcmDenoiseStream, StreamControl } from '../inference/types';
import { AudioAbortedError, AudioInputError } from '../audio/errors';
import { encodedRate, FORMATS, truePeakCeiling, type OutputFormat } from '../audio/formats';
import { dbOf, gatedLoudness, LoudnessMeter, noiseRemovedDb, TruePeakInterpolator } from '../dsp/loudness';
import { LoudnessNormalizer } from '../dsp/normalize';
import { FloatSpool } from '../audio/spool';
import { checkDecodedDuration, checkInputLimits } from '../audio/limits';
import { assertReadableFile } from '../audio/probe';
import { MemoryFile } from '../audio/memory-file';
import { openSink, writesInProcess, type AudioSink } from '../audio/sinks';
import { openSource, type AudioSource, type SourceInput } from '../audio/sources';

export { AudioAbortedError, AudioInputError, AudioPipelineError, AudioTooLongError } from '../audio/errors';

export type { OutputFormat } from '../audio/formats';
export type { InMemoryInput, SourceInput } from '../audio/sources';

/** Largest gain loudness normalisation applies (a near-silent file is not blown up into its noise floor). */
export const MAX_NORMALIZATION_GAIN_DB = 30;

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
  /** Integrated loudness (LUFS) to normalise the cleaned audio to; null/undefined: no normalisation. */
  loudnessLufs?: number | null;
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
  /** Rate the chain ran at: the model's rate, or 48000 when a 16 kHz model ran full band. */
  processing_sample_rate: number;
  /** What was done to each band of the output (up to half the lower of the input and output rates). */
  bands: BandProcessing[];
  /** Integrated loudness (BS.1770) of the input as the model hears it (at the model's rate); null for silence. */
  input_loudness_lufs: number | null;
  /** Integrated loudness of the output; null for silence. */
  output_loudness_lufs: number | null;
  /** Estimated noise attenuation: input/output energy over the input's quietest 400 ms blocks; null if none. */
  noise_removed_db: number | null;
  /** With loudness normalisation only: the target, the gain applied and the output's true peak. */
  loudness_target_lufs?: number;
  loudness_gain_db?: number;
  output_true_peak_dbtp?: number | null;
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

/** The rate the model's chain runs at; audio is decoded to it. */
export function modelRateFor(model: ModelId): number {
  return MODELS[model].sampleRate;
}

/** Denoises the file at `inputPath` into `outputPath`. */
export async function denoiseFile(
  deps: DenoiseFileDeps,
  inputPath: string,
  outputPath: string,
  opts: DenoiseFileOptions,
): Promise<DenoiseStats> {
  const { stats } = await denoise(deps, inputPath, { inMemory: false, path: async () => outputPath }, opts);
  return stats;
}

/** Where denoise() puts the output. */
export interface DenoiseTarget {
  /**
   * true: when the input is in memory and the output is a WAV written in-process (no loudness target), the output
   * stays in memory too: no bigger than the input's frames at 16 bits, so bounded by the upload's size.
   */
  inMemory: boolean;
  /** The output file's path otherwise (called at most once). */
  path(): Promise<string>;
}

/** The finished output: a file, or in memory. */
export type DenoiseOutput = { path: string } | { memory: MemoryFile };

/** Denoises `input` (a path, or an upload in memory) into a file or, for small WAV round trips, into memory. */
export async function denoise(
  deps: DenoiseFileDeps,
  input: SourceInput,
  target: DenoiseTarget,
  opts: DenoiseFileOptions,
): Promise<{ stats: DenoiseStats; output: DenoiseOutput }> {
  const started = process.hrtime.bigint();
  if (opts.signal?.aborted) throw new AudioAbortedError();
  if (typeof input === 'string') await assertReadableFile(input);
  else if (input.file.size === 0) throw new AudioInputError('file is empty');
  const run = new PipelineRun(deps, input, target, opts);
  try {
    const { frames, source, stream, loudness, output } = await run.execute();
    const processingS = Number(process.hrtime.bigint() - started) / 1e9;
    const durationS = frames / stream.sampleRate;
    const stats: DenoiseStats = {
      duration_s: round(durationS, 3),
      processing_s: round(processingS, 3),
      rtf: round(durationS > 0 ? processingS / durationS : 0, 4),
      model: opts.model,
      input_sample_rate: source.inputRate,
      output_sample_rate: run.outputRate,
      model_sample_rate: modelRateFor(opts.model),
      channels: source.channels,
      input_codec: source.codec,
      output_format: opts.outputFormat,
      attenuation_limit_db: opts.attenuationLimitDb,
      processing_sample_rate: stream.sampleRate,
      bands: bandsUpTo(stream.bands, Math.min(source.inputRate, run.outputRate) / 2),
      input_loudness_lufs: roundOrNull(loudness.input, 2),
      output_loudness_lufs: roundOrNull(loudness.output, 2),
      noise_removed_db: roundOrNull(loudness.noiseRemoved, 1),
    };
    if (loudness.target !== null) {
      stats.loudness_target_lufs = loudness.target;
      stats.loudness_gain_db = round(loudness.gainDb, 2);
      stats.output_true_peak_dbtp = loudness.truePeak === null ? null : round(loudness.truePeak, 2);
    }
    return { stats, output };
  } catch (err) {
    await run.teardown();
    if (run.outputPath) await fs.promises.rm(run.outputPath, { force: true }).catch(() => undefined);
    throw err;
  } finally {
    await run.dispose();
  }
}

/** How chunks go from the source through the engine stream to the sink (PipelineRun.pump). */
interface ChunkEdges<In, Out> {
  read(maxFrames: number): Promise<In | null>;
  frames(chunk: In): number;
  push(chunk: In): Promise<Out>;
  end(): Promise<Out>;
  emit(out: Out): Promise<void>;
}

/** State of one denoiseFile call: source, engine stream, sink, abort wiring. */
class PipelineRun {
  outputRate = 0;
  /** The output file, once there is one (null while the output is in memory). */
  outputPath: string | null = null;
  private source: AudioSource | null = null;
  private sink: AudioSink | null = null;
  private spool: FloatSpool | null = null;
  private stream: StreamControl | null = null;
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
    private readonly input: SourceInput,
    private readonly target: DenoiseTarget,
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

  async execute(): Promise<{
    frames: number;
    source: AudioSource;
    stream: StreamControl;
    loudness: LoudnessResult;
    output: DenoiseOutput;
  }> {
    const { config, engine } = this.deps;
    const opts = this.opts;
    const nativeRate = modelRateFor(opts.model);
    const inProcess = opts.inProcessWav !== false;
    // Above 16 kHz with the input's rate kept, a 16 kHz model runs full band at 48 kHz (its chain below 8 kHz, the
    // input's own band above it, filtered under the chain's guidance): decoded at 48 kHz for that.
    const rateFor = (inputRate: number) => (opts.keepInputSampleRate && nativeRate === 16000 && inputRate > 16000 ? 48000 : nativeRate);
    const source = await this.acquire(
      openSource(config, this.input, rateFor, { inProcessWav: inProcess, onFailure: (e) => this.fail(e) }),
      (s) => s.abort(),
    );
    const modelRate = source.rate;
    this.source = source;
    this.throwIfFailed();
    checkInputLimits(config, { sampleRate: source.inputRate, channels: source.channels, durationS: source.durationS });
    const format = FORMATS[opts.outputFormat];
    if (source.channels > format.maxChannels) {
      throw new AudioInputError(
        `${opts.outputFormat} output supports at most ${format.maxChannels} channels; the input has ${source.channels} (use wav)`,
      );
    }

    this.outputRate = encodedRate(opts.outputFormat, opts.keepInputSampleRate ? source.inputRate : nativeRate);
    const target = opts.loudnessLufs ?? null;
    const sinkOptions = {
      format: opts.outputFormat,
      channels: source.channels,
      modelRate,
      outputRate: this.outputRate,
      inProcessWav: inProcess,
      onFailure: (e: Error) => this.fail(e),
    };
    const streamOptions: DenoiseOptions = {
      model: opts.model,
      channels: source.channels,
      attenuationLimitDb: opts.attenuationLimitDb,
      fullBand: modelRate !== nativeRate,
      measureLoudness: true,
    };
    // Written in-process in one pass (16-bit WAV at the model's rate, no loudness target).
    const directWav = target === null && writesInProcess(sinkOptions);
    // And a WAV read as it is: the samples are decoded, dithered and rounded in the worker (PcmDenoiseStream), so this
    // thread only moves bytes.
    const pcmInput = directWav && engine.openPcmStream ? source.pcm : undefined;
    const stream: StreamControl = await this.acquire<StreamControl>(
      pcmInput ? engine.openPcmStream!(streamOptions, pcmInput.format) : engine.openStream(streamOptions),
      (st) => st.abort(),
    );
    this.stream = stream;
    if (stream.sampleRate !== modelRate) throw new Error(`engine runs ${opts.model} at ${stream.sampleRate} Hz, expected ${modelRate}`);

    // In memory only for an input read from memory (its frame count, so the output's size, is known and small).
    const inMemory = this.target.inMemory && source.inMemory === true && directWav;
    const memory = inMemory ? new MemoryFile() : null;
    if (!memory) this.outputPath = path.resolve(await this.guard(this.target.path()));
    const sink = await this.acquire(openSink(config, memory ?? this.outputPath!, sinkOptions), (k) => k.abort());
    this.sink = sink;
    if (target !== null) this.spool = await this.guard(FloatSpool.create(`${this.outputPath}.spool`, source.channels));
    const spool = this.spool;
    // Without a target the cleaned audio goes straight to the sink; with one it waits in the spool for pass 2 (and
    // its true peak tells whether the gain will need the limiter).
    const cleanPeak = spool ? new TruePeakInterpolator(modelRate, source.channels) : null;
    let peakScratch = new Float64Array(0);
    const emit = async (out: Float32Array[]): Promise<void> => {
      if (out.length === 0 || out[0].length === 0) return;
      if (cleanPeak) {
        if (peakScratch.length < out[0].length) peakScratch = new Float64Array(out[0].length);
        cleanPeak.process(out, peakScratch);
      }
      await this.guard(spool ? spool.write(out) : sink.write(out));
    };

    const chunkFrames = Math.max(
      256,
      Math.round(Math.min(modelRate * (opts.chunkSeconds ?? DEFAULT_CHUNK_SECONDS), MAX_CHUNK_SAMPLES / source.channels)),
    );
    let framesIn: number;
    if (pcmInput) {
      const pcmStream = stream as PcmDenoiseStream;
      const writePcm16 = sink.writePcm16?.bind(sink);
      if (!writePcm16) throw new Error('the in-process WAV sink takes no PCM');
      framesIn = await this.pump<Buffer, Uint8Array>(chunkFrames, modelRate, {
        read: (n) => pcmInput.readBytes(n),
        frames: (bytes) => bytes.length / pcmInput.frameBytes,
        push: (bytes) => pcmStream.push(bytes),
        end: () => pcmStream.end(),
        emit: (bytes) => (bytes.length > 0 ? this.guard(writePcm16(bytes)) : Promise.resolve()),
      });
    } else {
      const floatStream = stream as DenoiseStream;
      framesIn = await this.pump<Float32Array[], Float32Array[]>(chunkFrames, modelRate, {
        read: (n) => source.read(n),
        frames: (planar) => planar[0].length,
        push: (planar) => floatStream.push(planar),
        end: () => floatStream.end(),
        emit,
      });
    }

    // Metered in the worker, next to the chain (measureLoudness): the input as pushed, the output as returned.
    const measured = stream.loudness();
    if (!measured) throw new Error('the inference engine returned no loudness measurements');
    const loudness: LoudnessResult = {
      input: gatedLoudness(measured.input),
      output: gatedLoudness(measured.output),
      noiseRemoved: noiseRemovedDb(measured.input, measured.output),
      target,
      gainDb: 0,
      truePeak: null,
    };
    if (spool && target !== null) {
      // Pass 2: one gain for the whole file, limited to the format's true-peak ceiling, metered again.
      const measured = loudness.output;
      const ceilingDbtp = truePeakCeiling(opts.outputFormat) - LIMITER_MARGIN_DB;
      const normalizerFor = (gainDb: number) =>
        new LoudnessNormalizer({ sampleRate: modelRate, channels: source.channels, gainDb, ceilingDbtp });
      loudness.gainDb = measured === null ? 0 : Math.min(MAX_NORMALIZATION_GAIN_DB, target - measured);
      if (measured !== null && cleanPeak && cleanPeak.maximum() > 0 && dbOf(cleanPeak.maximum()) + loudness.gainDb > ceilingDbtp) {
        // The limiter takes some loudness away: measure how much on dry runs (no encoding) and add it back, until
        // within 0.1 LU of the target or after a few rounds (the limiter's loss grows with the gain).
        for (let round = 0; round < MAX_LIMITER_ROUNDS; round++) {
          const dry = normalizerFor(loudness.gainDb);
          const dryMeter = new LoudnessMeter(modelRate, source.channels);
          for await (const chunk of spool.read(chunkFrames)) {
            this.throwIfFailed();
            dryMeter.push(dry.push(chunk));
          }
          dryMeter.push(dry.flush());
          const limited = dryMeter.integrated();
          if (limited === null || Math.abs(target - limited) < 0.1) break;
          const next = Math.min(MAX_NORMALIZATION_GAIN_DB, loudness.gainDb + (target - limited));
          if (next === loudness.gainDb) break;
          loudness.gainDb = next;
        }
      }
      const normalizer = normalizerFor(loudness.gainDb);
      const finalMeter = new LoudnessMeter(modelRate, source.channels);
      const peak = new TruePeakInterpolator(modelRate, source.channels);
      let peaks = new Float64Array(0);
      const write = async (out: Float32Array[]): Promise<void> => {
        if (out[0].length === 0) return;
        finalMeter.push(out);
        if (peaks.length < out[0].length) peaks = new Float64Array(out[0].length);
        peak.process(out, peaks);
        await this.guard(sink.write(out));
      };
      for await (const chunk of spool.read(chunkFrames)) {
        this.throwIfFailed();
        await write(normalizer.push(chunk));
      }
      await write(normalizer.flush());
      loudness.output = finalMeter.integrated();
      loudness.truePeak = peak.maximum() > 0 ? dbOf(peak.maximum()) : null;
    }
    await this.guard(sink.close());
    this.sink = null;
    const output: DenoiseOutput = memory ? { memory } : { path: this.outputPath! };
    return { frames: framesIn, source, stream, loudness, output };
  }

  /**
   * Reads the source to its end through the engine stream into the sink (`edges` say how chunks cross: planar float,
   * or PCM bytes); returns the frames read. One chunk ahead: the next chunk is pushed before the previous one's
   * output is written, so the worker goes on with it meanwhile (the engine keeps a stream's requests in order).
   */
  private async pump<In, Out>(chunkFrames: number, modelRate: number, edges: ChunkEdges<In, Out>): Promise<number> {
    const { config } = this.deps;
    const source = this.source!;
    const total = source.durationS;
    let framesIn = 0;
    let ahead: Promise<Out> | null = null;
    for (;;) {
      this.throwIfFailed();
      const chunk = await this.guard(edges.read(chunkFrames));
      if (chunk === null) break;
      const n = edges.frames(chunk);
      if (n === 0) continue;
      framesIn += n;
      checkDecodedDuration(config, framesIn / modelRate);
      const out = this.guard(edges.push(chunk));
      out.catch(() => undefined); // a failure is thrown where it is awaited, below or after the loop
      if (ahead) await edges.emit(await ahead);
      ahead = out;
      this.opts.onProgress?.(framesIn / modelRate, total);
    }
    if (this.aborted) throw new AudioAbortedError();
    await this.guard(source.finish());
    if (framesIn === 0) throw new AudioInputError('could not decode: no audio samples in the file');

    this.throwIfFailed(); // end() cannot be aborted once sent, so do not send it for a run that already failed
    // Sent before the last chunk's answer is back, so the worker flushes right after it instead of waiting for this
    // thread to see that answer first; the outputs are still written in order.
    const tail = this.guard(edges.end());
    tail.catch(() => undefined); // a failure is thrown where it is awaited, below
    if (ahead) await edges.emit(await ahead);
    const last = await tail;
    this.stream = null; // flushed: nothing to abort any more
    await edges.emit(last);
    return framesIn;
  }

  /**
   * Stops the children, frees the engine stream, closes files; safe to call repeatedly: a second call (the error
   * path after an abort already began it) waits for the first, so the caller rejects only once the children are gone.
   */
  teardown(): Promise<void> {
    this.tearingDown ??= this.stopEverything();
    return this.tearingDown;
  }

  private tearingDown: Promise<void> | null = null;

  private async stopEverything(): Promise<void> {
    const source = this.source;
    const sink = this.sink;
    this.source = null;
    this.sink = null;
    const spool = this.spool;
    this.spool = null;
    await spool?.dispose();
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

  async dispose(): Promise<void> {
    this.opts.signal?.removeEventListener('abort', this.onAbort);
    const spool = this.spool;
    this.spool = null;
    await spool?.dispose();
  }
}

export { deinterleave, interleave, silenceNonFinite } from '../dsp/interleave';

interface LoudnessResult {
  input: number | null;
  output: number | null;
  noiseRemoved: number | null;
  target: number | null;
  gainDb: number;
  truePeak: number | null;
}

/** Dry passes at most, to make up for the loudness the limiter removes. */
const MAX_LIMITER_ROUNDS = 3;

/** Headroom under the format's ceiling for what the limiter's peak estimate and the output resampler can miss. */
const LIMITER_MARGIN_DB = 0.3;

function roundOrNull(x: number | null, digits: number): number | null {
  return x === null || !Number.isFinite(x) ? null : round(x, digits);
}

function round(x: number, digits: number): number {
  const f = 10 ** digits;
  return Math.round(x * f) / f;
}
