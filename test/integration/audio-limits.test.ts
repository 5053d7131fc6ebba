// Hardening of the file pipeline (issue 9, items 1 and 9): input limits checked before any decoding and again while
// decoding, non-finite float samples treated as silence; through the pipeline and through the whole app over HTTP.
import fs from 'node:fs';
import path from 'node:path';
import request from 'supertest';
import { createApp, type AppHandle } from '../../src/app';
import { loadConfig, type Config } from '../../src/config';
import { createInferenceEngine } from '../../src/inference/runtime/engine';
import type { InferenceEngine } from '../../src/inference/types';
import { AudioInputError, AudioTooLongError, denoiseFile, type DenoiseFileOptions } from '../../src/pipeline';
import { readPcm, writePcm } from '../../src/pipeline/clips';
import { childProcesses, fixture, makeTmpDir } from '../helpers/audio-helpers';
import { createToken, testConfig } from '../helpers/service-helpers';

const config = loadConfig();
let engine: InferenceEngine;
let tmp: string;
const base: DenoiseFileOptions = { model: 'nsm-2', attenuationLimitDb: 0, outputFormat: 'wav', keepInputSampleRate: true };

beforeAll(async () => {
  tmp = makeTmpDir('nsm-limits-');
  engine = await createInferenceEngine({ ...config, workers: 1 });
});
afterAll(async () => {
  await engine?.close();
  fs.rmSync(tmp, { recursive: true, force: true });
});

/** A 16-bit PCM WAV of `samples` samples (a quiet ramp) at `rate` Hz, mono. */
function pcmWav(file: string, rate: number, samples: number): void {
  const h = Buffer.alloc(44);
  h.write('RIFF', 0, 'ascii');
  h.writeUInt32LE(36 + 2 * samples, 4);
  h.write('WAVEfmt ', 8, 'ascii');
  h.writeUInt32LE(16, 16);
  h.writeUInt16LE(1, 20);
  h.writeUInt16LE(1, 22);
  h.writeUInt32LE(rate, 24);
  h.writeUInt32LE(rate * 2, 28);
  h.writeUInt16LE(2, 32);
  h.writeUInt16LE(16, 34);
  h.write('data', 36, 'ascii');
  h.writeUInt32LE(2 * samples, 40);
  const data = Buffer.alloc(2 * samples);
  for (let i = 0; i < samples; i++) data.writeInt16LE((i % 200) - 100, 2 * i);
  fs.writeFileSync(file, Buffer.concat([h, data]));
}

/** A float32 WAV (format tag 3) of planar samples. */
function floatWav(file: string, rate: number, x: Float32Array): void {
  const h = Buffer.alloc(44);
  h.write('RIFF', 0, 'ascii');
  h.writeUInt32LE(36 + 4 * x.length, 4);
  h.write('WAVEfmt ', 8, 'ascii');
  h.writeUInt32LE(16, 16);
  h.writeUInt16LE(3, 20);
  h.writeUInt16LE(1, 22);
  h.writeUInt32LE(rate, 24);
  h.writeUInt32LE(rate * 4, 28);
  h.writeUInt16LE(4, 32);
  h.writeUInt16LE(32, 34);
  h.write('data', 36, 'ascii');
  h.writeUInt32LE(4 * x.length, 40);
  fs.writeFileSync(file, Buffer.concat([h, Buffer.from(x.buffer, x.byteOffset, x.byteLength)]));
}

