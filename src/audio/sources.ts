// Sources of the file pipeline: planar float32 at the model's rate, in chunks, with what the stats need to know about
// the input (rate, channels, codec, container, duration), known before the first chunk.
//
//   WavFileSource       uncompressed WAV already at the model rate: read in-process, no child process.
//   ResampledWavSource  float WAV at another rate: read in-process (NaN/Inf cleaned), resampled by an ffmpeg child
//                       (soxr) through its stdin/stdout. (Integer PCM WAVs at another rate go to FfmpegSource.)
//   FfmpegSource        anything else: ONE ffmpeg child decodes and resamples; its stderr banner (codec, container,
//                       duration, input rate) and the WAV header it writes first (exact channel count) replace the
//                       separate probe run; a failure before the header is reported like the probe did.
import type { ChildProcess } from 'node:child_process';
import os from 'node:os';
import path from 'node:path';
import type { Readable } from 'node:stream';
import type { Config } from '../config';
import { AudioInputError, AudioPipelineError } from './errors';
import { killChild, spawnFfmpeg, StderrTail, untrustedInputArgs, waitForExit, writeToChild } from './ffmpeg';
import { checkInputLimits, type AudioLimits } from './limits';
import { cleanDetail, opusInputSampleRate, parseBanner, probeFailure } from './probe';
import { deinterleave, interleave, silenceNonFinite } from '../dsp/interleave';
import type { MemoryFile } from './memory-file';
import { decodeFrames, type WavSampleFormat } from '../dsp/pcm';
import { parseWav, WavReader } from './wav';

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
 * when the input is above 16 kHz). A WAV's header gives the input rate before anything is decoded; ffmpeg is started at
 * the rate chosen for a 48 kHz input and, in the rare case that the input's rate calls for another one, restarted once.
 */
export type RateChoice = number | ((inputRate: number) => number);

/** How long ffmpeg may take to print the banner and the WAV header (the probe's old bound). */
const HEADER_TIMEOUT_MS = 30_000;

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
  const guess = rateFor(known ?? 48000);
  const source = await FfmpegSource.open(config, inputPath, guess, config);
  const want = rateFor(source.inputRate);
  if (want === guess) return source;
  await source.abort();
  return FfmpegSource.open(config, inputPath, want, config);
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

/** Pulls whole frames of float32 samples from a child's stdout, one pipe chunk at a time (bounded memory). */
class PipeFrames {
  private readonly it: AsyncIterator<Buffer>;
  private pending: Buffer[] = [];
  private pendingBytes = 0;
  private ended = false;

  constructor(
    stdout: Readable | AsyncIterator<Buffer>,
    private readonly channels: number,
    prefix?: Buffer,
  ) {
    this.it = 'next' in stdout ? stdout : (stdout as AsyncIterable<Buffer>)[Symbol.asyncIterator]();
    if (prefix && prefix.length) {
      this.pending.push(prefix);
      this.pendingBytes = prefix.length;
    }
  }

  async read(maxFrames: number): Promise<Float32Array[] | null> {
    const frameBytes = 4 * this.channels;
    const want = maxFrames * frameBytes;
    while (this.pendingBytes < want && !this.ended) {
      const r = await this.it.next();
      if (r.done) this.ended = true;
      else {
        this.pending.push(r.value);
        this.pendingBytes += r.value.length;
      }
    }
    const take = Math.min(want, this.pendingBytes - (this.pendingBytes % frameBytes));
    if (take === 0) return null; // ended (a partial frame at the very end is dropped)
    const all = this.pending.length === 1 ? this.pending[0] : Buffer.concat(this.pending, this.pendingBytes);
    const rest = all.subarray(take);
    this.pending = rest.length ? [rest] : [];
    this.pendingBytes = rest.length;
    const planar = deinterleave(all.subarray(0, take), this.channels);
    silenceNonFinite(planar);
    return planar;
  }

  stop(): void {
    this.ended = true;
    this.pending = [];
    this.pendingBytes = 0;
    void this.it.return?.().catch(() => undefined);
  }
}

class FfmpegSource implements AudioSource {
  private frames: PipeFrames;
  private stopped = false;

  private constructor(
    private readonly child: ChildProcess,
    private readonly exit: Promise<{ code: number | null; signal: NodeJS.Signals | null }>,
    private readonly stderr: StderrTail,
    private readonly inputPath: string,
    readonly rate: number,
    readonly channels: number,
    readonly inputRate: number,
    readonly codec: string,
    readonly container: string,
    readonly durationS: number | null,
    stdout: AsyncIterator<Buffer>,
    afterHeader: Buffer,
  ) {
    this.frames = new PipeFrames(stdout, channels, afterHeader);
  }

