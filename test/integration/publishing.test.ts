// Publishing outputs through the whole app (gateway, in-process model service, engine, ffmpeg): mp3/opus/m4a and
// loudness normalisation on /denoise and /denoise/batch, checked on the files themselves with ffmpeg (codec, rate,
// EBU R128 loudness and true peak), plus the loudness fields of X-NS-Stats, the batch manifest and job stats
// (loudness_target_reached among them), and the validation of the new fields.
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import request from 'supertest';
import { createApp, type AppHandle } from '../../src/app';
import { probeAudio } from '../../src/audio/probe';
import type { Config } from '../../src/config';
import { writePcm } from '../../src/pipeline/clips';
import { createToken, eventually, fixture, readZip, testConfig } from '../helpers/service-helpers';

const API = '/v1/noise-suppressor';
const STEREO = fixture('speech-noisy-44k1-stereo.wav');

const binary = ((res: http.IncomingMessage, cb: (err: Error | null, body: Buffer) => void): void => {
  const chunks: Buffer[] = [];
  res.on('data', (c: Buffer) => chunks.push(c));
  res.on('end', () => cb(null, Buffer.concat(chunks)));
}) as unknown as Parameters<request.Test['parse']>[0];

describe('output formats and loudness normalisation', () => {
  let config: Config;
  let handle: AppHandle;
  let token: string;
  let dir: string;

  function ebur128(file: string): Promise<{ integrated: number; truePeak: number }> {
    return new Promise((resolve, reject) => {
      execFile(config.ffmpegPath, ['-hide_banner', '-nostats', '-i', file, '-af', 'ebur128=peak=true', '-f', 'null', '-'], (err, _o, stderr) => {
        if (err) return reject(err);
        const summary = stderr.slice(stderr.lastIndexOf('Summary:'));
        resolve({
          integrated: Number(/I:\s+(-?[\d.]+) LUFS/.exec(summary)![1]),
          truePeak: Number(/Peak:\s+(-?[\d.]+) dBFS/.exec(summary)![1]),
        });
      });
    });
  }

  beforeAll(async () => {
    config = testConfig();
    dir = path.join(config.dataDir, 'out');
    fs.mkdirSync(dir);
    handle = await createApp(config, { log: () => undefined });
    token = await createToken(handle.store, ['*']);
  });
  afterAll(async () => {
    await handle.close();
    fs.rmSync(config.dataDir, { recursive: true, force: true });
  });

  const denoise = (fields: Record<string, string>, file = STEREO) => {
    let req = request(handle.app).post(`${API}/denoise`).set('X-API-Key', token);
    for (const [k, v] of Object.entries(fields)) req = req.field(k, v);
    return req.attach('file', file).buffer(true).parse(binary);
  };

  test.each([
    ['mp3', 'audio/mpeg', 'mp3', 44100],
    ['opus', 'audio/ogg', 'opus', 48000],
    ['m4a', 'audio/mp4', 'aac', 44100],
  ] as const)('output_format=%s with loudness_lufs=-16: %s, a real %s file, -16 LUFS ±1, true peak ≤ -2 dBTP', async (format, type, codec, rate) => {
    const res = await denoise({ model: 'nsm-1', output_format: format, loudness_lufs: '-16' });
    expect(res.status).toBe(200);
    expect(res.headers['content-type']).toBe(type);
    expect(res.headers['content-disposition']).toBe(`attachment; filename="speech-noisy-44k1-stereo_denoised.${format}"`);
    const file = path.join(dir, `out.${format}`);
    fs.writeFileSync(file, res.body as Buffer);
    const probe = await probeAudio(config, file);
    expect([probe.codec, probe.channels, probe.sampleRate]).toEqual([codec, 2, rate]);
    const stats = JSON.parse(res.headers['x-ns-stats']);
    expect(stats).toMatchObject({ output_format: format, output_sample_rate: rate, loudness_target_lufs: -16, loudness_target_reached: true });
    expect(Math.abs(stats.output_loudness_lufs + 16)).toBeLessThanOrEqual(0.2);
    expect(stats.output_true_peak_dbtp).toBeLessThanOrEqual(-2);
    const measured = await ebur128(file);
    expect(Math.abs(measured.integrated + 16)).toBeLessThanOrEqual(1);
    expect(measured.truePeak).toBeLessThanOrEqual(-2); // the lossy ceiling, on the decoded file
  });

  test('wav and flac normalised to -23 LUFS (broadcast): within 0.3 LU by ffmpeg, true peak ≤ -1 dBTP, length kept', async () => {
    for (const format of ['wav', 'flac']) {
      const res = await denoise({ model: 'nsm-2', output_format: format, loudness_lufs: '-23' });
      expect(res.status).toBe(200);
      const file = path.join(dir, `broadcast.${format}`);
      fs.writeFileSync(file, res.body as Buffer);
      const measured = await ebur128(file);
      expect([format, Math.abs(measured.integrated + 23) <= 0.3]).toEqual([format, true]);
      expect(measured.truePeak).toBeLessThanOrEqual(-1);
      const probe = await probeAudio(config, file);
      expect(Math.abs(probe.durationS! - 3)).toBeLessThan(0.01);
      const stats = JSON.parse(res.headers['x-ns-stats']);
      expect(stats.loudness_gain_db).toBeLessThan(0); // a cut: the cleaned fixture is louder than -23 LUFS
      expect(Math.abs(stats.output_loudness_lufs + 23)).toBeLessThanOrEqual(0.1);
    }
  });

  test('a loud target that needs the limiter: -14 LUFS reached within 0.5 LU, true peak still ≤ -1 dBTP', async () => {
    const res = await denoise({ model: 'nsm-2', loudness_lufs: '-14' });
    const file = path.join(dir, 'loud.wav');
    fs.writeFileSync(file, res.body as Buffer);
    const measured = await ebur128(file);
    expect(Math.abs(measured.integrated + 14)).toBeLessThanOrEqual(0.5);
    expect(measured.truePeak).toBeLessThanOrEqual(-1);
  });

  test('without loudness_lufs: input/output loudness and noise removed in X-NS-Stats, no normalisation fields', async () => {
    const res = await denoise({ model: 'nsm-2' });
    const stats = JSON.parse(res.headers['x-ns-stats']);
    expect(typeof stats.input_loudness_lufs).toBe('number');
    expect(typeof stats.output_loudness_lufs).toBe('number');
    expect(stats.output_loudness_lufs).toBeLessThan(stats.input_loudness_lufs); // noise went away
    expect(typeof stats.noise_removed_db).toBe('number');
    expect(stats).not.toHaveProperty('loudness_target_lufs');
    expect(stats).not.toHaveProperty('output_true_peak_dbtp');
    expect(stats).not.toHaveProperty('loudness_target_reached');
    const file = path.join(dir, 'plain.wav');
    fs.writeFileSync(file, res.body as Buffer);
    expect(Math.abs((await ebur128(file)).integrated - stats.output_loudness_lufs)).toBeLessThanOrEqual(0.15);
  });

  test('silence: loudness null, no gain applied, still a valid file', async () => {
    const silent = path.join(dir, 'silence.wav');
    await writePcm(config, [new Float32Array(16000 * 2)], 16000, silent, ['-c:a', 'pcm_s16le', '-f', 'wav']);
    const res = await denoise({ loudness_lufs: '-16', output_format: 'opus' }, silent);
    expect(res.status).toBe(200);
    const stats = JSON.parse(res.headers['x-ns-stats']);
    expect(stats).toMatchObject({ input_loudness_lufs: null, output_loudness_lufs: null, noise_removed_db: null, loudness_gain_db: 0, loudness_target_reached: false });
  });

  test('/denoise/batch with output_format=opus and loudness_lufs: .opus entries, manifest stats carry the loudness', async () => {
    const res = await request(handle.app)
      .post(`${API}/denoise/batch`)
      .set('X-API-Key', token)
      .field('model', 'nsm-1')
      .field('output_format', 'opus')
      .field('loudness_lufs', '-19')
      .attach('files', STEREO)
      .attach('files', fixture('speech-noisy-16k-mono.wav'))
      .buffer(true)
      .parse(binary);
    expect(res.status).toBe(200);
    const entries = readZip(res.body as Buffer);
    expect(entries.map((e) => e.name).sort()).toEqual(['manifest.json', 'speech-noisy-16k-mono_denoised.opus', 'speech-noisy-44k1-stereo_denoised.opus']);
    const manifest = JSON.parse(entries.find((e) => e.name === 'manifest.json')!.data.toString());
    expect(manifest.output_format).toBe('opus');
    for (const item of manifest.items) {
      expect(item.stats).toMatchObject({ output_format: 'opus', loudness_target_lufs: -19, output_sample_rate: item.index === 0 ? 48000 : 16000, loudness_target_reached: true });
      // Measured on the encoded file (a lossy one is decoded again), which is re-encoded only beyond 0.3 LU.
      expect(Math.abs(item.stats.output_loudness_lufs + 19)).toBeLessThanOrEqual(0.3);
    }
    const summary = JSON.parse(res.headers['x-ns-batch']);
    expect(summary.duration_s).toBeCloseTo(6, 1);
  });

  test('jobs: the stats of a job with loudness_lufs carry loudness_target_reached (true for speech, false for silence)', async () => {
    const silent = path.join(dir, 'silence-job.wav');
    await writePcm(config, [new Float32Array(16000 * 2)], 16000, silent, ['-c:a', 'pcm_s16le', '-f', 'wav']);
    for (const [file, reached] of [[fixture('speech-noisy-16k-mono.wav'), true], [silent, false]] as const) {
      const res = await request(handle.app).post(`${API}/jobs`).set('X-API-Key', token).field('output_format', 'mp3').field('loudness_lufs', '-16').attach('file', file);
      expect(res.status).toBe(202);
      let job: { status: string; stats: Record<string, unknown> | null } = { status: 'queued', stats: null };
      await eventually(async () => {
        job = (await request(handle.app).get(`${API}/jobs/${res.body.id}`).set('X-API-Key', token)).body;
        return job.status === 'succeeded' || job.status === 'failed';
      }, 60_000);
      expect(job).toMatchObject({ status: 'succeeded', stats: { loudness_target_lufs: -16, loudness_target_reached: reached } });
    }
  });

  test('validation: loudness_lufs outside -40…-5 or not a number, unknown output_format → 400; mp3 with 6 channels → 422', async () => {
    for (const [fields, pattern] of [
      [{ loudness_lufs: '-50' }, /loudness_lufs must be a number from -40 to -5/],
      [{ loudness_lufs: 'loud' }, /loudness_lufs must be a number/],
      [{ loudness_lufs: '0' }, /loudness_lufs/],
      [{ output_format: 'ogg' }, /output_format must be one of "wav", "flac", "mp3", "opus", "m4a"/],
    ] as const) {
      const res = await denoise(fields).parse((r, cb) => {
        let t = '';
        r.on('data', (c: Buffer) => (t += c));
        r.on('end', () => cb(null, JSON.parse(t)));
      });
      expect(res.status).toBe(400);
      expect(res.body.type).toBe('invalid_request');
      expect(res.body.detail).toMatch(pattern);
    }
    const six = path.join(dir, 'six.wav');
    const ch = new Float32Array(16000).map((_, i) => 0.1 * Math.sin(i / 10));
    await writePcm(config, [ch, ch, ch, ch, ch, ch], 16000, six, ['-c:a', 'pcm_s16le', '-f', 'wav']);
    const res = await request(handle.app).post(`${API}/denoise`).set('X-API-Key', token).field('output_format', 'mp3').attach('file', six);
    expect(res.status).toBe(422);
    expect(res.body).toMatchObject({ type: 'invalid_audio', detail: 'mp3 output supports at most 2 channels; the input has 6 (use wav)' });
  });
});
