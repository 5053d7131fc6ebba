// The stream's query (docs/streaming.md): model, sample_rate, encoding, channels, attenuation_limit_db. Checked before
// the upgrade, so a bad value is an ordinary 400 the client can read.
import type { LiveEncoding, ModelId } from '../inference/types';
import { MODEL_IDS, DEFAULT_MODEL, LIVE_ENCODINGS, LIVE_SAMPLE_BYTES } from '../inference/types';
import { StreamRefusal } from './errors';

export interface StreamParams {
  model: ModelId;
  sampleRate: number;
  encoding: LiveEncoding;
  channels: number;
  attenuationLimitDb: number;
}

export const STREAM_QUERY_FIELDS = ['model', 'sample_rate', 'encoding', 'channels', 'attenuation_limit_db', 'ticket'];
export const STREAM_RATES = { min: 8000, max: 48000, default: 16000 } as const;

function one(query: Record<string, unknown>, name: string): string | undefined {
  const v = query[name];
  if (v === undefined) return undefined;
  if (typeof v !== 'string') throw new StreamRefusal('invalid_request', `"${name}" was given more than once; give it once`);
  return v.trim();
}

function integer(text: string, name: string, min: number, max: number): number {
  if (!/^\d+$/.test(text) || Number(text) < min || Number(text) > max) {
    throw new StreamRefusal('invalid_request', `"${name}" must be an integer from ${min} to ${max} (got "${text.slice(0, 40)}")`);
  }
  return Number(text);
}

export function parseStreamParams(query: Record<string, unknown>, defaultAttenuationLimitDb: number): StreamParams {
  for (const name of Object.keys(query)) {
    if (!STREAM_QUERY_FIELDS.includes(name)) {
      throw new StreamRefusal('invalid_request', `unknown query parameter "${name.slice(0, 40)}"; accepted: ${STREAM_QUERY_FIELDS.join(', ')}`);
    }
  }
  const model = one(query, 'model') ?? DEFAULT_MODEL;
  if (!MODEL_IDS.includes(model as ModelId)) {
    throw new StreamRefusal('invalid_request', `"model" must be one of ${MODEL_IDS.join(', ')} (got "${model.slice(0, 40)}")`);
  }
  const rateText = one(query, 'sample_rate');
  const sampleRate = rateText === undefined ? STREAM_RATES.default : integer(rateText, 'sample_rate', STREAM_RATES.min, STREAM_RATES.max);
  const encoding = (one(query, 'encoding') ?? 'pcm_s16le') as LiveEncoding;
  if (!LIVE_ENCODINGS.includes(encoding)) {
    throw new StreamRefusal('invalid_request', `"encoding" must be one of ${LIVE_ENCODINGS.join(', ')} (got "${String(encoding).slice(0, 40)}")`);
  }
  const chText = one(query, 'channels');
  const channels = chText === undefined ? 1 : integer(chText, 'channels', 1, 2);
  const limitText = one(query, 'attenuation_limit_db');
  let attenuationLimitDb = defaultAttenuationLimitDb;
  if (limitText !== undefined) {
    const v = Number(limitText);
    if (limitText === '' || !Number.isFinite(v) || v < 0 || v > 100) {
      throw new StreamRefusal('invalid_request', `"attenuation_limit_db" must be a number from 0 to 100 (got "${limitText.slice(0, 40)}")`);
    }
    attenuationLimitDb = v;
  }
  return { model: model as ModelId, sampleRate, encoding, channels, attenuationLimitDb };
}

/** Bytes of one frame (all channels) of the stream's audio: 2 or 4 bytes a sample for PCM, 1 for μ-law and A-law. */
export function frameBytes(p: Pick<StreamParams, 'encoding' | 'channels'>): number {
  return LIVE_SAMPLE_BYTES[p.encoding] * p.channels;
}
