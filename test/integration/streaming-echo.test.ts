// Live streams with an echo reference (channels=2&echo_reference=last: the last channel of every frame is what the
// client played) through the whole app with a real WebSocket client, against POST /denoise of the same microphone
// with the reference as its echo_reference part (echo-helpers.ts scenes: a far end through a room into the microphone,
// a near end later). Byte for byte: 16 kHz pcm_s16le, 48 kHz pcm_s16le (full band), 8 kHz μ-law (narrow band: the
// μ-law of /denoise's 16-bit output for the decoded samples), in-process and relayed to a model-service process.
// Also: ready's echo_reference and output_channels, the output arriving within latency_samples, done's canceller
// figures equal to the file's, billing as a plain stream, hostile float samples, and the query's refusals.
import fs from 'node:fs';
import path from 'node:path';
import { mulaw } from 'alawmulaw';
import request from 'supertest';
import { type AppHandle } from '../../src/app';
import type { Config } from '../../src/config';
import { Decimator2 } from '../../src/dsp/halfband';
import type { GatewayStore } from '../../src/store/gateway/types';
import { echoScene, writeMono } from '../helpers/echo-helpers';
import { eventually } from '../helpers/service-helpers';
import { refusal, relayedGateway, streamingServer, type StreamingServer, StreamClient, wavData } from '../helpers/streaming-helpers';

const API = '/v1/noise-suppressor';
const TOKEN = 'stream-echo-test-token-0123456789abc';
const ECHO_FIELDS = ['echo_reference', 'echo_reference_active', 'echo_delay_ms', 'echo_erle_db'];

/** Interleaves equal-length sample buffers (`bytes` a sample) into frames, the last one the reference. */
function interleave(bytes: number, ...channels: Buffer[]): Buffer {
  const frames = channels[0].length / bytes;
  const out = Buffer.alloc(frames * bytes * channels.length);
  for (let f = 0; f < frames; f++) {
    for (let c = 0; c < channels.length; c++) channels[c].copy(out, (f * channels.length + c) * bytes, f * bytes, (f + 1) * bytes);
  }
  return out;
}

/** A mono 16-bit WAV holding `pcm` as it is. */
function wav16(rate: number, pcm: Buffer): Buffer {
  const h = Buffer.alloc(44);
  h.write('RIFF', 0);
  h.writeUInt32LE(36 + pcm.length, 4);
  h.write('WAVEfmt ', 8);
  h.writeUInt32LE(16, 16);
  h.writeUInt16LE(1, 20);
  h.writeUInt16LE(1, 22);
  h.writeUInt32LE(rate, 24);
  h.writeUInt32LE(rate * 2, 28);
  h.writeUInt16LE(2, 32);
  h.writeUInt16LE(16, 34);
  h.write('data', 36);
  h.writeUInt32LE(pcm.length, 40);
  return Buffer.concat([h, pcm]);
}

const int16 = (b: Buffer): Int16Array => {
  const c = Buffer.from(b); // aligned
  return new Int16Array(c.buffer, c.byteOffset, c.length / 2);
};

