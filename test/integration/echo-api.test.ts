// The echo reference on POST /denoise through the whole app (gateway, model service over HTTP, real engine, ffmpeg), on
// scenes generated here (echo-helpers.ts: a far end played through a short room into the microphone, a near end from
// 8 s): the echo goes (far-end-only stretches against the same call without the reference), the output keeps the
// input's length, rate and channels, the stats and the JSON answer say what the canceller did, a silent reference
// changes no byte for any model and format, and the refusals (unreadable 422, too long or too short 400, too large
// 413, batches 400) leave no temp files.
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { spawnSync } from 'node:child_process';
import request from 'supertest';
import { createApp, type AppHandle } from '../../src/app';
import type { Config } from '../../src/config';
import { createInferenceEngine } from '../../src/inference/runtime/engine';
import { MODEL_IDS, type InferenceEngine } from '../../src/inference/types';
import { createModelServiceApp } from '../../src/model-service/app';
import { decodeAudio } from '../../scripts/lib/audio-io';
import { db, echoScene, energy, highPass48, writeMono } from '../helpers/echo-helpers';
import { createToken, eventually, fixture, testConfig, tmpEntries, wavInfo } from '../helpers/service-helpers';

const API = '/v1/noise-suppressor';

const binary = ((res: http.IncomingMessage, cb: (err: Error | null, body: Buffer) => void): void => {
  const chunks: Buffer[] = [];
  res.on('data', (c: Buffer) => chunks.push(c));
  res.on('end', () => cb(null, Buffer.concat(chunks)));
}) as unknown as Parameters<request.Test['parse']>[0];

