// G.711 on live streams (encoding=mulaw / alaw, one byte per sample) through the whole app with a real WebSocket
// client, and G.711 WAV files (format tags 7 / 6) through /denoise. The definition tested byte for byte:
//   a G.711 stream's output = G.711-encode(the pcm_s16le stream's output for the G.711-decoded input), and at 16 and
//   8 kHz that is G.711-encode(/denoise of the G.711 WAV), = G.711-encode(/denoise of a 16-bit WAV holding the decoded
//   samples), /denoise's 16-bit output (dither included) encoded with the same codec (alawmulaw). At 8 kHz both run
//   the narrow-band chain (the 16 kHz chain between the half-band resamplers of dsp/halfband.ts, in the worker).
// Also: the relayed path (MODEL_SERVICE_URL: the gateway relays the query to a model-service process's
// /internal/stream) gives the same bytes, and the refusals name the encodings.
import { spawnSync } from 'node:child_process';
import { alaw, mulaw } from 'alawmulaw';
import request from 'supertest';
import { type AppHandle } from '../../src/app';
import { loadConfig, type Config } from '../../src/config';
import { g711DecodeInto, g711EncodeInt16 } from '../../src/dsp/g711';
import type { GatewayStore } from '../../src/store/gateway/types';
import { fixture } from '../helpers/service-helpers';
import { refusal, relayedGateway, streamingServer, type StreamingServer, StreamClient, wavData } from '../helpers/streaming-helpers';

const API = '/v1/noise-suppressor';
const TOKEN = 'stream-g711-test-token-0123456789ab';
const ffmpeg = loadConfig().ffmpegPath;
const CODECS = { mulaw, alaw } as const;
type Law = keyof typeof CODECS;

/** 16-bit mono PCM of the noisy fixture at `rate` (ffmpeg resamples). */
function speech(rate: number): Buffer {
  return spawnSync(ffmpeg, ['-v', 'error', '-i', fixture('speech-noisy-16k-mono.wav'), '-ar', String(rate), '-ac', '1', '-f', 's16le', '-'], { maxBuffer: 1 << 24 }).stdout;
}

const int16 = (b: Buffer): Int16Array => {
  const c = Buffer.from(b); // aligned
  return new Int16Array(c.buffer, c.byteOffset, c.length / 2);
};
const encode = (law: Law, pcm: Buffer): Buffer => Buffer.from(CODECS[law].encode(int16(pcm)));
const decode = (law: Law, codes: Buffer): Buffer => {
  const s = CODECS[law].decode(new Uint8Array(codes));
  return Buffer.from(s.buffer, s.byteOffset, s.byteLength);
};

/** A WAV holding G.711 bytes as ffmpeg writes one (raw bytes wrapped with -c copy: format tag 7 or 6). */
function g711Wav(law: Law, codes: Buffer, rate: number): Buffer {
  const r = spawnSync(ffmpeg, ['-v', 'error', '-f', law, '-ar', String(rate), '-ac', '1', '-i', 'pipe:0', '-c', 'copy', '-f', 'wav', 'pipe:1'], { input: codes, maxBuffer: 1 << 24 });
  if (r.status !== 0) throw new Error(String(r.stderr));
  return r.stdout;
}

function pcmWav(pcm: Buffer, rate: number): Buffer {
  const r = spawnSync(ffmpeg, ['-v', 'error', '-f', 's16le', '-ar', String(rate), '-ac', '1', '-i', 'pipe:0', '-c', 'copy', '-f', 'wav', 'pipe:1'], { input: pcm, maxBuffer: 1 << 24 });
  return r.stdout;
}

/** Streams `bytes` in messages of `chunk` bytes, then end; everything the server sent. */
async function stream(url: string, token: string, bytes: Buffer, chunk: number): Promise<StreamClient> {
  const c = new StreamClient(url, { Authorization: `Bearer ${token}` });
  await c.ready;
  c.send(bytes, chunk);
  c.end();
  await c.closed;
  return c;
}

test.each(['mulaw', 'alaw'] as const)('%s: the worker\'s tables are the codec\'s, for every code and every 16-bit value', (law) => {
  const codes = Uint8Array.from({ length: 256 }, (_, i) => i);
  const planar = [new Float32Array(256)];
  expect(g711DecodeInto(law, codes, 1, planar, 0)).toBe(256);
  expect(Array.from(planar[0], (x) => x * 32768)).toEqual(Array.from(CODECS[law].decode(codes)));
  const all = Int16Array.from({ length: 65536 }, (_, i) => i - 32768);
  expect(Buffer.from(g711EncodeInt16(law, new Uint8Array(all.buffer))).equals(Buffer.from(CODECS[law].encode(all)))).toBe(true);
});

