// The file pipeline: any audio ffmpeg reads → model rate f32 → DenoiseStream → 16-bit WAV/FLAC.
//
//   ffmpeg (decode, soxr resample to the model rate, keep channels) ──f32le pipe──▶ this process
//     ──planar chunks (~1 s)──▶ DenoiseStream.push ──▶ interleave ──f32le pipe──▶ ffmpeg (resample, encode) ──▶ file
//
// Memory stays bounded whatever the duration: the decoder's stdout is read one chunk at a time and only after the
// previous chunk went through the engine and was accepted by the encoder's stdin (we wait for 'drain'), so a slow
// engine or encoder pauses the decoder through the pipe instead of buffering audio here.
import fs from 'node:fs';
import path from 'node:path';
import type { ChildProcess } from 'node:child_process';
import type { Config } from '../config';
import { bandsUpTo, CHAINS, type BandProcessing } from '../inference/catalog';
import type { DenoiseStream, InferenceEngine, ModelId } from '../inference/types';
import { AudioAbortedError, AudioInputError, AudioPipelineError } from './errors';
import { killChild, spawnFfmpeg, StderrTail, untrustedInputArgs, waitForExit } from './ffmpeg';
import { cleanDetail, probeAudio, type AudioProbe } from './probe';

export { AudioAbortedError, AudioInputError, AudioPipelineError } from './errors';

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
  /** Seconds of audio per engine call (default 1). */
  chunkSeconds?: number;
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
}

/** FLAC (libFLAC and ffmpeg's encoder) stores at most 8 channels. */
const FLAC_MAX_CHANNELS = 8;

export async function denoiseFile(
  deps: DenoiseFileDeps,
  inputPath: string,
  outputPath: string,
  opts: DenoiseFileOptions,
): Promise<DenoiseStats> {
  const started = process.hrtime.bigint();
  const { config, engine } = deps;
  const signal = opts.signal;
  if (signal?.aborted) throw new AudioAbortedError();

  const probe = await probeAudio(config, inputPath);
  if (opts.outputFormat === 'flac' && probe.channels > FLAC_MAX_CHANNELS) {
    throw new AudioInputError(`FLAC output supports at most ${FLAC_MAX_CHANNELS} channels; the input has ${probe.channels} (use wav)`);
  }
  if (signal?.aborted) throw new AudioAbortedError();

  // Absolute paths: ffmpeg reads names like "concat:a|b" as protocol URLs.
  inputPath = path.resolve(inputPath);
  outputPath = path.resolve(outputPath);
  const run = new PipelineRun(config, probe, inputPath, outputPath, opts);
  try {
    const stream = await run.guard(
      engine.openStream({
        model: opts.model,
        channels: probe.channels,
        attenuationLimitDb: opts.attenuationLimitDb,
        // Above 16 kHz with the input's rate kept, 16 kHz models also return (denoise) the band above 8 kHz.
        fullBand: opts.keepInputSampleRate && probe.sampleRate > 16000,
      }),
    );
    run.stream = stream;
    const decodedFrames = await run.execute();
    const processingS = Number(process.hrtime.bigint() - started) / 1e9;
    const durationS = decodedFrames / stream.sampleRate;
    return {
      duration_s: round(durationS, 3),
      processing_s: round(processingS, 3),
      rtf: round(durationS > 0 ? processingS / durationS : 0, 4),
      model: opts.model,
      input_sample_rate: probe.sampleRate,
      output_sample_rate: run.outputRate,
      model_sample_rate: CHAINS[opts.model].sample_rate,
      channels: probe.channels,
      input_codec: probe.codec,
      output_format: opts.outputFormat,
      attenuation_limit_db: opts.attenuationLimitDb,
      processing_sample_rate: stream.sampleRate,
      bands: bandsUpTo(stream.bands, Math.min(probe.sampleRate, run.outputRate) / 2),
    };
  } catch (err) {
    run.teardown();
    await fs.promises.rm(outputPath, { force: true }).catch(() => undefined);
    throw err;
  } finally {
    run.dispose();
  }
}

/** State of one denoiseFile call: the two ffmpeg children, the engine stream, abort wiring. */
class PipelineRun {
  stream: DenoiseStream | null = null;
  outputRate = 0;
  private decoder: ChildProcess | null = null;
  private encoder: ChildProcess | null = null;
  private readonly decoderErr = new StderrTail();
  private readonly encoderErr = new StderrTail();
  private aborted = false;
  /** Set once the signal fires or the encoder dies early; every await in the loop is guarded by it. */
  private failedWith: Error | null = null;
  /** Rejecters of the guard() calls in flight. (Not Promise.race against one long-lived promise: every race would
   * leave a reaction on it that keeps the chunk it resolved with alive, i.e. the whole file's audio.) */
  private readonly waiting = new Set<(err: Error) => void>();
  private readonly onAbort = (): void => {
    this.aborted = true;
    this.teardown();
    this.fail(new AudioAbortedError());
  };