describe('input limits (MAX_AUDIO_SECONDS, MIN/MAX_SAMPLE_RATE, MAX_CHANNELS)', () => {
  test('a 1 Hz WAV (3,600 samples = "1 h") is refused from its header at once, with no child process', async () => {
    const input = path.join(tmp, 'one-hertz.wav');
    pcmWav(input, 1, 3600);
    const t0 = Date.now();
    const err = await denoiseFile({ config, engine }, input, path.join(tmp, 'x.wav'), { ...base, keepInputSampleRate: false }).catch((e) => e);
    expect(err).toBeInstanceOf(AudioInputError);
    expect(err.status).toBe(422);
    expect(err.message).toMatch(/unsupported sample rate 1 Hz: accepted from 8000 to 384000 Hz/);
    // Refused from the header: milliseconds on an idle machine. The bound only has to separate that from decoding
    // the "hour" (tens of seconds of worker time before the fix) and survive a loaded CI machine.
    expect(Date.now() - t0).toBeLessThan(5000);
    expect(fs.existsSync(path.join(tmp, 'x.wav'))).toBe(false);
    expect(engine.state().streams).toBe(0);
  });

  test('a WAV longer than MAX_AUDIO_SECONDS → 413 from the header, before decoding', async () => {
    const input = path.join(tmp, 'ten-s.wav');
    pcmWav(input, 16000, 10 * 16000);
    const limited = { ...config, maxAudioSeconds: 5 };
    const err = await denoiseFile({ config: limited, engine }, input, path.join(tmp, 'y.wav'), base).catch((e) => e);
    expect(err).toBeInstanceOf(AudioTooLongError);
    expect(err.status).toBe(413);
    expect(err.message).toBe('audio too long: 10 s, the most accepted per file is 5 s');
    expect(engine.state().streams).toBe(0);
  });

  test('compressed input: the container duration is checked before decoding (ffmpeg path)', async () => {
    const limited = { ...config, maxAudioSeconds: 2 };
    const err = await denoiseFile({ config: limited, engine }, fixture('speech-noisy-44k1-stereo.mp3'), path.join(tmp, 'z.wav'), base)
      .catch((e) => e);
    expect(err).toBeInstanceOf(AudioTooLongError);
    expect(err.message).toMatch(/^audio too long: 3 s, the most accepted per file is 2 s$/);
    expect(childProcesses().filter((c) => c.comm === 'ffmpeg')).toEqual([]);
  });

  test('a header that does not tell the duration: the decoded length is enforced while decoding', async () => {
    // FLAC written to a pipe has no total-sample count in STREAMINFO: ffmpeg reports "Duration: N/A".
    const input = path.join(tmp, 'no-duration.flac');
    const [speech] = await readPcm(config, fixture('speech-noisy-16k-mono.wav'), 16000, 1);
    const x = new Float32Array(16000 * 8);
    for (let i = 0; i < x.length; i++) x[i] = speech[i % speech.length];
    await writePcm(config, [x], 16000, path.join(tmp, 'eight.wav'), ['-c:a', 'pcm_s16le', '-f', 'wav']);
    const { spawnSync } = await import('node:child_process');
    const r = spawnSync(config.ffmpegPath, ['-hide_banner', '-loglevel', 'error', '-i', path.join(tmp, 'eight.wav'), '-c:a', 'flac', '-f', 'flac', 'pipe:1']);
    fs.writeFileSync(input, r.stdout);
    const limited = { ...config, maxAudioSeconds: 3 };
    const out = path.join(tmp, 'nd.wav');
    let done = 0;
    const err = await denoiseFile({ config: limited, engine }, input, out, { ...base, onProgress: (d) => (done = d) }).catch((e) => e);
    expect(err).toBeInstanceOf(AudioTooLongError);
    expect(err.message).toBe('audio too long: it decodes to more than 3 s, the most accepted per file');
    // It stopped right after the limit, not at the end of the file.
    expect(done).toBeLessThanOrEqual(4);
    expect(fs.existsSync(out)).toBe(false);
    expect(childProcesses().filter((c) => c.comm === 'ffmpeg')).toEqual([]);
  });

  test('too many channels → 422', async () => {
    const planar = Array.from({ length: 3 }, () => new Float32Array(1600).fill(0.1));
    const input = path.join(tmp, 'three.wav');
    await writePcm(config, planar, 16000, input, ['-c:a', 'pcm_s16le', '-f', 'wav']);
    const err = await denoiseFile({ config: { ...config, maxChannels: 2 }, engine }, input, path.join(tmp, 'c.wav'), base).catch((e) => e);
    expect(err).toBeInstanceOf(AudioInputError);
    expect(err.status).toBe(422);
    expect(err.message).toBe('too many channels (3): at most 2 per file');
  });
});

describe('non-finite float samples are silence, never full-scale noise', () => {
  /** 2 s of a 300 Hz tone at -20 dBFS with NaN, +Inf and -Inf in its second half. */
  function poisoned(rate: number): Float32Array {
    const x = new Float32Array(2 * rate);
    for (let i = 0; i < x.length; i++) x[i] = 0.1 * Math.sin((2 * Math.PI * 300 * i) / rate);
    for (let i = rate; i < x.length; i++) if (i % 3 === 0) x[i] = [NaN, Infinity, -Infinity][(i / 3) % 3];
    return x;
  }

  test.each([
    [16000, 'in-process WAV'],
    [44100, 'in-process WAV resampled by ffmpeg'],
  ])('float WAV at %i Hz (%s)', async (rate) => {
    const input = path.join(tmp, `nan-${rate}.wav`);
    floatWav(input, rate, poisoned(rate));
    const out = path.join(tmp, `nan-${rate}-out.wav`);
    const stats = await denoiseFile({ config, engine }, input, out, base);
    expect(stats.duration_s).toBeCloseTo(2, 1);
    const [y] = await readPcm(config, out, rate, 1);
    let fullScale = 0;
    let peak = 0;
    for (const v of y) {
      if (Math.abs(v) >= 0.99) fullScale++;
      peak = Math.max(peak, Math.abs(v));
    }
    expect(fullScale).toBe(0);
    // The input never exceeds 0.1; the output stays in that range.
    expect(peak).toBeLessThan(0.2);
  });
});

