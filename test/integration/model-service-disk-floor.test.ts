// The free-disk floor of synchronous calls (TMP_MIN_FREE_DISK_MB, issue 35 #6): a call whose upload or output would
// take TMP_DIR below it is refused with 503 upstream_unavailable + Retry-After (refunded), the output's share decided
// from the probe before anything is decoded; with room, the same calls succeed. The floor is set from the real free
// space of the test's file system (statfs), with margins far above what other processes move meanwhile.
import fs from 'node:fs';
import path from 'node:path';
import request from 'supertest';
import { closeServer, createApp, startModelServiceServer, type AppHandle } from '../../src/app';
import { createInferenceEngine } from '../../src/inference/runtime/engine';
import { JOB_STREAM_PATH } from '../../src/model-service/job-stream';
import { loadConfig, type Config } from '../../src/config';
import { spawnFfmpeg, waitForExit } from '../../src/audio/ffmpeg';
import { freeBytesOf } from '../../src/storage/disk-budget';
import { bytesPerFrame } from '../../src/pipeline/disk-use';
import { makeTmpDir } from '../helpers/audio-helpers';
import { createToken, eventually, fixture, noiseWav, rawRequest, testConfig, tmpEntries } from '../helpers/service-helpers';

jest.setTimeout(120_000);
const MB = 1024 * 1024;

let appConfig: Config;
let handle: AppHandle;
let token: string;
let workspaceId: string;
let longSilence: string;
const tmp = makeTmpDir('nsm-disk-floor-');

/** A server whose floor is `room` bytes under the free space of TMP_DIR's file system now (negative: above it). */
async function startWithRoom(room: number): Promise<void> {
  appConfig = testConfig();
  appConfig.tmpMinFreeDiskBytes = Math.max(0, (await freeBytesOf(appConfig.tmpDir)) - room);
  handle = await createApp(appConfig, { log: () => undefined });
  token = await createToken(handle.store, ['*']);
  workspaceId = (await handle.store.listWorkspaces())[0].id;
}

async function stop(): Promise<void> {
  await handle.close();
  fs.rmSync(appConfig.dataDir, { recursive: true, force: true });
}

beforeAll(async () => {
  // 30 min of 48 kHz stereo silence: a FLAC of a few hundred KB whose 16-bit WAV output is 345 MB.
  longSilence = path.join(tmp, 'long-silence.flac');
  const child = spawnFfmpeg(loadConfig().ffmpegPath, ['-loglevel', 'error', '-f', 'lavfi', '-i', 'anullsrc=r=48000:cl=stereo', '-t', '1800', '-c:a', 'flac', '-y', longSilence]);
  child.stdin!.end();
  expect((await waitForExit(child)).code).toBe(0);
});
afterAll(() => fs.rmSync(tmp, { recursive: true, force: true }));

const denoise = (file: string) =>
  request(handle.app).post('/v1/noise-suppressor/denoise').set('Authorization', `Bearer ${token}`).attach('file', file);

test('the estimate per frame: 16-bit WAV at the output rate, float spools with a loudness target, bitrate for lossy', () => {
  expect(bytesPerFrame({ format: 'wav', channels: 2, modelRate: 16000, outputRate: 48000, spools: false })).toBe(12);
  expect(bytesPerFrame({ format: 'wav', channels: 1, modelRate: 16000, outputRate: 16000, spools: true })).toBe(10);
  expect(bytesPerFrame({ format: 'opus', channels: 1, modelRate: 16000, outputRate: 48000, spools: false })).toBeCloseTo(0.25, 6);
});

describe('TMP_MIN_FREE_DISK_MB', () => {
  afterEach(stop);

  test('already below the floor: 503 upstream_unavailable + Retry-After before the upload is read, refunded', async () => {
    await startWithRoom(-1024 * MB);
    const before = await handle.store.creditsUsed(workspaceId, new Date());
    // A small upload: the answer comes before the body is read, and the connection is closed after it (a large body
    // still being written would meet a closed socket, EPIPE, before the client reads the answer).
    const res = await request(handle.app).post('/v1/noise-suppressor/denoise').set('Authorization', `Bearer ${token}`).attach('file', noiseWav(0.5), 'small.wav');
    expect(res.status).toBe(503);
    expect(res.body.error.type).toBe('upstream_unavailable');
    expect(res.body.error.message).toMatch(/short of disk space/);
    expect(res.headers['retry-after']).toBe('30');
    expect(await handle.store.creditsUsed(workspaceId, new Date())).toBe(before);
  });

  test('room for the upload but not for the output: refused from the probe, before decoding; a short clip passes', async () => {
    // 150 MB of room: the FLAC fits, its 345 MB output does not.
    await startWithRoom(150 * MB);
    const before = await handle.store.creditsUsed(workspaceId, new Date());
    const t0 = Date.now();
    const res = await denoise(longSilence);
    expect(res.status).toBe(503);
    expect(res.body.error.type).toBe('upstream_unavailable');
    expect(res.body.error.message).toMatch(/short of disk space for this file's output/);
    expect(res.headers['retry-after']).toBe('30');
    // Denoising 30 min would take minutes here: it was refused before.
    expect(Date.now() - t0).toBeLessThan(20_000);
    expect(await handle.store.creditsUsed(workspaceId, new Date())).toBe(before);
    await eventually(() => tmpEntries(appConfig).length === 0);

    const ok = await denoise(fixture('speech-noisy-44k1-stereo.flac'));
    expect(ok.status).toBe(200);
    expect(await handle.store.creditsUsed(workspaceId, new Date())).toBe(before + 1);
  });

  test("a job's input copy takes its bytes from the same floor: a declared input that would cross it is refused before it is read", async () => {
    // The room is measured once, while other test files write and delete temporary files beside this one: 200 MB of
    // room against 1000 MB declared leaves the answers the same whichever way the disk moves by less than 200 MB
    // (with 50 MB of room the small input below was once refused in CI).
    await startWithRoom(200 * MB);
    const engine = await createInferenceEngine(appConfig);
    const service = await startModelServiceServer(appConfig, engine, 'disk-floor-test-token-0123456789', () => undefined);
    try {
      const call = (bytes: Buffer, declared: number) =>
        rawRequest(`${service.url}${JOB_STREAM_PATH}?model=nsm-1`, {
          method: 'POST',
          headers: { Authorization: 'Bearer disk-floor-test-token-0123456789', 'Content-Type': 'application/octet-stream', 'Content-Length': declared },
          body: declared === bytes.length ? bytes : undefined,
        });
      // 1000 MB declared against 200 MB of room: answered at once, nothing written (the body is never sent here).
      const refused = await call(Buffer.alloc(0), 1000 * MB);
      expect(refused.status).toBe(503);
      expect(refused.headers['retry-after']).toBe('30');
      expect(JSON.parse(refused.body.toString()).detail).toMatch(/short of disk space for this job's input/);
      await eventually(() => tmpEntries(appConfig).length === 0);
      // A real input that fits is served.
      const wav = noiseWav(1);
      const ok = await call(wav, wav.length);
      expect(ok.status).toBe(200);
      expect(ok.body.toString()).toMatch(/"type":"result"/);
    } finally {
      await closeServer(service.server);
      await engine.close();
    }
  });
});