describe('G.711 streams and files', () => {
  let config: Config;
  let store: GatewayStore;
  let handle: AppHandle;
  let running: StreamingServer;
  let base: string;
  let token: string;

  async function denoise(file: Buffer, name: string): Promise<{ pcm: Buffer; stats: Record<string, any> }> {
    const res = await request(handle.app)
      .post(`${API}/denoise`)
      .set('Authorization', `Bearer ${token}`)
      .attach('file', file, name)
      .field('model', 'nsm-2')
      .buffer(true)
      .parse((r, cb) => {
        const chunks: Buffer[] = [];
        r.on('data', (c: Buffer) => chunks.push(c));
        r.on('end', () => cb(null, Buffer.concat(chunks)));
      });
    expect(res.status).toBe(200);
    return { pcm: wavData(res.body as Buffer), stats: JSON.parse(String(res.headers['x-ns-stats'])) };
  }

  beforeAll(async () => {
    running = await streamingServer('g711');
    ({ config, store, handle, base, token } = running);
  });

  afterAll(() => running?.close());

  test.each(['mulaw', 'alaw'] as const)('%s at 16 kHz: G.711 of /denoise of the G.711 WAV, byte for byte, any message size', async (law) => {
    const codes = encode(law, speech(16000));
    const wav = g711Wav(law, codes, 16000);
    expect(wav.readUInt16LE(20)).toBe(law === 'mulaw' ? 7 : 6); // a WAV of G.711 data, not PCM
    const fromWav = await denoise(wav, `call.${law}.wav`);
    expect(fromWav.stats).toMatchObject({ input_codec: law === 'mulaw' ? 'pcm_mulaw' : 'pcm_alaw', input_sample_rate: 16000, output_sample_rate: 16000 });
    // ffmpeg's decoding of the G.711 WAV is the codec's: /denoise of a 16-bit WAV of the decoded samples is the same.
    const fromPcm = await denoise(pcmWav(decode(law, codes), 16000), 'decoded.wav');
    expect(fromWav.pcm.equals(fromPcm.pcm)).toBe(true);
    const expected = encode(law, fromWav.pcm);
    for (const chunk of [320, 7]) {
      const c = await stream(`${base}?model=nsm-2&sample_rate=16000&encoding=${law}`, token, codes, chunk);
      expect(c.errors).toEqual([]);
      expect(c.closeCode).toBe(1000);
      expect(await c.ready).toMatchObject({ encoding: law, sample_rate: 16000, channels: 1, latency_samples: 512 });
      expect(c.audio.length).toBe(codes.length); // one byte per sample, total out = total in
      expect(c.audio.equals(expected)).toBe(true);
      expect(c.done).toMatchObject({ stats: { input_seconds: 3, output_seconds: 3, bytes_in: codes.length, bytes_out: codes.length } });
    }
  }, 90_000);

  test.each(['mulaw', 'alaw'] as const)('%s at 8 kHz: G.711 of /denoise of the G.711 WAV, byte for byte, and its pcm_s16le twin encoded', async (law) => {
    const codes = encode(law, speech(8000));
    const fromWav = await denoise(g711Wav(law, codes, 8000), 'call.wav');
    expect(fromWav.stats).toMatchObject({ input_codec: `pcm_${law}`, input_sample_rate: 8000, output_sample_rate: 8000, processing_sample_rate: 8000 });
    const fromPcm = await denoise(pcmWav(decode(law, codes), 8000), 'decoded.wav');
    expect(fromWav.pcm.equals(fromPcm.pcm)).toBe(true);
    const expected = encode(law, fromWav.pcm);
    const p = await stream(`${base}?model=nsm-2&sample_rate=8000&encoding=pcm_s16le`, token, decode(law, codes), 320);
    expect(p.audio.equals(fromPcm.pcm)).toBe(true);
    for (const chunk of [160, 13]) {
      const g = await stream(`${base}?model=nsm-2&sample_rate=8000&encoding=${law}`, token, codes, chunk);
      expect(g.errors).toEqual([]);
      expect(await g.ready).toMatchObject({ encoding: law, sample_rate: 8000, latency_ms: (await p.ready).latency_ms });
      expect(g.audio.length).toBe(codes.length);
      expect(g.audio.equals(expected)).toBe(true);
    }
  }, 60_000);

  test('stereo A-law: frames of 2 bytes; a message that is not whole frames closes with 1007', async () => {
    const mono = encode('alaw', speech(8000)).subarray(0, 8000);
    const stereo = Buffer.alloc(mono.length * 2);
    for (let i = 0; i < mono.length; i++) {
      stereo[2 * i] = mono[i];
      stereo[2 * i + 1] = mono[mono.length - 1 - i];
    }
    const ok = await stream(`${base}?sample_rate=8000&encoding=alaw&channels=2`, token, stereo, 320);
    expect(ok.errors).toEqual([]);
    expect(ok.audio.length).toBe(stereo.length);
    const bad = new StreamClient(`${base}?sample_rate=8000&encoding=alaw&channels=2`, { Authorization: `Bearer ${token}` });
    await bad.ready;
    bad.ws.send(Buffer.alloc(161));
    expect((await bad.closed).code).toBe(1007);
    expect(bad.errors[0]).toMatchObject({ error: { type: 'invalid_request', message: expect.stringContaining('whole 2-byte frames') } });
  }, 60_000);

  test('an unknown encoding is refused before the upgrade, naming the accepted ones', async () => {
    const r = await refusal(`${base}?encoding=ulaw`, { Authorization: `Bearer ${token}` });
    expect(r.status).toBe(400);
    expect(r.body.error).toMatchObject({ type: 'invalid_request', message: expect.stringContaining('pcm_s16le, pcm_f32le, mulaw, alaw') });
  });

  describe('relayed to a model-service process (MODEL_SERVICE_URL)', () => {
    let relay: { ws: string; close(): Promise<void> } | undefined;
    let relayed: string;

    beforeAll(async () => {
      relay = await relayedGateway(config, store, TOKEN);
      relayed = relay.ws;
    }, 60_000);

    afterAll(() => relay?.close());

    test.each(['mulaw', 'alaw'] as const)('%s at 8 kHz: the same bytes as in-process', async (law) => {
      const codes = encode(law, speech(8000));
      const here = await stream(`${base}?sample_rate=8000&encoding=${law}`, token, codes, 160);
      const there = await stream(`${relayed}?sample_rate=8000&encoding=${law}`, token, codes, 160);
      expect(there.errors).toEqual([]);
      expect(await there.ready).toMatchObject({ encoding: law, sample_rate: 8000 });
      expect(there.audio.length).toBe(codes.length);
      expect(there.audio.equals(here.audio)).toBe(true);
    }, 60_000);
  });
});
