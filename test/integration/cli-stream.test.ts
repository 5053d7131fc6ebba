// `nsm stream` as a real process (bin/nsm.js) against the real app on a loopback port: the WAV it writes (16-bit, or
// G.711 with --encoding), raw bytes with -o -, the measured server-added latency with --realtime, --force, and every
// mistake or failure as one line on stderr with its exit status. The latency definition it shares with the bench
// (src/cli/stream-latency.ts) is checked on its own first.
import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import type http from 'node:http';
import path from 'node:path';
import { createApp, type AppHandle } from '../../src/app';
import { PROJECT_ROOT, type Config } from '../../src/config';
import { probeAudio } from '../../src/audio/probe';
import { addedLatency, LatencyHistogram } from '../../src/cli/stream-latency';
import { makeTmpDir } from '../helpers/audio-helpers';
import { closeQuietly, createToken, fixture, testConfig } from '../helpers/service-helpers';
import { serveApp, StreamClient, wavData } from '../helpers/streaming-helpers';

const BIN = path.join(PROJECT_ROOT, 'bin/nsm.js');
const INPUT = fixture('speech-noisy-16k-mono.wav');

test('server-added latency: each output sample counts from the frame holding input sample n + D; unsent frames count 0', () => {
  // 20 ms frames of 320 samples, D = 512. Frames 0..2 sent at 0, 20, 40 ms; output [0, 640) arrives at 43 ms.
  const runs: Array<[number, number]> = [];
  addedLatency([0, 20, 40], 320, 512, 0, 640, 43, (ms, n) => runs.push([ms, n]));
  // Samples 0..127 need input up to 639 (frame 1, sent at 20 ms), 128..447 frame 2 (40 ms), 448..639 frame 3 (not sent).
  expect(runs).toEqual([[23, 128], [3, 320], [0, 192]]);
  const h = new LatencyHistogram(0.05, 100);
  for (const [ms, n] of runs) h.add(ms, n);
  expect(h.samples).toBe(640);
  expect(h.percentile(50)).toBeCloseTo(3.05, 6);
  expect(h.percentile(99)).toBeCloseTo(23.05, 6);
  expect(h.max).toBe(23);
});

