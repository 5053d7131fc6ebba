// The installed `nsm`: a link to bin/nsm.js (what `npm link --ignore-scripts` makes) works from any directory with
// the clone's dist/, models and ffmpeg, without rebuilding; a clone that was never built says so in one line.
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { PROJECT_ROOT } from '../../src/config';
import { fixture } from '../helpers/service-helpers';

let tmp: string;
beforeAll(() => {
  tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'ns-cli-bin-'));
});
afterAll(() => fs.rmSync(tmp, { recursive: true, force: true }));

test('a link on the PATH runs the clone\'s CLI from another directory; relative paths are the caller\'s', () => {
  const binDir = path.join(tmp, 'global-bin');
  const work = path.join(tmp, 'somewhere-else');
  fs.mkdirSync(binDir);
  fs.mkdirSync(work);
  fs.symlinkSync(path.join(PROJECT_ROOT, 'bin', 'nsm.js'), path.join(binDir, 'nsm'));
  fs.copyFileSync(fixture('speech-noisy-16k-mono.wav'), path.join(work, 'take.wav'));
  const env = { ...process.env, PATH: `${binDir}${path.delimiter}${process.env.PATH}`, WORKERS: '1' };

  const help = spawnSync('nsm', ['--help'], { cwd: work, env, encoding: 'utf8' });
  expect(help.status).toBe(0);
  expect(help.stdout).toContain('nsm denoise IN...');

  const run = spawnSync('nsm', ['denoise', 'take.wav', '--model', 'nsm-1', '-q'], { cwd: work, env, encoding: 'utf8', timeout: 60_000 });
  expect({ status: run.status, stderr: run.stderr }).toEqual({ status: 0, stderr: '' });
  expect(fs.readFileSync(path.join(work, 'take_denoised.wav')).subarray(0, 4).toString('latin1')).toBe('RIFF');
  expect(fs.readdirSync(work).sort()).toEqual(['take.wav', 'take_denoised.wav']);
});

test('without dist/ (a clone never built): one line saying to run npm run build in the clone, exit 1', () => {
  const clone = path.join(tmp, 'unbuilt-clone');
  fs.mkdirSync(path.join(clone, 'bin'), { recursive: true });
  fs.copyFileSync(path.join(PROJECT_ROOT, 'bin', 'nsm.js'), path.join(clone, 'bin', 'nsm.js'));
  const r = spawnSync(process.execPath, [path.join(clone, 'bin', 'nsm.js'), 'denoise', 'x.wav'], { cwd: tmp, encoding: 'utf8' });
  expect({ status: r.status, stdout: r.stdout, stderr: r.stderr }).toEqual({
    status: 1,
    stdout: '',
    stderr: `nsm: the CLI is not built (dist/src/cli/nsm.js is missing): run "npm run build" in ${clone}\n`,
  });
});
