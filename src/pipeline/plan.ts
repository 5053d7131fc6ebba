// The file pipeline's decisions for one run, from its options and what the source's header says: the rate audio is
// decoded to, the output rate, the engine stream's and the sink's options, whether PCM bytes cross undecoded, whether
// the output stays in memory, and the chunk size. run.ts carries them out.
import type { Config } from '../config';
import { AudioInputError } from '../audio/errors';
import { encodedRate, FORMATS } from '../audio/formats';
import { checkInputLimits } from '../audio/limits';
import { writesInProcess, type SinkOptions } from '../audio/sinks';
import type { AudioSource } from '../audio/sources';
import { FULL_BAND_RATE, MODELS } from '../inference/models';
import type { DenoiseOptions, InferenceEngine, ModelId } from '../inference/types';
import type { DenoiseFileOptions, DenoiseTarget } from './types';

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

/**
 * The rate to decode to, given the input's own rate. Above 16 kHz with the input's rate kept, a model that runs full
 * band on request does so at 48 kHz (its chain below 8 kHz, the input's own band above it, filtered under the chain's
 * guidance): decoded at 48 kHz for that.
 */
export function decodeRateFor(opts: DenoiseFileOptions): (inputRate: number) => number {
  const spec = MODELS[opts.model];
  return (inputRate) => (opts.keepInputSampleRate && spec.fullBand === 'on-request' && inputRate > 16000 ? FULL_BAND_RATE : spec.sampleRate);
}

export interface RunPlan {
  /** The rate the source was decoded to and the chain runs at: the model's, or 48 kHz for a full-band run. */
  modelRate: number;
  outputRate: number;
  /** Integrated loudness to normalise to (a second pass from a spool file), 'keep' (the input's, known once read), or null. */
  loudnessTarget: number | 'keep' | null;
  /** The sink's options but the failure callback, which the run adds. */
  sink: Omit<SinkOptions, 'onFailure'>;
  stream: DenoiseOptions;
  /**
   * The source's PCM bytes when they go to the engine undecoded (PcmDenoiseStream): a WAV read as it is, written
   * in-process in one pass (16-bit WAV at the model's rate, no loudness target), and an engine that takes PCM. The
   * samples are then decoded, dithered and rounded in the worker, so this thread only moves bytes.
   */
  pcmInput: AudioSource['pcm'];
  /** The output stays in memory: only for an input read from memory (its frame count, so the output's size, is known and small). */
  inMemory: boolean;
  /** Frames per engine call. */
  chunkFrames: number;
}

/** Checks the opened source against the limits and the output format (throws AudioInputError), then plans the run. */
export function planRun(
  config: Config,
  opts: DenoiseFileOptions,
  source: AudioSource,
  engine: Pick<InferenceEngine, 'openPcmStream'>,
  target: Pick<DenoiseTarget, 'inMemory'>,
): RunPlan {
  const nativeRate = modelRateFor(opts.model);
  const modelRate = source.rate;
  checkInputLimits(config, { sampleRate: source.inputRate, channels: source.channels, durationS: source.durationS });
  const format = FORMATS[opts.outputFormat];
  if (source.channels > format.maxChannels) {
    throw new AudioInputError(
      `${opts.outputFormat} output supports at most ${format.maxChannels} channels; the input has ${source.channels} (use wav)`,
    );
  }
  const outputRate = encodedRate(opts.outputFormat, opts.keepInputSampleRate ? source.inputRate : nativeRate);
  const loudnessTarget = opts.loudnessLufs ?? null;
  const sink = { format: opts.outputFormat, channels: source.channels, modelRate, outputRate, inProcessWav: opts.inProcessWav !== false };
  const stream: DenoiseOptions = {
    model: opts.model,
    channels: source.channels,
    attenuationLimitDb: opts.attenuationLimitDb,
    fullBand: modelRate !== nativeRate,
    measureLoudness: true,
    ...(opts.speech ? { speech: opts.speech } : {}),
    ...(opts.echoReference ? { echoReference: true } : {}),
  };
  const directWav = loudnessTarget === null && writesInProcess(sink);
  return {
    modelRate,
    outputRate,
    loudnessTarget,
    sink,
    stream,
    // (The echo reference joins the input as planar float: no PCM edges with it.)
    pcmInput: directWav && engine.openPcmStream && !opts.echoReference ? source.pcm : undefined,
    inMemory: target.inMemory && source.inMemory === true && directWav,
    chunkFrames: Math.max(
      256,
      Math.round(Math.min(modelRate * (opts.chunkSeconds ?? DEFAULT_CHUNK_SECONDS), MAX_CHUNK_SAMPLES / source.channels)),
    ),
  };
}
