// The line `nsm denoise` prints per file on stderr: where it went and what it became (stats.ts's DenoiseStats).
import type { DenoiseStats } from '../pipeline';

/** A job of `nsm denoise`: its input and output paths ('-': standard input or output). */
interface Job {
  input: string;
  output: string;
}

export const shown = (p: string, stdio: 'stdin' | 'stdout'): string => (p === '-' ? stdio : p);

/** A level change in dB, signed as heard: −12.0 removed, +3.5 added (a negative figure printed "−-3.5" before). */
const change = (removedDb: number): string => (removedDb >= 0 ? `−${removedDb.toFixed(1)}` : `+${(-removedDb).toFixed(1)}`);

/** One line per file on stderr: where it went and what it became. */
export function summaryLine(job: Job, stats: DenoiseStats): string {
  const ch = stats.channels === 1 ? 'mono' : stats.channels === 2 ? 'stereo' : `${stats.channels} ch`;
  const lufs = (v: number | null) => (v === null ? 'silent' : `${v.toFixed(1)} LUFS`);
  const loudness = stats.loudness_target_lufs !== undefined
    ? `, loudness ${lufs(stats.input_loudness_lufs)} → ${lufs(stats.output_loudness_lufs)} (target ${stats.loudness_target_lufs}, peak ${stats.output_true_peak_dbtp === null || stats.output_true_peak_dbtp === undefined ? '–' : stats.output_true_peak_dbtp.toFixed(1) + ' dBTP'})`
    : `, loudness ${lufs(stats.input_loudness_lufs)} → ${lufs(stats.output_loudness_lufs)}`;
  const noise = stats.noise_removed_db === null ? '' : `, noise ${change(stats.noise_removed_db)} dB`;
  const speech = stats.speech_s === undefined ? '' : `, speech ${stats.speech_s.toFixed(2)} s in ${stats.speech_segment_count} segment${stats.speech_segment_count === 1 ? '' : 's'}`;
  const trim = stats.silence_removed_s === undefined ? '' : `, pauses trimmed by ${stats.silence_removed_s.toFixed(2)} s to ${stats.output_duration_s?.toFixed(2)} s`;
  const echo = !stats.echo_reference ? ''
    : !stats.echo_reference_active ? ', echo reference silent (nothing removed)'
    : `, echo ${stats.echo_erle_db === null || stats.echo_erle_db === undefined ? '−?' : change(stats.echo_erle_db)} dB (delay ${stats.echo_delay_ms === null || stats.echo_delay_ms === undefined ? 'not found' : `${stats.echo_delay_ms} ms`})`;
  return `wrote ${shown(job.output, 'stdout')} (from ${shown(job.input, 'stdin')}): ${stats.duration_s.toFixed(2)} s ${ch} ` +
    `${stats.output_sample_rate} Hz ${stats.output_format}, ${stats.model}, ${stats.processing_s.toFixed(2)} s (rtf ${stats.rtf.toFixed(3)})` +
    loudness + noise + speech + trim + echo;
}
