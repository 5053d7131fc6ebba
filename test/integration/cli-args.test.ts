// The command lines of nsm, nsm jobs, keys and db on node:util parseArgs (src/cli/args.ts): what is accepted, and
// one style for every mistake (`<program>: <what> (see <help command>)`, exit 2), checked on the real processes.
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseCommandLine, UsageError } from '../../src/cli/args';
import { parseDenoiseArgs } from '../../src/cli/nsm';
import { parseStreamArgs } from '../../src/cli/stream';
import { PROJECT_ROOT } from '../../src/config';

const SPECS = {
  output: { type: 'string' as const, short: 'o' },
  loudness: { type: 'string' as const, short: 'l', aliases: ['loudness-lufs'] },
  force: { type: 'boolean' as const },
  quiet: { type: 'boolean' as const, short: 'q' },
};

describe('parseCommandLine', () => {
  test('values inline or next, short groups, aliases, values starting with one dash, -- ends the options', () => {
    expect(parseCommandLine(['a.wav', '-o', '-', '--loudness', '-16', '-q', '--force', '--', '--not-an-option'], SPECS)).toEqual({
      values: { output: '-', loudness: '-16', quiet: true, force: true },
      positionals: ['a.wav', '--not-an-option'],
    });
    expect(parseCommandLine(['--output=x.flac', '--loudness-lufs=-23', '-qo', 'y.wav'], SPECS).values).toEqual({ output: 'y.wav', loudness: '-23', quiet: true });
    expect(parseCommandLine(['-', 'b'], SPECS).positionals).toEqual(['-', 'b']);
  });

  test.each([
    [['--foo'], 'unknown option --foo'],
    [['-x'], 'unknown option -x'],
    [['--output'], '--output needs a value'],
    [['-o'], '-o needs a value'],
    [['--output', '--force'], '--output needs a value'],
    [['--output='], '--output needs a value'],
    [['--force=yes'], '--force takes no value'],
  ])('%j → %s', (argv, message) => {
    expect(() => parseCommandLine(argv, SPECS)).toThrow(new UsageError(message));
  });

  test('`once`: an option given twice is a mistake (keys); otherwise the last one counts', () => {
    expect(() => parseCommandLine(['-o', 'a', '--output', 'b'], SPECS, { once: true })).toThrow('--output given twice');
    expect(parseCommandLine(['-o', 'a', '--output', 'b'], SPECS).values.output).toBe('b');
  });

  test('nsm denoise keeps its options: aliases, --loudness -16, -o -, and --keep-rate/--model-rate exclusive', () => {
    const args = parseDenoiseArgs(['in.wav', '--attenuation-limit-db', '12', '-l', '-16', '-f', 'FLAC', '--model-rate', '-m', 'nsm-1', '--json', '-q'], 0);
    expect(args).toMatchObject({ model: 'nsm-1', attenuationLimitDb: 12, loudnessLufs: -16, format: 'flac', keepInputSampleRate: false, json: true, quiet: true });
    expect(args.jobs).toEqual([{ input: 'in.wav', output: 'in_denoised.flac' }]);
    expect(parseDenoiseArgs(['-', '-o', '-'], 0).jobs).toEqual([{ input: '-', output: '-' }]);
    expect(() => parseDenoiseArgs(['in.wav', '--keep-rate', '--model-rate'], 0)).toThrow('--keep-rate and --model-rate exclude each other');
  });

  test('nsm denoise never writes over its input or its echo reference, by any name (--force or not)', () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'nsm-same-file-'));
    try {
      const input = path.join(dir, 'in.wav');
      const far = path.join(dir, 'far.wav');
      fs.writeFileSync(input, 'input');
      fs.writeFileSync(far, 'far end');
      fs.symlinkSync(input, path.join(dir, 'link.wav'));
      fs.linkSync(input, path.join(dir, 'hard.wav'));
      for (const name of ['in.wav', 'link.wav', 'hard.wav']) {
        expect(() => parseDenoiseArgs([input, '-o', path.join(dir, name), '--force'], 0)).toThrow(`output would overwrite the input ${input}`);
        expect(() => parseDenoiseArgs([path.join(dir, name), '-o', input, '--force'], 0)).toThrow('output would overwrite the input');
      }
      expect(() => parseDenoiseArgs([input, '--echo-reference', far, '-o', far, '--force'], 0)).toThrow(`output would overwrite the echo reference ${far}`);
      expect(() => parseStreamArgs([input, '-o', path.join(dir, 'link.wav'), '--force'], {})).toThrow(`output would overwrite the input ${input}`);
      // Another file, existing or not, is an ordinary output.
      expect(parseDenoiseArgs([input, '-o', path.join(dir, 'out.wav')], 0).jobs).toEqual([{ input, output: path.join(dir, 'out.wav') }]);
      expect(parseDenoiseArgs([input, '--echo-reference', far, '-o', path.join(dir, 'out.wav')], 0).echoReference).toBe(far);
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
});