  constructor(
    private readonly config: Config,
    private readonly probe: AudioProbe,
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

  /** Resolves like `p`, or rejects as soon as the run fails (abort, encoder death), whichever comes first. */
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

  async execute(): Promise<number> {
    const stream = this.stream!;
    const channels = this.probe.channels;
    const modelRate = stream.sampleRate;
    this.outputRate = this.opts.keepInputSampleRate ? this.probe.sampleRate : modelRate;

    this.decoder = spawnFfmpeg(this.config.ffmpegPath, [
      '-loglevel', 'error',
      ...untrustedInputArgs(),
      '-i', this.inputPath,
      '-map', '0:a:0', '-vn', '-sn', '-dn',
      '-af', `aresample=${modelRate}:resampler=soxr`,
      '-ar', String(modelRate), '-ac', String(channels),
      '-c:a', 'pcm_f32le', '-f', 'f32le', 'pipe:1',
    ]);
    this.decoder.stdin!.on('error', () => undefined);
    this.decoder.stdin!.end();
    this.decoder.stderr!.on('data', (d: Buffer) => this.decoderErr.push(d));
    const decoderExit = waitForExit(this.decoder);
    decoderExit.catch(() => undefined);

    this.encoder = spawnFfmpeg(this.config.ffmpegPath, [
      '-loglevel', 'error',
      '-f', 'f32le', '-ar', String(modelRate), '-ac', String(channels), '-i', 'pipe:0',
      ...(this.outputRate !== modelRate ? ['-af', `aresample=${this.outputRate}:resampler=soxr`] : []),
      '-ar', String(this.outputRate),
      '-fflags', '+bitexact', '-flags', '+bitexact', '-map_metadata', '-1',
      ...(this.opts.outputFormat === 'flac'
        ? ['-c:a', 'flac', '-sample_fmt', 's16', '-f', 'flac']
        : ['-c:a', 'pcm_s16le', '-rf64', 'auto', '-f', 'wav']),
      '-y', this.outputPath,
    ]);
    const encoder = this.encoder;
    encoder.stderr!.on('data', (d: Buffer) => this.encoderErr.push(d));
    encoder.stdout!.resume();
    let encoderInputEnded = false;
    encoder.stdin!.on('error', () => undefined); // EPIPE surfaces through the exit below
    const encoderExit = waitForExit(encoder);
    encoderExit.then(
      ({ code, signal }) => {
        if (this.aborted) return;
        if (!encoderInputEnded || code !== 0) this.fail(this.encoderError(code, signal));
      },
      (err: Error) => this.fail(err),
    );

    const frameBytes = 4 * channels;
    const chunkFrames = Math.max(256, Math.round(modelRate * (this.opts.chunkSeconds ?? 1)));
    const chunkBytes = chunkFrames * frameBytes;
    const total = this.probe.durationS;
    let pending: Buffer[] = [];
    let pendingBytes = 0;
    let framesIn = 0;

    const writeOut = async (planar: Float32Array[]): Promise<void> => {
      if (planar.length === 0 || planar[0].length === 0) return;
      const ok = encoder.stdin!.write(interleave(planar));
      if (!ok) await this.guard(new Promise<void>((resolve) => encoder.stdin!.once('drain', resolve)));
    };
    const processBytes = async (bytes: Buffer): Promise<void> => {
      const planar = deinterleave(bytes, channels);
      framesIn += planar[0].length;
      this.throwIfFailed();
      await writeOut(await this.guard(stream.push(planar)));
      this.opts.onProgress?.(framesIn / modelRate, total);
    };

    // Reading with for-await pulls one pipe chunk at a time: the decoder is paused while we await below.
    for await (const data of this.decoder.stdout! as AsyncIterable<Buffer>) {
      if (this.aborted) break;
      pending.push(data);
      pendingBytes += data.length;
      while (pendingBytes >= chunkBytes) {
        const all = pending.length === 1 ? pending[0] : Buffer.concat(pending, pendingBytes);
        await processBytes(all.subarray(0, chunkBytes));
        const rest = all.subarray(chunkBytes);
        pending = rest.length ? [rest] : [];
        pendingBytes = rest.length;
      }
    }
    if (this.aborted) throw new AudioAbortedError();

    const { code, signal } = await this.guard(decoderExit);
    if (code !== 0) {
      const detail = cleanDetail(this.decoderErr.summary(), this.inputPath);
      if (signal) throw new AudioPipelineError(`ffmpeg decoder was killed (${signal})`);
      throw new AudioInputError(`could not decode: ${detail || `ffmpeg exited with code ${code}`}`);
    }
    const tailBytes = pendingBytes - (pendingBytes % frameBytes);
    if (tailBytes > 0) await processBytes(Buffer.concat(pending, pendingBytes).subarray(0, tailBytes));
    if (framesIn === 0) throw new AudioInputError('could not decode: no audio samples in the file');

    this.throwIfFailed(); // end() cannot be aborted once sent, so do not send it for a run that already failed
    await writeOut(await this.guard(stream.end()));
    this.stream = null; // flushed: nothing to abort any more
    encoderInputEnded = true;
    encoder.stdin!.end();
    const enc = await this.guard(encoderExit);
    if (enc.code !== 0) throw this.encoderError(enc.code, enc.signal);
    return framesIn;
  }

  private encoderError(code: number | null, signal: NodeJS.Signals | null): AudioPipelineError {
    const detail = this.encoderErr.summary();
    const how = signal ? `was killed (${signal})` : code === 0 ? 'stopped early' : `exited with code ${code}`;
    return new AudioPipelineError(`ffmpeg encoder ${how}${detail ? `: ${detail}` : ''}`);
  }

  /** Kills both children and frees the engine stream; safe to call repeatedly. */
  teardown(): void {
    killChild(this.decoder);
    killChild(this.encoder);
    if (this.stream) {
      try {
        this.stream.abort();
      } catch {
        /* engine already released it */
      }
      this.stream = null;
    }
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

function round(x: number, digits: number): number {
  const f = 10 ** digits;
  return Math.round(x * f) / f;
}
