// The speech fields of /denoise, /denoise/batch and jobs (docs/speech.md): speech_segments, trim_silence and their
// settings, checked against the bounds of src/vad/options.ts; every failure names the field and the rule. A job
// stores what they resolved to (speechJobFields) and the runner sends that back here in the query.
import fs from 'node:fs';
import path from 'node:path';
import type { Config } from '../config';
import {
  TRIM_DEFAULT_MAX_PAUSE_S,
  TRIM_MAX_PAUSE_BOUNDS,
  VAD_BOUNDS,
  VAD_DEFAULTS,
  type SpeechRequest,
  type SpeechSegment,
  type VadOptions,
} from '../vad/options';
import { VAD_FILE } from '../vad/silero-graph';
import { badRequest, unprocessable } from './http-error';

export const SPEECH_FIELDS = ['speech_segments', 'trim_silence', 'trim_silence_max_pause_s', 'vad_threshold', 'vad_min_speech_ms', 'vad_hangover_ms'];

const NUMERIC: Array<{ field: string; key: keyof VadOptions | 'maxPause'; min: number; max: number; unit: string }> = [
  { field: 'trim_silence_max_pause_s', key: 'maxPause', ...TRIM_MAX_PAUSE_BOUNDS, unit: 'seconds' },
  { field: 'vad_threshold', key: 'threshold', ...VAD_BOUNDS.threshold, unit: 'a speech probability' },
  { field: 'vad_min_speech_ms', key: 'minSpeechMs', ...VAD_BOUNDS.minSpeechMs, unit: 'milliseconds' },
  { field: 'vad_hangover_ms', key: 'hangoverMs', ...VAD_BOUNDS.hangoverMs, unit: 'milliseconds' },
];

const NUMBER = /^[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?$/;

function text(fields: Record<string, unknown>, name: string): string | undefined {
  const value = fields[name];
  if (value === undefined) return undefined;
  if (typeof value !== 'string') throw badRequest(`${name} was given more than once; send it once`);
  const trimmed = value.trim();
  return trimmed === '' ? undefined : trimmed;
}

function bool(fields: Record<string, unknown>, name: string): boolean {
  const raw = text(fields, name)?.toLowerCase();
  if (raw === undefined || raw === 'false' || raw === '0') return false;
  if (raw === 'true' || raw === '1') return true;
  throw badRequest(`${name} must be a boolean (true, false, 1 or 0), got "${text(fields, name)}"`);
}

/** The speech request of a call, or null when it asks for neither segments nor trimming. */
export function parseSpeechFields(fields: Record<string, unknown>): SpeechRequest | null {
  const segments = bool(fields, 'speech_segments');
  const trim = bool(fields, 'trim_silence');
  const values: Partial<Record<keyof VadOptions | 'maxPause', number>> = {};
  for (const { field, key, min, max, unit } of NUMERIC) {
    const raw = text(fields, field);
    if (raw === undefined) continue;
    const n = NUMBER.test(raw) ? Number(raw) : NaN;
    if (!(n >= min && n <= max)) throw badRequest(`${field} must be a number from ${min} to ${max} (${unit}), got "${raw}"`);
    values[key] = n;
  }
  if (values.maxPause !== undefined && !trim) throw badRequest('trim_silence_max_pause_s applies only with trim_silence=true');
  const tuned = NUMERIC.filter((n) => n.key !== 'maxPause' && values[n.key] !== undefined).map((n) => n.field);
  if (tuned.length > 0 && !segments && !trim) {
    throw badRequest(`${tuned.join(', ')} ${tuned.length > 1 ? 'apply' : 'applies'} only with speech_segments=true or trim_silence=true`);
  }
  if (!segments && !trim) return null;
  return {
    segments,
    trimMaxPauseS: trim ? (values.maxPause ?? TRIM_DEFAULT_MAX_PAUSE_S) : null,
    vad: {
      threshold: values.threshold ?? VAD_DEFAULTS.threshold,
      minSpeechMs: values.minSpeechMs ?? VAD_DEFAULTS.minSpeechMs,
      hangoverMs: values.hangoverMs ?? VAD_DEFAULTS.hangoverMs,
    },
  };
}

/** A job's speech fields as stored in its params (and sent to the model service): what the request resolved to. */
export function speechJobFields(req: SpeechRequest | null): Record<string, boolean | number> {
  if (!req) return {};
  return {
    speech_segments: req.segments,
    trim_silence: req.trimMaxPauseS !== null,
    ...(req.trimMaxPauseS !== null ? { trim_silence_max_pause_s: req.trimMaxPauseS } : {}),
    vad_threshold: req.vad.threshold,
    vad_min_speech_ms: req.vad.minSpeechMs,
    vad_hangover_ms: req.vad.hangoverMs,
  };
}

/** The `speech_segments` member of a response, a batch item or a job result: present only when they were asked for. */
export interface WithSpeechSegments {
  speech_segments?: SpeechSegment[];
}

export function speechOf(segments: SpeechSegment[] | undefined): WithSpeechSegments {
  return segments ? { speech_segments: segments } : {};
}

/** Speech detection needs models/silero_vad.onnx: without it the request is fine, the server lacks the graph. */
export function assertVadInstalled(config: Config): void {
  if (!fs.existsSync(path.join(config.modelsDir, VAD_FILE))) {
    throw unprocessable(`speech detection is not installed on this server (${VAD_FILE} is missing: run \`npm run models\`)`, 'model_not_installed');
  }
}
