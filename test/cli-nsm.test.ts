// The nsm command line, spawned as a real process: node bin/nsm.js (compiled CLI, real engine, real ffmpeg).
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { loadConfig, PROJECT_ROOT } from '../src/config';
import { probeAudio } from '../src/audio/probe';
import { readPcm, writePcm } from '../src/audio/pcm';
import { fixture, makeTmpDir } from './audio-helpers';

const config = loadConfig();
const BIN = path.join(PROJECT_ROOT, 'bin/nsm.js');

interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
}

function nsm(args: string[], onStderr?: (text: string, child: ReturnType<typeof spawn>) => void): Promise<Run> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [BIN, ...args], { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, WORKERS: '1' } });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => (stdout += d));
    child.stderr.on('data', (d) => {
      stderr += d;
      onStderr?.(stderr, child);
    });
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, stdout, stderr }));
  });
}

let tmp: string;
beforeAll(async () => {
  tmp = makeTmpDir('nsm-cli-');
});
afterAll(() => fs.rmSync(tmp, { recursive: true, force: true }));

test('--help prints usage and exits 0; no arguments is a usage error', async () => {
  const help = await nsm(['--help']);
  expect(help.code).toBe(0);
  expect(help.stdout).toContain('nsm denoise IN');
  expect(help.stdout).toContain('nsm-2-hd');
  const none = await nsm([]);
  expect(none.code).toBe(2);
});

test('denoise IN writes <base>_denoised.wav next to the input at the input rate', async () => {
  const input = path.join(tmp, 'interview.mp3');
  fs.copyFileSync(fixture('speech-noisy-44k1-stereo.mp3'), input);
  const run = await nsm(['denoise', input]);
  expect(run.code).toBe(0);
  const out = path.join(tmp, 'interview_denoised.wav');
  expect(run.stderr).toContain(`wrote ${out}`);
  const p = await probeAudio(config, out);
  expect([p.sampleRate, p.channels, p.codec]).toEqual([44100, 2, 'pcm_s16le']);
  expect(Math.abs(p.durationS! - 3)).toBeLessThan(0.05);
});

test('-o, --format flac, --model-rate, --model, --attenuation-limit and --json', async () => {
  const out = path.join(tmp, 'clean.flac');
  const run = await nsm(['denoise', fixture('speech-noisy-44k1-stereo.webm'), '-o', out, '--format', 'flac', '--model-rate',
    '--model', 'nsm-1', '--attenuation-limit', '12', '--json', '--quiet']);
  expect(run.code).toBe(0);
  expect(run.stderr).toBe('');
  const stats = JSON.parse(run.stdout);
  expect(stats).toMatchObject({ output: out, model: 'nsm-1', output_format: 'flac', output_sample_rate: 16000, input_sample_rate: 48000, channels: 2, attenuation_limit_db: 12 });
  const p = await probeAudio(config, out);
  expect([p.sampleRate, p.channels, p.codec]).toEqual([16000, 2, 'flac']);
});

test.each([
  [['denoise', 'FIXTURE:not-audio.wav', '-o', 'OUT'], 3, /could not decode/],
  [['denoise', 'FIXTURE:empty.wav', '-o', 'OUT'], 3, /file is empty/],
  [['denoise', 'FIXTURE:does-not-exist.wav'], 3, /input not found/],
  [['denoise', 'FIXTURE:speech-noisy-16k-mono.wav', '--model', 'nsm-9'], 2, /unknown model "nsm-9"/],
  [['denoise', 'FIXTURE:speech-noisy-16k-mono.wav', '--attenuation-limit', '150'], 2, /0 to 100/],
  [['denoise', 'FIXTURE:speech-noisy-16k-mono.wav', '--format', 'mp3'], 2, /wav or flac/],
  [['frobnicate'], 2, /unknown command/],
])('%j exits %i', async (args, code, message) => {
  const out = path.join(tmp, 'should-not-exist.wav');
  const run = await nsm(args.map((a) => (a.startsWith('FIXTURE:') ? fixture(a.slice(8)) : a === 'OUT' ? out : a)));
  expect(run.code).toBe(code);
  expect(run.stderr).toMatch(message);
  expect(fs.existsSync(out)).toBe(false);
});

test('long files report progress; SIGINT stops the run with 130 and removes the partial output', async () => {
  // 40 s of looped noisy speech (over the 10 s threshold for progress output).
  const [speech] = await readPcm(config, fixture('speech-noisy-16k-mono.wav'), 16000, 1);
  const long = new Float32Array(speech.length * 40 / 3);
  for (let k = 0; k < long.length; k += speech.length) long.set(speech.subarray(0, long.length - k), k);
  const input = path.join(tmp, 'lecture.wav');
  await writePcm(config, [long], 16000, input, ['-c:a', 'pcm_s16le', '-f', 'wav']);

  const full = await nsm(['denoise', input, '--model', 'nsm-1']);
  expect(full.code).toBe(0);
  expect(full.stderr).toMatch(/progress 0% \(/);
  expect(full.stderr).toMatch(/progress 50% \(/);
  expect(full.stderr).toMatch(/progress 100%/);

  const out = path.join(tmp, 'interrupted.wav');
  let sent = false;
  const run = await nsm(['denoise', input, '-o', out, '--model', 'nsm-4'], (text, child) => {
    if (!sent && /progress \d+%/.test(text)) {
      sent = true;
      child.kill('SIGINT');
    }
  });
  expect(sent).toBe(true);
  expect(run.code).toBe(130);
  expect(run.stderr).toContain('interrupted');
  expect(fs.existsSync(out)).toBe(false);
});
