// Loudness targets on quiet speech (issue 29, item 2): a fixture scaled to −42.5 and −50 LUFS (a quiet far-field
// recording's levels) normalised to −16 LUFS in every output format, measured on the delivered files by ffmpeg's
// ebur128; loudness_target_reached true there, false on digital silence and where the limiter's budget runs out;
// the lift of a quiet input before the model; and nsm's warning line when a target is missed.
import { execFile, spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { loadConfig, PROJECT_ROOT } from '../../src/config';
import { LoudnessMeter } from '../../src/dsp/loudness';
import { createInferenceEngine } from '../../src/inference/runtime/engine';
import type { InferenceEngine } from '../../src/inference/types';
import { denoiseFile, type DenoiseStats, type OutputFormat } from '../../src/pipeline';
import { readPcm, writePcm } from '../../src/pipeline/clips';
import { MAX_LIMITER_COST_LU, MODEL_INPUT_NOMINAL_LUFS } from '../../src/pipeline/loudness';
import { fixture, makeTmpDir } from '../helpers/audio-helpers';

const config = loadConfig({ NODE_ENV: 'test', WORKERS: '1' } as NodeJS.ProcessEnv);
const LOSSY: Record<OutputFormat, boolean> = { wav: false, flac: false, mp3: true, opus: true, m4a: true };

/** ffmpeg's EBU R128 scanner on a file: integrated loudness (LUFS) and true peak (dBTP). */
function ebur128(file: string): Promise<{ integrated: number; truePeak: number }> {
  return new Promise((resolve, reject) => {
    execFile(config.ffmpegPath, ['-hide_banner', '-nostats', '-i', file, '-af', 'ebur128=peak=true', '-f', 'null', '-'], (err, _o, stderr) => {
      if (err) return reject(err);
      const summary = stderr.slice(stderr.lastIndexOf('Summary:'));
      const i = /I:\s+(-?[\d.]+|-inf) LUFS/.exec(summary);
      const p = /Peak:\s+(-?[\d.]+|-inf) dBFS/.exec(summary);
      if (!i || !p) return reject(new Error(`no ebur128 summary in: ${summary.slice(0, 400)}`));
      resolve({ integrated: Number(i[1].replace('-inf', '-Infinity')), truePeak: Number(p[1].replace('-inf', '-Infinity')) });
    });
  });
}

function nsm(args: string[]): Promise<{ code: number | null; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [path.join(PROJECT_ROOT, 'bin/nsm.js'), ...args], { stdio: ['ignore', 'ignore', 'pipe'], env: { ...process.env, WORKERS: '1' } });
    let stderr = '';
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, stderr }));
  });
}

let tmp: string;
let engine: InferenceEngine;
/** 16-bit WAVs of the fixture at these integrated loudnesses (what a quiet recorder writes). */
const quiet: Record<string, string> = {};

/** Writes `name`'s audio scaled to `lufs` (by this project's meter, which agrees with ffmpeg's to 0.1 LU). */
async function scaledCopy(name: string, rate: number, channels: number, lufs: number): Promise<string> {
  const planar = await readPcm(config, fixture(name), rate, channels);
  const meter = new LoudnessMeter(rate, channels);
  meter.push(planar);
  const k = Math.pow(10, (lufs - meter.integrated()!) / 20);
  const file = path.join(tmp, `${path.parse(name).name}_${lufs}.wav`);
  await writePcm(config, planar.map((ch) => ch.map((v) => v * k)), rate, file, ['-c:a', 'pcm_s16le', '-f', 'wav']);
  return file;
}

beforeAll(async () => {
  tmp = makeTmpDir('loudness-targets-');
  engine = await createInferenceEngine({ ...config, workers: 1 });
  for (const lufs of [-42.5, -50]) quiet[lufs] = await scaledCopy('speech-noisy-16k-mono.wav', 16000, 1, lufs);
  quiet.stereo = await scaledCopy('speech-noisy-44k1-stereo.wav', 44100, 2, -50);
});
afterAll(async () => {
  await engine.close();
  fs.rmSync(tmp, { recursive: true, force: true });
});

const run = (input: string, format: OutputFormat, loudnessLufs: number, name: string): Promise<DenoiseStats> =>
  denoiseFile({ config, engine }, input, path.join(tmp, `${name}.${format}`), {
    model: 'nsm-2',
    attenuationLimitDb: 0,
    outputFormat: format,
    keepInputSampleRate: true,
    loudnessLufs,
  });

