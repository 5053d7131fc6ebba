// 8 kHz files (telephony) through the whole app: with the input's rate kept (the default) the file is decoded as it is
// and the model runs narrow band in the worker (its 16 kHz chain between the half-band resamplers, as an 8 kHz live
// stream runs it: test/integration/streaming.test.ts checks the two are equal); with keep_input_sample_rate=false it is decoded to
// 16 kHz as before. Speech detection and trimming work on the 8 kHz output (the VAD hears it at 16 kHz through the
// same interpolator) and find the turns where they find them at 16 kHz.
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import request from 'supertest';
import { createApp, type AppHandle } from '../../src/app';
import type { Config } from '../../src/config';
import { pcm16WavHeader } from '../../src/audio/wav';
import { decodeAudio } from '../../scripts/lib/audio-io';
import { createToken, fixture, testConfig, wavInfo } from '../helpers/service-helpers';

const API = '/v1/noise-suppressor';

const binary = ((res: http.IncomingMessage, cb: (err: Error | null, body: Buffer) => void): void => {
  const chunks: Buffer[] = [];
  res.on('data', (c: Buffer) => chunks.push(c));
  res.on('end', () => cb(null, Buffer.concat(chunks)));
}) as unknown as Parameters<request.Test['parse']>[0];

/** The 3 s fixture, 2.5 s of low noise, the fixture again: 16-bit mono WAV at 16 kHz. */
function twoTurns16k(): Buffer {
  const speech = decodeAudio(fixture('speech-noisy-16k-mono.wav'), 16000)[0];
  const gap = 2.5 * 16000;
  const x = new Float32Array(2 * speech.length + gap);
  x.set(speech);
  let seed = 7;
  for (let i = 0; i < gap; i++) {
    seed = (seed * 1103515245 + 12345) >>> 0;
    x[speech.length + i] = (seed / 2 ** 32 - 0.5) * 0.01;
  }
  x.set(speech, speech.length + gap);
  const data = Buffer.alloc(x.length * 2);
  for (let i = 0; i < x.length; i++) data.writeInt16LE(Math.max(-32768, Math.min(32767, Math.round(x[i] * 32767))), i * 2);
  return Buffer.concat([pcm16WavHeader(data.length, 16000, 1), data]);
}

/** Frames in a 16-bit mono WAV's data chunk. */
function frames(buf: Buffer): number {
  for (let p = 12; p + 8 <= buf.length; ) {
    const size = buf.readUInt32LE(p + 4);
    if (buf.toString('ascii', p, p + 4) === 'data') return size / 2;
    p += 8 + size + (size % 2);
  }
  throw new Error('no data chunk');
}

describe('8 kHz files', () => {
  let config: Config;
  let handle: AppHandle;
  let token: string;
  let wav16k: Buffer;
  let wav8k: Buffer;

  beforeAll(async () => {
    config = testConfig();
    handle = await createApp(config, { log: () => undefined });
    token = await createToken(handle.store, ['*']);
    wav16k = twoTurns16k();
    const r = spawnSync(config.ffmpegPath, ['-v', 'error', '-i', 'pipe:0', '-ar', '8000', '-c:a', 'pcm_s16le', '-f', 'wav', 'pipe:1'], { input: wav16k, maxBuffer: 1 << 24 });
    wav8k = r.stdout;
    fs.writeFileSync(path.join(config.dataDir, 'two-turns-8k.wav'), wav8k);
  });

  afterAll(async () => {
    await handle.close();
    fs.rmSync(config.dataDir, { recursive: true, force: true });
  });

  const post = () => request(handle.app).post(`${API}/denoise`).set('Authorization', `Bearer ${token}`);

  test('rate kept: narrow band at 8 kHz, the band up to 4 kHz denoised; not kept: 16 kHz as before', async () => {
    const kept = await post().attach('file', wav8k, 'call.wav').buffer(true).parse(binary);
    expect(kept.status).toBe(200);
    expect(JSON.parse(kept.headers['x-ns-stats'])).toMatchObject({
      input_sample_rate: 8000, output_sample_rate: 8000, model_sample_rate: 16000, processing_sample_rate: 8000,
      bands: [{ from_hz: 0, to_hz: 4000, processing: 'denoised_16k' }],
    });
    expect(wavInfo(kept.body).sampleRate).toBe(8000);
    expect(frames(kept.body)).toBe(8.5 * 8000);
    const wide = await post().field('keep_input_sample_rate', 'false').attach('file', wav8k, 'call.wav').buffer(true).parse(binary);
    expect(JSON.parse(wide.headers['x-ns-stats'])).toMatchObject({ output_sample_rate: 16000, processing_sample_rate: 16000 });
    expect(frames(wide.body)).toBe(8.5 * 16000);
  });

  test('speech segments at 8 kHz: the turns found at 16 kHz, the audio unchanged by detection; trimming cuts the pause', async () => {
    const seg = async (wav: Buffer): Promise<{ body: any; audio: Buffer }> => {
      const res = await post().field('speech_segments', 'true').field('response', 'json').attach('file', wav, 'a.wav');
      expect(res.status).toBe(200);
      return { body: res.body, audio: Buffer.from(res.body.audio_base64, 'base64') };
    };
    const narrow = await seg(wav8k);
    const wide = await seg(wav16k);
    const a = narrow.body.speech_segments as Array<{ start_s: number; end_s: number }>;
    const b = wide.body.speech_segments as Array<{ start_s: number; end_s: number }>;
    expect(a).toHaveLength(2);
    expect(b).toHaveLength(2);
    // Within three 32 ms VAD frames: the 8 kHz file lacks the 4-8 kHz band, and the VAD's gate (vad/gate.ts) weighs
    // each frame's share of energy the denoiser kept, so a turn's edge can move by a frame or two (0.066 s seen).
    for (let i = 0; i < 2; i++) {
      expect(Math.abs(a[i].start_s - b[i].start_s)).toBeLessThan(0.1);
      expect(Math.abs(a[i].end_s - b[i].end_s)).toBeLessThan(0.1);
    }
    const plain = await post().attach('file', wav8k, 'a.wav').buffer(true).parse(binary);
    expect(narrow.audio.equals(plain.body)).toBe(true);

    const trimmed = await post().field('trim_silence', 'true').attach('file', wav8k, 'a.wav').buffer(true).parse(binary);
    const stats = JSON.parse(trimmed.headers['x-ns-stats']);
    expect(stats.silence_removed_s).toBeGreaterThan(2.3);
    expect(stats.silence_removed_s).toBeLessThan(2.8);
    expect(Math.abs(frames(trimmed.body) / 8000 - stats.output_duration_s)).toBeLessThan(0.001);
  }, 60_000);
});
