// The model service app on its own (createModelServiceApp + the real engine and ffmpeg): limits and states the
// gateway in front would hide, plus the file-name rules.
import fs from 'node:fs';
import path from 'node:path';
import request from 'supertest';
import type { Config } from '../src/config';
import { createInferenceEngine } from '../src/inference/engine';
import type { InferenceEngine } from '../src/inference/types';
import { createModelServiceApp } from '../src/model-service/app';
import { cleanInputName, contentDisposition, headerJson, OutputNamer, safeBaseName } from '../src/model-service/names';
import { eventually, fixture, tmpEntries, testConfig } from './service-helpers';

describe('file names', () => {
  test('safeBaseName strips directories, extensions, control and unsafe characters, leading dots', async () => {
    expect(safeBaseName('talk.wav')).toBe('talk');
    expect(safeBaseName('../../etc/passwd')).toBe('passwd');
    expect(safeBaseName('C:\\Users\\me\\My Talk.final.mp3')).toBe('My Talk.final');
    expect(safeBaseName('..')).toBe('audio');
    expect(safeBaseName('')).toBe('audio');
    expect(safeBaseName(undefined)).toBe('audio');
    expect(safeBaseName('.bashrc')).toBe('bashrc');
    expect(safeBaseName('a\u0000b\u001fc\u007f.wav')).toBe('abc');
    expect(safeBaseName('what?<is>:this|*.wav')).toBe('what__is__this__');
    expect(safeBaseName('x'.repeat(500) + '.wav')).toHaveLength(120);
    expect(safeBaseName('Grüße.wav')).toBe('Grüße');
  });

  test('cleanInputName keeps the name but not its directories or control characters', async () => {
    expect(cleanInputName('dir/sub\\a b.wav')).toBe('a b.wav');
    expect(cleanInputName('a\r\nb.wav')).toBe('ab.wav');
  });

  test('OutputNamer makes names unique, case-insensitively', async () => {
    const namer = new OutputNamer();
    expect(namer.take('a', 'wav')).toBe('a_denoised.wav');
    expect(namer.take('a', 'wav')).toBe('a_denoised_2.wav');
    expect(namer.take('A', 'wav')).toBe('A_denoised_3.wav');
    expect(namer.take('a', 'flac')).toBe('a_denoised.flac');
    expect(namer.take('a_denoised', 'wav').startsWith('a_denoised_denoised')).toBe(true);
  });

  test('contentDisposition: ASCII fallback plus RFC 5987 filename* only when needed', async () => {
    expect(contentDisposition('a_denoised.wav')).toBe('attachment; filename="a_denoised.wav"');
    expect(contentDisposition('é (1)*.wav')).toBe(`attachment; filename="_ (1)*.wav"; filename*=UTF-8''%C3%A9%20%281%29%2A.wav`);
    expect(contentDisposition('a"b\\c.wav')).toBe('attachment; filename="a_b_c.wav"; filename*=UTF-8\'\'a%22b%5Cc.wav');
  });

  test('headerJson escapes non-ASCII so the header stays valid', async () => {
    expect(headerJson({ a: 'ü' })).toBe('{"a":"\\u00fc"}');
    expect(JSON.parse(headerJson({ a: 'ü☕' }))).toEqual({ a: 'ü☕' });
  });
});