describe('echo reference on /denoise', () => {
  let config: Config;
  let handle: AppHandle;
  let token: string;
  let dir: string;
  const file = (name: string): string => path.join(dir, name);
  /** The ffmpeg binary, for references in other formats. */
  const ffmpeg = (...args: string[]): void => {
    const r = spawnSync(config.ffmpegPath, ['-v', 'error', '-y', ...args]);
    if (r.status !== 0) throw new Error(String(r.stderr));
  };

  beforeAll(async () => {
    config = testConfig();
    handle = await createApp(config, { log: () => undefined });
    token = await createToken(handle.store, ['*']);
    dir = fs.mkdtempSync(path.join(config.dataDir, 'echo-'));
    for (const rate of [16000, 48000] as const) {
      const scene = await echoScene({ rate, seconds: 12, nearFrom: 8, delayMs: 70 });
      writeMono(file(`mic${rate}.wav`), rate, scene.mic);
      writeMono(file(`far${rate}.wav`), rate, scene.ref);
      writeMono(file(`near${rate}.wav`), rate, scene.near);
    }
  });

  afterAll(async () => {
    await handle.close();
    fs.rmSync(config.dataDir, { recursive: true, force: true });
  });

  const post = (endpoint = 'denoise') => request(handle.app).post(`${API}/${endpoint}`).set('Authorization', `Bearer ${token}`);
  /** The answer's audio decoded (mono at `rate`). */
  const decoded = (body: Buffer, rate: number, name: string): Float32Array => {
    fs.writeFileSync(file(name), body);
    return decodeAudio(file(name), rate)[0];
  };

  test('16 kHz: the echo goes, the near end stays; same length, rate and channels; stats and JSON say what the canceller did', async () => {
    const plain = await post().attach('file', file('mic16000.wav')).buffer(true).parse(binary);
    const res = await post().attach('file', file('mic16000.wav')).attach('echo_reference', file('far16000.wav')).buffer(true).parse(binary);
    expect(plain.status).toBe(200);
    expect(res.status).toBe(200);
    expect(res.body.length).toBe(plain.body.length);
    expect(wavInfo(res.body)).toEqual(wavInfo(plain.body));
    const stats = JSON.parse(res.headers['x-ns-stats']);
    expect(stats).toMatchObject({ duration_s: 12, channels: 1, output_sample_rate: 16000, echo_reference: true, echo_reference_active: true });
    expect(Math.abs(stats.echo_delay_ms - 70)).toBeLessThanOrEqual(24); // the room's direct path is 70 ms behind the reference
    expect(stats.echo_erle_db).toBeGreaterThan(6);
    const plainStats = JSON.parse(plain.headers['x-ns-stats']);
    for (const k of ['echo_reference', 'echo_reference_active', 'echo_delay_ms', 'echo_erle_db']) expect(plainStats[k]).toBeUndefined();

    const r = 16000;
    const without = decoded(plain.body, r, 'plain.wav');
    const withRef = decoded(res.body, r, 'with.wav');
    // Far-end single talk after 4 s: what the denoiser leaves of the echo (it is speech), against what is left with the reference.
    const removed = db(energy(without, 4 * r, 8 * r), energy(withRef, 4 * r, 8 * r));
    expect(removed).toBeGreaterThan(15);
    // Double talk from 8 s: the near end comes through (within 6 dB of its level in the microphone).
    const near = decodeAudio(file('near16000.wav'), r)[0];
    const kept = db(energy(withRef, 8.5 * r), energy(near, 8.5 * r));
    expect(kept).toBeGreaterThan(-6);
    // With an attenuation limit (the dry mix is the echo-free signal, not the microphone) and a loudness target (the
    // input read whole first, then replayed beside the reference): the echo still goes.
    const limited = await post().field('attenuation_limit_db', '12').field('loudness', 'podcast').attach('file', file('mic16000.wav'))
      .attach('echo_reference', file('far16000.wav')).buffer(true).parse(binary);
    expect(limited.status).toBe(200);
    expect(db(energy(without, 4 * r, 8 * r), energy(decoded(limited.body, r, 'limited.wav'), 4 * r, 8 * r))).toBeGreaterThan(15);

    // response=json: the same stats and the same audio.
    const json = await post().field('response', 'json').attach('file', file('mic16000.wav')).attach('echo_reference', file('far16000.wav'));
    expect(json.status).toBe(200);
    expect({ ...json.body.stats, processing_s: 0, rtf: 0 }).toEqual({ ...stats, processing_s: 0, rtf: 0 });
    expect(Buffer.from(json.body.audio_base64, 'base64').equals(res.body)).toBe(true);
    await eventually(() => tmpEntries(config).length === 0);
  });

  test('48 kHz kept: a stereo MP3 reference at 44.1 kHz; the echo goes below and above 8 kHz', async () => {
    ffmpeg('-i', file('far48000.wav'), '-ac', '2', '-ar', '44100', '-c:a', 'libmp3lame', '-b:a', '192k', file('far.mp3'));
    const plain = await post().attach('file', file('mic48000.wav')).buffer(true).parse(binary);
    const res = await post().attach('file', file('mic48000.wav')).attach('echo_reference', file('far.mp3')).buffer(true).parse(binary);
    expect(res.status).toBe(200);
    expect(wavInfo(res.body)).toEqual({ sampleRate: 48000, channels: 1, bitsPerSample: 16 });
    expect(res.body.length).toBe(plain.body.length);
    const stats = JSON.parse(res.headers['x-ns-stats']);
    expect(stats).toMatchObject({ processing_sample_rate: 48000, echo_reference: true, echo_reference_active: true });
    const r = 48000;
    const without = decoded(plain.body, r, 'plain48.wav');
    const withRef = decoded(res.body, r, 'with48.wav');
    const whole = db(energy(without, 4 * r, 8 * r), energy(withRef, 4 * r, 8 * r));
    expect(whole).toBeGreaterThan(15);
    const hiWithout = highPass48(without.subarray(4 * r, 8 * r), 8500, 201);
    const hiWith = highPass48(withRef.subarray(4 * r, 8 * r), 8500, 201);
    const high = db(energy(hiWithout), energy(hiWith));
    expect(high).toBeGreaterThan(15);
  });

  test('a silent reference changes no byte: every model, WAV and FLAC, 16 kHz and full band', async () => {
    // Silence as a stereo FLAC at another rate (decoded and resampled by ffmpeg), and as a 16 kHz WAV.
    ffmpeg('-f', 'lavfi', '-i', 'anullsrc=r=22050:cl=stereo', '-t', '3', '-c:a', 'flac', file('silent.flac'));
    writeMono(file('silent.wav'), 16000, new Float32Array(48000));
    // Every chain (each aligns the canceller's output its own way), each in one output format, alternating: the
    // encoder comes after the canceller and the chain and does not depend on them (every model in both formats was
    // twice the calls, ~12 s of the suite, for no other path).
    const cases: Array<{ input: string; model: string; format: string; reference: string }> = [];
    MODEL_IDS.forEach((model, i) => cases.push({ input: fixture('speech-noisy-44k1-stereo.wav'), model, format: i % 2 ? 'flac' : 'wav', reference: file('silent.flac') }));
    for (const format of ['wav', 'flac']) cases.push({ input: fixture('speech-noisy-16k-mono.wav'), model: 'nsm-2', format, reference: file('silent.wav') });
    expect(new Set(cases.map((c) => c.format))).toEqual(new Set(['wav', 'flac']));
    for (const c of cases) {
      // The call without a reference and the one with it at once: they are independent.
      const [plain, res] = await Promise.all([
        post().field('model', c.model).field('output_format', c.format).attach('file', c.input).buffer(true).parse(binary),
        post().field('model', c.model).field('output_format', c.format).attach('file', c.input).attach('echo_reference', c.reference).buffer(true).parse(binary),
      ]);
      expect([c.model, c.format, plain.status]).toEqual([c.model, c.format, 200]);
      expect([c.model, c.format, res.status]).toEqual([c.model, c.format, 200]);
      expect([c.model, c.format, res.body.equals(plain.body)]).toEqual([c.model, c.format, true]);
      expect(JSON.parse(res.headers['x-ns-stats'])).toMatchObject({ echo_reference: true, echo_reference_active: false, echo_delay_ms: null, echo_erle_db: null });
    }
  });

  test('refusals: unreadable or empty (422), too long or too short (400, saying which), on a batch (400); no temp files left', async () => {
    const mic = file('mic16000.wav'); // 12 s
    const expectDetail = (res: request.Response, status: number, type: string, detail: RegExp): void => {
      expect([res.status, res.body.type]).toEqual([status, type]);
      expect(res.body.detail).toMatch(detail);
    };
    expectDetail(await post().attach('file', mic).attach('echo_reference', fixture('not-audio.wav')), 422, 'invalid_audio', /^echo_reference: could not decode/);
    expectDetail(await post().attach('file', mic).attach('echo_reference', fixture('empty.wav')), 422, 'invalid_audio', /^echo_reference: file is empty/);
    // Too long: 12 s + 10.5 s (the header check allows a second of slack; the exact count after decoding refuses it).
    writeMono(file('long.wav'), 16000, new Float32Array(22.5 * 16000).fill(0.01));
    expectDetail(await post().attach('file', mic).attach('echo_reference', file('long.wav')), 400, 'invalid_request', /^echo_reference is longer than the file by more than 10 s \(more than 22 s against 12 s\)/);
    // ... and well over, refused from the headers before anything is decoded.
    ffmpeg('-f', 'lavfi', '-i', 'sine=f=300:d=40', '-ar', '16000', '-c:a', 'libopus', file('long.ogg'));
    expectDetail(await post().attach('file', mic).attach('echo_reference', file('long.ogg')), 400, 'invalid_request', /^echo_reference is longer than the file by more than 10 s/);
    // Too short: 5.7 s of 12 s.
    writeMono(file('short.wav'), 16000, new Float32Array(5.7 * 16000).fill(0.01));
    expectDetail(await post().attach('file', mic).attach('echo_reference', file('short.wav')), 400, 'invalid_request', /^echo_reference is shorter than half of the file \(5\.7 s against 12 s\)/);
    // Half of it, or 10 s more, is fine.
    writeMono(file('half.wav'), 16000, new Float32Array(6 * 16000));
    expect((await post().attach('file', mic).attach('echo_reference', file('half.wav'))).status).toBe(200);

    expectDetail(await post('denoise/batch').attach('files', mic).attach('echo_reference', file('far16000.wav')), 400, 'invalid_request', /"echo_reference" is not taken by \/denoise\/batch/);
    expectDetail(await post().attach('file', mic).field('echo_reference', 'far.wav'), 400, 'invalid_request', /"echo_reference" must be a file part/);
    expectDetail(await post().attach('file', mic).attach('echo_reference', file('far16000.wav')).attach('echo_reference', file('far16000.wav')), 400, 'invalid_request', /only one "echo_reference" per call/);
    await eventually(() => tmpEntries(config).length === 0);
  });
});

