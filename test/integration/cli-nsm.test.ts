// The nsm command line, spawned as a real process: node bin/nsm.js (compiled CLI, real engine, real ffmpeg).
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { loadConfig, PROJECT_ROOT } from '../../src/config';
import { probeAudio } from '../../src/audio/probe';
import { readPcm, writePcm } from '../../src/pipeline/clips';
import { fixture, makeTmpDir } from '../helpers/audio-helpers';

const config = loadConfig();
const BIN = path.join(PROJECT_ROOT, 'bin/nsm.js');

interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
}

function nsm(args: string[], onStderr?: (text: string, child: ReturnType<typeof spawn>) => void, stdin?: Buffer): Promise<Run & { stdoutBytes: Buffer }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [BIN, ...args], {
      stdio: [stdin ? 'pipe' : 'ignore', 'pipe', 'pipe'],
      env: { ...process.env, WORKERS: '2' },
    });
    if (stdin) child.stdin!.end(stdin);
    const chunks: Buffer[] = [];
    let stderr = '';
    child.stdout!.on('data', (d: Buffer) => chunks.push(d));
    child.stderr!.on('data', (d) => {
      stderr += d;
      onStderr?.(stderr, child);
    });
    child.on('error', reject);
    child.on('close', (code) => {
      const stdoutBytes = Buffer.concat(chunks);
      resolve({ code, stdout: stdoutBytes.toString('utf8'), stdoutBytes, stderr });
    });
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
  expect(help.stdout).toContain('nsm denoise IN...');
  const denoiseHelp = await nsm(['denoise', '--help']);
  expect(denoiseHelp.code).toBe(0);
  expect(denoiseHelp.stdout).toContain('nsm-2-hd');
  expect(denoiseHelp.stdout).toContain('--force');
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
  [['denoise', 'FIXTURE:speech-noisy-16k-mono.wav', '--format', 'aiff'], 2, /--format must be one of wav, flac/],
  [['denoise', 'FIXTURE:speech-noisy-16k-mono.wav', '-o', 'clean.xyz'], 2, /cannot tell the output format from the extension \.xyz/],
  [['denoise', 'FIXTURE:speech-noisy-16k-mono.wav', '-o', 'clean.flac', '--format', 'wav'], 2, /--format wav does not match the output name clean\.flac/],
  [['denoise', 'FIXTURE:speech-noisy-16k-mono.wav', 'FIXTURE:speech-noisy-44k1-stereo.mp3', '-o', 'OUT'], 2, /-o names one output but 2 inputs/],
  [['denoise', '-', '-', '-o', 'OUT'], 2, /standard input \(-\) can be read only once/],
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
  // A line per 10 % step reached (the pipeline reports per 8 s chunk, so 40 s gives 20, 40, 60, 80), rising, then 100 %.
  const steps = [...full.stderr.matchAll(/progress (\d+)% \((\d+\.\d)\/40\.0 s\)/g)].map((m) => Number(m[1]));
  expect(steps.length).toBeGreaterThanOrEqual(3);
  for (let i = 1; i < steps.length; i++) expect(steps[i]).toBeGreaterThan(steps[i - 1]);
  expect(steps[steps.length - 1]).toBeLessThan(100);
  expect(full.stderr).toMatch(/progress 100%\n/);

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

