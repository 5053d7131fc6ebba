// MAX_DECODED_SAMPLES (issue 35, #6): a 208 KB FLAC of 8 min of 384 kHz 7.1 silence used to decode to a 2.95 GB WAV
// (1 credit). Now it is refused from the probe before anything is decoded, over HTTP as 413 payload_too_large with the
// reason, no credit and no temp file; the cap also holds while decoding, and a file exactly at it passes.
import fs from 'node:fs';
import path from 'node:path';
import request from 'supertest';
import { createApp, type AppHandle } from '../../src/app';
import { loadConfig, type Config } from '../../src/config';
import { spawnFfmpeg, waitForExit } from '../../src/audio/ffmpeg';
import { checkDecodedDuration, checkInputLimits } from '../../src/audio/limits';
import { createInferenceEngine } from '../../src/inference/runtime/engine';
import type { InferenceEngine } from '../../src/inference/types';
import { AudioTooLongError, denoiseFile, type DenoiseFileOptions } from '../../src/pipeline';
import { childProcesses, makeTmpDir } from '../helpers/audio-helpers';
import { createToken, eventually, testConfig, tmpEntries } from '../helpers/service-helpers';

jest.setTimeout(180_000);

const config = loadConfig();
const base: DenoiseFileOptions = { model: 'nsm-2', attenuationLimitDb: 0, outputFormat: 'wav', keepInputSampleRate: true };
let tmp: string;
let bomb: string;

async function ffmpeg(args: string[]): Promise<void> {
  const child = spawnFfmpeg(config.ffmpegPath, ['-loglevel', 'error', ...args]);
  child.stdin!.end();
  const stderr: Buffer[] = [];
  child.stderr!.on('data', (d: Buffer) => stderr.push(d));
  const { code } = await waitForExit(child);
  if (code !== 0) throw new Error(`ffmpeg failed: ${Buffer.concat(stderr).toString()}`);
}

beforeAll(async () => {
  tmp = makeTmpDir('nsm-sample-cap-');
  bomb = path.join(tmp, 'bomb.flac');
  // The audit's file: 8 min of 384 kHz 7.1 silence, 1,474,560,000 samples in about 208 KB.
  await ffmpeg(['-f', 'lavfi', '-i', 'anullsrc=r=384000:cl=7.1', '-t', '480', '-c:a', 'flac', '-y', bomb]);
});
afterAll(() => fs.rmSync(tmp, { recursive: true, force: true }));

describe('the cap, as arithmetic', () => {
  test('the default is 4 h of 48 kHz stereo: exactly that passes, a second more does not', () => {
    expect(config.maxDecodedSamples).toBe(4 * 3600 * 48000 * 2);
    expect(() => checkInputLimits(config, { sampleRate: 48000, channels: 2, durationS: 4 * 3600 })).not.toThrow();
    // The same samples in another shape: 1 h of 48 kHz 7.1 and 7.5 min of 384 kHz 7.1.
    expect(() => checkInputLimits(config, { sampleRate: 48000, channels: 8, durationS: 3600 })).not.toThrow();
    expect(() => checkInputLimits(config, { sampleRate: 384000, channels: 8, durationS: 450 })).not.toThrow();
    const over = { ...config, maxAudioSeconds: 5 * 3600 };
    expect(() => checkInputLimits(over, { sampleRate: 48000, channels: 2, durationS: 4 * 3600 + 1 })).toThrow(AudioTooLongError);
  });

  test('while decoding: the samples decoded so far, with a frame of slack', () => {
    const shape = { sampleRate: 384000, channels: 8 };
    expect(() => checkDecodedDuration(config, 450, shape)).not.toThrow();
    const err = (() => {
      try {
        checkDecodedDuration(config, 452, shape);
      } catch (e) {
        return e as AudioTooLongError;
      }
      return null;
    })();
    expect(err).toBeInstanceOf(AudioTooLongError);
    expect(err!.status).toBe(413);
    expect(err!.message).toBe(
      'audio too large: it decodes to more than 1.38 billion samples over all channels, the most accepted per file (MAX_DECODED_SAMPLES: e.g. 4 h of 48 kHz stereo)',
    );
  });
});