describe('quiet speech reaches -16 LUFS in every format', () => {
  test('the inputs really are that quiet (ffmpeg)', async () => {
    expect(Math.abs((await ebur128(quiet[-42.5])).integrated + 42.5)).toBeLessThanOrEqual(0.15);
    expect(Math.abs((await ebur128(quiet[-50])).integrated + 50)).toBeLessThanOrEqual(0.15);
  });

  test.each(['wav', 'flac', 'mp3', 'opus', 'm4a'] as const)('%s: -16 LUFS ±1 by ffmpeg from -42.5 and -50 LUFS input, true peak under the ceiling', async (format) => {
    const ceiling = LOSSY[format] ? -2 : -1;
    for (const level of [-42.5, -50]) {
      const stats = await run(quiet[level], format, -16, `quiet${level}`);
      const measured = await ebur128(path.join(tmp, `quiet${level}.${format}`));
      const got = { level, integrated: measured.integrated, truePeak: measured.truePeak };
      expect([got, Math.abs(measured.integrated + 16) <= 1]).toEqual([got, true]);
      expect([got, measured.truePeak <= ceiling]).toEqual([got, true]);
      expect(stats).toMatchObject({ loudness_target_lufs: -16, loudness_target_reached: true });
      expect(Math.abs(stats.output_loudness_lufs! + 16)).toBeLessThanOrEqual(0.5);
      expect(Math.abs(stats.input_loudness_lufs! - level)).toBeLessThanOrEqual(0.2); // the file's own, not the lifted level
      // Lifted before the model to the models' level range (the fixture peaks far below -1 dBTP at these levels).
      expect(stats.loudness_input_gain_db).toBeCloseTo(MODEL_INPUT_NOMINAL_LUFS - stats.input_loudness_lufs!, 1);
      expect(stats.loudness_gain_db!).toBeGreaterThan(stats.loudness_input_gain_db!);
    }
  });

  test('a stereo 44.1 kHz recording at -50 LUFS, full band, to mp3: -16 LUFS ±1, true peak ≤ -2 dBTP', async () => {
    const stats = await run(quiet.stereo, 'mp3', -16, 'stereo');
    expect(stats).toMatchObject({ processing_sample_rate: 48000, channels: 2, loudness_target_reached: true });
    const measured = await ebur128(path.join(tmp, 'stereo.mp3'));
    expect(Math.abs(measured.integrated + 16)).toBeLessThanOrEqual(1);
    expect(measured.truePeak).toBeLessThanOrEqual(-2);
  });
});

describe('targets that cannot be met say so', () => {
  test('digital silence: nothing to measure, no gain, loudness_target_reached false', async () => {
    const silent = path.join(tmp, 'silent.wav');
    await writePcm(config, [new Float32Array(16000 * 2)], 16000, silent, ['-c:a', 'pcm_s16le', '-f', 'wav']);
    for (const format of ['wav', 'mp3'] as const) {
      const stats = await run(silent, format, -16, `silent-out`);
      expect(stats).toMatchObject({ output_loudness_lufs: null, loudness_gain_db: 0, loudness_input_gain_db: 0, loudness_target_reached: false });
    }
  });

  test(`-5 LUFS on speech would need the limiter to take far more than ${MAX_LIMITER_COST_LU} LU: false, and louder than -16 but not crushed`, async () => {
    const stats = await run(fixture('speech-noisy-16k-mono.wav'), 'wav', -5, 'crushed');
    expect(stats.loudness_target_reached).toBe(false);
    const measured = await ebur128(path.join(tmp, 'crushed.wav'));
    expect(measured.integrated).toBeLessThan(-5.5);
    expect(measured.integrated).toBeGreaterThan(-16);
    expect(measured.truePeak).toBeLessThanOrEqual(-1);
    expect(Math.abs(stats.output_loudness_lufs! - measured.integrated)).toBeLessThanOrEqual(0.2);
  });

  test('nsm denoise -l -16 warns on stderr when the target is missed, and only then', async () => {
    const silent = path.join(tmp, 'silent-cli.wav');
    await writePcm(config, [new Float32Array(16000 * 2)], 16000, silent, ['-c:a', 'pcm_s16le', '-f', 'wav']);
    for (const extra of [[], ['--quiet']]) {
      const missed = await nsm(['denoise', silent, '-l', '-16', '-o', path.join(tmp, 'cli-silent.mp3'), '--force', ...extra]);
      expect(missed.code).toBe(0);
      const warnings = missed.stderr.split('\n').filter((l) => l.startsWith('nsm: warning:'));
      expect(warnings).toEqual([expect.stringMatching(/^nsm: warning: .*silent-cli\.wav: loudness target -16 LUFS not reached: .*silent/)]);
    }
    const met = await nsm(['denoise', quiet[-42.5], '-l', '-16', '-o', path.join(tmp, 'cli-quiet.mp3'), '--force']);
    expect(met.code).toBe(0);
    expect(met.stderr).not.toMatch(/warning/);
  });
});
