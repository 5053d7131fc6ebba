// Sinks of the file pipeline: planar float32 at the model's rate in, the output file out.
//
//   WavFileSink     16-bit PCM WAV at the model's rate: written in-process (wav.ts), no child process.
//   FfmpegSink      FLAC, MP3, Opus, M4A, or WAV at another rate: an ffmpeg encoder child (soxr resampling) fed
//                   through its stdin; codec, bitrate and container come from formats.ts.
//
// Both turn non-finite samples into silence before encoding (never full-scale garbage), both dither what they round
// to 16 bits (dither.ts; not the lossy codecs, which take float), and both apply backpressure: write() resolves once
// the bytes were taken (file write done, or the encoder's stdin drained).
import type { ChildProcess } from 'node:child_process';
import os from 'node:os';
import type { Config } from '../config';
import { LowFrequencyDither } from '../dsp/dither';
import { AudioPipelineError } from './errors';
import { FORMATS, type OutputFormat } from './formats';
import { killChild, spawnFfmpeg, StderrTail, waitForExit, writeToChild } from './ffmpeg';
import { interleave, silenceNonFinite } from '../dsp/interleave';
import type { MemoryFile } from './memory-file';
import { WavWriter } from './wav';

export interface AudioSink {
  /** Takes the arrays over: they may be modified (dithered in place). */
  write(planar: Float32Array[]): Promise<void>;
  /**
   * The in-process 16-bit WAV sink: writes bytes a PcmDenoiseStream returned, already dithered and rounded as write()
   * would have done (the same dither, continued across calls, must not be mixed with write() on one file).
   */
  writePcm16?(bytes: Uint8Array): Promise<void>;
  /** Finishes the file; rejects when it could not be completed. */
  close(): Promise<void>;
  /** Stops without finishing (the caller removes the file); safe to call repeatedly. */
  abort(): Promise<void>;
}

export interface SinkOptions {
  format: OutputFormat;
  channels: number;
  modelRate: number;
  outputRate: number;
  /** false: encode with ffmpeg even where the in-process WAV writer applies. */
  inProcessWav: boolean;
  /** Called when the encoder dies between writes. */
  onFailure(err: Error): void;
}

/** Whether the output is written in-process (16-bit WAV at the model's rate), which a MemoryFile output requires. */
export function writesInProcess(opts: Pick<SinkOptions, 'inProcessWav' | 'format' | 'outputRate' | 'modelRate'>): boolean {
  return opts.inProcessWav && os.endianness() === 'LE' && opts.format === 'wav' && opts.outputRate === opts.modelRate;
}

/** Opens the sink for `output`: a path, or (where writesInProcess) an empty MemoryFile. */
export async function openSink(config: Config, output: string | MemoryFile, opts: SinkOptions): Promise<AudioSink> {
  if (writesInProcess(opts)) {
    try {
      return new WavFileSink(
        await WavWriter.create(output, opts.channels, opts.modelRate),
        new LowFrequencyDither(opts.modelRate, opts.channels),
      );
    } catch (err) {
      throw outputError(err);
    }
  }
  if (typeof output !== 'string') throw new Error('only 16-bit WAV at the model rate can be written to memory');
  return new FfmpegSink(config, output, opts);
}

function outputError(err: unknown): AudioPipelineError {
  const code = (err as NodeJS.ErrnoException).code;
  return new AudioPipelineError(`cannot write the output file (${code ?? (err as Error).message})`, { cause: err });
}

class WavFileSink implements AudioSink {
  private done = false;
  constructor(
    private readonly writer: WavWriter,
    private readonly dither: LowFrequencyDither,
  ) {}

  write(planar: Float32Array[]): Promise<void> {
    // Dither and 16-bit rounding in one pass (toInt16 turns non-finite samples into 0 itself).
    return this.writePcm16(this.dither.toInt16(planar));
  }

  async writePcm16(bytes: Uint8Array): Promise<void> {
    try {
      await this.writer.writePcm(Buffer.isBuffer(bytes) ? bytes : Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength));
    } catch (err) {
      throw outputError(err);
    }
  }

  async close(): Promise<void> {
    this.done = true;
    try {
      await this.writer.close();
    } catch (err) {
      throw outputError(err);
    }
  }

  async abort(): Promise<void> {
    if (this.done) return;
    this.done = true;
    await this.writer.abort();
  }
}

class FfmpegSink implements AudioSink {
  private readonly child: ChildProcess;
  private readonly exit: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  private readonly stderr = new StderrTail();
  private inputEnded = false;
  private aborted = false;
  /** 16-bit PCM formats only: ffmpeg rounds (after resampling, which keeps the dither's low band). */
  private readonly dither: LowFrequencyDither | null;

  constructor(config: Config, outputPath: string, opts: SinkOptions) {
    this.dither = FORMATS[opts.format].lossy ? null : new LowFrequencyDither(opts.modelRate, opts.channels);
    this.child = spawnFfmpeg(config, [
      '-loglevel', 'error',
      '-f', 'f32le', '-ar', String(opts.modelRate), '-ac', String(opts.channels), '-i', 'pipe:0',
      ...(opts.outputRate !== opts.modelRate ? ['-af', `aresample=${opts.outputRate}:resampler=soxr`] : []),
      '-ar', String(opts.outputRate),
      '-fflags', '+bitexact', '-flags', '+bitexact', '-map_metadata', '-1',
      ...FORMATS[opts.format].ffmpegArgs(opts.channels),
      '-y', outputPath,
    ]);
    const child = this.child;
    child.stderr!.on('data', (d: Buffer) => this.stderr.push(d));
    child.stdout!.resume();
    child.stdin!.on('error', () => undefined); // EPIPE surfaces through the exit below
    this.exit = waitForExit(child);
    this.exit.then(
      ({ code, signal }) => {
        if (this.aborted) return;
        if (!this.inputEnded || code !== 0) opts.onFailure(this.error(code, signal));
      },
      (err: Error) => opts.onFailure(err),
    );
  }

  async write(planar: Float32Array[]): Promise<void> {
    if (planar.length === 0 || planar[0].length === 0) return;
    const out = this.dither ? this.dither.processInPlace(planar) : planar;
    silenceNonFinite(out); // in place: the arrays are the sink's (write() takes them over)
    await writeToChild(this.child, interleave(out));
  }

  async close(): Promise<void> {
    this.inputEnded = true;
    this.child.stdin!.end();
    const { code, signal } = await this.exit;
    if (code !== 0) throw this.error(code, signal);
  }

  async abort(): Promise<void> {
    this.aborted = true;
    killChild(this.child);
    await this.exit.catch(() => undefined);
  }

  private error(code: number | null, signal: NodeJS.Signals | null): AudioPipelineError {
    const detail = this.stderr.summary();
    const how = signal ? `was killed (${signal})` : code === 0 ? 'stopped early' : `exited with code ${code}`;
    return new AudioPipelineError(`ffmpeg encoder ${how}${detail ? `: ${detail}` : ''}`);
  }
}

