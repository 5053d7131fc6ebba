// Sources of the file pipeline: planar float32 at the model's rate, in chunks, with what the stats need to know about
// the input (rate, channels, codec, container, duration), known before the first chunk.
//
//   WavFileSource       uncompressed WAV already at the model rate: read in-process, no child process.
//   ResampledWavSource  float WAV at another rate: read in-process (NaN/Inf cleaned), resampled by an ffmpeg child
//                       (soxr) through its stdin/stdout. (Integer PCM WAVs at another rate go to FfmpegSource.)
//   FfmpegSource        anything else: ONE ffmpeg child decodes and resamples (ffmpeg-source.ts), started once ffprobe's
//                       JSON (probe.ts) and a packet scan beside it (duration-scan.ts) have described the input and the
//                       limits have passed: nothing is decoded before then.
import type { ChildProcess } from 'node:child_process';
import os from 'node:os';
import path from 'node:path';
import type { Config } from '../config';
import { startDurationScan } from './duration-scan';
import { AudioPipelineError } from './errors';
import { killChild, spawnFfmpeg, StderrTail, waitForExit, writeToChild } from './ffmpeg';
import { FfmpegSource, PipeFrames } from './ffmpeg-source';
import { checkDecodedDuration, checkInputLimits } from './limits';
import { audioOf, probeMedia } from './probe';
import { interleave } from '../dsp/interleave';
import type { MemoryFile } from './memory-file';
import { decodeFrames, type WavSampleFormat } from '../dsp/pcm';
import { WavReader } from './wav';

/** An input held in memory (a small upload), and how to put it in a file when a decoder child needs one. */
export interface InMemoryInput {
  file: MemoryFile;
  /** Writes the bytes to a file once and resolves with its path. */
  spill(): Promise<string>;
}

/** A path, or an input in memory. */
export type SourceInput = string | InMemoryInput;

export interface AudioSource {
  /** Rate of the samples read() returns (the rate asked for; see RateChoice). */
  readonly rate: number;
  readonly channels: number;
  /** The input file's own sample rate (Opus: the rate its header says it was recorded at). */
  readonly inputRate: number;
  readonly codec: string;
  readonly container: string;
  /** Duration from the header or container, null when unknown. */
  readonly durationS: number | null;
  /** true: read in-process from an input in memory, so the frame count is exact and bounded by its size. */
  readonly inMemory?: boolean;
  /** Up to maxFrames frames at the model rate (planar, finite samples), or null at the end of the audio. */
  read(maxFrames: number): Promise<Float32Array[] | null>;
  /**
   * Sources that read an uncompressed file as it is (the in-process WAV reader): its sample format, and read() as the
   * file's interleaved bytes of whole frames, undecoded (a PcmDenoiseStream decodes them where the chain runs).
   */
  readonly pcm?: { format: WavSampleFormat; frameBytes: number; readBytes(maxFrames: number): Promise<Buffer | null> };
  /** After read() returned null: resolves once the decoder finished cleanly, rejects with its error. */
  finish(): Promise<void>;
  /** Stops children and closes files; safe to call repeatedly. */
  abort(): Promise<void>;
}

export interface SourceOptions {
  /** false: decode with ffmpeg even where the in-process WAV reader applies. */
  inProcessWav: boolean;
  /** Called when a background part (a child feeding or being fed) fails between reads. */
  onFailure(err: Error): void;
}

/**
 * The rate to decode to: fixed, or chosen from the input's own rate (e.g. 48 kHz for a full-band run of a 16 kHz model
 * when the input is above 16 kHz). A WAV's header, or else the probe, gives the input rate before anything is decoded.
 */
export type RateChoice = number | ((inputRate: number) => number);

export async function openSource(
  config: Config,
  input: SourceInput,
  rate: RateChoice,
  opts: SourceOptions,
): Promise<AudioSource> {
  const rateFor = typeof rate === 'number' ? () => rate : rate;
  /** The input's rate when a WAV header already gave it. */
  let known: number | null = null;
  // Typed-array views read little-endian samples only on a little-endian host (x64, arm64: all we run on).
  if (opts.inProcessWav && os.endianness() === 'LE') {
    const reader = await WavReader.open(typeof input === 'string' ? input : input.file);
    if (reader) {
      const info = reader.info;
      try {
        // Exact from the header, and before any child exists.
        checkInputLimits(config, { sampleRate: info.sampleRate, channels: info.channels, durationS: info.frames / info.sampleRate });
      } catch (err) {
        await reader.close();
        throw err;
      }
      const modelRate = rateFor(info.sampleRate);
      if (info.sampleRate === modelRate) return new WavFileSource(reader, typeof input !== 'string');
      // Float samples may be NaN/Inf, which soxr would smear over its filter length: clean them here first. Integer
      // PCM cannot hold them, and ffmpeg reading the file itself costs less than piping it through this process.
      if (info.format === 'f32' || info.format === 'f64') return new ResampledWavSource(config, reader, modelRate, opts.onFailure);
      known = info.sampleRate;
      await reader.close();
    }
  }
  // Absolute: ffmpeg reads names like "concat:a|b" as protocol URLs.
  const inputPath = path.resolve(typeof input === 'string' ? input : await input.spill());
  // The packet scan runs beside the probe; a WAV header read above already gave the exact length.
  const scan = known === null ? startDurationScan(config.ffmpegPath, inputPath, config.maxAudioSeconds) : null;
  try {
    const audio = await audioOf(await probeMedia(config, inputPath), inputPath);
    const inputRate = known ?? audio.sampleRate;
    const shape = { sampleRate: inputRate, channels: audio.channels };
    // Before anything is decoded: rate, channels, and the duration and samples the container claims.
    checkInputLimits(config, { ...shape, durationS: audio.durationS });
    // The container's duration may be missing or wrong (an MP3 estimated from its first bitrate): the packets tell.
    const scanned = scan ? await scan.seconds : null;
    if (scanned !== null) checkDecodedDuration(config, scanned, shape);
    // (Within a second over the limit passes, as decoding does; the pipeline's header check would not pass it.)
    const counted = scanned !== null && scanned <= config.maxAudioSeconds ? scanned : null;
    return await FfmpegSource.open(config, inputPath, rateFor(inputRate), {
      inputRate, codec: audio.codec, container: audio.container, durationS: counted ?? audio.durationS,
    });
  } finally {
    // Reaped before the caller hears of a refusal: no ffmpeg outlives the call.
    await scan?.stop();
  }
}

