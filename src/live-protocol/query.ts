// The query that configures a live stream (docs/streaming.md, "Connecting"), read the same way at both ends: the
// gateway checks the client's before the upgrade (a bad value is an ordinary 400), the model service the relayed one
// on /internal/stream (which trusts nothing it did not check). One table of fields; a new setting is a row here, a
// line in parseLiveQuery and one in liveQuery, and both ends take it.
import { VAD_BOUNDS, VAD_DEFAULTS, type VadOptions } from '../vad/options';
import { DEFAULT_MODEL, LIVE_ENCODINGS, LIVE_SAMPLE_BYTES, MODEL_IDS, type LiveEncoding, type LiveOptions, type ModelId } from '../inference/types';

/** A stream's settings: what the denoising side is opened with. */
export type LiveParams = LiveOptions;

/** Every query parameter a stream takes. `ticket` is the public side's (browser authentication), never relayed. */
export const LIVE_QUERY_FIELDS = ['model', 'sample_rate', 'encoding', 'channels', 'attenuation_limit_db', 'vad', 'vad_threshold', 'vad_min_speech_ms', 'vad_hangover_ms', 'echo_reference', 'ticket'];
export const LIVE_RATES = { min: 8000, max: 48000, default: 16000 } as const;
/** Output channels a stream may have; with an echo reference the input has one more (docs/echo.md, "Live streams"). */
export const LIVE_MAX_CHANNELS = 2;
/** The values of `echo_reference`: `last`, the last channel of every input frame is the reference. */
export const LIVE_ECHO_REFERENCES = ['last'];

/** Speech events' settings (vad=true): the names, bounds and units of /denoise's speech fields (docs/speech.md). */
const VAD_SETTINGS: Array<{ field: string; key: keyof VadOptions; unit: string }> = [
  { field: 'vad_threshold', key: 'threshold', unit: 'a speech probability' },
  { field: 'vad_min_speech_ms', key: 'minSpeechMs', unit: 'milliseconds' },
  { field: 'vad_hangover_ms', key: 'hangoverMs', unit: 'milliseconds' },
];

