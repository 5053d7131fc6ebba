// speech_segments and trim_silence through the whole app (gateway, model service over HTTP, real engine, ffmpeg):
// the JSON response, X-NS-Stats' summary, the batch manifest, a job's result, the shortened output's length where
// every layer reports it, and the 400s. Input: the 16 kHz fixture twice with 2.5 s of noise between them.
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { spawnSync } from 'node:child_process';
import request from 'supertest';
import { createApp, type AppHandle } from '../src/app';
import type { Config } from '../src/config';
import { pcm16WavHeader } from '../src/audio/wav';
import type { JobView } from '../src/jobs/views';
import { decodeAudio } from '../scripts/lib/audio-io';
import { until } from './jobs-helpers';
import { createToken, fixture, readZip, testConfig, wavInfo } from './service-helpers';

const API = '/v1/noise-suppressor';

const binary = ((res: http.IncomingMessage, cb: (err: Error | null, body: Buffer) => void): void => {
  const chunks: Buffer[] = [];
  res.on('data', (c: Buffer) => chunks.push(c));
  res.on('end', () => cb(null, Buffer.concat(chunks)));
}) as unknown as Parameters<request.Test['parse']>[0];

/** Speech (3 s fixture), 2.5 s of low noise, the same speech again: 8.5 s at 16 kHz mono, 16-bit. */
function twoTurns(file: string): void {
  const speech = decodeAudio(fixture('speech-noisy-16k-mono.wav'), 16000)[0];
  const gap = 2.5 * 16000;
  const x = new Float32Array(2 * speech.length + gap);
  x.set(speech);
  let seed = 99;
  for (let i = 0; i < gap; i++) {
    seed = (seed * 1103515245 + 12345) >>> 0;
    x[speech.length + i] = (seed / 2 ** 32 - 0.5) * 0.01;
  }
  x.set(speech, speech.length + gap);
  const data = Buffer.alloc(x.length * 2);
  for (let i = 0; i < x.length; i++) data.writeInt16LE(Math.max(-32768, Math.min(32767, Math.round(x[i] * 32767))), i * 2);
  fs.writeFileSync(file, Buffer.concat([pcm16WavHeader(data.length, 16000, 1), data]));
}

/** Frames of a 16-bit WAV body: its data chunk's size, which must also be what the body holds after the header. */
function wavFrames(buf: Buffer): number {
  const { channels } = wavInfo(buf);
  for (let p = 12; p + 8 <= buf.length; ) {
    const size = buf.readUInt32LE(p + 4);
    if (buf.toString('ascii', p, p + 4) === 'data') {
      expect(buf.length - (p + 8)).toBe(size);
      return size / (2 * channels);
    }
    p += 8 + size + (size % 2);
  }
  throw new Error('no data chunk');
}

/** Seconds of any audio file, decoded by ffmpeg. */
function decodedSeconds(config: Config, file: string): number {
  const r = spawnSync(config.ffmpegPath, ['-v', 'error', '-i', file, '-ac', '1', '-ar', '16000', '-f', 'f32le', 'pipe:1'], { maxBuffer: 1 << 28 });
  return r.stdout.length / 4 / 16000;
}

