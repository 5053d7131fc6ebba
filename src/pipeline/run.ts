// One run of the file pipeline (PipelineRun): opens the source, the engine stream and the sink as plan.ts decides,
// pumps chunks from one to the next (one ahead, memory bounded; an echo reference beside the input: echo-reference.ts);
// with a loudness target reads the input whole first (pass 0: a quiet one is lifted for the model) and normalises from
// the spool after (normalize-pass.ts); on abort or failure stops children and frees the stream and files.
import path from 'node:path';
import { AudioAbortedError, AudioInputError } from '../audio/errors';
import { truePeakCeiling } from '../audio/formats';
import { checkDecodedDuration } from '../audio/limits';
import { MemoryFile } from '../audio/memory-file';
import { openSink, type AudioSink } from '../audio/sinks';
import { openSource, type AudioSource, type SourceInput } from '../audio/sources';
import { FloatSpool } from '../audio/spool';
import { dbOf, gatedLoudness, LoudnessMeter, TruePeakInterpolator } from '../dsp/loudness';
import type { DenoiseStream, PcmDenoiseStream, StreamControl } from '../inference/types';
import { keepTarget, modelInputGainDb, scaledBlocks } from './loudness';
import { MEASURE_RATE, normalizeInto, type PassIo } from './normalize-pass';
import { RunDiskUse } from './disk-use';
import { decodeRateFor, planRun } from './plan';
import { ReferenceTrack } from './echo-reference';
import { measuredLoudness, type RunResult } from './stats';
import type { DenoiseFileDeps, DenoiseFileOptions, DenoiseOutput, DenoiseTarget } from './types';

/** How chunks go from the source through the engine stream to the sink (PipelineRun.pump). */
interface ChunkEdges<In, Out> {
  read(maxFrames: number): Promise<In | null>;
  frames(chunk: In): number;
  push(chunk: In): Promise<Out>;
  end(): Promise<Out>;
  emit(out: Out): Promise<void>;
  /** After read() returned null: waits for the reader to finish cleanly (default: the source's finish()). */
  finish?(): Promise<void>;
}

/** The input of a run with a loudness target, spooled by pass 0: read back with the lift for the model applied. */
interface LiftedInput {
  /** The gain applied (dB; 0 for an input within the models' level range). */
  gainDb: number;
  read(): Promise<Float32Array[] | null>;
}

/** State of one denoiseFile call: source, engine stream, sink, abort wiring. */
export class PipelineRun {
  /** The output file, once there is one (null while the output is in memory). */
  outputPath: string | null = null;
  private source: AudioSource | null = null;
  private reference: ReferenceTrack | null = null;
  private sink: AudioSink | null = null;
  /** The decoder that measures the output after pass 2. */
  private measuring: AudioSource | null = null;
  private spool: FloatSpool | null = null;
  private inputSpool: FloatSpool | null = null;
  private stream: StreamControl | null = null;
  /** The disk the output and spools take (null: unchecked, or an output kept in memory). */
  private disk: RunDiskUse | null = null;
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

