// Speech events on live streams (vad=true) through the whole app with a real WebSocket client: speech_start and
// speech_end in order with the audio (each after the output up to its time) and before `done`, at the times of
// /denoise's speech_segments for the same file (within one 32 ms VAD frame) at 16, 8 (μ-law) and 48 kHz (stereo
// float), and 44.1 kHz (resampled both ways); the audio unchanged by vad=true, and no events or fields without it;
// bad settings refused before the upgrade; a stream ended or cut mid-speech; the relayed path (a model-service
// process) gives the same events. Input: the 16 kHz fixture twice with 2.5 s of low noise between (speech-api.test.ts).
import { spawnSync } from 'node:child_process';
import { mulaw } from 'alawmulaw';
import request from 'supertest';
import { type AppHandle } from '../../src/app';
import { loadConfig, type Config } from '../../src/config';
import { pcm16WavHeader } from '../../src/audio/wav';
import type { GatewayStore } from '../../src/store/gateway/types';
import { decodeAudio } from '../../scripts/lib/audio-io';
import { eventually, fixture } from '../helpers/service-helpers';
import { refusal, relayedGateway, streamingServer, type StreamingServer, StreamClient } from '../helpers/streaming-helpers';

const API = '/v1/noise-suppressor';
const TOKEN = 'stream-vad-test-token-0123456789abcd';
const ffmpeg = loadConfig().ffmpegPath;
const FRAME_MS = 32;

/** Speech (3 s), 2.5 s of low noise, the same speech: 8.5 s of 16-bit mono at 16 kHz. */
function twoTurns(): Buffer {
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
  return data;
}

/** `s16` (16 kHz mono) as raw samples at `rate`, `channels`, `format` (ffmpeg). */
function convert(s16: Buffer, rate: number, channels: number, format: 's16le' | 'f32le'): Buffer {
  const r = spawnSync(ffmpeg, ['-v', 'error', '-f', 's16le', '-ar', '16000', '-ac', '1', '-i', 'pipe:0', '-ar', String(rate), '-ac', String(channels), '-f', format, 'pipe:1'], { input: s16, maxBuffer: 1 << 26 });
  if (r.status !== 0) throw new Error(String(r.stderr));
  return r.stdout;
}

function wav(s16: Buffer, rate: number, channels: number): Buffer {
  return Buffer.concat([pcm16WavHeader(s16.length, rate, channels), s16]);
}

/** Streams `bytes` in messages of `chunk` bytes, then end. */
async function stream(url: string, token: string, bytes: Buffer, chunk: number): Promise<StreamClient> {
  const c = new StreamClient(url, { Authorization: `Bearer ${token}` });
  await c.ready;
  c.send(bytes, chunk);
  c.end();
  await c.closed;
  return c;
}

/** The events as segments [start_ms, end_ms]; checks they alternate, start first. */
function segmentsOf(c: StreamClient): Array<[number, number]> {
  const out: Array<[number, number]> = [];
  c.speech.forEach((e, i) => {
    expect(e.type).toBe(i % 2 === 0 ? 'speech_start' : 'speech_end');
    if (i % 2 === 1) out.push([c.speech[i - 1].at_ms, e.at_ms]);
  });
  expect(c.speech.length % 2).toBe(0);
  return out;
}

/** Every event came after the output up to its time (`frameBytes` a frame at `rate`), and none after `done`. */
function expectInOrder(c: StreamClient, rate: number, frameBytes: number): void {
  for (const e of c.speech) {
    expect(e.afterBytes).toBeGreaterThanOrEqual(Math.floor((e.at_ms * rate) / 1000) * frameBytes);
    expect(e.decided_ms).toBeGreaterThanOrEqual(e.at_ms);
  }
  expect(c.done).not.toBeNull();
  expect(c.speech.at(-1)!.afterBytes).toBe(c.audio.length); // the last (at the flush) before done, after all audio
}

function expectClose(a: Array<[number, number]>, b: Array<[number, number]>, tolMs: number): void {
  if (process.env.VAD_TEST_PRINT) console.log(JSON.stringify({ stream: a, file: b }));
  expect(a.length).toBe(b.length);
  a.forEach(([s, e], i) => {
    expect(Math.abs(s - b[i][0])).toBeLessThanOrEqual(tolMs);
    expect(Math.abs(e - b[i][1])).toBeLessThanOrEqual(tolMs);
  });
}

