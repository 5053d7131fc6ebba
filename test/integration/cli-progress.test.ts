// Progress on stderr (src/cli/progress.ts): redrawn frames (carriage returns) only on a terminal; in a log, CI or a
// pipe one line per finished file or change of state. The reporters on real streams, then `nsm jobs` as a process.
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import type http from 'node:http';
import path from 'node:path';
import { PassThrough } from 'node:stream';
import { progressReporter, statusLine } from '../../src/cli/progress';
import { createApp, type AppHandle } from '../../src/app';
import { PROJECT_ROOT, type Config } from '../../src/config';
import { closeQuietly, fixture, listen, testConfig } from '../helpers/service-helpers';

/** A stream that says it is (or is not) a terminal, collecting what is written. */
function stream(tty: boolean): { stream: NodeJS.WriteStream; text(): string } {
  const s = new PassThrough();
  let text = '';
  s.on('data', (d: Buffer) => (text += d.toString()));
  Object.assign(s, { isTTY: tty });
  return { stream: s as unknown as NodeJS.WriteStream, text: () => text };
}

describe('statusLine (nsm jobs)', () => {
  const drive = (tty: boolean, quiet = false): string => {
    const out = stream(tty);
    const status = statusLine(out.stream, quiet);
    for (let i = 0; i <= 100; i++) status.show(`uploading ${i}%`);
    status.line('uploaded talk.wav (12.0 MB)');
    status.note('job_1 running');
    status.show('job_1 running [#####] 50%');
    status.done();
    return out.text();
  };

  test('on a terminal: frames redrawn in place, then the kept line', () => {
    const text = drive(true);
    expect(text.split('\r').length).toBeGreaterThan(100);
    expect(text).toContain('\r\x1b[Kuploaded talk.wav (12.0 MB)\n');
    expect(text).not.toContain('job_1 running\n'); // the frames show the state there
  });

  test('not a terminal: no frames, one line per finished file and per change of state', () => {
    expect(drive(false)).toBe('uploaded talk.wav (12.0 MB)\njob_1 running\n');
    expect(drive(false, true)).toBe('');
  });
});

describe('progressReporter (nsm denoise)', () => {
  test('on a terminal a redrawn bar; elsewhere a line per 10 %, never a carriage return', () => {
    for (const tty of [true, false]) {
      const out = stream(tty);
      const progress = progressReporter(out.stream);
      for (let s = 0; s <= 60; s += 0.5) progress.update(s, 60);
      progress.finish();
      if (tty) expect(out.text()).toContain('\r[');
      else {
        expect(out.text()).not.toContain('\r');
        expect(out.text().trim().split('\n')).toHaveLength(11); // 0 %, 10 % … 90 %, then 100 %
      }
    }
  });
});

describe('nsm jobs submit --wait with stderr in a pipe', () => {
  let config: Config;
  let handle: AppHandle;
  let server: http.Server;
  let env: Record<string, string>;

  beforeAll(async () => {
    config = testConfig();
    handle = await createApp(config, { log: () => undefined });
    const l = await listen(handle.app);
    server = l.server;
    const ws = await handle.store.createWorkspace('progress', 'scale');
    const token = (await handle.store.createToken({ workspaceId: ws.id, name: 'p', scopes: ['noise-suppressor:jobs'], allowedIps: [], expiresAt: null })).token;
    env = { NSM_URL: l.url, NSM_TOKEN: token };
  });

  afterAll(async () => {
    await closeQuietly(server);
    await handle.close();
    fs.rmSync(config.dataDir, { recursive: true, force: true });
  });

  test('prints lines, not frames: the upload, the job id, its states', async () => {
    const work = fs.mkdtempSync(path.join(config.dataDir, 'cli-'));
    // 0.5 MB: the upload reads 9 chunks, each a frame on a terminal, none a line here.
    const input = fixture('speech-noisy-44k1-stereo.wav');
    const r = await new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve) => {
      const child = spawn(process.execPath, [path.join(PROJECT_ROOT, 'bin/nsm.js'), 'jobs', 'submit', input, '--wait', '--interval', '0.2', '--model', 'nsm-1'], {
        env: { ...process.env, ...env },
        cwd: work,
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      let stdout = '';
      let stderr = '';
      child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
      child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
      child.on('close', (code) => resolve({ code, stdout, stderr }));
    });
    expect(r.code).toBe(0);
    expect(r.stderr).not.toMatch(/\r|\x1b/);
    const lines = r.stderr.trim().split('\n');
    const size = (fs.statSync(input).size / 1048576).toFixed(1);
    expect(lines[0]).toBe(`uploaded ${input} (${size} MB)`);
    expect(lines[1]).toMatch(/^submitted job_\w+$/);
    const id = lines[1].slice('submitted '.length);
    // Then one line per state seen while polling (queued and/or running, then succeeded), each once.
    const states = lines.slice(2);
    expect(states.length).toBeGreaterThanOrEqual(1);
    expect(states.length).toBeLessThanOrEqual(3);
    for (const line of states) expect(line).toMatch(new RegExp(`^${id} (queued|running|succeeded)$`));
    expect(states[states.length - 1]).toBe(`${id} succeeded`);
    expect(r.stdout.trim()).toBe(`wrote speech-noisy-44k1-stereo_denoised.wav (${id})`);
  });
});