test('no CLI puts a file in the place of a pipe, a device or a folder, --force or not (they write beside it and rename)', () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'nsm-not-a-file-'));
  try {
    const fifo = path.join(dir, 'pipe.wav');
    expect(spawnSync('mkfifo', [fifo]).status).toBe(0);
    const folder = path.join(dir, 'folder.wav');
    fs.mkdirSync(folder);
    const targets: Array<[string, string]> = [[fifo, 'is not a regular file (a device, pipe or socket)'], [folder, 'is a folder']];
    if (process.getuid?.() === 0) {
      // As root (the case that replaced /dev/null): a character device of its own, the same as /dev/null.
      const device = path.join(dir, 'null.wav');
      expect(spawnSync('mknod', ['-m', '666', device, 'c', '1', '3']).status).toBe(0);
      targets.push([device, 'is not a regular file (a device, pipe or socket)']);
    }
    const input = path.join(PROJECT_ROOT, 'fixtures/speech-noisy-16k-mono.wav');
    const dataDir = path.join(dir, 'data');
    // A database for `db backup` to copy.
    expect(spawnSync(process.execPath, [path.join(PROJECT_ROOT, 'dist/src/cli/keys.js'), 'create', '--workspace', 'w'], { env: { ...process.env, DATA_DIR: dataDir } }).status).toBe(0);
    for (const [target, why] of targets) {
      const before = fs.statSync(target);
      const runs = [
        [path.join(PROJECT_ROOT, 'bin/nsm.js'), 'denoise', input, '-o', target, '--force', '-q'],
        [path.join(PROJECT_ROOT, 'dist/src/cli/db.js'), 'backup', target, '--force'],
      ];
      for (const args of runs) {
        const r = spawnSync(process.execPath, args, { env: { ...process.env, DATA_DIR: dataDir, WORKERS: '1' }, encoding: 'utf8', timeout: 60_000 });
        expect([args[1], r.status === 0, r.stderr.includes(why) || r.stderr.includes('is a directory')]).toEqual([args[1], false, true]);
        const after = fs.statSync(target);
        expect([after.ino, after.mode, after.rdev]).toEqual([before.ino, before.mode, before.rdev]); // the same thing, untouched
      }
    }
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});

describe('one error style on every CLI (real processes)', () => {
  let dataDir: string;
  beforeAll(() => {
    dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'ns-cli-args-'));
  });
  afterAll(() => fs.rmSync(dataDir, { recursive: true, force: true }));

  const NSM = path.join(PROJECT_ROOT, 'bin/nsm.js');
  const dist = (p: string) => path.join(PROJECT_ROOT, 'dist/src/cli', p);
  test.each([
    [[NSM, 'denoise', 'in.wav', '--foo'], 'nsm: unknown option --foo (see nsm denoise --help)'],
    [[NSM, 'denoise', 'in.wav', '--model'], 'nsm: --model needs a value (see nsm denoise --help)'],
    [[NSM, 'denoise', 'in.wav', '--force=yes'], 'nsm: --force takes no value (see nsm denoise --help)'],
    [[NSM, 'denoise', 'in.wav', '--model', 'nsm-9'], 'nsm: unknown model "nsm-9" (expected one of nsm-1, nsm-2, nsm-3, nsm-4, nsm-2-hd) (see nsm denoise --help)'],
    [[NSM, 'frobnicate'], 'nsm: unknown command "frobnicate" (see nsm --help)'],
    [[NSM, '--frobnicate'], 'nsm: unknown option --frobnicate (see nsm --help)'],
    [[NSM, 'jobs', 'list', '--foo'], 'nsm jobs: unknown option --foo (see nsm jobs --help)'],
    [[NSM, 'jobs', 'wait'], 'nsm jobs: wait needs exactly one job id (see nsm jobs --help)'],
    [[NSM, 'jobs', 'frobnicate'], 'nsm jobs: unknown jobs command "frobnicate" (see nsm jobs --help)'],
    [[dist('keys.js'), 'list', '--foo'], 'keys: unknown option --foo (see keys --help)'],
    [[dist('keys.js'), 'create', '--workspace', 'a', '--workspace', 'b'], 'keys: --workspace given twice (see keys --help)'],
    [[dist('keys.js'), 'list', '--plan', 'free'], 'keys: list does not take --plan (see keys --help)'],
    [[dist('keys.js')], 'keys: a command is required (see keys --help)'],
    [[dist('db.js'), 'backup', 'x.db', '--foo'], 'db: unknown option --foo (see db backup --help)'],
    [[dist('db.js'), 'backup'], 'db: backup needs a FILE (see db backup --help)'],
    [[dist('db.js'), 'migrate', 'extra'], 'db: migrate takes no arguments, got "extra" (see db migrate --help)'],
    [[dist('db.js'), 'vacuum'], 'db: unknown command "vacuum" (see db --help)'],
  ])('%j', (args, line) => {
    const r = spawnSync(process.execPath, args, { env: { ...process.env, DATA_DIR: dataDir, NSM_TOKEN: 't' }, encoding: 'utf8', timeout: 30_000 });
    expect({ status: r.status, stderr: r.stderr }).toEqual({ status: 2, stderr: `${line}\n` });
  });
});
