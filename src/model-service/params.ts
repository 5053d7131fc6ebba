// Validation of the text fields of POST /denoise and /denoise/batch; every failure names the field and the rule.
import type { Config } from '../config';
import { MODEL_IDS, type ModelId } from '../inference/types';
import { isModelId, loadCatalog } from './catalog';
import { isOutputFormat, OUTPUT_FORMATS, type OutputFormat } from '../audio/formats';
import { LOUDNESS_PRESETS, LOUDNESS_RANGE } from '../dsp/normalize';
import { badRequest, unprocessable } from './http-error';
import { assertVadInstalled, parseSpeechFields, SPEECH_FIELDS } from './speech-params';
import type { SpeechRequest } from '../vad/options';

export type { OutputFormat };

export { LOUDNESS_RANGE };
export { speechOf, type WithSpeechSegments } from './speech-params';
export type { SpeechSegment } from '../vad/options';

export interface DenoiseParams {
  model: ModelId;
  attenuationLimitDb: number;
  outputFormat: OutputFormat;
  /** `output_format=video`: the input's container back with the audio cleaned (src/video); outputFormat is unused. */
  video: boolean;
  /** Normalise to this integrated loudness (LUFS), or to the input's speech loudness ('keep'); null: no normalisation. */
  loudnessLufs: number | 'keep' | null;
  keepInputSampleRate: boolean;
  response: string; // 'audio' | 'json' for /denoise, 'zip' | 'json' for /denoise/batch
  /** speech_segments / trim_silence (speech-params.ts); null: neither. */
  speech: SpeechRequest | null;
}

export type EndpointKind = 'single' | 'batch';

export const COMMON_FIELDS = ['model', 'attenuation_limit_db', 'output_format', 'keep_input_sample_rate', 'response', 'loudness_lufs', 'loudness', ...SPEECH_FIELDS];
const RESPONSES: Record<EndpointKind, string[]> = { single: ['audio', 'json'], batch: ['zip', 'json'] };
export const FILE_FIELD: Record<EndpointKind, string> = { single: 'file', batch: 'files' };
/** The optional second file part of /denoise and jobs: what the loudspeaker played (docs/echo.md). */
export const ECHO_REFERENCE_FIELD = 'echo_reference';

/** The /denoise fields a job takes (everything but `response`); job-stream.ts reads the same for a job's input. */
export const JOB_DENOISE_FIELDS = ['model', 'attenuation_limit_db', 'output_format', 'keep_input_sample_rate', 'loudness_lufs', 'loudness', ...SPEECH_FIELDS];

