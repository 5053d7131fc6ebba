// The console's Live page in headless Chromium against the REAL app (gateway, WebSocket stream, ONNX inference,
// SQLite), with a fake microphone fed from a noisy recording: the page streams it and keeps what comes back
// (window.__live); that audio must be the denoised recording (much lower noise floor, the same samples /denoise gives
// for what the page sent), and the stream must be one row of the request log. Screenshots at 390 and 1280 px. With
// "cancel echo" the page plays the sample and streams two channels (the microphone, then what it plays): ready says
// echo_reference, one channel comes back.
import fs from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { chromium, type Browser, type Page } from 'playwright-core';
import { createApp, closeServer, type AppHandle } from '../../src/app';
import { loadConfig, PROJECT_ROOT } from '../../src/config';
import { until } from '../helpers/jobs-helpers';
import { layoutProblems } from '../helpers/layout';

const CHROMIUM = '/usr/bin/chromium';
const SECRET = 'e2e-live-admin-secret';
// Speech with pink noise and mains hum, 16-bit PCM (what Chromium's fake capture reads); it plays in a loop.
const RECORDING = path.join(PROJECT_ROOT, 'fixtures', 'speech-noisy-16k-mono.wav');
const SHOTS = path.join(PROJECT_ROOT, 'test-output');
const STREAM_S = 6;

/** Energies (dB) of consecutive 20 ms frames. */
function frameDb(x: Float32Array, rate: number): number[] {
  const n = Math.round(rate * 0.02);
  const out: number[] = [];
  for (let i = 0; i + n <= x.length; i += n) {
    let sum = 0;
    for (let j = i; j < i + n; j++) sum += x[j] * x[j];
    out.push(10 * Math.log10(sum / n + 1e-12));
  }
  return out;
}

function percentile(xs: number[], p: number): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))];
}

/** A mono 32-bit float WAV of `x`. */
function floatWav(x: Float32Array, rate: number): Buffer {
  const data = Buffer.from(x.buffer, x.byteOffset, x.byteLength);
  const head = Buffer.alloc(44);
  head.write('RIFF', 0);
  head.writeUInt32LE(36 + data.length, 4);
  head.write('WAVEfmt ', 8);
  head.writeUInt32LE(16, 16);
  head.writeUInt16LE(3, 20); // IEEE float
  head.writeUInt16LE(1, 22);
  head.writeUInt32LE(rate, 24);
  head.writeUInt32LE(rate * 4, 28);
  head.writeUInt16LE(4, 32);
  head.writeUInt16LE(32, 34);
  head.write('data', 36);
  head.writeUInt32LE(data.length, 40);
  return Buffer.concat([head, data]);
}

/** The samples of a 16-bit PCM WAV, as floats. */
function wavSamples(buf: Buffer): Float32Array {
  let off = 12;
  while (off + 8 <= buf.length) {
    const size = buf.readUInt32LE(off + 4);
    if (buf.toString('ascii', off, off + 4) === 'data') {
      const pcm = buf.subarray(off + 8, off + 8 + size);
      const out = new Float32Array(pcm.length / 2);
      for (let i = 0; i < out.length; i++) out[i] = pcm.readInt16LE(i * 2) / 32768;
      return out;
    }
    off += 8 + size + (size % 2);
  }
  throw new Error('no data chunk');
}