  async execute(): Promise<RunResult & { output: DenoiseOutput }> {
    const { config, engine } = this.deps;
    const opts = this.opts;
    const source = await this.acquire(
      openSource(config, this.input, decodeRateFor(opts), { inProcessWav: opts.inProcessWav !== false, onFailure: (e) => this.fail(e) }),
      (s) => s.abort(),
    );
    this.source = source;
    this.throwIfFailed();
    const refOpts = { inProcessWav: opts.inProcessWav !== false, onFailure: (e: Error) => this.fail(e) };
    const ref = opts.echoReference ? ReferenceTrack.open(config, opts.echoReference, source.rate, source.durationS, refOpts) : null;
    this.reference = ref && (await this.acquire(ref, (r) => r.abort()));
    const plan = planRun(config, opts, source, engine, this.target);
    const { modelRate, pcmInput, chunkFrames, loudnessTarget: target } = plan;
    const sinkOptions = { ...plan.sink, onFailure: (e: Error) => this.fail(e) };
    if (opts.disk && !plan.inMemory) {
      const shape = { format: opts.outputFormat, channels: source.channels, modelRate, outputRate: plan.outputRate, spools: target !== null };
      // Reserved before anything is decoded when the probe gave the length; taken chunk by chunk (pump, liftInput).
      this.disk = await this.guard(RunDiskUse.start(opts.disk, shape, source.durationS));
    }
    // With a loudness target the input is read whole first (pass 0), so that a quiet one can be lifted into the
    // models' level range before the engine stream is even opened.
    const lifted = target !== null ? await this.liftInput(chunkFrames, modelRate) : null;
    const stream: StreamControl = await this.acquire<StreamControl>(
      pcmInput ? engine.openPcmStream!(plan.stream, pcmInput.format) : engine.openStream(plan.stream),
      (st) => st.abort(),
    );
    this.stream = stream;
    if (stream.sampleRate !== modelRate) throw new Error(`engine runs ${opts.model} at ${stream.sampleRate} Hz, expected ${modelRate}`);

    const memory = plan.inMemory ? new MemoryFile() : null;
    if (!memory) this.outputPath ??= path.resolve(await this.guard(this.target.path()));
    const openOutput = async (): Promise<AudioSink> => {
      const sink = await this.acquire(openSink(config, memory ?? this.outputPath!, sinkOptions), (k) => k.abort());
      this.sink = sink;
      return sink;
    };
    // Without a target the cleaned audio goes straight to the sink; with one it waits in the spool for pass 2, which
    // opens the sink (its true peak tells whether the gain will need the limiter).
    const sink = target === null ? await openOutput() : null;
    if (target !== null) this.spool = await this.guard(FloatSpool.create(`${this.outputPath}.spool`, source.channels));
    const spool = this.spool;
    const cleanPeak = spool ? new TruePeakInterpolator(modelRate, source.channels) : null;
    let peakScratch = new Float64Array(0);
    const emit = async (out: Float32Array[]): Promise<void> => {
      if (out.length === 0 || out[0].length === 0) return;
      if (cleanPeak) {
        if (peakScratch.length < out[0].length) peakScratch = new Float64Array(out[0].length);
        cleanPeak.process(out, peakScratch);
      }
      await this.guard(spool ? spool.write(out) : sink!.write(out));
    };

    let framesIn: number;
    if (pcmInput && sink) {
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
      const ref = this.reference;
      framesIn = await this.pump<Float32Array[], Float32Array[]>(chunkFrames, modelRate, {
        read: (n) => (ref ? ref.alongside(lifted ? lifted.read() : source.read(n)) : lifted ? lifted.read() : source.read(n)),
        frames: (planar) => planar[0].length,
        push: (planar) => floatStream.push(planar),
        end: () => floatStream.end(),
        emit,
        finish: lifted ? () => Promise.resolve() : undefined,
      });
    }
    await this.inputSpool?.dispose(); // read through: free its disk before pass 2
    this.inputSpool = null;

    // Metered in the worker, next to the chain (measureLoudness): the input as pushed, the output as returned.
    const measured = stream.loudness();
    if (!measured) throw new Error('the inference engine returned no loudness measurements');
    const lift = lifted?.gainDb ?? 0;
    // 'keep': the input's speech loudness, in the file's own terms (the meters saw the input after the lift).
    const resolved = target === 'keep' ? keepTarget(scaledBlocks(measured.input, -lift), scaledBlocks(measured.output, -lift)) : target;
    const loudness = measuredLoudness(measured, resolved, lift);
    if (spool && target !== null) {
      // Pass 2 (normalize-pass.ts): one gain for the whole file, limited to the format's true-peak ceiling.
      const pass = await normalizeInto(
        {
          spool,
          sampleRate: modelRate,
          channels: source.channels,
          chunkFrames,
          // (null: 'keep' of silence, which gets no gain whatever the target: chooseGain.)
          target: resolved ?? 0,
          measured: gatedLoudness(measured.output),
          blocks: measured.output,
          peak: cleanPeak ? cleanPeak.maximum() : 0,
          check: () => this.throwIfFailed(),
        },
        truePeakCeiling(opts.outputFormat),
        this.passIo(openOutput),
      );
      Object.assign(loudness, { gainDb: pass.gainDb, output: pass.output, truePeak: pass.truePeak, reached: pass.reached });
    } else {
      await this.guard(sink!.close());
      this.sink = null;
    }
    const output: DenoiseOutput = memory ? { memory } : { path: this.outputPath! };
    const speech = opts.speech ? (stream.speech?.() ?? null) : null;
    if (opts.speech && !speech) throw new Error('the inference engine returned no speech detection');
    const echo = opts.echoReference ? (stream.echo?.() ?? null) : null;
    if (opts.echoReference && !echo) throw new Error('the inference engine returned no echo canceller figures');
    return { frames: framesIn, source, stream, outputRate: plan.outputRate, loudness, output, speech, echo };
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
      checkDecodedDuration(config, framesIn / modelRate, { sampleRate: source.inputRate, channels: source.channels });
      if (this.disk) await this.guard(this.disk.cover(framesIn));
      const out = this.guard(edges.push(chunk));
      out.catch(() => undefined); // a failure is thrown where it is awaited, below or after the loop
      if (ahead) await edges.emit(await ahead);
      ahead = out;
      this.opts.onProgress?.(framesIn / modelRate, total);
    }
    if (this.aborted) throw new AudioAbortedError();
    await this.guard(edges.finish ? edges.finish() : source.finish());
    if (framesIn === 0) throw new AudioInputError('could not decode: no audio samples in the file');
    await this.guard(this.reference?.finish(framesIn) ?? Promise.resolve()); // its length against the input's (400)

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