  static async open(config: Config, inputPath: string, modelRate: number, limits: AudioLimits): Promise<FfmpegSource> {
    const child = spawnFfmpeg(config.ffmpegPath, [
      '-nostats',
      ...untrustedInputArgs(),
      '-i', inputPath,
      '-map', '0:a:0', '-vn', '-sn', '-dn',
      '-af', `aresample=${modelRate}:resampler=soxr`,
      '-ar', String(modelRate),
      '-fflags', '+bitexact', '-flags', '+bitexact', '-map_metadata', '-1',
      // Whole 32 KiB pipe writes instead of one per packet (~2-4 KiB): 8-16x fewer wake-ups of this process.
      '-c:a', 'pcm_f32le', '-flush_packets', '0', '-f', 'wav', 'pipe:1',
    ]);
    child.stdin!.on('error', () => undefined);
    child.stdin!.end();
    // The banner is at the start of stderr (kept whole, bounded); errors are at its end (kept as a tail).
    let banner = '';
    const tail = new StderrTail(64 * 1024);
    let bannerDone: () => void = () => undefined;
    const bannerReady = new Promise<void>((resolve) => (bannerDone = resolve));
    child.stderr!.on('data', (d: Buffer) => {
      tail.push(d);
      if (banner.length < 256 * 1024) {
        banner += d.toString();
        // Printed once the input is fully described, before any audio is written. (A banner this long is cut:
        // waiting for more would stall the decoder behind an unread stdout.)
        if (/Stream mapping:|Output #0/.test(banner) || banner.length >= 256 * 1024) bannerDone();
      }
    });
    const exit = waitForExit(child);
    exit.then(() => bannerDone(), () => bannerDone());

    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      killChild(child);
    }, HEADER_TIMEOUT_MS);
    const stdout = child.stdout!;
    try {
      // The WAV header ffmpeg writes first: exact channel count. Read it, and keep what follows it.
      const head: Buffer[] = [];
      let headBytes = 0;
      let info = null;
      const it = (stdout as AsyncIterable<Buffer>)[Symbol.asyncIterator]();
      while (!info) {
        const r = await it.next();
        if (r.done) break;
        head.push(r.value);
        headBytes += r.value.length;
        info = parseWav(Buffer.concat(head, headBytes), Infinity);
        if (!info && headBytes > 1 << 20) throw new AudioPipelineError('ffmpeg decoder wrote no usable WAV header');
      }
      await bannerReady;
      clearTimeout(timer);
      if (!info) {
        // No audio came out: the probe's error reporting (no audio stream, not audio, format not accepted...).
        const { code, signal } = await exit;
        const text = banner + tail.toString();
        if (signal) throw new AudioPipelineError(`ffmpeg decoder was killed (${signal})`);
        if (code !== 0) throw probeFailure(text, inputPath, parseBanner(text).hasAudio);
        throw new AudioInputError('could not decode: no audio samples in the file');
      }
      // The same iterator goes on reading the samples that follow the header.
      const afterHeader = Buffer.concat(head, headBytes).subarray(info.dataOffset);
      const b = parseBanner(banner);
      const opusRate = b.codec === 'opus' ? await opusInputSampleRate(inputPath) : null;
      const inputRate = opusRate ?? b.sampleRate ?? info.sampleRate;
      const source = new FfmpegSource(
        child, exit, tail, inputPath, modelRate, info.channels, inputRate, b.codec ?? 'unknown', b.container ?? 'unknown', b.durationS, it, afterHeader,
      );
      // Before any audio goes to the engine (the caller checks again; this one spares the decoding).
      checkInputLimits(limits, { sampleRate: inputRate, channels: info.channels, durationS: b.durationS });
      return source;
    } catch (err) {
      clearTimeout(timer);
      killChild(child);
      await exit.catch(() => undefined);
      if (timedOut) throw new AudioPipelineError(`ffmpeg did not start decoding within ${HEADER_TIMEOUT_MS / 1000} s`);
      throw err;
    }
  }

  read(maxFrames: number): Promise<Float32Array[] | null> {
    if (this.stopped) return Promise.resolve(null);
    return this.frames.read(maxFrames);
  }

  async finish(): Promise<void> {
    const { code, signal } = await this.exit;
    if (code === 0) return;
    if (signal) throw new AudioPipelineError(`ffmpeg decoder was killed (${signal})`);
    const detail = cleanDetail(this.stderr.summary(), this.inputPath);
    throw new AudioInputError(`could not decode: ${detail || `ffmpeg exited with code ${code}`}`);
  }

  async abort(): Promise<void> {
    this.stopped = true;
    killChild(this.child);
    this.frames.stop();
    await this.exit.catch(() => undefined);
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
    const child = (this.child = spawnFfmpeg(this.config.ffmpegPath, [
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