describe('several files, stdin/stdout, formats from the extension, no silent overwrite', () => {
  const copyAs = (name: string, as: string): string => {
    const copy = path.join(tmp, as);
    fs.copyFileSync(fixture(name), copy);
    return copy;
  };

  test('nsm denoise A B C -d DIR: outputs named after the inputs, a summary line per file and a total', async () => {
    const dir = path.join(tmp, 'many');
    fs.mkdirSync(dir);
    const inputs = [
      copyAs('speech-noisy-16k-mono.wav', 'one.wav'),
      copyAs('speech-noisy-44k1-stereo.mp3', 'two.mp3'),
      copyAs('speech-noisy-44k1-stereo.webm', 'three.webm'),
    ];
    const run = await nsm(['denoise', ...inputs, '-d', dir, '--model', 'nsm-1']);
    expect(run.code).toBe(0);
    expect(fs.readdirSync(dir).sort()).toEqual(['one_denoised.wav', 'three_denoised.wav', 'two_denoised.wav']);
    const lines = run.stderr.trim().split('\n');
    expect(lines).toHaveLength(4);
    for (const input of inputs) {
      const base = path.parse(input).name;
      expect(lines).toContainEqual(expect.stringMatching(new RegExp(`^wrote ${path.join(dir, base)}_denoised\\.wav \\(from ${input}\\): \\d+\\.\\d+ s (mono|stereo) \\d+ Hz wav, nsm-1, `)));
    }
    expect(lines[3]).toBe('nsm: 3 of 3 files denoised');
    const p = await probeAudio(config, path.join(dir, 'two_denoised.wav'));
    expect([p.sampleRate, p.channels]).toEqual([44100, 2]);
  });

  test('-d DIR that does not exist yet is created (the README\'s `nsm denoise *.mp3 -d cleaned/`)', async () => {
    const work = path.join(tmp, 'fresh-dir');
    fs.mkdirSync(work);
    fs.copyFileSync(fixture('speech-noisy-44k1-stereo.mp3'), path.join(work, 'a.mp3'));
    fs.copyFileSync(fixture('speech-noisy-44k1-stereo.mp3'), path.join(work, 'b.mp3'));
    // Run from the inputs' folder with relative names, as a user types it; cleaned/sub/ is two levels deep.
    const child = spawn(process.execPath, [BIN, 'denoise', 'a.mp3', 'b.mp3', '-d', 'cleaned/sub/', '--model', 'nsm-1', '-q'], {
      cwd: work, stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, WORKERS: '2' },
    });
    let stderr = '';
    child.stderr!.on('data', (d) => (stderr += d));
    const code = await new Promise<number | null>((resolve) => child.on('close', resolve));
    expect({ code, stderr }).toEqual({ code: 0, stderr: '' });
    expect(fs.readdirSync(path.join(work, 'cleaned/sub')).sort()).toEqual(['a_denoised.wav', 'b_denoised.wav']);
    expect((await probeAudio(config, path.join(work, 'cleaned/sub/a_denoised.wav'))).codec).toBe('pcm_s16le');

    // A run that is refused before any work creates no folder; a -d that names a file is refused.
    const refused = await nsm(['denoise', path.join(work, 'missing.mp3'), '-d', path.join(work, 'never')]);
    expect(refused.code).toBe(3);
    expect(fs.existsSync(path.join(work, 'never'))).toBe(false);
    const onFile = await nsm(['denoise', path.join(work, 'a.mp3'), '-d', path.join(work, 'a.mp3')]);
    expect(onFile.code).toBe(2);
    expect(onFile.stderr).toBe(`nsm: ${path.join(work, 'a.mp3')} is not a directory\nnsm: nothing was written\n`);
  });

  test('two inputs that would write the same output are refused before any work', async () => {
    const a = copyAs('speech-noisy-44k1-stereo.mp3', 'same.mp3');
    const b = copyAs('speech-noisy-44k1-stereo.ogg', 'same.ogg');
    const run = await nsm(['denoise', a, b]);
    expect(run.code).toBe(2);
    expect(run.stderr).toMatch(/same\.mp3 and .*same\.ogg would both be written to .*same_denoised\.wav/);
    expect(fs.existsSync(path.join(tmp, 'same_denoised.wav'))).toBe(false);
  });

  test('a bad file among good ones: the good ones are written, the bad one reported, exit 3', async () => {
    const dir = path.join(tmp, 'mixed');
    fs.mkdirSync(dir);
    const run = await nsm(['denoise', fixture('speech-noisy-16k-mono.wav'), fixture('not-audio.wav'), '-d', dir, '--model', 'nsm-1']);
    expect(run.code).toBe(3);
    expect(run.stderr).toMatch(/nsm: .*not-audio\.wav: could not decode/);
    expect(run.stderr).toMatch(/nsm: 1 of 2 files denoised/);
    expect(fs.readdirSync(dir)).toEqual(['speech-noisy-16k-mono_denoised.wav']); // no partial file of the bad one
  });

  test('the output extension picks the format: -o clean.flac writes FLAC', async () => {
    const out = path.join(tmp, 'by-extension.flac');
    const run = await nsm(['denoise', fixture('speech-noisy-16k-mono.wav'), '-o', out, '-q']);
    expect(run.code).toBe(0);
    expect(run.stderr).toBe('');
    expect(fs.readFileSync(out).subarray(0, 4).toString('latin1')).toBe('fLaC');
    expect((await probeAudio(config, out)).codec).toBe('flac');
  });

  test('- reads standard input and writes standard output (WAV by default, --format flac)', async () => {
    const input = fs.readFileSync(fixture('speech-noisy-44k1-stereo.ogg'));
    const run = await nsm(['denoise', '-', '--model', 'nsm-1'], undefined, input);
    expect(run.code).toBe(0);
    expect(run.stdoutBytes.subarray(0, 4).toString('latin1')).toBe('RIFF');
    expect(run.stdoutBytes.subarray(8, 12).toString('latin1')).toBe('WAVE');
    expect(run.stderr).toMatch(/^wrote stdout \(from stdin\): 3\.\d+ s stereo 44100 Hz wav, nsm-1/);
    const piped = path.join(tmp, 'piped.wav');
    fs.writeFileSync(piped, run.stdoutBytes);
    const p = await probeAudio(config, piped);
    expect([p.sampleRate, p.channels, p.codec]).toEqual([44100, 2, 'pcm_s16le']);

    const flac = await nsm(['denoise', '-', '-o', '-', '--format', 'flac', '-q'], undefined, fs.readFileSync(fixture('speech-noisy-16k-mono.wav')));
    expect(flac.code).toBe(0);
    expect(flac.stdoutBytes.subarray(0, 4).toString('latin1')).toBe('fLaC');
    // A file input can go to standard output too.
    const toStdout = await nsm(['denoise', fixture('speech-noisy-16k-mono.wav'), '-o', '-', '-q']);
    expect(toStdout.stdoutBytes.subarray(0, 4).toString('latin1')).toBe('RIFF');
  });

  test('an existing output is never replaced without --force (nothing is written); --force replaces it', async () => {
    const out = path.join(tmp, 'keep-me.wav');
    fs.writeFileSync(out, 'precious');
    const refused = await nsm(['denoise', fixture('speech-noisy-16k-mono.wav'), '-o', out]);
    expect(refused.code).toBe(2);
    expect(refused.stderr).toBe(`nsm: ${out} exists; pass --force to replace it\nnsm: nothing was written\n`);
    expect(fs.readFileSync(out, 'utf8')).toBe('precious');

    // With several inputs one existing output stops the whole run before any work.
    const dir = path.join(tmp, 'partly-there');
    fs.mkdirSync(dir);
    fs.writeFileSync(path.join(dir, 'speech-noisy-16k-mono_denoised.wav'), 'precious');
    const many = await nsm(['denoise', fixture('speech-noisy-16k-mono.wav'), fixture('speech-noisy-48k-mono.wav'), '-d', dir]);
    expect(many.code).toBe(2);
    expect(fs.readdirSync(dir)).toEqual(['speech-noisy-16k-mono_denoised.wav']);

    const forced = await nsm(['denoise', fixture('speech-noisy-16k-mono.wav'), '-o', out, '--force', '-q']);
    expect(forced.code).toBe(0);
    expect(fs.readFileSync(out).subarray(0, 4).toString('latin1')).toBe('RIFF');
    expect(fs.readdirSync(tmp).filter((n) => n.includes('.partial-'))).toEqual([]);
  });
});