describe('console Live page in a real browser', () => {
  let dataDir: string;
  let handle: AppHandle;
  let server: http.Server;
  let base: string;
  let browser: Browser;
  let page: Page;
  let wsId: string;
  const browserErrors: string[] = [];

  beforeAll(async () => {
    if (!fs.existsSync(CHROMIUM)) throw new Error(`no Chromium at ${CHROMIUM}: apt-get install -y chromium`);
    dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'console-live-e2e-'));
    const config = loadConfig({ DATA_DIR: dataDir, ADMIN_SECRET: SECRET, WORKERS: '1', NODE_ENV: 'test' });
    handle = await createApp(config, { log: () => undefined });
    server = http.createServer(handle.app);
    handle.attachServer(server);
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    wsId = (await handle.store.createWorkspace('live-studio', 'starter')).id;
    fs.mkdirSync(SHOTS, { recursive: true });
    browser = await chromium.launch({
      executablePath: CHROMIUM,
      args: [
        '--headless',
        '--no-sandbox',
        '--disable-gpu',
        '--disable-background-networking',
        '--disable-component-update',
        // The microphone plays the recording (in a loop); permission is granted without a prompt.
        '--use-fake-ui-for-media-stream',
        '--use-fake-device-for-media-stream',
        `--use-file-for-fake-audio-capture=${RECORDING}`,
        '--autoplay-policy=no-user-gesture-required',
      ],
    });
    page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
    page.on('pageerror', (err) => browserErrors.push(String(err)));
    page.on('console', (msg) => {
      if (msg.type() === 'error') browserErrors.push(msg.text());
    });
  });

  afterAll(async () => {
    await browser?.close();
    if (server) await closeServer(server, 1000);
    await handle?.close();
    if (dataDir) fs.rmSync(dataDir, { recursive: true, force: true });
  });

  const shot = (name: string) => page.screenshot({ path: path.join(SHOTS, `console-live-${name}.png`), fullPage: true });

  test('the microphone goes through the stream and comes back denoised; the stream is in the request log', async () => {
    await page.goto(`${base}/console/#live`);
    await page.fill('#signin-secret', SECRET);
    await page.click('#signin-form button[type=submit]');
    await page.waitForSelector('#page-live:not([hidden])');
    await page.waitForSelector('#live-model option[value="nsm-2"]', { state: 'attached' });
    expect(await page.inputValue('#live-workspace')).toBe(wsId);
    await page.selectOption('#live-model', 'nsm-2');
    // Every text the two level read-outs show, from now to the end.
    await page.evaluate(() => {
      const seen: string[] = ((window as any).__meterTexts = []);
      for (const id of ['live-in-db', 'live-out-db']) {
        const node = document.getElementById(id)!;
        seen.push(node.textContent ?? '');
        new MutationObserver(() => seen.push(node.textContent ?? '')).observe(node, { childList: true, characterData: true, subtree: true });
      }
    });

    await page.click('#live-start');
    // Streaming, or the page's reason why not (a refused upgrade is read back from the request log).
    await page.waitForSelector('#live-status[data-state="streaming"], #live-status[data-state="error"]', { timeout: 30_000 });
    expect(await page.textContent('#live-status')).toBe('Streaming with nsm-2.');
    // Until STREAM_S seconds have come back (the fake microphone runs in real time).
    await until(async () => {
      const state = await page.evaluate(() => (document.querySelector('#live-status') as HTMLElement).dataset.state);
      if (state !== 'streaming') throw new Error(`the stream stopped: ${await page.textContent('#live-status')}`);
      const got = await page.evaluate(() => (window as any).__live.kept.received / (window as any).__live.sampleRate);
      return got >= STREAM_S ? true : undefined;
    }, 60_000, 200);

    // While it runs: a measured round trip and the model's delay are shown, the meters move, before/after switches.
    await until(async () => ((await page.textContent('#live-rtt'))!.endsWith(' ms') ? true : undefined), 10_000);
    expect(await page.textContent('#live-model-delay')).toMatch(/^\d+(\.\d+)? ms$/);
    expect(Number(await page.getAttribute('#live-in-meter', 'aria-valuenow'))).toBeGreaterThan(-60);
    await page.click('#live-hear-before');
    expect(await page.getAttribute('#live-hear-before', 'aria-pressed')).toBe('true');
    expect(await page.getAttribute('#live-hear-after', 'aria-pressed')).toBe('false');
    await page.click('#live-hear-after');
    await shot('1280');
    expect(await layoutProblems(page)).toEqual([]);
    await page.setViewportSize({ width: 390, height: 844 });
    await shot('390');
    expect(await layoutProblems(page)).toEqual([]);
    await page.setViewportSize({ width: 1280, height: 900 });

    await page.click('#live-stop');
    await page.waitForSelector('#live-status[data-state="stopped"]', { timeout: 30_000 });
    expect(await page.textContent('#live-status')).toMatch(/Stopped: \d+\.\d s streamed, 1 credit\./);
    // The level read-outs: whole dB while there is sound, "< −60 dB" under the meter's floor, "silent" when no stream
    // runs; never "−∞ dB", which a quiet room is not.
    const meterTexts = (await page.evaluate(() => (window as any).__meterTexts)) as string[];
    expect(meterTexts.length).toBeGreaterThan(10);
    expect(meterTexts.filter((t) => !/^(silent|< −60 dB|−\d+ dB|0 dB)$/.test(t))).toEqual([]);
    expect(meterTexts.slice(0, 2)).toEqual(['silent', 'silent']);
    expect([await page.textContent('#live-in-db'), await page.textContent('#live-out-db')]).toEqual(['silent', 'silent']);

    // The samples as base64 of their float32 bytes: the same values, where a JSON array of 100,000 numbers each way
    // took ~3.5 s to come over.
    const got = await page.evaluate(() => {
      const live = (window as any).__live as { sampleRate: number; sent: Float32Array[]; received: Float32Array[] };
      const base64 = (chunks: Float32Array[]): string => {
        const all = new Float32Array(chunks.reduce((n, c) => n + c.length, 0));
        let at = 0;
        for (const c of chunks) {
          all.set(c, at);
          at += c.length;
        }
        const bytes = new Uint8Array(all.buffer);
        let text = '';
        for (let i = 0; i < bytes.length; i += 0x8000) text += String.fromCharCode(...bytes.subarray(i, i + 0x8000));
        return btoa(text);
      };
      return { rate: live.sampleRate, sent: base64(live.sent), received: base64(live.received) };
    });
    const floats = (b64: string): Float32Array => {
      const bytes = Buffer.from(b64, 'base64');
      return new Float32Array(bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.length));
    };
    const sent = floats(got.sent);
    const received = floats(got.received);
    expect(got.rate).toBe(16000); // nsm-2's own rate: the page's audio context runs at it
    expect(sent.length).toBeGreaterThanOrEqual(STREAM_S * got.rate);
    // After "end" the server flushed: as much came back as went out.
    expect(received.length).toBe(sent.length);

    // The recording went out (the fake microphone is not silent), and what came back is speech, not silence...
    const inDb = frameDb(sent, got.rate);
    const outDb = frameDb(received, got.rate);
    expect(percentile(inDb, 90)).toBeGreaterThan(-30);
    expect(percentile(outDb, 90)).toBeGreaterThan(-35);
    // ...with the noise gone: the quiet frames are far quieter than the input's.
    const floorIn = percentile(inDb, 10);
    const floorOut = percentile(outDb, 10);
    expect(floorOut).toBeLessThan(floorIn - 15);

    // It is the denoised recording: the same audio /denoise makes of what the page sent (same model and settings).
    const form = new FormData();
    form.append('file', new Blob([new Uint8Array(floatWav(sent, got.rate))], { type: 'audio/wav' }), 'sent.wav');
    form.append('model', 'nsm-2');
    form.append('attenuation_limit_db', '0');
    const key = (await handle.store.createToken({ workspaceId: wsId, name: 'check', scopes: ['*'], allowedIps: [], expiresAt: null })).token;
    const res = await fetch(`${base}/v1/noise-suppressor/denoise`, { method: 'POST', headers: { 'X-API-Key': key }, body: form });
    expect(res.status).toBe(200);
    const expected = wavSamples(Buffer.from(await res.arrayBuffer()));
    expect(expected.length).toBe(received.length);
    let err = 0;
    let sig = 0;
    for (let i = 0; i < expected.length; i++) {
      err += (received[i] - expected[i]) ** 2;
      sig += expected[i] ** 2;
    }
    // 16-bit output of /denoise: equal to within its rounding (and dither), i.e. far above 40 dB.
    expect(10 * Math.log10(sig / err)).toBeGreaterThan(40);

    // One request-log row for the stream (101, 1 credit, the bytes sent), after the ticket's row.
    const rows = await handle.store.queryRequests({ workspaceId: wsId, endpoint: 'stream', limit: 10, offset: 0 });
    expect(rows).toHaveLength(1);
    expect(rows[0]).toMatchObject({ status: 101, creditsCharged: 1, bytesIn: sent.length * 4, bytesOut: received.length * 4, errorType: null });
    const tickets = await handle.store.queryRequests({ workspaceId: wsId, endpoint: 'stream/tickets', limit: 10, offset: 0 });
    expect(tickets.map((t) => t.status)).toEqual([201]);
    expect(browserErrors).toEqual([]);
  });

  test('cancel echo: the sample plays, the stream carries it as the reference (ready says so), mono comes back', async () => {
    await page.check('#live-echo');
    await page.click('#live-start');
    await page.waitForSelector('#live-status[data-state="streaming"], #live-status[data-state="error"]', { timeout: 30_000 });
    expect(await page.textContent('#live-status')).toBe('Streaming with nsm-2, cancelling the sample\'s echo.');
    const ready = await page.evaluate(() => (window as any).__live.ready);
    expect(ready).toMatchObject({ type: 'ready', channels: 2, echo_reference: true, output_channels: 1, encoding: 'pcm_f32le' });
    await until(async () => ((await page.evaluate(() => (window as any).__live.kept.received / (window as any).__live.sampleRate)) >= 2 ? true : undefined), 60_000, 200);
    await page.click('#live-stop');
    await page.waitForSelector('#live-status[data-state="stopped"]', { timeout: 30_000 });
    const kept = await page.evaluate(() => (window as any).__live.kept);
    expect(kept.received).toBe(kept.sent);
    // The sample did reach the reference channel: the canceller saw it.
    expect(await page.evaluate(() => (window as any).__live.done)).toMatchObject({ echo_reference: true, echo_reference_active: true });
    // The request log: two float channels in for each one out.
    const rows = await handle.store.queryRequests({ workspaceId: wsId, endpoint: 'stream', limit: 10, offset: 0 });
    expect(rows[0]).toMatchObject({ status: 101, creditsCharged: 1, bytesIn: kept.sent * 8, bytesOut: kept.received * 4, errorType: null });
    expect(browserErrors).toEqual([]);
  });
});
