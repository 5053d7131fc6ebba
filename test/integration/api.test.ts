// The whole app (createApp: gateway + in-process model service + real engine, ffmpeg and SQLite) over real HTTP:
// every field, header and validation error of the public API, batch zips, file names and temp-file cleanup.
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { spawnSync } from 'node:child_process';
import request from 'supertest';
import { createApp, type AppHandle } from '../../src/app';
import type { Config } from '../../src/config';
import { GATEWAY_ERRORS } from '../../src/http/errors';
import { COMMON_FIELDS } from '../../src/model-service/params';
import {
  closeQuietly,
  createToken,
  eventually,
  fixture,
  listen,
  multipartBody,
  readZip,
  tmpEntries,
  testConfig,
  wavInfo,
} from '../helpers/service-helpers';

const API = '/v1/noise-suppressor';
const MONO_16K = fixture('speech-noisy-16k-mono.wav');
const STEREO_44K = fixture('speech-noisy-44k1-stereo.wav');

/** superagent parser that keeps any body as a Buffer. */
const binary = ((res: http.IncomingMessage, cb: (err: Error | null, body: Buffer) => void): void => {
  const chunks: Buffer[] = [];
  res.on('data', (c: Buffer) => chunks.push(c));
  res.on('end', () => cb(null, Buffer.concat(chunks)));
}) as unknown as Parameters<request.Test['parse']>[0];