class WavFileSource implements AudioSource {
  readonly rate: number;
  readonly channels: number;
  readonly inputRate: number;
  readonly codec: string;
  readonly container: string;
  readonly durationS: number;
  readonly pcm: NonNullable<AudioSource['pcm']>;
  private closed = false;

  constructor(
    private readonly reader: WavReader,
    readonly inMemory: boolean,
  ) {
    const info = reader.info;
    this.pcm = { format: info.format, frameBytes: info.blockAlign, readBytes: (n) => this.readBytes(n) };
    this.rate = info.sampleRate;
    this.channels = info.channels;
    this.inputRate = info.sampleRate;
    this.codec = info.codec;
    this.container = info.container;
    this.durationS = info.frames / info.sampleRate;
  }

  async readBytes(maxFrames: number): Promise<Buffer | null> {
    if (this.closed) return null;
    const bytes = await this.reader.readBytes(maxFrames);
    if (bytes.length === 0) {
      await this.abort();
      return null;
    }
    return bytes;
  }

  async read(maxFrames: number): Promise<Float32Array[] | null> {
    const bytes = await this.readBytes(maxFrames);
    return bytes && decodeFrames(bytes, this.reader.info);
  }

  async finish(): Promise<void> {
    await this.abort();
  }

  async abort(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    await this.reader.close();
  }
}


class ResampledWavSource implements AudioSource {
  readonly channels: number;
  readonly inputRate: number;
  readonly codec: string;
  readonly container: string;
  readonly durationS: number;
  private child: ChildProcess | null = null;
  private exit: Promise<{ code: number | null; signal: NodeJS.Signals | null }> | null = null;
  private frames: PipeFrames | null = null;
  private readonly stderr = new StderrTail();
  private stopped = false;
  private feeding: Promise<void> | null = null;

  constructor(
    private readonly config: Config,
    private readonly reader: WavReader,
    readonly rate: number,
    private readonly onFailure: (err: Error) => void,
  ) {
    const info = reader.info;
    this.channels = info.channels;
    this.inputRate = info.sampleRate;
    this.codec = info.codec;
    this.container = info.container;
    this.durationS = info.frames / info.sampleRate;
  }

  /** Spawned on the first read, once the caller has accepted the input. */
  private start(): PipeFrames {
    const C = this.channels;
    const child = (this.child = spawnFfmpeg(this.config, [
      '-loglevel', 'error',
      '-f', 'f32le', '-ar', String(this.inputRate), '-ac', String(C), '-i', 'pipe:0',
      '-af', `aresample=${this.rate}:resampler=soxr`, '-ar', String(this.rate),
      '-c:a', 'pcm_f32le', '-flush_packets', '0', '-f', 'f32le', 'pipe:1',
    ]));
    child.stderr!.on('data', (d: Buffer) => this.stderr.push(d));
    child.stdin!.on('error', () => undefined); // EPIPE surfaces through the exit status
    this.exit = waitForExit(child);
    this.exit.catch(() => undefined);
    this.feeding = this.feed(child).catch((err: Error) => {
      if (!this.stopped) this.onFailure(err);
    });
    return (this.frames = new PipeFrames(child.stdout!, C));
  }

  /** Writes the whole file into the resampler's stdin, 1 s at a time, waiting for 'drain' (bounded memory). */
  private async feed(child: ChildProcess): Promise<void> {
    const stdin = child.stdin!;
    const step = Math.max(1024, this.inputRate);
    for (;;) {
      if (this.stopped) return;
      const planar = await this.reader.read(step);
      if (planar[0].length === 0) break;
      await writeToChild(child, interleave(planar, false));
    }
    stdin.end();
    await this.reader.close();
  }

  read(maxFrames: number): Promise<Float32Array[] | null> {
    if (this.stopped) return Promise.resolve(null);
    return (this.frames ?? this.start()).read(maxFrames);
  }

  async finish(): Promise<void> {
    await this.feeding;
    if (!this.exit) return;
    const { code, signal } = await this.exit;
    if (code === 0) return;
    throw new AudioPipelineError(`ffmpeg resampler ${signal ? `was killed (${signal})` : `exited with code ${code}`}: ${this.stderr.summary()}`);
  }

  async abort(): Promise<void> {
    this.stopped = true;
    killChild(this.child);
    this.frames?.stop();
    await this.exit?.catch(() => undefined);
    await this.reader.close();
  }
}