describe('model service app alone', () => {
  let config: Config;
  let engine: InferenceEngine;

  beforeAll(async () => {
    config = testConfig({ workers: 1 });
    engine = await createInferenceEngine(config);
  });
  afterAll(async () => {
    await engine.close();
    fs.rmSync(config.dataDir, { recursive: true, force: true });
  });

  test('a file over 100 MB → 413 {detail}; nothing left in the temp dir', async () => {
    const app = createModelServiceApp({ config, engine });
    const big = Buffer.alloc(100 * 1024 * 1024 + 1);
    const res = await request(app).post('/denoise').attach('file', big, { filename: 'big.wav', contentType: 'audio/wav' });
    expect(res.status).toBe(413);
    expect(res.body).toEqual({ detail: 'file "big.wav" is larger than 100 MB', type: 'payload_too_large', request_id: expect.stringMatching(/^req_/) });
    await eventually(() => tmpEntries(config).length === 0);
  });

  test('a bad option that precedes the file is rejected (checked when the file part starts)', async () => {
    const app = createModelServiceApp({ config, engine });
    const res = await request(app)
      .post('/denoise')
      .set('X-Request-Id', 'req_from_the_gateway_1')
      .field('model', 'nsm-7')
      .attach('file', fixture('speech-noisy-16k-mono.wav'));
    expect(res.status).toBe(400);
    expect(res.body.detail).toMatch(/unknown model "nsm-7"/);
    // The gateway's request id comes back in the body, so the client's error and the logs correlate.
    expect(res.body).toMatchObject({ type: 'invalid_request', request_id: 'req_from_the_gateway_1' });
    await eventually(() => tmpEntries(config).length === 0);
  });

  test('batch limits: files per call, size per file, total size per request → 413 {detail}', async () => {
    const app = createModelServiceApp({ config, engine, limits: { maxFileBytes: 200_000, maxBatchFiles: 3, maxBatchBytes: 250_000 } });
    const mono = fixture('speech-noisy-16k-mono.wav'); // 96 044 bytes

    let req = request(app).post('/denoise/batch');
    for (let i = 0; i < 4; i++) req = req.attach('files', fixture('not-audio.wav'));
    const tooMany = await req;
    expect(tooMany.status).toBe(413);
    expect(tooMany.body).toEqual({ detail: 'too many files: at most 3 per batch', type: 'payload_too_large', request_id: expect.stringMatching(/^req_/) });

    // Alone, so the per-file limit (200 000) is reached long before the total (250 000) could be.
    const tooBig = await request(app).post('/denoise/batch').attach('files', fixture('speech-noisy-44k1-stereo.wav'));
    expect(tooBig.status).toBe(413);
    expect(tooBig.body).toEqual({ detail: 'file "speech-noisy-44k1-stereo.wav" is larger than 200000 bytes', type: 'payload_too_large', request_id: expect.stringMatching(/^req_/) });

    const tooMuch = await request(app).post('/denoise/batch').attach('files', mono).attach('files', mono).attach('files', mono);
    expect(tooMuch.status).toBe(413);
    expect(tooMuch.body).toEqual({ detail: "the request's files exceed 250000 bytes in total", type: 'payload_too_large', request_id: expect.stringMatching(/^req_/) });

    const fits = await request(app).post('/denoise/batch').field('response', 'json').attach('files', mono).attach('files', mono);
    expect(fits.status).toBe(200);
    expect(fits.body.succeeded).toBe(2);
    await eventually(() => tmpEntries(config).length === 0);
  });

  test('unknown paths → 404 {detail}', async () => {
    const app = createModelServiceApp({ config, engine });
    const res = await request(app).get('/v1/noise-suppressor/models');
    expect(res.status).toBe(404);
    expect(res.body.detail).toMatch(/no such endpoint/);
    expect(res.body.type).toBe('not_found');
  });

  test('without installed models: 422 on denoise, health degraded, models unavailable, sample 404', async () => {
    const emptyModels = path.join(config.dataDir, 'no-models');
    fs.mkdirSync(emptyModels, { recursive: true });
    const app = createModelServiceApp({ config: { ...config, modelsDir: emptyModels }, engine });

    const res = await request(app).post('/denoise').field('model', 'nsm-3').attach('file', fixture('speech-noisy-16k-mono.wav'));
    expect(res.status).toBe(422);
    expect(res.body.detail).toMatch(/model "nsm-3" is not installed/);
    expect(res.body.type).toBe('model_not_installed');

    const health = await request(app).get('/health');
    expect(health.body).toMatchObject({ status: 'degraded', models: [] });
    const models = await request(app).get('/models');
    expect(models.body.models.every((m: { available: boolean }) => m.available === false)).toBe(true);
    const sample = await request(app).get('/sample');
    expect(sample.status).toBe(404);
    expect(sample.body.detail).toMatch(/sample clip is not installed/);
    await eventually(() => tmpEntries(config).length === 0);
  });

  test('stale request directories from a crashed process are swept at start', async () => {
    const stale = path.join(config.tmpDir, 'req-stale');
    fs.mkdirSync(stale, { recursive: true });
    fs.writeFileSync(path.join(stale, 'upload-0'), 'x');
    const old = new Date(Date.now() - 7 * 60 * 60 * 1000);
    fs.utimesSync(stale, old, old);
    const fresh = path.join(config.tmpDir, 'req-fresh');
    fs.mkdirSync(fresh);
    createModelServiceApp({ config, engine });
    await eventually(() => !fs.existsSync(stale));
    expect(fs.existsSync(fresh)).toBe(true);
    fs.rmSync(fresh, { recursive: true });
  });
});