describe('speech segments and silence trimming', () => {
  let config: Config;
  let handle: AppHandle;
  let token: string;
  let input: string;

  beforeAll(async () => {
    config = testConfig();
    handle = await createApp(config, { log: () => undefined });
    token = await createToken(handle.store, ['*']);
    input = path.join(config.dataDir, 'two-turns.wav');
    twoTurns(input);
  });

  afterAll(async () => {
    await handle.close();
    fs.rmSync(config.dataDir, { recursive: true, force: true });
  });

  const post = (endpoint = 'denoise') => request(handle.app).post(`${API}/${endpoint}`).set('Authorization', `Bearer ${token}`);

  test('speech_segments=true: segments in the JSON body, a summary in X-NS-Stats, the audio unchanged', async () => {
    const res = await post().field('speech_segments', 'true').field('response', 'json').attach('file', input);
    expect(res.status).toBe(200);
    const segments = res.body.speech_segments as Array<{ start_s: number; end_s: number }>;
    expect(segments).toHaveLength(2);
    const [a, b] = segments;
    expect(a.start_s).toBeGreaterThanOrEqual(0);
    expect(a.end_s).toBeLessThanOrEqual(3.3); // the speech ends at 3.0 s; the hangover and the denoiser's tail add a little
    expect(b.start_s - a.end_s).toBeGreaterThan(2.2); // the noise between the turns is not speech
    expect(b.end_s).toBeLessThanOrEqual(8.5);
    const header = JSON.parse(res.headers['x-ns-stats']);
    expect(header).toEqual(res.body.stats);
    expect(header.speech_segments).toBeUndefined();
    expect(header.speech_segment_count).toBe(2);
    expect(header.speech_s).toBeCloseTo(a.end_s - a.start_s + b.end_s - b.start_s, 2);
    expect(header.silence_removed_s).toBeUndefined();
    // Detection alone changes nothing in the audio: the bytes of a call without it.
    const plain = await post().attach('file', input).buffer(true).parse(binary);
    expect(JSON.parse(plain.headers['x-ns-stats']).speech_s).toBeUndefined();
    expect(Buffer.from(res.body.audio_base64, 'base64').equals(plain.body)).toBe(true);
  });

  test('trim_silence=true: the pause between the turns is cut to 0.5 s; lengths agree everywhere', async () => {
    const res = await post().field('trim_silence', 'true').attach('file', input).buffer(true).parse(binary);
    expect(res.status).toBe(200);
    const stats = JSON.parse(res.headers['x-ns-stats']);
    expect(stats.duration_s).toBe(8.5);
    expect(stats.silence_removed_s).toBeGreaterThan(2.3);
    expect(stats.silence_removed_s).toBeLessThan(2.8);
    expect(stats.output_duration_s).toBeCloseTo(stats.duration_s - stats.silence_removed_s, 3);
    expect(Number(res.headers['content-length'])).toBe(res.body.length);
    expect(Math.abs(wavFrames(res.body) / 16000 - stats.output_duration_s)).toBeLessThan(0.001);
    expect(stats.speech_segment_count).toBe(2);

    // Through an encoder and a loudness pass (the spool holds the shortened audio): the same length, the target met.
    const flac = await post()
      .field('trim_silence', 'true').field('trim_silence_max_pause_s', '0.3').field('output_format', 'flac').field('loudness_lufs', '-16')
      .attach('file', input).buffer(true).parse(binary);
    expect(flac.status).toBe(200);
    const fs2 = JSON.parse(flac.headers['x-ns-stats']);
    expect(fs2.silence_removed_s).toBeGreaterThan(stats.silence_removed_s + 0.3);
    expect(fs2.loudness_target_reached).toBe(true);
    const file = path.join(config.dataDir, 'trimmed.flac');
    fs.writeFileSync(file, flac.body);
    expect(Math.abs(decodedSeconds(config, file) - fs2.output_duration_s)).toBeLessThan(0.002);
  });

  test('batch: each item of manifest.json carries its segments when asked', async () => {
    const res = await post('denoise/batch').field('speech_segments', 'true').attach('files', input).attach('files', fixture('speech-noisy-44k1-stereo.wav'))
      .buffer(true).parse(binary);
    expect(res.status).toBe(200);
    const manifest = JSON.parse(readZip(res.body).find((e) => e.name === 'manifest.json')!.data.toString());
    expect(manifest.items).toHaveLength(2);
    for (const item of manifest.items) {
      expect(item.status).toBe('ok');
      expect(item.speech_segments.length).toBe(item.stats.speech_segment_count);
      expect(item.speech_segments.length).toBeGreaterThan(0);
    }
    const plain = await post('denoise/batch').attach('files', input).buffer(true).parse(binary);
    const m2 = JSON.parse(readZip(plain.body).find((e) => e.name === 'manifest.json')!.data.toString());
    expect(m2.items[0].speech_segments).toBeUndefined();
  });

  test('bad speech fields: 400 with the field and the rule', async () => {
    const cases: Array<[Record<string, string>, RegExp]> = [
      [{ speech_segments: 'maybe' }, /speech_segments must be a boolean/],
      [{ trim_silence: 'true', trim_silence_max_pause_s: '20' }, /trim_silence_max_pause_s must be a number from 0.1 to 10/],
      [{ trim_silence_max_pause_s: '1' }, /applies only with trim_silence=true/],
      [{ vad_hangover_ms: '200' }, /vad_hangover_ms applies only with speech_segments=true or trim_silence=true/],
      [{ speech_segments: 'true', vad_threshold: '1.5' }, /vad_threshold must be a number from 0.2 to 0.95/],
    ];
    for (const [fields, message] of cases) {
      let req = post();
      for (const [k, v] of Object.entries(fields)) req = req.field(k, v);
      const res = await req.attach('file', input);
      expect(res.status).toBe(400);
      expect(res.body.detail).toMatch(message);
      expect(res.body).toMatchObject({ type: 'invalid_request', request_id: expect.any(String) });
    }
  });

  test('a job: params as resolved, the segments in its result, the shortened file downloaded whole', async () => {
    const res = await request(handle.app).post(`${API}/jobs`).set('Authorization', `Bearer ${token}`)
      .field('speech_segments', 'true').field('trim_silence', 'true').field('vad_hangover_ms', '500').attach('file', input);
    expect(res.status).toBe(202);
    expect(res.body.params).toMatchObject({ speech_segments: true, trim_silence: true, trim_silence_max_pause_s: 0.5, vad_threshold: 0.7, vad_min_speech_ms: 250, vad_hangover_ms: 500 });
    const done = await until(async () => {
      const job = (await request(handle.app).get(`${API}/jobs/${res.body.id}`).set('Authorization', `Bearer ${token}`)).body as JobView;
      return job.status === 'succeeded' || job.status === 'failed' ? job : undefined;
    }, 60_000);
    expect(done.status).toBe('succeeded');
    expect(done.result!.speech_segments).toHaveLength(2);
    expect(done.stats).toMatchObject({ speech_segment_count: 2 });
    expect(done.progress).toBe(1);
    const audio = await request(handle.app).get(done.result!.url).set('Authorization', `Bearer ${token}`).buffer(true).parse(binary);
    expect(audio.body.length).toBe(done.result!.bytes);
    expect(Math.abs(wavFrames(audio.body) / 16000 - (done.stats!.output_duration_s as number))).toBeLessThan(0.001);
  });
});
