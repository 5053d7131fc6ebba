// `nsm denoise`'s line per file (cli/denoise-summary.ts): level changes keep one sign each way, so an echo made louder
// (a reference the microphone never heard) reads "+58.2 dB", not "−-58.2 dB" as it did.
import { summaryLine } from '../../src/cli/denoise-summary';
import type { DenoiseStats } from '../../src/pipeline';

const stats = (over: Partial<DenoiseStats>): DenoiseStats =>
  ({
    duration_s: 6, processing_s: 0.6, rtf: 0.1, model: 'nsm-2', input_sample_rate: 16000, output_sample_rate: 16000,
    model_sample_rate: 16000, channels: 1, input_codec: 'pcm_s16le', output_format: 'wav', attenuation_limit_db: 0,
    processing_sample_rate: 16000, bands: [], input_loudness_lufs: -21.4, output_loudness_lufs: -30, noise_removed_db: 12.34,
    ...over,
  }) as DenoiseStats;

const job = { input: 'mic.wav', output: 'clean.wav' };

test('removed reads −, added reads +, unknown reads −?', () => {
  expect(summaryLine(job, stats({}))).toContain(', noise −12.3 dB');
  expect(summaryLine(job, stats({ noise_removed_db: -3.46 }))).toContain(', noise +3.5 dB');
  const echo = { echo_reference: true as const, echo_reference_active: true, echo_delay_ms: 48 };
  expect(summaryLine(job, stats({ ...echo, echo_erle_db: 31.84 }))).toContain(', echo −31.8 dB (delay 48 ms)');
  expect(summaryLine(job, stats({ ...echo, echo_erle_db: -58.2 }))).toContain(', echo +58.2 dB (delay 48 ms)');
  expect(summaryLine(job, stats({ ...echo, echo_erle_db: null }))).toContain(', echo −? dB');
  expect(summaryLine(job, stats({ echo_reference: true as const, echo_reference_active: false }))).toContain('echo reference silent');
});