const NUMBER = /^[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?$/;

/** One text value; an empty string counts as omitted (what `curl -F x=` and empty form inputs send). */
function single(body: Record<string, unknown>, name: string): string | undefined {
  const value = body[name];
  if (value === undefined) return undefined;
  if (typeof value !== 'string') throw badRequest(`${name} was given more than once; send it once`);
  const trimmed = value.trim();
  return trimmed === '' ? undefined : trimmed;
}

/**
 * Checks the fields received so far and fills in defaults. It is also called when a file part starts, before the
 * rest of the body has arrived, so a bad option that precedes the file is rejected before a large upload is stored.
 */
export function parseDenoiseParams(
  config: Config,
  kind: EndpointKind,
  body: Record<string, unknown> | undefined,
): DenoiseParams {
  const fields = body ?? {};
  for (const name of Object.keys(fields)) {
    if (COMMON_FIELDS.includes(name)) continue;
    if (name === ECHO_REFERENCE_FIELD && kind === 'batch') {
      throw badRequest(`"${ECHO_REFERENCE_FIELD}" is not taken by /denoise/batch: send each file with its reference to /denoise, or as a job`);
    }
    if (name === FILE_FIELD[kind] || name === 'file' || name === 'files' || name === ECHO_REFERENCE_FIELD) {
      throw badRequest(`"${name}" must be a file part (multipart/form-data with a filename), not a text field`);
    }
    const files = kind === 'single' ? `${FILE_FIELD[kind]}, ${ECHO_REFERENCE_FIELD}` : FILE_FIELD[kind];
    throw badRequest(`unknown field "${name}"; accepted fields: ${files}, ${COMMON_FIELDS.join(', ')}`);
  }

  const modelRaw = single(fields, 'model');
  let model: ModelId;
  if (modelRaw === undefined) {
    model = loadCatalog(config).default;
  } else if (!isModelId(modelRaw)) {
    throw badRequest(`unknown model "${modelRaw}"; use one of ${MODEL_IDS.join(', ')}`);
  } else {
    model = modelRaw;
  }

  const attenuationRaw = single(fields, 'attenuation_limit_db');
  let attenuationLimitDb = config.defaultAttenuationLimitDb;
  if (attenuationRaw !== undefined) {
    if (!NUMBER.test(attenuationRaw)) {
      throw badRequest(`attenuation_limit_db must be a number from 0 to 100, got "${attenuationRaw}"`);
    }
    attenuationLimitDb = Number(attenuationRaw);
    if (!(attenuationLimitDb >= 0 && attenuationLimitDb <= 100)) {
      throw badRequest(`attenuation_limit_db must be from 0 to 100, got ${attenuationRaw}`);
    }
  }

  const formatRaw = single(fields, 'output_format')?.toLowerCase();
  const video = formatRaw === 'video';
  if (video && kind === 'batch') throw badRequest('output_format=video is for /denoise and jobs, not batches: send each video alone');
  if (formatRaw !== undefined && !video && !isOutputFormat(formatRaw)) {
    throw badRequest(
      `output_format must be one of ${[...OUTPUT_FORMATS, ...(kind === 'single' ? ['video'] : [])].map((f) => `"${f}"`).join(', ')}, got "${single(fields, 'output_format')}"`,
    );
  }
  const outputFormat: OutputFormat = video ? 'wav' : ((formatRaw as OutputFormat | undefined) ?? 'wav');

  const loudnessRaw = single(fields, 'loudness_lufs');
  let loudnessLufs: number | 'keep' | null = null;
  if (loudnessRaw !== undefined) {
    const n = NUMBER.test(loudnessRaw) ? Number(loudnessRaw) : NaN;
    if (!(n >= LOUDNESS_RANGE.min && n <= LOUDNESS_RANGE.max)) {
      throw badRequest(
        `loudness_lufs must be a number from ${LOUDNESS_RANGE.min} to ${LOUDNESS_RANGE.max} (integrated loudness in LUFS, e.g. -16), got "${loudnessRaw}"`,
      );
    }
    loudnessLufs = n;
  }

  const presetRaw = single(fields, 'loudness')?.toLowerCase();
  if (presetRaw !== undefined) {
    if (!Object.hasOwn(LOUDNESS_PRESETS, presetRaw)) {
      throw badRequest(`loudness must be "podcast" (-16 LUFS), "broadcast" (-23 LUFS) or "keep" (the input's speech loudness), got "${single(fields, 'loudness')}"`);
    }
    if (loudnessRaw !== undefined) throw badRequest('send loudness or loudness_lufs, not both');
    loudnessLufs = LOUDNESS_PRESETS[presetRaw as keyof typeof LOUDNESS_PRESETS];
  }

  const keepRaw = single(fields, 'keep_input_sample_rate')?.toLowerCase();
  let keepInputSampleRate = true;
  if (keepRaw !== undefined) {
    if (keepRaw === 'true' || keepRaw === '1') keepInputSampleRate = true;
    else if (keepRaw === 'false' || keepRaw === '0') keepInputSampleRate = false;
    else {
      throw badRequest(
        `keep_input_sample_rate must be a boolean (true, false, 1 or 0), got "${single(fields, 'keep_input_sample_rate')}"`,
      );
    }
  }

  const allowed = RESPONSES[kind];
  const responseRaw = single(fields, 'response')?.toLowerCase();
  if (responseRaw !== undefined && !allowed.includes(responseRaw)) {
    throw badRequest(`response must be "${allowed[0]}" or "${allowed[1]}", got "${single(fields, 'response')}"`);
  }
  const response = responseRaw ?? allowed[0];

  const speech = parseSpeechFields(fields);
  // Shortened sound under an untouched picture would lose sync.
  if (video && speech?.trimMaxPauseS != null) throw badRequest('trim_silence does not apply to output_format=video: the video keeps its length');
  return { model, attenuationLimitDb, outputFormat, video, loudnessLufs, keepInputSampleRate, response, speech };
}

/**
 * A known model id whose graph files are missing cannot run here: the request is fine, the server lacks it. The same
 * for speech detection's graph when the call asks for it.
 */
export function assertModelInstalled(config: Config, model: ModelId, speech: SpeechRequest | null = null): void {
  if (speech) assertVadInstalled(config);
  const record = loadCatalog(config).models.find((m) => m.id === model);
  if (!record?.available) {
    throw unprocessable(`model "${model}" is not installed on this server (run \`npm run models\`)`, 'model_not_installed');
  }
}