describe('speech events on live streams', () => {
  let config: Config;
  let store: GatewayStore;
  let handle: AppHandle;
  let running: StreamingServer;
  let base: string;
  let token: string;
  const input = twoTurns();

  /** /denoise's speech segments of a WAV, in ms. */
  async function fileSegments(file: Buffer, extra: Record<string, string> = {}): Promise<Array<[number, number]>> {
    let req = request(handle.app).post(`${API}/denoise`).set('Authorization', `Bearer ${token}`).attach('file', file, 'a.wav');
    for (const [k, v] of Object.entries({ model: 'nsm-2', speech_segments: 'true', response: 'json', ...extra })) req = req.field(k, v);
    const res = await req;
    expect(res.status).toBe(200);
    return (res.body.speech_segments as Array<{ start_s: number; end_s: number }>).map((s) => [Math.round(s.start_s * 1000), Math.round(s.end_s * 1000)]);
  }

  beforeAll(async () => {
    running = await streamingServer('vad');
    ({ config, store, handle, base, token } = running);
  });

  afterAll(() => running?.close());

  test('16 kHz: events in order with the audio, at /denoise\'s segments; the audio as without vad, which sends none', async () => {
    const expected = await fileSegments(wav(input, 16000, 1));
    expect(expected.length).toBe(2);
    const c = await stream(`${base}?model=nsm-2&vad=true&vad_hangover_ms=300`, token, input, 640);
    expect(c.errors).toEqual([]);
    expect(c.closeCode).toBe(1000);
    expect(await c.ready).toMatchObject({ vad: true, vad_threshold: 0.7, vad_min_speech_ms: 250, vad_hangover_ms: 300 });
    expectInOrder(c, 16000, 2);
    const got = segmentsOf(c);
    expectClose(got, expected, FRAME_MS);
    const speechS = got.reduce((s, [a, b]) => s + (b - a), 0) / 1000;
    expect(c.done!.stats).toMatchObject({ speech_segment_count: 2 });
    expect(c.done!.stats.speech_s).toBeCloseTo(speechS, 3);

    const plain = await stream(`${base}?model=nsm-2`, token, input, 640);
    expect(plain.speech).toEqual([]);
    expect(plain.audio.equals(c.audio)).toBe(true);
    const ready = await plain.ready;
    for (const k of ['vad', 'vad_threshold', 'vad_min_speech_ms', 'vad_hangover_ms']) expect(ready).not.toHaveProperty(k);
    expect(plain.done!.stats).not.toHaveProperty('speech_s');
    expect(plain.done!.stats).not.toHaveProperty('speech_segment_count');
  }, 90_000);

  test('settings change the decisions: a 3 s hangover joins the two turns', async () => {
    const c = await stream(`${base}?vad=1&vad_hangover_ms=3000&vad_threshold=0.6&vad_min_speech_ms=100`, token, input, 3200);
    expect(await c.ready).toMatchObject({ vad: true, vad_threshold: 0.6, vad_min_speech_ms: 100, vad_hangover_ms: 3000 });
    expect(segmentsOf(c).length).toBe(1);
    expect(c.done!.stats.speech_segment_count).toBe(1);
  }, 60_000);

  test('8 kHz μ-law, 48 kHz stereo float and 44.1 kHz: the same segments as /denoise of the file at that rate', async () => {
    const at8 = convert(input, 8000, 1, 's16le');
    const codes = Buffer.from(mulaw.encode(new Int16Array(Buffer.from(at8).buffer, 0, at8.length / 2)));
    const c8 = await stream(`${base}?vad=true&sample_rate=8000&encoding=mulaw`, token, codes, 160);
    expect(c8.errors).toEqual([]);
    expectInOrder(c8, 8000, 1);
    const mu = Buffer.from(new Int16Array(mulaw.decode(codes)).buffer);
    expectClose(segmentsOf(c8), await fileSegments(wav(mu, 8000, 1), { keep_input_sample_rate: 'true' }), FRAME_MS);

    const s48 = convert(input, 48000, 2, 's16le');
    const f48 = convert(input, 48000, 2, 'f32le');
    const c48 = await stream(`${base}?vad=true&sample_rate=48000&channels=2&encoding=pcm_f32le`, token, f48, 48 * 20 * 8);
    expect(c48.errors).toEqual([]);
    expectInOrder(c48, 48000, 8);
    expectClose(segmentsOf(c48), await fileSegments(wav(s48, 48000, 2), { keep_input_sample_rate: 'true' }), FRAME_MS);

    // 44.1 kHz runs the full-band chain at 48 kHz between resamplers (the file path: ffmpeg's, which has no delay).
    const s44 = convert(input, 44100, 1, 's16le');
    const c44 = await stream(`${base}?vad=true&sample_rate=44100`, token, s44, 1764);
    expect(c44.errors).toEqual([]);
    expectInOrder(c44, 44100, 2);
    expectClose(segmentsOf(c44), await fileSegments(wav(s44, 44100, 1), { keep_input_sample_rate: 'true' }), FRAME_MS);
  }, 120_000);

  test.each([
    ['vad=maybe', '"vad" must be a boolean'],
    ['vad=true&vad_threshold=0.1', '"vad_threshold" must be a number from 0.2 to 0.95'],
    ['vad=true&vad_hangover_ms=3001', '"vad_hangover_ms" must be a number from 0 to 3000'],
    ['vad=true&vad_min_speech_ms=abc', '"vad_min_speech_ms" must be a number from 0 to 2000'],
    ['vad_hangover_ms=500', '"vad_hangover_ms" applies only with vad=true'],
    ['vad=false&vad_threshold=0.5', '"vad_threshold" applies only with vad=true'],
    ['vad=true&vad=true', '"vad" was given more than once'],
  ])('%s is refused before the upgrade', async (query, message) => {
    const r = await refusal(`${base}?${query}`, { Authorization: `Bearer ${token}` });
    expect(r.status).toBe(400);
    expect(r.body.error.type).toBe('invalid_request');
    expect(r.body.error.message).toContain(message);
  });

  test('a stream ended mid-speech gets its speech_end at the end, before done; one cut mid-speech leaves the server well', async () => {
    const half = input.subarray(0, 1.6 * 16000 * 2);
    const c = await stream(`${base}?vad=true`, token, half, 640);
    expect(c.closeCode).toBe(1000);
    expect(c.speech.map((e) => e.type)).toEqual(['speech_start', 'speech_end']);
    expect(c.speech[1].at_ms).toBeLessThanOrEqual(1600);
    expect(c.speech[1].at_ms).toBeGreaterThan(1600 - 2 * FRAME_MS);
    expectInOrder(c, 16000, 2);
    expect(c.done!.stats.speech_segment_count).toBe(1);

    // The client vanishes mid-speech (no end, no close frame).
    const cut = new StreamClient(`${base}?vad=true`, { Authorization: `Bearer ${token}` });
    await cut.ready;
    cut.send(input.subarray(0, 2 * 16000 * 2), 640);
    await eventually(() => cut.speech.length > 0, 20_000);
    cut.ws.terminate();
    await cut.closed;
    const after = await stream(`${base}?vad=true`, token, input, 640);
    expect(after.errors).toEqual([]);
    expect(segmentsOf(after).length).toBe(2);
  }, 90_000);

  test('a stream that pauses right after the audio that decides an event still gets it (no more input needed)', async () => {
    const url = `${base}?vad=true&vad_hangover_ms=200`;
    const whole = await stream(url, token, input, 640);
    const start = whole.speech[0];
    expect(start.type).toBe('speech_start');
    // The audio up to the output that decides the first speech_start (its frame end plus the model's delay), the last
    // 200 ms in real time (20 ms messages): so the deciding frame (speech: not gated) waits in the VAD's batch for a
    // run when input stops.
    const c = new StreamClient(url, { Authorization: `Bearer ${token}` });
    const latencyMs = Number((await c.ready).latency_ms);
    const stop = Math.ceil(((start.decided_ms + latencyMs + 4) * 16000) / 1000) * 2;
    c.send(input.subarray(0, stop - 6400), 640);
    for (let off = stop - 6400; off < stop; off += 640) {
      await new Promise((r) => setTimeout(r, 20));
      c.ws.send(input.subarray(off, Math.min(stop, off + 640)));
    }
    const sentAt = performance.now();
    await eventually(() => c.speech.length >= 1, 5_000);
    expect(c.speech.map(({ type, at_ms }) => [type, at_ms])).toEqual([['speech_start', start.at_ms]]);
    expect(c.speech[0].receivedAt - sentAt).toBeLessThan(1000); // the flush timer's 20 ms, not more input
    c.end();
    await c.closed;
    expect(c.speech.map((e) => e.type)).toEqual(['speech_start', 'speech_end']);
  }, 60_000);

  describe('relayed to a model-service process (MODEL_SERVICE_URL)', () => {
    let relay: { ws: string; close(): Promise<void> } | undefined;
    let relayed: string;

    beforeAll(async () => {
      relay = await relayedGateway(config, store, TOKEN);
      relayed = relay.ws;
    }, 60_000);

    afterAll(() => relay?.close());

    test('the same events and audio as in-process; a bad setting is the replica\'s 400 too', async () => {
      const here = await stream(`${base}?vad=true&vad_hangover_ms=400`, token, input, 640);
      const there = await stream(`${relayed}?vad=true&vad_hangover_ms=400`, token, input, 640);
      expect(there.errors).toEqual([]);
      expect(await there.ready).toMatchObject({ vad: true, vad_hangover_ms: 400 });
      expect(there.audio.equals(here.audio)).toBe(true);
      expect(there.speech.map(({ type, at_ms }) => [type, at_ms])).toEqual(here.speech.map(({ type, at_ms }) => [type, at_ms]));
      expectInOrder(there, 16000, 2);
      expect(there.done!.stats).toMatchObject({ speech_segment_count: here.done!.stats.speech_segment_count, speech_s: here.done!.stats.speech_s });
    }, 60_000);
  });
});