describe('echo reference size: it counts toward the call\'s upload limit', () => {
  let config: Config;
  let engine: InferenceEngine;
  const TOKEN = 'echo-api-test-token-0123456789abcdef';

  beforeAll(async () => {
    config = testConfig({ workers: 1 });
    engine = await createInferenceEngine(config, { warmUp: false });
  });

  afterAll(async () => {
    await engine.close();
    fs.rmSync(config.dataDir, { recursive: true, force: true });
  });

  test('file + echo_reference over the per-file limit together → 413; each alone fits', async () => {
    const app = createModelServiceApp({ config, engine, token: TOKEN, limits: { maxFileBytes: 150_000 } });
    const mono = fixture('speech-noisy-16k-mono.wav'); // 96 044 bytes
    const res = await request(app).post('/denoise').set('Authorization', `Bearer ${TOKEN}`).attach('file', mono).attach('echo_reference', mono);
    expect(res.status).toBe(413);
    expect(res.body).toMatchObject({ type: 'payload_too_large', detail: 'file and echo_reference together are larger than 150000 bytes, the most one call accepts' });
    const alone = await request(app).post('/denoise').set('Authorization', `Bearer ${TOKEN}`).attach('file', mono);
    expect(alone.status).toBe(200);
    await eventually(() => tmpEntries(config).length === 0);
  });
});