describe('absurd finite float samples are bounded (dsp/sample-bound.ts), not carried into the chains', () => {
  // One sample of 1e30 overflowed nsm-4's float32 energies and left its chain attenuating by 30-50 dB for the rest of
  // the file; bounded at ±1e4 at the decoder it is a click, and the speech after it comes out as without it.
  const rms = (x: Float32Array, from: number, to: number): number => {
    let e = 0;
    for (let i = from; i < to; i++) e += x[i] * x[i];
    return 10 * Math.log10(e / (to - from) + 1e-20);
  };

  test.each([
    ['wav', 'in-process WAV reader'],
    ['caf', "ffmpeg's f32 output"],
  ])('float %s at 16 kHz (%s), nsm-4: the seconds after a 1e30 spike as loud as without it', async (kind) => {
    const rate = 16000;
    const clean = new Float32Array(4 * rate);
    for (let i = 0; i < clean.length; i++) clean[i] = 0.1 * Math.sin((2 * Math.PI * 300 * i) / rate) * (1 + Math.sin((2 * Math.PI * 3 * i) / rate));
    const spiked = clean.slice();
    for (let i = rate; i < rate + 10; i++) spiked[i] = 1e30;
    const outs: Float32Array[] = [];
    for (const [name, x] of [['clean', clean], ['spiked', spiked]] as const) {
      const input = path.join(tmp, `spike-${name}.${kind}`);
      if (kind === 'wav') floatWav(input, rate, x);
      else await writePcm(config, [x], rate, input, ['-c:a', 'pcm_f32le', '-f', 'caf']);
      const out = path.join(tmp, `spike-${kind}-${name}-out.wav`);
      await denoiseFile({ config, engine }, input, out, { ...base, model: 'nsm-4' });
      outs.push((await readPcm(config, out, rate, 1))[0]);
    }
    expect(outs[1].every((v) => Number.isFinite(v))).toBe(true);
    expect(Math.abs(rms(outs[1], 2 * rate, 4 * rate) - rms(outs[0], 2 * rate, 4 * rate))).toBeLessThan(3);
  });
});

describe('over HTTP: limits answer at once, with the right status, and cost no credit', () => {
  let appConfig: Config;
  let handle: AppHandle;
  let token: string;
  let workspaceId: string;

  beforeAll(async () => {
    appConfig = testConfig({ maxAudioSeconds: 5 });
    handle = await createApp(appConfig, { log: () => undefined });
    token = await createToken(handle.store, ['*']);
    workspaceId = (await handle.store.listWorkspaces())[0].id;
  });
  afterAll(async () => {
    await handle.close();
    fs.rmSync(appConfig.dataDir, { recursive: true, force: true });
  });

  const post = (file: string, fields: Record<string, string> = {}) => {
    let req = request(handle.app).post('/v1/noise-suppressor/denoise').set('Authorization', `Bearer ${token}`);
    for (const [k, v] of Object.entries(fields)) req = req.field(k, v);
    return req.attach('file', file);
  };

  test('too long → 413 payload_too_large; 1 Hz → 422; no credit either time', async () => {
    const long = path.join(tmp, 'http-long.wav');
    pcmWav(long, 16000, 6 * 16000);
    const slow = path.join(tmp, 'http-1hz.wav');
    pcmWav(slow, 1, 3600);
    const before = await handle.store.creditsUsed(workspaceId, new Date());
    const t0 = Date.now();
    const a = await post(long);
    expect(a.status).toBe(413);
    expect(a.body.error.type).toBe('payload_too_large');
    expect(a.body.error.message).toMatch(/audio too long: 6 s, the most accepted per file is 5 s/);
    const b = await post(slow, { keep_input_sample_rate: 'false' });
    expect(b.status).toBe(422);
    expect(b.body.detail).toMatch(/unsupported sample rate 1 Hz/);
    expect(Date.now() - t0).toBeLessThan(5000); // see the first test: header refusal vs. decoding the whole file
    expect(await handle.store.creditsUsed(workspaceId, new Date())).toBe(before);
  });
});
