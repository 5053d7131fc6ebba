// The model service app on its own (createModelServiceApp + the real engine and ffmpeg): limits and states the
// gateway in front would hide, plus the file-name rules.
import fs from 'node:fs';
import path from 'node:path';
import request from 'supertest';
import type { Config } from '../../src/config';
import { createInferenceEngine } from '../../src/inference/runtime/engine';
import type { InferenceEngine } from '../../src/inference/types';
import { createModelServiceApp } from '../../src/model-service/app';
import { CATALOG_TTL_MS } from '../../src/model-service/catalog';
import { cleanInputName, contentDisposition, headerJson, OutputNamer, safeBaseName } from '../../src/model-service/names';
import { IN_MEMORY_UPLOAD_BYTES } from '../../src/model-service/uploads';
import { eventually, fixture, noiseWav, readZip, tmpEntries, testConfig } from '../helpers/service-helpers';

const TOKEN = 'service-test-token-0123456789abcdef';
/** supertest against the model service with the gateway's credentials on every request. */
function authed(app: Parameters<typeof request.agent>[0]) {
  return request.agent(app).set('Authorization', `Bearer ${TOKEN}`);
}

/** supertest parser: the response body as one Buffer (zips). */
const wholeBody = ((res: NodeJS.ReadableStream, cb: (err: Error | null, body: Buffer) => void): void => {
  const chunks: Buffer[] = [];
  res.on('data', (c: Buffer) => chunks.push(c));
  res.on('end', () => cb(null, Buffer.concat(chunks)));
}) as unknown as Parameters<request.Test['parse']>[0];

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

  test('bidi overrides, isolates, marks and other invisible format characters are stripped (issue 9 item 18)', async () => {
    // "evil\u202Egnp.exe.wav" displays as "evilvaw.exe.png": the override must not survive into any name.
    expect(safeBaseName('evil\u202Egnp.exe.wav')).toBe('evilgnp.exe');
    expect(cleanInputName('a\u2066b\u2069c\u200Fd\u200Ee\u061Cf\u202Ag\u202Ch.wav')).toBe('abcdefgh.wav');
    expect(cleanInputName('\uFEFFzero\u200Bwidth\u00ADsoft\u2028line\u2029para.wav')).toBe('zerowidthsoftlinepara.wav');
    expect(cleanInputName('tag\u{E0041}\u{E0042}s.wav')).toBe('tags.wav');
    // Joiners are spelling, not control: kept.
    expect(cleanInputName('\u0645\u06CC\u200C\u062E\u0648\u0627\u0647\u0645.wav')).toBe('\u0645\u06CC\u200C\u062E\u0648\u0627\u0647\u0645.wav');
    expect(cleanInputName('\u{1F468}\u200D\u{1F469}.wav')).toBe('\u{1F468}\u200D\u{1F469}.wav');
    const cd = contentDisposition('x\u202Eyz_denoised.wav');
    expect(cd).not.toMatch(/%E2%80%AE/i);
    expect(cd).toBe('attachment; filename="xyz_denoised.wav"');
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
    const app = createModelServiceApp({ config, engine, token: TOKEN });
    const big = Buffer.alloc(100 * 1024 * 1024 + 1);
    const res = await authed(app).post('/denoise').attach('file', big, { filename: 'big.wav', contentType: 'audio/wav' });
    expect(res.status).toBe(413);
    expect(res.body).toEqual({ detail: 'file "big.wav" is larger than 100 MB', type: 'payload_too_large', request_id: expect.stringMatching(/^req_/) });
    await eventually(() => tmpEntries(config).length === 0);
  });

  test('a bad option that precedes the file is rejected (checked when the file part starts)', async () => {
    const app = createModelServiceApp({ config, engine, token: TOKEN });
    const res = await authed(app)
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
    const app = createModelServiceApp({ config, engine, token: TOKEN, limits: { maxFileBytes: 200_000, maxBatchFiles: 3, maxBatchBytes: 250_000 } });
    const mono = fixture('speech-noisy-16k-mono.wav'); // 96 044 bytes

    let req = authed(app).post('/denoise/batch');
    for (let i = 0; i < 4; i++) req = req.attach('files', fixture('not-audio.wav'));
    const tooMany = await req;
    expect(tooMany.status).toBe(413);
    expect(tooMany.body).toEqual({ detail: 'too many files: at most 3 per batch', type: 'payload_too_large', request_id: expect.stringMatching(/^req_/) });

    // Alone, so the per-file limit (200 000) is reached long before the total (250 000) could be.
    const tooBig = await authed(app).post('/denoise/batch').attach('files', fixture('speech-noisy-44k1-stereo.wav'));
    expect(tooBig.status).toBe(413);
    expect(tooBig.body).toEqual({ detail: 'file "speech-noisy-44k1-stereo.wav" is larger than 200000 bytes', type: 'payload_too_large', request_id: expect.stringMatching(/^req_/) });

    const tooMuch = await authed(app).post('/denoise/batch').attach('files', mono).attach('files', mono).attach('files', mono);
    expect(tooMuch.status).toBe(413);
    expect(tooMuch.body).toEqual({ detail: "the request's files exceed 250000 bytes in total", type: 'payload_too_large', request_id: expect.stringMatching(/^req_/) });

    const fits = await authed(app).post('/denoise/batch').field('response', 'json').attach('files', mono).attach('files', mono);
    expect(fits.status).toBe(200);
    expect(fits.body.succeeded).toBe(2);
    await eventually(() => tmpEntries(config).length === 0);
  });

  test('bidi controls in uploaded names reach neither Content-Disposition nor zip entries nor the manifest', async () => {
    const app = createModelServiceApp({ config, engine, token: TOKEN });
    const wav = fs.readFileSync(fixture('speech-noisy-16k-mono.wav'));
    const single = await authed(app).post('/denoise').attach('file', wav, { filename: 'talk\u202Evaw.exe.wav', contentType: 'audio/wav' });
    expect(single.status).toBe(200);
    const cd = String(single.headers['content-disposition']);
    expect(cd).toBe('attachment; filename="talkvaw.exe_denoised.wav"');

    const batch = await authed(app)
      .post('/denoise/batch')
      .attach('files', wav, { filename: 'a\u2067b\u2069.wav', contentType: 'audio/wav' })
      .attach('files', wav, { filename: '\u200Fc\u202Ed.wav', contentType: 'audio/wav' })
      .buffer(true)
      .parse(wholeBody);
    expect(batch.status).toBe(200);
    const entries = readZip(batch.body as Buffer);
    expect(entries.map((e) => e.name).sort()).toEqual(['ab_denoised.wav', 'cd_denoised.wav', 'manifest.json']);
    const manifest = JSON.parse(entries.find((e) => e.name === 'manifest.json')!.data.toString('utf8'));
    expect(manifest.items.map((i: { input: string }) => i.input)).toEqual(['ab.wav', 'cd.wav']);
    await eventually(() => tmpEntries(config).length === 0);
  });

  test('unknown paths → 404 {detail}', async () => {
    const app = createModelServiceApp({ config, engine, token: TOKEN });
    const res = await authed(app).get('/v1/noise-suppressor/models');
    expect(res.status).toBe(404);
    expect(res.body.detail).toMatch(/no such endpoint/);
    expect(res.body.type).toBe('not_found');
  });

  test('without installed models: 422 on denoise, health degraded, models unavailable, sample 404', async () => {
    const emptyModels = path.join(config.dataDir, 'no-models');
    fs.mkdirSync(emptyModels, { recursive: true });
    const app = createModelServiceApp({ config: { ...config, modelsDir: emptyModels }, engine, token: TOKEN });

    const res = await authed(app).post('/denoise').field('model', 'nsm-3').attach('file', fixture('speech-noisy-16k-mono.wav'));
    expect(res.status).toBe(422);
    expect(res.body.detail).toMatch(/model "nsm-3" is not installed/);
    expect(res.body.type).toBe('model_not_installed');

    const health = await authed(app).get('/health');
    expect(health.body).toMatchObject({ status: 'degraded', models: [] });
    const models = await authed(app).get('/models');
    expect(models.body.models.every((m: { available: boolean }) => m.available === false)).toBe(true);
    const sample = await authed(app).get('/sample');
    expect(sample.status).toBe(404);
    expect(sample.body.detail).toMatch(/sample clip is not installed/);
    await eventually(() => tmpEntries(config).length === 0);

    // Installed while the service runs: taken up within CATALOG_TTL_MS, no restart.
    for (const f of fs.readdirSync(config.modelsDir)) fs.symlinkSync(path.join(config.modelsDir, f), path.join(emptyModels, f));
    // The catalog reads Date.now(): Date is moved past its TTL (and keeps running); timers stay real.
    jest.useFakeTimers({ advanceTimers: true, doNotFake: ['hrtime', 'nextTick', 'performance', 'queueMicrotask', 'setImmediate', 'clearImmediate', 'setInterval', 'clearInterval', 'setTimeout', 'clearTimeout'] });
    try {
      jest.setSystemTime(Date.now() + CATALOG_TTL_MS);
      const after = await authed(app).get('/health');
      expect(after.body.status).toBe('ok');
      expect(after.body.models).toContain('nsm-3');
    } finally {
      jest.useRealTimers();
    }
  });

  /** A batch of one file through the model service: the output bytes, from the zip (the batch path uses temp files). */
  async function batchOutput(app: Parameters<typeof request.agent>[0], data: Buffer, name: string): Promise<Buffer> {
    const batch = await authed(app)
      .post('/denoise/batch')
      .attach('files', data, { filename: name })
      .buffer(true)
      .parse(wholeBody);
    expect(batch.status).toBe(200);
    return readZip(batch.body as Buffer).find((e) => e.name.endsWith('_denoised.wav'))!.data;
  }

  test('a small WAV is denoised in memory: no temp file, the same bytes as through temp files', async () => {
    // TMP_DIR is a regular file here: any request directory would fail to be created.
    const blocked = path.join(config.dataDir, 'not-a-directory');
    fs.writeFileSync(blocked, 'x');
    const app = createModelServiceApp({ config: { ...config, tmpDir: blocked }, engine, token: TOKEN });
    const wav = fs.readFileSync(fixture('speech-noisy-16k-mono.wav'));
    const single = await authed(app).post('/denoise').attach('file', wav, { filename: 'a.wav' }).buffer(true);
    expect(single.status).toBe(200);
    expect(single.headers['content-length']).toBe(String((single.body as Buffer).length));
    const json = await authed(app).post('/denoise').field('response', 'json').attach('file', wav, { filename: 'a.wav' });
    expect(json.status).toBe(200);
    expect(Buffer.from(json.body.audio_base64 as string, 'base64').equals(single.body as Buffer)).toBe(true);

    // The same upload through temp files (a batch, with a usable TMP_DIR): identical bytes.
    const viaFiles = await batchOutput(createModelServiceApp({ config, engine, token: TOKEN }), wav, 'a.wav');
    expect((single.body as Buffer).equals(viaFiles)).toBe(true);

    // What needs ffmpeg (another format, or a loudness target's spool) does need the directory: 500 here.
    const flac = await authed(app).post('/denoise').attach('file', fixture('speech-noisy-44k1-stereo.flac'));
    expect(flac.status).toBe(500);
    const normalised = await authed(app).post('/denoise').field('loudness_lufs', '-16').attach('file', wav, { filename: 'a.wav' });
    expect(normalised.status).toBe(500);
  });

  test('uploads that need a file get one: another format, a loudness target, or more than the in-memory limit', async () => {
    const app = createModelServiceApp({ config, engine, token: TOKEN });
    const flac = fs.readFileSync(fixture('speech-noisy-44k1-stereo.flac'));
    const fromFlac = await authed(app).post('/denoise').attach('file', flac, { filename: 'b.flac' }).buffer(true);
    expect(fromFlac.status).toBe(200);
    expect((fromFlac.body as Buffer).equals(await batchOutput(app, flac, 'b.flac'))).toBe(true);

    const wav = fs.readFileSync(fixture('speech-noisy-16k-mono.wav'));
    const normalised = await authed(app).post('/denoise').field('loudness_lufs', '-16').attach('file', wav, { filename: 'a.wav' });
    expect(normalised.status).toBe(200);
    expect(JSON.parse(String(normalised.headers['x-ns-stats'])).loudness_target_lufs).toBe(-16);

    // Past IN_MEMORY_UPLOAD_BYTES the upload goes to disk while it arrives (what came so far first).
    const long = noiseWav(Math.ceil(IN_MEMORY_UPLOAD_BYTES / 32000) + 5);
    expect(long.length).toBeGreaterThan(IN_MEMORY_UPLOAD_BYTES);
    const big = await authed(app).post('/denoise').attach('file', long, { filename: 'long.wav' }).buffer(true);
    expect(big.status).toBe(200);
    expect(JSON.parse(String(big.headers['x-ns-stats'])).duration_s).toBeCloseTo((long.length - 44) / 32000, 2);
    expect((big.body as Buffer).equals(await batchOutput(app, long, 'long.wav'))).toBe(true);
    await eventually(() => tmpEntries(config).length === 0);
  }, 60_000);

  test('stale request directories from a crashed process are swept at start', async () => {
    const stale = path.join(config.tmpDir, 'req-stale');
    fs.mkdirSync(stale, { recursive: true });
    fs.writeFileSync(path.join(stale, 'upload-0'), 'x');
    const old = new Date(Date.now() - 7 * 60 * 60 * 1000);
    fs.utimesSync(stale, old, old);
    const fresh = path.join(config.tmpDir, 'req-fresh');
    fs.mkdirSync(fresh);
    createModelServiceApp({ config, engine, token: TOKEN });
    await eventually(() => !fs.existsSync(stale));
    expect(fs.existsSync(fresh)).toBe(true);
    fs.rmSync(fresh, { recursive: true });
  });
});
