// A batch in which every file failed delivered nothing (issue 27, item 10): it still answers 200 with its manifest
// (the v1 contract), and its credit is given back; a batch with at least one cleaned file costs its credit. The whole
// app (gateway, in-process model service, real engine and ffmpeg, SQLite).
import fs from 'node:fs';
import request from 'supertest';
import { createApp, type AppHandle } from '../../src/app';
import type { Config } from '../../src/config';
import { fixture, testConfig } from '../helpers/service-helpers';
import { until } from '../helpers/jobs-helpers';

const BATCH = '/v1/noise-suppressor/denoise/batch';
const MONO = fixture('speech-noisy-16k-mono.wav');

describe('batch credits', () => {
  let config: Config;
  let handle: AppHandle;
  let token: string;
  let ws: string;

  beforeAll(async () => {
    config = testConfig();
    handle = await createApp(config, { log: () => undefined });
    const w = await handle.store.createWorkspace('batch-refund', 'scale');
    ws = w.id;
    token = (await handle.store.createToken({ workspaceId: w.id, name: 't', scopes: ['*'], allowedIps: [], expiresAt: null })).token;
  });

  afterAll(async () => {
    await handle.close();
    fs.rmSync(config.dataDir, { recursive: true, force: true });
  });

  const used = () => handle.store.creditsUsed(ws, new Date());
  const held = () => handle.store.creditsHeld(ws, new Date());

  test('every file failed (junk, an empty file): 200 with the manifest, refunded, logged with 0 credits', async () => {
    const res = await request(handle.app)
      .post(BATCH)
      .set('Authorization', `Bearer ${token}`)
      .field('response', 'json')
      .attach('files', Buffer.from('this is not audio at all'), 'junk.wav')
      .attach('files', Buffer.alloc(0), 'empty.wav');
    expect(res.status).toBe(200);
    expect(JSON.parse(res.headers['x-ns-batch'])).toMatchObject({ files: 2, succeeded: 0, failed: 2 });
    expect(res.body.items.map((it: { status: string }) => it.status)).toEqual(['error', 'error']);
    expect(await held()).toBe(0);
    expect(await used()).toBe(0);
    // The log row is written once the response is out.
    const row = await until(async () => (await handle.store.queryRequests({ workspaceId: ws, endpoint: 'denoise/batch', limit: 1 }))[0]);
    expect(row).toMatchObject({ status: 200, creditsCharged: 0 });
  });

  test('one file cleaned, one failed: 200 and 1 credit', async () => {
    const res = await request(handle.app)
      .post(BATCH)
      .set('Authorization', `Bearer ${token}`)
      .field('response', 'json')
      .attach('files', MONO)
      .attach('files', Buffer.from('junk'), 'junk.wav');
    expect(res.status).toBe(200);
    expect(JSON.parse(res.headers['x-ns-batch'])).toMatchObject({ files: 2, succeeded: 1, failed: 1 });
    expect(await held()).toBe(0);
    expect(await used()).toBe(1);
  });
});