describe('public API through the full app', () => {
  let config: Config;
  let handle: AppHandle;
  let token: string;
  let workspaceId: string;

  beforeAll(async () => {
    config = testConfig({ workers: 2 }); // two file workers: /health and /metrics report the configured size
    handle = await createApp(config, { log: () => undefined });
    token = await createToken(handle.store, ['*']);
    workspaceId = (await handle.store.listWorkspaces())[0].id;
    // GET /sample serves models/sample.wav, which the build writes; write it if this checkout has not yet.
    if (!fs.existsSync(path.join(config.modelsDir, 'sample.wav'))) {
      const { makeSample } = await import('../../scripts/make-sample');
      await makeSample(config);
    }
  });

  afterAll(async () => {
    await handle.close();
    fs.rmSync(config.dataDir, { recursive: true, force: true });
  });

  // Every request, accepted or rejected, must leave the temp directory empty.
  afterEach(async () => {
    await eventually(() => tmpEntries(config).length === 0);
  });

  const auth = () => ({ Authorization: `Bearer ${token}` });
  const denoise = () => request(handle.app).post(`${API}/denoise`).set(auth()).buffer(true).parse(binary);

  test('POST /denoise (defaults): the cleaned WAV with stats, file name, lengths and gateway headers', async () => {
    const res = await denoise().attach('file', STEREO_44K);
    expect(res.status).toBe(200);
    expect(res.headers['content-type']).toBe('audio/wav');
    expect(res.headers['content-disposition']).toBe('attachment; filename="speech-noisy-44k1-stereo_denoised.wav"');
    expect(Number(res.headers['content-length'])).toBe(res.body.length);
    expect(res.headers['x-request-id']).toMatch(/^\S+$/);
    expect(res.headers['x-gateway-upstream-ms']).toMatch(/^\d+$/);
    expect(res.headers['ratelimit-limit']).toBeDefined();

    const stats = JSON.parse(res.headers['x-ns-stats']);
    expect(stats).toMatchObject({
      model: 'nsm-2',
      input_sample_rate: 44100,
      output_sample_rate: 44100,
      channels: 2,
      output_format: 'wav',
      attenuation_limit_db: 0,
    });
    expect(stats.duration_s).toBeCloseTo(3, 1);
    expect(stats.processing_s).toBeGreaterThan(0);
    expect(stats.rtf).toBeCloseTo(stats.processing_s / stats.duration_s, 2);

    const info = wavInfo(res.body);
    expect(info).toEqual({ sampleRate: 44100, channels: 2, bitsPerSample: 16 });
    // Same length as the input: 3 s at 44.1 kHz stereo 16-bit.
    expect(Math.abs(res.body.length - 44 - 3 * 44100 * 4)).toBeLessThan(1024);

    // One credit charged for the successful call.
    expect(await handle.store.creditsUsed(workspaceId, new Date())).toBe(1);
  });

  test('options: model, keep_input_sample_rate=false, output_format=flac, attenuation_limit_db', async () => {
    const res = await denoise()
      .field('model', 'nsm-2-hd')
      .field('keep_input_sample_rate', 'false')
      .field('output_format', 'flac')
      .field('attenuation_limit_db', '12.5')
      .attach('file', MONO_16K);
    expect(res.status).toBe(200);
    expect(res.headers['content-type']).toBe('audio/flac');
    expect(res.headers['content-disposition']).toBe('attachment; filename="speech-noisy-16k-mono_denoised.flac"');
    expect(res.body.subarray(0, 4).toString('ascii')).toBe('fLaC');
    const stats = JSON.parse(res.headers['x-ns-stats']);
    expect(stats).toMatchObject({
      model: 'nsm-2-hd',
      input_sample_rate: 16000,
      output_sample_rate: 48000,
      attenuation_limit_db: 12.5,
      output_format: 'flac',
    });

    const native = await denoise().field('keep_input_sample_rate', '0').field('model', 'nsm-1').attach('file', STEREO_44K);
    expect(native.status).toBe(200);
    expect(wavInfo(native.body).sampleRate).toBe(16000);
    expect(JSON.parse(native.headers['x-ns-stats']).output_sample_rate).toBe(16000);

    const kept = await denoise().field('keep_input_sample_rate', 'TRUE').attach('file', fixture('speech-noisy-48k-mono.wav'));
    expect(wavInfo(kept.body).sampleRate).toBe(48000);
  });

  test('response=json: {filename, stats, audio_base64} with an exact Content-Length', async () => {
    const res = await request(handle.app)
      .post(`${API}/denoise`)
      .set(auth())
      .field('response', 'json')
      .attach('file', fixture('speech-noisy-44k1-stereo.mp3'));
    expect(res.status).toBe(200);
    expect(res.headers['content-type']).toMatch(/^application\/json/);
    expect(Number(res.headers['content-length'])).toBe(Buffer.byteLength(res.text));
    expect(Object.keys(res.body).sort()).toEqual(['audio_base64', 'filename', 'stats']);
    expect(res.body.filename).toBe('speech-noisy-44k1-stereo_denoised.wav');
    expect(res.body.stats.input_codec).toBe('mp3');
    expect(res.body.stats).toEqual(JSON.parse(res.headers['x-ns-stats']));
    const audio = Buffer.from(res.body.audio_base64, 'base64');
    expect(wavInfo(audio)).toMatchObject({ sampleRate: 44100, channels: 2 });
  });

  test('non-ASCII and hostile file names: sanitised, with an RFC 5987 filename*', async () => {
    const res = await denoise().attach('file', MONO_16K, { filename: 'Grüße ☕.wav', contentType: 'audio/wav' });
    expect(res.status).toBe(200);
    expect(res.headers['content-disposition']).toBe(
      `attachment; filename="Gr__e __denoised.wav"; filename*=UTF-8''Gr%C3%BC%C3%9Fe%20%E2%98%95_denoised.wav`,
    );
    const quoted = await denoise().attach('file', MONO_16K, { filename: 'say "hi".wav', contentType: 'audio/wav' });
    expect(quoted.headers['content-disposition']).toBe('attachment; filename="say _hi__denoised.wav"');
  });

  describe('validation: 400/422 with {detail} naming the problem, no credit charged', () => {
    const cases: Array<[string, Record<string, string>, RegExp]> = [
      ['unknown model', { model: 'nsm-9' }, /unknown model "nsm-9"/],
      ['attenuation above 100', { attenuation_limit_db: '101' }, /attenuation_limit_db must be from 0 to 100/],
      ['negative attenuation', { attenuation_limit_db: '-1' }, /attenuation_limit_db must be from 0 to 100/],
      ['attenuation not a number', { attenuation_limit_db: 'loud' }, /attenuation_limit_db must be a number/],
      ['bad output_format', { output_format: 'ogg' }, /output_format must be one of "wav", "flac", "mp3", "opus", "m4a"/],
      ['bad response', { response: 'zip' }, /response must be "audio" or "json"/],
      ['keep_input_sample_rate not a boolean', { keep_input_sample_rate: 'yes' }, /keep_input_sample_rate must be a boolean/],
      ['unknown field', { atenuation: '3' }, /unknown field "atenuation"/],
    ];
    test.each(cases)('%s → 400', async (_name, fields, detail) => {
      const before = await handle.store.creditsUsed(workspaceId, new Date());
      let req = request(handle.app).post(`${API}/denoise`).set(auth());
      for (const [k, v] of Object.entries(fields)) req = req.field(k, v);
      const res = await req.attach('file', MONO_16K);
      expect(res.status).toBe(400);
      // The spec's {detail}, plus the error type and the request id the client got in X-Request-Id.
      expect(Object.keys(res.body)).toEqual(['detail', 'type', 'request_id']);
      expect(res.body.detail).toMatch(detail);
      expect(res.body.type).toBe('invalid_request');
      expect(res.headers['x-request-id']).toMatch(/^req_/);
      expect(res.body.request_id).toBe(res.headers['x-request-id']);
      expect(await handle.store.creditsUsed(workspaceId, new Date())).toBe(before);
    });

    test('missing file, wrong field name, two files, not multipart → 400', async () => {
      const missing = await request(handle.app).post(`${API}/denoise`).set(auth()).field('model', 'nsm-1');
      expect(missing.status).toBe(400);
      expect(missing.body.detail).toMatch(/missing file/);

      const wrong = await request(handle.app).post(`${API}/denoise`).set(auth()).attach('audio', MONO_16K);
      expect(wrong.status).toBe(400);
      expect(wrong.body.detail).toBe('unexpected file field "audio"; send the audio as "file"');

      const two = await request(handle.app).post(`${API}/denoise`).set(auth()).attach('file', MONO_16K).attach('file', MONO_16K);
      expect(two.status).toBe(400);
      expect(two.body.detail).toMatch(/only one "file" per call/);

      const json = await request(handle.app).post(`${API}/denoise`).set(auth()).send({ file: 'x' });
      expect(json.status).toBe(400);
      expect(json.body.detail).toMatch(/multipart\/form-data/);

      const textFile = await request(handle.app).post(`${API}/denoise`).set(auth()).field('file', 'not a file part');
      expect(textFile.status).toBe(400);
      expect(textFile.body.detail).toMatch(/"file" must be a file part/);
    });

    test('empty, non-audio and truncated files → 422', async () => {
      for (const [name, detail] of [
        ['empty.wav', /empty/],
        ['not-audio.wav', /could not decode/],
        ['truncated.m4a', /./],
      ] as const) {
        const res = await request(handle.app).post(`${API}/denoise`).set(auth()).attach('file', fixture(name));
        expect([name, res.status]).toEqual([name, 422]);
        expect(res.body.detail).toMatch(detail);
      }
    });
  });

  test('POST /denoise/batch (zip, flac) with a broken file: 3 files, 2 ok, 1 error, streamed zip + manifest', async () => {
    const res = await request(handle.app)
      .post(`${API}/denoise/batch`)
      .set(auth())
      .field('output_format', 'flac')
      .attach('files', MONO_16K)
      .attach('files', fixture('not-audio.wav'))
      .attach('files', fixture('speech-noisy-44k1-stereo.ogg'))
      .buffer(true)
      .parse(binary);
    expect(res.status).toBe(200);
    expect(res.headers['content-type']).toBe('application/zip');
    expect(res.headers['content-disposition']).toBe('attachment; filename="denoised.zip"');
    expect(res.headers['transfer-encoding']).toBe('chunked'); // streamed, not built in memory first
    expect(res.headers['x-gateway-upstream-ms']).toMatch(/^\d+$/);
    const batch = JSON.parse(res.headers['x-ns-batch']);
    expect(batch).toEqual({ files: 3, succeeded: 2, failed: 1, processing_s: expect.any(Number), model: 'nsm-2', duration_s: expect.any(Number) });

    const entries = readZip(res.body);
    expect(entries.map((e) => e.name).sort()).toEqual([
      'manifest.json',
      'speech-noisy-16k-mono_denoised.flac',
      'speech-noisy-44k1-stereo_denoised.flac',
    ]);
    const manifest = JSON.parse(entries.find((e) => e.name === 'manifest.json')!.data.toString());
    expect(manifest).toMatchObject({ model: 'nsm-2', output_format: 'flac', files: 3, succeeded: 2, failed: 1 });
    expect(manifest.processing_s).toBe(batch.processing_s);
    expect(manifest.items).toHaveLength(3);
    expect(manifest.items[0]).toMatchObject({ index: 0, input: 'speech-noisy-16k-mono.wav', status: 'ok', output: 'speech-noisy-16k-mono_denoised.flac' });
    expect(manifest.items[1]).toEqual({
      index: 1,
      input: 'not-audio.wav',
      status: 'error',
      error: { type: 'invalid_audio', message: expect.stringMatching(/could not decode/) },
    });
    expect(manifest.items[2]).toMatchObject({ index: 2, input: 'speech-noisy-44k1-stereo.ogg', status: 'ok', output: 'speech-noisy-44k1-stereo_denoised.flac' });
    for (const item of [manifest.items[0], manifest.items[2]]) {
      const entry = entries.find((e) => e.name === item.output)!;
      expect(item.bytes).toBe(entry.data.length);
      expect(entry.data.subarray(0, 4).toString('ascii')).toBe('fLaC');
      expect(item.stats).toMatchObject({ output_format: 'flac', model: 'nsm-2' });
      expect(item.stats.duration_s).toBeCloseTo(3, 1);
    }
    expect(manifest.items[2].stats).toMatchObject({ input_codec: 'vorbis', channels: 2, output_sample_rate: 44100 });

    // Cross-check with Info-ZIP where installed: the archive is valid as a whole.
    const zipPath = path.join(config.dataDir, 'check.zip');
    fs.writeFileSync(zipPath, res.body);
    const unzip = spawnSync('unzip', ['-l', zipPath], { encoding: 'utf8' });
    if (!unzip.error) {
      expect(unzip.status).toBe(0);
      expect(unzip.stdout).toMatch(/3 files/);
    }
    fs.rmSync(zipPath);
  });

  test('batch: duplicate and path-like names get distinct, flat outputs', async () => {
    const audio = fs.readFileSync(MONO_16K);
    const names = ['a.wav', 'a.wav', '../../etc/a.wav', 'A.WAV', '..', 'b\tc.flac', 'x/y/.hidden.wav', 'C:\\Users\\me\\talk.mp3'];
    const { body, contentType } = multipartBody(names.map((filename) => ({ name: 'files', filename, data: audio })));
    const res = await request(handle.app)
      .post(`${API}/denoise/batch`)
      .set(auth())
      .set('Content-Type', contentType)
      .send(body)
      .buffer(true)
      .parse(binary);
    expect(res.status).toBe(200);
    const entries = readZip(res.body).map((e) => e.name);
    const manifest = JSON.parse(readZip(res.body).find((e) => e.name === 'manifest.json')!.data.toString());
    const outputs = manifest.items.map((it: { output: string }) => it.output);
    expect(outputs).toEqual([
      'a_denoised.wav',
      'a_denoised_2.wav',
      'a_denoised_3.wav',
      'A_denoised_4.wav',
      'audio_denoised.wav',
      'bc_denoised.wav',
      'hidden_denoised.wav',
      'talk_denoised.wav',
    ]);
    expect(entries.sort()).toEqual([...outputs, 'manifest.json'].sort());
    for (const name of entries) {
      expect(name).not.toMatch(/[/\\]|\.\.|[\u0000-\u001f]/);
    }
    expect(manifest.items.map((it: { input: string }) => it.input)).toEqual(['a.wav', 'a.wav', 'a.wav', 'A.WAV', '..', 'bc.flac', '.hidden.wav', 'talk.mp3']);
  });

  test('batch response=json: the manifest with audio_base64 per ok item', async () => {
    const res = await request(handle.app)
      .post(`${API}/denoise/batch`)
      .set(auth())
      .field('response', 'json')
      .field('model', 'nsm-1')
      .attach('files', MONO_16K)
      .attach('files', fixture('empty.wav'));
    expect(res.status).toBe(200);
    expect(Number(res.headers['content-length'])).toBe(Buffer.byteLength(res.text));
    expect(JSON.parse(res.headers['x-ns-batch'])).toMatchObject({ files: 2, succeeded: 1, failed: 1 });
    expect(res.body).toMatchObject({ model: 'nsm-1', output_format: 'wav', files: 2, succeeded: 1, failed: 1 });
    const [ok, bad] = res.body.items;
    expect(ok).toMatchObject({ index: 0, status: 'ok', output: 'speech-noisy-16k-mono_denoised.wav' });
    const audio = Buffer.from(ok.audio_base64, 'base64');
    expect(audio.length).toBe(ok.bytes);
    expect(wavInfo(audio).sampleRate).toBe(16000);
    expect(bad).toEqual({ index: 1, input: 'empty.wav', status: 'error', error: { type: 'invalid_audio', message: 'file is empty' } });
  });

  test('batch limits and validation: 26 files → 413 payload_too_large; no files / wrong field / bad option → 400', async () => {
    let req = request(handle.app).post(`${API}/denoise/batch`).set(auth());
    for (let i = 0; i < 26; i++) req = req.attach('files', fixture('not-audio.wav'));
    const tooMany = await req;
    expect(tooMany.status).toBe(413);
    expect(tooMany.body.error).toMatchObject({ type: 'payload_too_large', message: expect.stringMatching(/at most 25/) });

    const none = await request(handle.app).post(`${API}/denoise/batch`).set(auth()).field('model', 'nsm-2');
    expect(none.status).toBe(400);
    expect(none.body.detail).toMatch(/missing files/);

    const wrong = await request(handle.app).post(`${API}/denoise/batch`).set(auth()).attach('file', MONO_16K);
    expect(wrong.status).toBe(400);
    expect(wrong.body.detail).toBe('unexpected file field "file"; send the audio as "files"');

    const badResponse = await request(handle.app).post(`${API}/denoise/batch`).set(auth()).field('response', 'audio').attach('files', MONO_16K);
    expect(badResponse.status).toBe(400);
    expect(badResponse.body.detail).toMatch(/response must be "zip" or "json"/);
  });

  test('GET /models, /sample, /health', async () => {
    const models = await request(handle.app).get(`${API}/models`).set(auth());
    expect(models.status).toBe(200);
    expect(models.body.default).toBe('nsm-2');
    expect(models.body.models.map((m: { id: string }) => m.id)).toEqual(['nsm-1', 'nsm-2', 'nsm-3', 'nsm-4', 'nsm-2-hd']);
    for (const m of models.body.models) {
      expect(Object.keys(m).sort()).toEqual(['available', 'description', 'id', 'label', 'sample_rate', 'size_mb']);
      expect(m.available).toBe(true);
      expect(m.size_mb).toBeGreaterThan(0);
    }
    expect(models.body.models.find((m: { id: string }) => m.id === 'nsm-2-hd').sample_rate).toBe(48000);

    const sample = await request(handle.app).get(`${API}/sample`).set(auth()).buffer(true).parse(binary);
    expect(sample.status).toBe(200);
    expect(sample.headers['content-type']).toBe('audio/wav');
    expect(wavInfo(sample.body).sampleRate).toBe(16000);
    expect(Number(sample.headers['content-length'])).toBe(sample.body.length);

    const health = await request(handle.app).get(`${API}/health`).set(auth());
    expect(health.status).toBe(200);
    expect(health.body).toMatchObject({ status: 'ok', version: '1.0.0', models: ['nsm-1', 'nsm-2', 'nsm-3', 'nsm-4', 'nsm-2-hd'] });
    expect(health.body.workers).toMatchObject({ size: 2, busy: expect.any(Number), queued: expect.any(Number) });
    expect(health.body.uptime_s).toBeGreaterThanOrEqual(0);
  });

  test('GET /openapi.json needs no token and describes every endpoint', async () => {
    const res = await request(handle.app).get('/openapi.json');
    expect(res.status).toBe(200);
    expect(res.body.openapi).toBe('3.1.0');
    expect(res.body.info.version).toBe('1.0.0');
    for (const p of ['denoise', 'denoise/batch', 'models', 'sample', 'health']) {
      expect(res.body.paths[`${API}/${p}`]).toBeDefined();
    }
    // The description stays in step with the code: error types, form fields, error statuses.
    expect([...res.body.components.schemas.ErrorEnvelope.properties.error.properties.type.enum].sort()).toEqual(
      Object.keys(GATEWAY_ERRORS).sort(),
    );
    // /denoise also takes the echo canceller's reference as a second file part; batch does not.
    for (const [p, fileFields] of [['denoise', ['file', 'echo_reference']], ['denoise/batch', ['files']]] as const) {
      const post = res.body.paths[`${API}/${p}`].post;
      const props = Object.keys(post.requestBody.content['multipart/form-data'].schema.properties);
      expect(props.sort()).toEqual([...fileFields, ...COMMON_FIELDS].sort());
      for (const status of ['200', '400', '401', '402', '403', '413', '422', '429', '502', '503', '504']) {
        expect([p, status, post.responses[status] !== undefined]).toEqual([p, status, true]);
      }
    }
  });

  test('scopes still apply: a models-only token cannot denoise', async () => {
    const limited = await createToken(handle.store, ['noise-suppressor:models']);
    const res = await request(handle.app).post(`${API}/denoise`).set('X-API-Key', limited).attach('file', MONO_16K);
    expect(res.status).toBe(403);
    expect(res.body.error.type).toBe('scope_denied');
  });

  describe('client aborts leave no temp files', () => {
    let server: http.Server;
    let url: string;
    beforeAll(async () => {
      ({ server, url } = await listen(handle.app));
    });
    afterAll(() => closeQuietly(server));

    test('abort while the upload is still arriving', async () => {
      const audio = fs.readFileSync(STEREO_44K);
      const { body, contentType } = multipartBody([{ name: 'file', filename: 'x.wav', data: audio }]);
      await new Promise<void>((resolve) => {
        const req = http.request(`${url}${API}/denoise`, {
          method: 'POST',
          headers: { ...auth(), 'Content-Type': contentType, 'Content-Length': body.length },
        });
        req.on('error', () => resolve());
        req.write(body.subarray(0, body.length >> 1));
        // Let the half body reach the model service's temp dir, then vanish.
        setTimeout(() => {
          req.destroy();
          resolve();
        }, 300);
      });
      await eventually(() => tmpEntries(config).length === 0);
    });

    test('abort while the file is being denoised', async () => {
      const { body, contentType } = multipartBody([
        { name: 'model', value: 'nsm-4' },
        { name: 'file', filename: 'x.wav', data: fs.readFileSync(STEREO_44K) },
      ]);
      let answered = false;
      await new Promise<void>((resolve) => {
        const req = http.request(`${url}${API}/denoise`, {
          method: 'POST',
          headers: { ...auth(), 'Content-Type': contentType, 'Content-Length': body.length },
        });
        req.on('error', () => resolve());
        req.on('response', () => {
          answered = true;
          resolve();
        });
        req.end(body);
        const poll = setInterval(() => {
          // Abort once the request directory exists (upload stored, processing under way).
          if (tmpEntries(config).length > 0) {
            clearInterval(poll);
            setTimeout(() => req.destroy(), 100);
          }
        }, 10);
      });
      expect(answered).toBe(false); // the abort really happened mid-processing
      await eventually(() => tmpEntries(config).length === 0);
      // The service is still healthy afterwards.
      const res = await request(handle.app).get(`${API}/health`).set(auth());
      expect(res.body.workers.streams).toBe(0);
    });
  });
});
