// The form fields of POST /jobs: the /denoise parameters (checked by the same rules as /denoise), plus `url` or a
// `file` part, an optional echo reference (an `echo_reference` part or `echo_reference_url`), and an optional
// `webhook_url`.
import type { Config } from '../../config';
import { HttpError } from '../../model-service/http-error';
import { JOB_DENOISE_FIELDS, parseDenoiseParams } from '../../model-service/params';
import { SPEECH_FIELDS, speechJobFields } from '../../model-service/speech-params';
import { JobApiError } from './errors';
import type { JobParams } from '../types';
import { parseUserUrl, UrlNotAllowedError } from '../outbound/url-guard';

export const JOB_FIELDS = ['model', 'attenuation_limit_db', 'output_format', 'keep_input_sample_rate', 'loudness_lufs', 'loudness', ...SPEECH_FIELDS, 'url', 'echo_reference_url', 'webhook_url'];

export interface JobForm {
  params: JobParams;
  url: URL | null;
  /** The echo reference's address (`echo_reference_url`), fetched like `url`. */
  referenceUrl: URL | null;
  webhookUrl: URL | null;
}

function text(body: Record<string, unknown>, name: string): string | undefined {
  const value = body[name];
  if (value === undefined) return undefined;
  if (typeof value !== 'string') throw new JobApiError('invalid_request', `${name} was given more than once; send it once`);
  const trimmed = value.trim();
  return trimmed === '' ? undefined : trimmed;
}

/**
 * Checks the fields received so far. Called when the file part starts too, so a bad option sent before a large
 * file is refused before the file is stored.
 */
export function parseJobForm(config: Config, body: Record<string, unknown> | undefined): JobForm {
  const fields = body ?? {};
  for (const name of Object.keys(fields)) {
    if (JOB_FIELDS.includes(name)) continue;
    if (name === 'file' || name === 'echo_reference') throw new JobApiError('invalid_request', `"${name}" must be a file part (multipart/form-data with a filename), not a text field`);
    if (name === 'response') throw new JobApiError('invalid_request', '"response" does not apply to jobs: the result is fetched from the job\'s result URL');
    throw new JobApiError('invalid_request', `unknown field "${name}"; accepted fields: file, ${JOB_FIELDS.join(', ')}`);
  }
  const denoiseFields: Record<string, unknown> = {};
  for (const name of JOB_DENOISE_FIELDS) if (fields[name] !== undefined) denoiseFields[name] = fields[name];
  let parsed;
  try {
    parsed = parseDenoiseParams(config, 'single', denoiseFields);
  } catch (err) {
    if (err instanceof HttpError) throw new JobApiError('invalid_request', err.detail);
    throw err;
  }
  const urlText = text(fields, 'url');
  const referenceText = text(fields, 'echo_reference_url');
  const webhookText = text(fields, 'webhook_url');
  let url: URL | null = null;
  let referenceUrl: URL | null = null;
  let webhookUrl: URL | null = null;
  try {
    if (urlText !== undefined) url = parseUserUrl(urlText, 'url');
    if (referenceText !== undefined) referenceUrl = parseUserUrl(referenceText, 'echo_reference_url');
    if (webhookText !== undefined) webhookUrl = parseUserUrl(webhookText, 'webhook_url');
  } catch (err) {
    if (err instanceof UrlNotAllowedError) throw new JobApiError('url_not_allowed', err.message);
    throw err;
  }
  return {
    params: {
      model: parsed.model,
      attenuation_limit_db: parsed.attenuationLimitDb,
      output_format: parsed.video ? 'video' : parsed.outputFormat,
      keep_input_sample_rate: parsed.keepInputSampleRate,
      loudness_lufs: typeof parsed.loudnessLufs === 'number' ? parsed.loudnessLufs : null,
      ...(parsed.loudnessLufs === 'keep' ? { loudness: 'keep' as const } : {}),
      ...speechJobFields(parsed.speech),
    },
    url,
    referenceUrl,
    webhookUrl,
  };
}