describe('live streams with an echo reference', () => {
  let config: Config;
  let store: GatewayStore;
  let handle: AppHandle;
  let running: StreamingServer;
  let base: string;
  let token: string;
  let dir: string;
  const file = (name: string): string => path.join(dir, name);

  /** /denoise of mic.wav with far.wav as its echo_reference: the 16-bit samples and the stats. */
  async function denoise(mic: string, far: string | null): Promise<{ pcm: Buffer; stats: Record<string, any> }> {
    let req = request(handle.app).post(`${API}/denoise`).set('Authorization', `Bearer ${token}`).attach('file', file(mic));
    if (far) req = req.attach('echo_reference', file(far));
    const res = await req.buffer(true).parse((r, cb) => {
      const chunks: Buffer[] = [];
      r.on('data', (c: Buffer) => chunks.push(c));
      r.on('end', () => cb(null, Buffer.concat(chunks)));
    });
    expect(res.status).toBe(200);
    return { pcm: wavData(res.body as Buffer), stats: JSON.parse(String(res.headers['x-ns-stats'])) };
  }

  /** Streams `bytes` in messages of `chunk` bytes, waits (optionally) for the output to catch up to the latency, ends. */
  async function stream(url: string, bytes: Buffer, chunk: number, frameBytes?: number): Promise<StreamClient> {
    const c = new StreamClient(url, { Authorization: `Bearer ${token}` });
    const ready = await c.ready;
    c.send(bytes, chunk);
    if (frameBytes) {
      // Everything up to latency_samples before the last input frame comes out before `end`.
      const due = (bytes.length / frameBytes - Number(ready.latency_samples)) * (frameBytes / 2);
      await eventually(() => c.received >= due, 90_000);
    }
    c.end();
    await c.closed;
    return c;
  }

  beforeAll(async () => {
    running = await streamingServer('echo');
    ({ config, store, handle, base, token } = running);
    dir = fs.mkdtempSync(path.join(config.dataDir, 'stream-echo-'));
    for (const rate of [16000, 48000] as const) {
      const scene = await echoScene({ rate, seconds: 8, nearFrom: 6, delayMs: 70 });
      writeMono(file(`mic${rate}.wav`), rate, scene.mic);
      writeMono(file(`far${rate}.wav`), rate, scene.ref);
      if (rate === 16000) {
        // 8 kHz telephony: the 16 kHz scene decimated, then through μ-law (the files hold the decoded samples).
        for (const [name, x] of [['mic', scene.mic], ['far', scene.ref]] as const) {
          const y = new Decimator2().process(x);
          writeMono(file(`${name}8000-pcm.wav`), 8000, y);
          const codes = Buffer.from(mulaw.encode(int16(wavData(fs.readFileSync(file(`${name}8000-pcm.wav`))))));
          fs.writeFileSync(file(`${name}8000.ulaw`), codes);
          const decoded = mulaw.decode(new Uint8Array(codes));
          fs.writeFileSync(file(`${name}8000.wav`), wav16(8000, Buffer.from(decoded.buffer, decoded.byteOffset, decoded.byteLength)));
        }
      }
    }
  }, 60_000);

  afterAll(() => running?.close());

  const samples = (name: string): Buffer => wavData(fs.readFileSync(file(name)));

  test('16 kHz pcm_s16le: /denoise with echo_reference, byte for byte, in any message size; ready, done and billing', async () => {
    const expected = await denoise('mic16000.wav', 'far16000.wav');
    const input = interleave(2, samples('mic16000.wav'), samples('far16000.wav'));
    const c = await stream(`${base}?channels=2&echo_reference=last`, input, 1280, 4);
    expect(c.errors).toEqual([]);
    const ready = await c.ready;
    expect(ready).toMatchObject({ sample_rate: 16000, encoding: 'pcm_s16le', channels: 2, echo_reference: true, output_channels: 1 });
    expect(c.audio.length).toBe(expected.pcm.length);
    expect(c.audio.equals(expected.pcm)).toBe(true);
    // The canceller's figures, as the file's stats name them and with the same values.
    const stats = c.done!.stats;
    for (const k of ECHO_FIELDS) expect(stats[k]).toEqual(expected.stats[k]);
    expect(stats).toMatchObject({ echo_reference: true, echo_reference_active: true, input_seconds: 8, output_seconds: 8, bytes_in: input.length, bytes_out: input.length / 2 });
    expect(Math.abs(stats.echo_delay_ms - 70)).toBeLessThanOrEqual(24);

    // Billed as any stream of that length: as the plain mono stream of the microphone (whose ready and done say
    // nothing of a reference), which costs the canceller's delay less (8 ms at 16 kHz).
    const plain = await stream(base, samples('mic16000.wav'), 640);
    const plainReady = await plain.ready;
    expect(plainReady.echo_reference).toBeUndefined();
    expect(plainReady.output_channels).toBeUndefined();
    for (const k of ECHO_FIELDS) expect(plain.done!.stats[k]).toBeUndefined();
    expect(stats.credits_charged).toBe(plain.done!.stats.credits_charged);
    expect(stats.credits_charged).toBeGreaterThan(0);
    expect(Number(ready.latency_samples) - Number(plainReady.latency_samples)).toBe(128);

    // Other message sizes (whole frames), the same bytes.
    const odd = await stream(`${base}?channels=2&echo_reference=last`, input, 4 * 997);
    expect(odd.audio.equals(expected.pcm)).toBe(true);
  }, 120_000);

  test('48 kHz pcm_s16le (full band): /denoise with echo_reference at the rate kept, byte for byte', async () => {
    const expected = await denoise('mic48000.wav', 'far48000.wav');
    expect(expected.stats).toMatchObject({ processing_sample_rate: 48000, echo_reference_active: true });
    const input = interleave(2, samples('mic48000.wav'), samples('far48000.wav'));
    const c = await stream(`${base}?sample_rate=48000&channels=2&echo_reference=last`, input, 3840, 4);
    expect(c.errors).toEqual([]);
    expect(await c.ready).toMatchObject({ sample_rate: 48000, echo_reference: true, output_channels: 1 });
    expect(c.audio.equals(expected.pcm)).toBe(true);
    for (const k of ECHO_FIELDS) expect(c.done!.stats[k]).toEqual(expected.stats[k]);
  }, 120_000);

  describe('8 kHz μ-law (narrow band), in-process and relayed to a model-service process', () => {
    let relay: { ws: string; close(): Promise<void> } | undefined;
    let relayed: string;

    beforeAll(async () => {
      relay = await relayedGateway(config, store, TOKEN);
      relayed = relay.ws;
    }, 60_000);

    afterAll(() => relay?.close());

    test('the μ-law of /denoise\'s output for the decoded samples, byte for byte, both ways; done carries the figures', async () => {
      const expected = await denoise('mic8000.wav', 'far8000.wav');
      expect(expected.stats).toMatchObject({ processing_sample_rate: 8000, echo_reference_active: true });
      const want = Buffer.from(mulaw.encode(int16(expected.pcm)));
      const input = interleave(1, fs.readFileSync(file('mic8000.ulaw')), fs.readFileSync(file('far8000.ulaw')));
      const query = '?sample_rate=8000&encoding=mulaw&channels=2&echo_reference=last';
      for (const url of [base, relayed]) {
        const c = await stream(`${url}${query}`, input, 320);
        expect(c.errors).toEqual([]);
        expect(await c.ready).toMatchObject({ sample_rate: 8000, encoding: 'mulaw', channels: 2, echo_reference: true, output_channels: 1 });
        expect(c.audio.length).toBe(want.length);
        expect(c.audio.equals(want)).toBe(true);
        for (const k of ECHO_FIELDS) expect(c.done!.stats[k]).toEqual(expected.stats[k]);
      }
    }, 120_000);
  });

  test('pcm_f32le with 1e30, NaN and ±Inf in both channels: the stream goes on, and the near end after it is heard', async () => {
    // Before the bound on float samples (dsp/sample-bound.ts) one 1e30 left the canceller's filter non-finite and
    // the rest of the stream silent; here the near end (from 6 s) must come out as loud as in the same stream without
    // the hostile samples, which sit at 2-3 s, during far-end single talk.
    const toF32 = (pcm: Buffer): Buffer => {
      const x = int16(pcm);
      const f = new Float32Array(x.length);
      for (let i = 0; i < x.length; i++) f[i] = x[i] / 32768;
      return Buffer.from(f.buffer);
    };
    const mic = toF32(samples('mic16000.wav'));
    const far = toF32(samples('far16000.wav'));
    const clean = interleave(4, mic, far);
    const hostile = Buffer.from(clean);
    const bad = [1e30, NaN, Infinity, -Infinity, -1e30];
    for (let k = 0; k < 200; k++) hostile.writeFloatLE(bad[k % 5], (2 * 16000 + 80 * k) * 8 + (k % 2) * 4);
    const levels: number[] = [];
    for (const input of [clean, hostile]) {
      const c = await stream(`${base}?channels=2&echo_reference=last&encoding=pcm_f32le`, input, 1280, 8);
      expect(c.errors).toEqual([]);
      expect(c.done!.stats).toMatchObject({ echo_reference: true, input_seconds: 8 });
      expect(Number.isFinite(c.done!.stats.echo_erle_db)).toBe(true);
      const out = new Float32Array(Buffer.from(c.audio).buffer, 0, c.audio.length / 4);
      expect(out.length).toBe(8 * 16000);
      let e = 0;
      let nonFinite = 0; // counted, one expect: an expect per sample was 48,000 calls, ~1.5 s of the file
      for (let i = 6.5 * 16000; i < out.length; i++) {
        if (!Number.isFinite(out[i])) nonFinite++;
        e += out[i] * out[i];
      }
      expect(nonFinite).toBe(0);
      levels.push(10 * Math.log10(e / (1.5 * 16000) + 1e-20));
    }
    expect(levels[0]).toBeGreaterThan(-50);
    expect(Math.abs(levels[1] - levels[0])).toBeLessThan(3);
  }, 120_000);

  test('two microphone channels and the reference (channels=3): stereo out', async () => {
    const mic = samples('mic16000.wav').subarray(0, 2 * 16000);
    const input = interleave(2, mic, mic, samples('far16000.wav').subarray(0, 2 * 16000));
    const c = await stream(`${base}?channels=3&echo_reference=last`, input, 1200);
    expect(await c.ready).toMatchObject({ channels: 3, echo_reference: true, output_channels: 2 });
    expect(c.audio.length).toBe((input.length / 3) * 2);
    expect(c.done!.stats).toMatchObject({ echo_reference: true, input_seconds: 1 });
  }, 60_000);

  test('vad=true with a reference: speech events at /denoise\'s segments with that echo_reference; the audio unchanged; a plain speech stream beside it unharmed', async () => {
    // (vad=true with echo_reference=last once failed every stream of the worker's tick: the speech detector was
    // opened with the input's channels, the reference included, and fed the output's.)
    // A scene of its own: 12 s, the near end from 8 s. Here the stream's last speech_end came at the end of the
    // stream (12000 ms, the file's 11840) while its detector compared the output with the echo-free microphone
    // instead of the microphone as it came, which the file path uses; on the 8 s scene above both gave the same.
    const scene = await echoScene({ rate: 16000, seconds: 12, nearFrom: 8, delayMs: 80, seed: 3 });
    writeMono(file('mic-vad.wav'), 16000, scene.mic);
    writeMono(file('far-vad.wav'), 16000, scene.ref);
    const res = await request(handle.app).post(`${API}/denoise`).set('Authorization', `Bearer ${token}`)
      .attach('file', file('mic-vad.wav')).attach('echo_reference', file('far-vad.wav'))
      .field('speech_segments', 'true').field('response', 'json');
    expect(res.status).toBe(200);
    const expected = (res.body.speech_segments as Array<{ start_s: number; end_s: number }>).map((x) => [Math.round(x.start_s * 1000), Math.round(x.end_s * 1000)]);
    expect(expected.length).toBeGreaterThan(0);
    const input = interleave(2, samples('mic-vad.wav'), samples('far-vad.wav'));
    // A plain speech stream at the same time, on the same worker's ticks: it must not notice the other.
    const [c, plain] = await Promise.all([
      stream(`${base}?channels=2&echo_reference=last&vad=true`, input, 1280),
      stream(`${base}?vad=true`, samples('mic16000.wav'), 640),
    ]);
    expect([c.errors, plain.errors, c.closeCode, plain.closeCode]).toEqual([[], [], 1000, 1000]);
    expect(await c.ready).toMatchObject({ echo_reference: true, output_channels: 1, vad: true });
    expect(c.audio.equals((await denoise('mic-vad.wav', 'far-vad.wav')).pcm)).toBe(true);
    expect(c.speech.map((e) => e.type)).toEqual(expected.flatMap(() => ['speech_start', 'speech_end']));
    const got = expected.map((_, i) => [c.speech[2 * i].at_ms, c.speech[2 * i + 1].at_ms]);
    // Within one 32 ms frame of the detector, as plain streams (streaming-vad.test.ts).
    got.forEach(([a, b], i) => expect([Math.abs(a - expected[i][0]) <= 32, Math.abs(b - expected[i][1]) <= 32]).toEqual([true, true]));
    expect(c.done!.stats).toMatchObject({ echo_reference: true, speech_segment_count: expected.length });
  }, 120_000);

  test.each([
    ['channels=2&echo_reference=first', '"echo_reference" must be last (got "first")'],
    ['channels=2&echo_reference=', '"echo_reference" must be last'],
    ['echo_reference=last', '"echo_reference" needs "channels" of at least 2'],
    ['channels=1&echo_reference=last', '"channels" must be an integer from 2 to 3 (got "1")'],
    ['channels=4&echo_reference=last', '"channels" must be an integer from 2 to 3 (got "4")'],
    ['channels=3', '"channels" must be an integer from 1 to 2 (got "3")'],
    ['channels=2&echo_reference=last&echo_reference=last', '"echo_reference" was given more than once'],
  ])('%s is refused before the upgrade: %s', async (query, message) => {
    const r = await refusal(`${base}?${query}`, { Authorization: `Bearer ${token}` });
    expect(r.status).toBe(400);
    expect(r.body.error).toMatchObject({ type: 'invalid_request', message: expect.stringContaining(message) });
  });
});