  /** How pass 2 reaches the output: (re)opening the sink, and decoding the finished file to measure it. */
  private passIo(openOutput: () => Promise<AudioSink>): PassIo {
    return {
      openSink: async () => {
        const sink = await openOutput();
        return {
          write: (out) => this.guard(sink.write(out)),
          close: async () => {
            await this.guard(sink.close());
            this.sink = null;
          },
        };
      },
      readOutput: async () => {
        const check = await this.acquire(
          openSource(this.deps.config, this.outputPath!, MEASURE_RATE, { inProcessWav: true, onFailure: (e) => this.fail(e) }),
          (s) => s.abort(),
        );
        this.measuring = check;
        return {
          channels: check.channels,
          read: () => this.guard(check.read(MEASURE_RATE)),
          finish: async () => {
            await this.guard(check.finish());
            this.measuring = null;
          },
        };
      },
    };
  }

  /**
   * Pass 0 of a run with a loudness target: reads the whole input into a spool file while metering its loudness and
   * true peak, and decides the lift for the model (loudness.ts, modelInputGainDb). Progress is reported by the pump
   * that replays it.
   */
  private async liftInput(chunkFrames: number, modelRate: number): Promise<LiftedInput> {
    const source = this.source!;
    this.outputPath = path.resolve(await this.guard(this.target.path()));
    const spool = await this.guard(FloatSpool.create(`${this.outputPath}.input.spool`, source.channels));
    this.inputSpool = spool;
    const meter = new LoudnessMeter(modelRate, source.channels);
    const peak = new TruePeakInterpolator(modelRate, source.channels);
    let scratch = new Float64Array(0);
    let frames = 0;
    for (;;) {
      this.throwIfFailed();
      const chunk = await this.guard(source.read(chunkFrames));
      if (chunk === null) break;
      const n = chunk[0].length;
      if (n === 0) continue;
      frames += n;
      checkDecodedDuration(this.deps.config, frames / modelRate, { sampleRate: source.inputRate, channels: source.channels });
      if (this.disk) await this.guard(this.disk.cover(frames));
      meter.push(chunk);
      if (scratch.length < n) scratch = new Float64Array(n);
      peak.process(chunk, scratch);
      await this.guard(spool.write(chunk));
    }
    if (this.aborted) throw new AudioAbortedError();
    await this.guard(source.finish());
    if (frames === 0) throw new AudioInputError('could not decode: no audio samples in the file');
    const gainDb = modelInputGainDb(meter.integrated(), peak.maximum() > 0 ? dbOf(peak.maximum()) : -Infinity);
    const gain = Math.pow(10, gainDb / 20);
    const chunks = spool.read(chunkFrames);
    return {
      gainDb,
      read: async () => {
        const next = await chunks.next();
        if (next.done) return null;
        if (gain !== 1) for (const ch of next.value) for (let i = 0; i < ch.length; i++) ch[i] *= gain;
        return next.value;
      },
    };
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
    const check = this.measuring;
    this.source = null;
    this.sink = null;
    this.measuring = null;
    const spools = [this.spool, this.inputSpool];
    this.spool = null;
    this.inputSpool = null;
    await Promise.all(spools.map((s) => s?.dispose()));
    if (this.stream) {
      try {
        this.stream.abort();
      } catch {
        /* engine already released it */
      }
      this.stream = null;
    }
    await Promise.all([source?.abort(), sink?.abort(), check?.abort(), this.reference?.abort()]); // (abort repeats safely)
  }

  async dispose(): Promise<void> {
    this.opts.signal?.removeEventListener('abort', this.onAbort);
    this.disk?.release();
    const spools = [this.spool, this.inputSpool];
    this.spool = null;
    this.inputSpool = null;
    await Promise.all(spools.map((s) => s?.dispose()));
  }
}