describe('the 208 KB bomb', () => {
  let engine: InferenceEngine;
  beforeAll(async () => {
    engine = await createInferenceEngine({ ...config, workers: 1 });
  });
  afterAll(async () => {
    await engine?.close();
  });

  test('refused from the probe before decoding: 413 with the reason, no output, no decoder left', async () => {
    expect(fs.statSync(bomb).size).toBeLessThan(300_000);
    const out = path.join(tmp, 'bomb-out.wav');
    let progressed = 0;
    const t0 = Date.now();
    const err = await denoiseFile({ config, engine }, bomb, out, { ...base, onProgress: (d) => (progressed = d) }).catch((e) => e);
    expect(err).toBeInstanceOf(AudioTooLongError);
    expect(err.status).toBe(413);
    expect(err.message).toBe(
      'audio too large: 8 min of 384000 Hz × 8 channels is more than 1.38 billion samples over all channels, the most accepted per file (MAX_DECODED_SAMPLES: e.g. 4 h of 48 kHz stereo)',
    );
    // Nothing reached the engine or the disk (decoding the file to its end takes minutes here).
    expect(progressed).toBe(0);
    expect(engine.state().streams).toBe(0);
    expect(fs.existsSync(out)).toBe(false);
    expect(Date.now() - t0).toBeLessThan(30_000);
    expect(childProcesses().filter((c) => c.comm === 'ffmpeg' || c.comm === 'ffprobe')).toEqual([]);
  });

  test('a file whose probe and packets lie is stopped while decoding', async () => {
    // 20 s of FLAC whose timestamps were scaled by 0.1 on the way into Matroska: ffprobe and the packet scan say 2 s,
    // the decoder gives all 20 s.
    const long = path.join(tmp, 'long.flac');
    const liar = path.join(tmp, 'liar.mkv');
    await ffmpeg(['-f', 'lavfi', '-i', 'sine=f=300:r=48000:d=20', '-c:a', 'flac', '-y', long]);
    await ffmpeg(['-itsscale', '0.1', '-i', long, '-c', 'copy', '-y', liar]);
    const capped = { ...config, maxDecodedSamples: 5 * 48000 };
    const out = path.join(tmp, 'liar-out.wav');
    let progressed = 0;
    const err = await denoiseFile({ config: capped, engine }, liar, out, { ...base, onProgress: (d) => (progressed = d) }).catch((e) => e);
    expect(err).toBeInstanceOf(AudioTooLongError);
    expect(err.message).toMatch(/^audio too large: it decodes to more than 240000 samples over all channels/);
    // Stopped at the first chunk past the cap (8 s chunks), not at the end of the 20 s.
    expect(progressed).toBeLessThanOrEqual(8);
    expect(fs.existsSync(out)).toBe(false);
  });

  test('a lower MAX_DECODED_SAMPLES refuses a real clip the default accepts', async () => {
    const clip = path.join(tmp, 'tone.flac');
    await ffmpeg(['-f', 'lavfi', '-i', 'sine=f=440:r=48000:d=2', '-ac', '2', '-c:a', 'flac', '-y', clip]);
    const stats = await denoiseFile({ config, engine }, clip, path.join(tmp, 'tone-ok.wav'), base);
    expect(stats.duration_s).toBeCloseTo(2, 1);
    const err = await denoiseFile({ config: { ...config, maxDecodedSamples: 100_000 }, engine }, clip, path.join(tmp, 'tone-no.wav'), base).catch((e) => e);
    expect(err).toBeInstanceOf(AudioTooLongError);
    expect(err.message).toMatch(/^audio too large: 2 s of 48000 Hz × 2 channels is more than 100000 samples/);
  });
});

describe('over HTTP', () => {
  let appConfig: Config;
  let handle: AppHandle;
  let token: string;
  let workspaceId: string;

  beforeAll(async () => {
    appConfig = testConfig();
    handle = await createApp(appConfig, { log: () => undefined });
    token = await createToken(handle.store, ['*']);
    workspaceId = (await handle.store.listWorkspaces())[0].id;
  });
  afterAll(async () => {
    await handle.close();
    fs.rmSync(appConfig.dataDir, { recursive: true, force: true });
  });

  test('/denoise and /denoise/batch: 413 payload_too_large with the reason, no credit, no temp file left', async () => {
    const before = await handle.store.creditsUsed(workspaceId, new Date());
    const single = await request(handle.app)
      .post('/v1/noise-suppressor/denoise')
      .set('Authorization', `Bearer ${token}`)
      .attach('file', bomb);
    expect(single.status).toBe(413);
    expect(single.body.error.type).toBe('payload_too_large');
    expect(single.body.error.message).toMatch(/audio too large: 8 min of 384000 Hz × 8 channels is more than 1.38 billion samples/);
    expect(await handle.store.creditsUsed(workspaceId, new Date())).toBe(before);
    const batch = await request(handle.app)
      .post('/v1/noise-suppressor/denoise/batch')
      .set('Authorization', `Bearer ${token}`)
      .field('response', 'json')
      .attach('files', bomb);
    // A batch reports each file (v1): the bomb is a failed item with the same reason, and no output was written.
    expect(batch.status).toBe(200);
    expect(batch.body.items[0].status).toBe('error');
    expect(batch.body.items[0].error.message).toMatch(/audio too large: 8 min of 384000 Hz × 8 channels/);
    await eventually(() => tmpEntries(appConfig).length === 0);
  });
});