describe('nsm stream against a server', () => {
  let config: Config;
  let handle: AppHandle;
  let server: http.Server;
  let url: string;
  let token: string;
  let tmp: string;

  function nsm(args: string[], env: Record<string, string> = {}, onSpawn?: (child: ReturnType<typeof spawn>) => void): Promise<{ code: number | null; stderr: string; stdout: Buffer }> {
    return new Promise((resolve, reject) => {
      const child = spawn(process.execPath, [BIN, 'stream', ...args], {
        stdio: ['ignore', 'pipe', 'pipe'],
        env: { ...process.env, NSM_URL: url, NSM_TOKEN: token, ...env },
      });
      onSpawn?.(child);
      const out: Buffer[] = [];
      let stderr = '';
      child.stdout!.on('data', (d: Buffer) => out.push(d));
      child.stderr!.on('data', (d: Buffer) => (stderr += d.toString()));
      child.on('error', reject);
      child.on('close', (code) => resolve({ code, stderr, stdout: Buffer.concat(out) }));
    });
  }

  /** One line on stderr, in the CLI's style. */
  const oneLine = (stderr: string): string => {
    expect(stderr.endsWith('\n')).toBe(true);
    expect(stderr.trimEnd().split('\n')).toHaveLength(1);
    expect(stderr).toMatch(/^nsm stream: /);
    return stderr.trim();
  };

  beforeAll(async () => {
    config = testConfig();
    handle = await createApp(config, { log: () => undefined });
    const served = await serveApp(handle);
    server = served.server;
    url = served.http;
    token = await createToken(handle.store);
    tmp = makeTmpDir('nsm-stream-cli-');
  });

  afterAll(async () => {
    await closeQuietly(server);
    await handle.close();
    fs.rmSync(tmp, { recursive: true, force: true });
    fs.rmSync(config.dataDir, { recursive: true, force: true });
  });

  test('--realtime writes the WAV and prints the measured server-added latency (not 0)', async () => {
    const out = path.join(tmp, 'clean.wav');
    const t0 = Date.now();
    const r = await nsm([INPUT, '-o', out, '--realtime']);
    expect(r.code).toBe(0);
    expect(Date.now() - t0).toBeGreaterThanOrEqual(2900); // 3 s of audio in real time
    const m = /server-added latency p50 ([\d.]+) ms, p99 ([\d.]+) ms, max ([\d.]+) ms/.exec(r.stderr);
    expect(m).not.toBeNull();
    const [p50, p99, max] = m!.slice(1).map(Number);
    // The server runs the model between a frame and its answer: more than the 0.05 ms bin that holds zeros. (With
    // nsm-2's 128-sample hop, 20-30 % of the samples count 0: answered before the frame holding n + D was sent; with
    // nsm-1's 256-sample hop about half do, so its median can be 0.)
    expect(p50).toBeGreaterThan(0.05);
    expect(p99).toBeGreaterThanOrEqual(p50);
    expect(max).toBeGreaterThanOrEqual(p99 - 0.05);
    expect(r.stderr).toMatch(/^wrote .*clean\.wav \(from .*\): 3\.00 s mono 16000 Hz pcm_s16le, nsm-2, .*1 credit, model delay 32 ms/);
    const p = await probeAudio(config, out);
    expect([p.codec, p.sampleRate, p.channels]).toEqual(['pcm_s16le', 16000, 1]);
    expect(wavData(fs.readFileSync(out)).length).toBe(3 * 16000 * 2);
    expect(fs.readdirSync(tmp).filter((f) => f.includes('partial'))).toEqual([]);
  }, 60_000);

  test('--encoding mulaw at 8 kHz: a μ-law WAV of what the stream returned for the μ-law ffmpeg made of IN', async () => {
    const out = path.join(tmp, 'call.wav');
    const r = await nsm([INPUT, '-o', out, '--encoding', 'mulaw', '--rate', '8000', '-q']);
    expect(r.code).toBe(0);
    expect(r.stderr).toBe('');
    const p = await probeAudio(config, out);
    expect([p.codec, p.sampleRate, p.channels]).toEqual(['pcm_mulaw', 8000, 1]);
    // The same bytes straight from the server, for the μ-law bytes the CLI sent.
    const sent = spawnSync(config.ffmpegPath, ['-v', 'error', '-i', INPUT, '-ac', '1', '-ar', '8000', '-f', 'mulaw', '-'], { maxBuffer: 1 << 24 }).stdout;
    const c = new StreamClient(`${url.replace('http', 'ws')}/v1/noise-suppressor/stream?sample_rate=8000&encoding=mulaw`, { Authorization: `Bearer ${token}` });
    await c.ready;
    c.send(sent, 160);
    c.end();
    await c.closed;
    expect(wavData(fs.readFileSync(out)).equals(c.audio)).toBe(true);
    // -o -: the raw bytes on standard output.
    const raw = await nsm([INPUT, '-o', '-', '-e', 'mulaw', '-r', '8000', '-q']);
    expect(raw.code).toBe(0);
    expect(raw.stdout.equals(c.audio)).toBe(true);
  }, 60_000);

  test('an existing output is refused without --force (left as it was), replaced with it', async () => {
    const out = path.join(tmp, 'exists.wav');
    fs.writeFileSync(out, 'keep me');
    const r = await nsm([INPUT, '-o', out]);
    expect(r.code).toBe(2);
    expect(oneLine(r.stderr)).toBe(`nsm stream: ${out} exists; pass --force to replace it`);
    expect(fs.readFileSync(out, 'utf8')).toBe('keep me');
    const forced = await nsm([INPUT, '-o', out, '--force', '-q']);
    expect(forced.code).toBe(0);
    expect((await probeAudio(config, out)).codec).toBe('pcm_s16le');
  }, 60_000);

  test('mistakes and failures: one line each, the right exit status, nothing written', async () => {
    const out = path.join(tmp, 'never.wav');
    const usage: Array<[string[], RegExp]> = [
      [[], /give one input/],
      [[INPUT], /-o OUT is required/],
      [[INPUT, '-o', out, '--encoding', 'ulaw'], /--encoding must be one of pcm_s16le, mulaw, alaw, got "ulaw"/],
      [[INPUT, '-o', out, '--rate', '7999'], /--rate must be an integer from 8000 to 48000/],
      [[INPUT, '-o', out, '--channels', '3'], /--channels must be 1 or 2/],
      [[INPUT, '-o', out, '--model', 'nsm-9'], /unknown model "nsm-9"/],
      [[INPUT, '-o', out, '--loud'], /unknown option --loud/],
      [[INPUT, '-o', path.join(tmp, 'x.mp3')], /the output is a WAV file/],
      [[INPUT, '-o', out, '--server', 'ftp://x'], /--server must be an http\(s\) URL/],
    ];
    for (const [args, why] of usage) {
      const r = await nsm(args);
      expect(r.code).toBe(2);
      expect(oneLine(r.stderr)).toMatch(why);
      expect(r.stderr).toMatch(/\(see nsm stream --help\)\n$/);
    }
    const noToken = await nsm([INPUT, '-o', out], { NSM_TOKEN: '' });
    expect(noToken.code).toBe(2);
    expect(oneLine(noToken.stderr)).toMatch(/no token/);

    const missing = await nsm([path.join(tmp, 'nope.wav'), '-o', out]);
    expect(missing.code).toBe(3);
    expect(oneLine(missing.stderr)).toBe(`nsm stream: input not found: ${path.join(tmp, 'nope.wav')}`);
    const notAudio = path.join(tmp, 'notes.txt');
    fs.writeFileSync(notAudio, 'not audio at all');
    const unreadable = await nsm([notAudio, '-o', out]);
    expect(unreadable.code).toBe(3);
    expect(oneLine(unreadable.stderr)).toMatch(/^nsm stream: could not read .*notes\.txt: /);

    const refused = await nsm([INPUT, '-o', out], { NSM_TOKEN: 'mw_live_' + 'x'.repeat(32) });
    expect(refused.code).toBe(1);
    expect(oneLine(refused.stderr)).toMatch(/^nsm stream: refused: 401 invalid_token: /);
    const gone = await nsm([INPUT, '-o', out, '--server', 'http://127.0.0.1:1']);
    expect(gone.code).toBe(1);
    expect(oneLine(gone.stderr)).toMatch(/^nsm stream: cannot reach http:\/\/127\.0\.0\.1:1: .*ECONNREFUSED/);
    expect(fs.existsSync(out)).toBe(false);
    expect(fs.readdirSync(tmp).filter((f) => f.includes('partial'))).toEqual([]);
  }, 120_000);

  test('Ctrl-C mid-stream: exit 130, one line, no output and no partial file', async () => {
    const out = path.join(tmp, 'interrupted.wav');
    // Once the stream is under way (its partial output exists), as a user would.
    const r = await nsm([INPUT, '-o', out, '--realtime'], {}, (child) => {
      const poll = setInterval(() => {
        if (!fs.readdirSync(tmp).some((f) => f.startsWith('.interrupted.wav.partial'))) return;
        clearInterval(poll);
        setTimeout(() => child.kill('SIGINT'), 300);
      }, 20);
      child.once('close', () => clearInterval(poll));
    });
    expect(r.code).toBe(130);
    expect(oneLine(r.stderr)).toBe('nsm stream: interrupted');
    expect(fs.existsSync(out)).toBe(false);
    expect(fs.readdirSync(tmp).filter((f) => f.includes('partial'))).toEqual([]);
  }, 30_000);

  test('--help', async () => {
    const r = await nsm(['--help']);
    expect(r.code).toBe(0);
    expect(r.stdout.toString()).toMatch(/--encoding E {10}pcm_s16le \(default\), mulaw or alaw/);
    expect(r.stdout.toString()).toMatch(/--force/);
  });
});