const NUMBER = /^[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?$/;

/** A query parameter with a bad value, or one the protocol does not know; `message` says which and why. */
export class LiveQueryError extends Error {}

function one(query: Record<string, unknown>, name: string): string | undefined {
  const v = query[name];
  if (v === undefined) return undefined;
  if (typeof v !== 'string') throw new LiveQueryError(`"${name}" was given more than once; give it once`);
  return v.trim();
}

function integer(text: string, name: string, min: number, max: number): number {
  if (!/^\d+$/.test(text) || Number(text) < min || Number(text) > max) {
    throw new LiveQueryError(`"${name}" must be an integer from ${min} to ${max} (got "${text.slice(0, 40)}")`);
  }
  return Number(text);
}

/** The stream's settings from its query (Express's parsed `req.query`); throws LiveQueryError. */
export function parseLiveQuery(query: Record<string, unknown>, defaultAttenuationLimitDb: number): LiveParams {
  for (const name of Object.keys(query)) {
    if (!LIVE_QUERY_FIELDS.includes(name)) {
      throw new LiveQueryError(`unknown query parameter "${name.slice(0, 40)}"; accepted: ${LIVE_QUERY_FIELDS.join(', ')}`);
    }
  }
  const model = one(query, 'model') ?? DEFAULT_MODEL;
  if (!MODEL_IDS.includes(model as ModelId)) {
    throw new LiveQueryError(`"model" must be one of ${MODEL_IDS.join(', ')} (got "${model.slice(0, 40)}")`);
  }
  const rateText = one(query, 'sample_rate');
  const sampleRate = rateText === undefined ? LIVE_RATES.default : integer(rateText, 'sample_rate', LIVE_RATES.min, LIVE_RATES.max);
  const encoding = (one(query, 'encoding') ?? 'pcm_s16le') as LiveEncoding;
  if (!LIVE_ENCODINGS.includes(encoding)) {
    throw new LiveQueryError(`"encoding" must be one of ${LIVE_ENCODINGS.join(', ')} (got "${String(encoding).slice(0, 40)}")`);
  }
  const echoText = one(query, 'echo_reference');
  if (echoText !== undefined && !LIVE_ECHO_REFERENCES.includes(echoText)) {
    throw new LiveQueryError(`"echo_reference" must be ${LIVE_ECHO_REFERENCES.join(', ')} (got "${echoText.slice(0, 40)}"): the last channel is the reference`);
  }
  const echoReference = echoText !== undefined;
  const chText = one(query, 'channels');
  if (echoReference && chText === undefined) {
    throw new LiveQueryError('"echo_reference" needs "channels" of at least 2: the microphone channels, then the reference');
  }
  const channels = chText === undefined ? 1 : integer(chText, 'channels', echoReference ? 2 : 1, LIVE_MAX_CHANNELS + (echoReference ? 1 : 0));
  const limitText = one(query, 'attenuation_limit_db');
  let attenuationLimitDb = defaultAttenuationLimitDb;
  if (limitText !== undefined) {
    const v = Number(limitText);
    if (limitText === '' || !Number.isFinite(v) || v < 0 || v > 100) {
      throw new LiveQueryError(`"attenuation_limit_db" must be a number from 0 to 100 (got "${limitText.slice(0, 40)}")`);
    }
    attenuationLimitDb = v;
  }
  const vad = vadOf(query);
  return { model: model as ModelId, sampleRate, encoding, channels, attenuationLimitDb, ...(vad ? { vad } : {}), ...(echoReference ? { echoReference: true } : {}) };
}

/** vad=true and its settings (defaults filled in), or null without it; a setting without vad=true is refused. */
function vadOf(query: Record<string, unknown>): VadOptions | null {
  const flag = one(query, 'vad')?.toLowerCase();
  if (flag !== undefined && !['true', 'false', '1', '0'].includes(flag)) {
    throw new LiveQueryError(`"vad" must be a boolean (true, false, 1 or 0) (got "${flag.slice(0, 40)}")`);
  }
  const on = flag === 'true' || flag === '1';
  const vad: VadOptions = { ...VAD_DEFAULTS };
  const given: string[] = [];
  for (const { field, key, unit } of VAD_SETTINGS) {
    const text = one(query, field);
    if (text === undefined) continue;
    const { min, max } = VAD_BOUNDS[key];
    const n = NUMBER.test(text) ? Number(text) : NaN;
    if (!(n >= min && n <= max)) throw new LiveQueryError(`"${field}" must be a number from ${min} to ${max} (${unit}) (got "${text.slice(0, 40)}")`);
    vad[key] = n;
    given.push(field);
  }
  if (given.length > 0 && !on) throw new LiveQueryError(`${given.map((f) => `"${f}"`).join(', ')} ${given.length > 1 ? 'apply' : 'applies'} only with vad=true`);
  return on ? vad : null;
}

/** The query that opens a stream with `p` on a model service (the relay): parseLiveQuery gives `p` back from it. */
export function liveQuery(p: LiveParams): URLSearchParams {
  return new URLSearchParams({
    model: p.model,
    sample_rate: String(p.sampleRate),
    encoding: p.encoding,
    channels: String(p.channels),
    attenuation_limit_db: String(p.attenuationLimitDb),
    ...(p.vad
      ? { vad: 'true', vad_threshold: String(p.vad.threshold), vad_min_speech_ms: String(p.vad.minSpeechMs), vad_hangover_ms: String(p.vad.hangoverMs) }
      : {}),
    ...(p.echoReference ? { echo_reference: 'last' } : {}),
  });
}

/** Channels of the output: the input's, less the echo reference. */
export function outputChannels(p: Pick<LiveParams, 'channels' | 'echoReference'>): number {
  return p.channels - (p.echoReference ? 1 : 0);
}

/**
 * Bytes of one frame (all channels) of the client's binary messages: 2 or 4 bytes a sample for PCM, 1 for μ-law and
 * A-law. Kept apart from outputFrameBytes: an input channel the output does not have (an echo reference) changes this
 * one only.
 */
export function inputFrameBytes(p: Pick<LiveParams, 'encoding' | 'channels'>): number {
  return LIVE_SAMPLE_BYTES[p.encoding] * p.channels;
}

/** Bytes of one frame of the server's binary messages (the denoised channels, in the stream's encoding). */
export function outputFrameBytes(p: Pick<LiveParams, 'encoding' | 'channels' | 'echoReference'>): number {
  return LIVE_SAMPLE_BYTES[p.encoding] * outputChannels(p);
}
