// Loudness presets (issue 39, item 4): `loudness=podcast|broadcast|keep` on /denoise, batch, jobs and `nsm --loudness`;
// `keep` normalises the cleaned audio to the input's speech loudness (the input's blocks where the cleaned output holds
// speech, BS.1770-gated), where cleaned speech otherwise comes out quieter. Delivered files measured by ffmpeg's
// ebur128. Without the field nothing changes (byte-identical: the md5 comparison in the branch's report).
import { execFile, spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import request from 'supertest';
import { createApp, type AppHandle } from '../../src/app';
import { loadConfig, PROJECT_ROOT, type Config } from '../../src/config';
import { lufsOf } from '../../src/dsp/loudness';
import { createInferenceEngine } from '../../src/inference/runtime/engine';
import type { InferenceEngine } from '../../src/inference/types';
import type { JobView } from '../../src/jobs/views';
import { parseDenoiseParams } from '../../src/model-service/params';
import { denoiseFile } from '../../src/pipeline';
import { keepTarget } from '../../src/pipeline/loudness';
import { fixture, makeTmpDir } from '../helpers/audio-helpers';
import { until } from '../helpers/jobs-helpers';
import { createToken, testConfig } from '../helpers/service-helpers';

jest.setTimeout(120_000);
const config = loadConfig({ NODE_ENV: 'test', WORKERS: '1' } as NodeJS.ProcessEnv);
const NOISY = fixture('speech-noisy-44k1-stereo.flac');
const API = '/v1/noise-suppressor';

function ebur128(file: string): Promise<number> {
  return new Promise((resolve, reject) => {
    execFile(config.ffmpegPath, ['-hide_banner', '-nostats', '-i', file, '-af', 'ebur128', '-f', 'null', '-'], (err, _o, stderr) => {
      if (err) return reject(err);
      const i = /I:\s+(-?[\d.]+) LUFS/.exec(stderr.slice(stderr.lastIndexOf('Summary:')));
      if (!i) return reject(new Error('no ebur128 summary'));
      resolve(Number(i[1]));
    });
  });
}

/** The mean square of a 400 ms block at `lufs`. */
const block = (lufs: number): number => Math.pow(10, (lufs + 0.691) / 10);

describe('keepTarget', () => {
  test("the input's loudness over the blocks where the output holds speech, not over its noise", () => {
    // Ten speech blocks (input −20, cleaned −22) and ten of noise alone (input −28, cleaned −60).
    const input = Float64Array.from([...Array(10).fill(block(-20)), ...Array(10).fill(block(-28))]);
    const output = Float64Array.from([...Array(10).fill(block(-22)), ...Array(10).fill(block(-60))]);
    expect(keepTarget(input, output)).toBeCloseTo(-20, 6);
    // BS.1770 over the whole input keeps the noise blocks (above its relative gate): it reads lower.
    expect(lufsOf((10 * block(-20) + 10 * block(-28)) / 20)).toBeLessThan(-22);
    expect(keepTarget(input, new Float64Array(20))).toBeNull();
  });

  test('the field: presets, and refusals that name it', () => {
    const parse = (fields: Record<string, string>) => parseDenoiseParams(config, 'single', fields).loudnessLufs;
    expect(parse({ loudness: 'podcast' })).toBe(-16);
    expect(parse({ loudness: 'Broadcast' })).toBe(-23);
    expect(parse({ loudness: 'keep' })).toBe('keep');
    expect(parse({})).toBeNull();
    expect(() => parse({ loudness: 'loud' })).toThrow(/loudness must be "podcast" \(-16 LUFS\), "broadcast" \(-23 LUFS\) or "keep"/);
    expect(() => parse({ loudness: 'keep', loudness_lufs: '-16' })).toThrow('send loudness or loudness_lufs, not both');
  });
});

describe('keep on real noisy speech', () => {
  let engine: InferenceEngine;
  let tmp: string;
  beforeAll(async () => {
    tmp = makeTmpDir('nsm-loudness-keep-');
    engine = await createInferenceEngine(config);
  });
  afterAll(async () => {
    await engine?.close();
    fs.rmSync(tmp, { recursive: true, force: true });
  });

  test('the cleaned file is as loud as the input speech; without a target it comes out quieter', async () => {
    const base = { model: 'nsm-2' as const, attenuationLimitDb: 0, outputFormat: 'wav' as const, keepInputSampleRate: true };
    const plain = path.join(tmp, 'plain.wav');
    const kept = path.join(tmp, 'kept.wav');
    const plainStats = await denoiseFile({ config, engine }, NOISY, plain, base);
    const keptStats = await denoiseFile({ config, engine }, NOISY, kept, { ...base, loudnessLufs: 'keep' });
    expect(plainStats.loudness_target_lufs).toBeUndefined();
    const target = keptStats.loudness_target_lufs!;
    expect(typeof target).toBe('number');
    expect(keptStats.loudness_target_reached).toBe(true);
    // The target is the input's speech: at least its whole-file loudness, at most a few LU above.
    const input = keptStats.input_loudness_lufs!;
    expect(target).toBeGreaterThanOrEqual(input - 0.5);
    expect(target).toBeLessThan(input + 4);
    const [plainLufs, keptLufs] = [await ebur128(plain), await ebur128(kept)];
    expect(Math.abs(keptLufs - target)).toBeLessThan(0.6);
    // This 3 s clip is speech from end to end: 1.2 LU here (0 to 4.3 LU on the dns3-real recordings, docs/api.md).
    expect(keptLufs - plainLufs).toBeGreaterThan(0.8);
  });
});

describe('through the API, jobs and the CLI', () => {
  let appConfig: Config;
  let handle: AppHandle;
  let token: string;
  beforeAll(async () => {
    const base = testConfig();
    appConfig = { ...base, jobs: { ...base.jobs } };
    handle = await createApp(appConfig, { log: () => undefined });
    token = await createToken(handle.store, ['*']);
  });
  afterAll(async () => {
    await handle.close();
    fs.rmSync(appConfig.dataDir, { recursive: true, force: true });
  });
  const auth = () => ({ Authorization: `Bearer ${token}` });

  test('/denoise podcast and broadcast, batch keep, 400 for both fields', async () => {
    for (const [preset, lufs] of [['podcast', -16], ['broadcast', -23]] as const) {
      const res = await request(handle.app).post(`${API}/denoise`).set(auth()).field('loudness', preset).attach('file', NOISY);
      expect(res.status).toBe(200);
      const stats = JSON.parse(res.headers['x-ns-stats']);
      expect([stats.loudness_target_lufs, stats.loudness_target_reached]).toEqual([lufs, true]);
    }
    const batch = await request(handle.app).post(`${API}/denoise/batch`).set(auth()).field('loudness', 'keep').field('response', 'json').attach('files', NOISY);
    expect(batch.status).toBe(200);
    expect(batch.body.items[0].stats.loudness_target_reached).toBe(true);
    expect(batch.body.items[0].stats.loudness_target_lufs).toBeGreaterThan(batch.body.items[0].stats.input_loudness_lufs - 0.5);
    const both = await request(handle.app).post(`${API}/denoise`).set(auth()).field('loudness', 'keep').field('loudness_lufs', '-16').attach('file', NOISY);
    expect(both.status).toBe(400);
  });

  test('a job with loudness=keep shows it in its params and its result reaches the target', async () => {
    const res = await request(handle.app).post(`${API}/jobs`).set(auth()).field('loudness', 'keep').attach('file', NOISY);
    expect(res.status).toBe(202);
    expect(res.body.params).toMatchObject({ loudness: 'keep', loudness_lufs: null });
    const done = await until(async () => {
      const job = (await request(handle.app).get(`${API}/jobs/${res.body.id}`).set(auth())).body as JobView;
      return job.status === 'succeeded' || job.status === 'failed' ? job : undefined;
    }, 60_000);
    expect(done.status).toBe('succeeded');
    const stats = done.stats as unknown as { loudness_target_lufs: number; loudness_target_reached: boolean };
    expect(stats.loudness_target_reached).toBe(true);
  });

  test('nsm denoise --loudness keep and podcast', async () => {
    const out = path.join(appConfig.dataDir, 'cli-keep.wav');
    const run = (args: string[]) =>
      new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve) => {
        const child = spawn(process.execPath, [path.join(PROJECT_ROOT, 'bin/nsm.js'), ...args], { env: { ...process.env, WORKERS: '1' } });
        let stdout = '';
        let stderr = '';
        child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
        child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
        child.on('close', (code) => resolve({ code, stdout, stderr }));
      });
    const keep = await run(['denoise', NOISY, '-o', out, '--loudness', 'keep', '--json', '-q']);
    expect(keep.code).toBe(0);
    const stats = JSON.parse(keep.stdout.trim().split('\n').pop()!).stats ?? JSON.parse(keep.stdout.trim().split('\n').pop()!);
    expect(stats.loudness_target_reached).toBe(true);
    const bad = await run(['denoise', NOISY, '-o', out, '--loudness', 'loud', '--force']);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toMatch(/--loudness must be a number from -40 to -5 \(LUFS\), podcast, broadcast or keep, got "loud"/);
  });
});
