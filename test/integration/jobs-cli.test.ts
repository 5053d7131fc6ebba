// `nsm jobs` as a real process (bin/nsm.js) against a real server: submit --wait downloads the result, status/list,
// wait's exit code on failure, download resumes a partial file, cancel, and the usage/input errors.
import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import type http from 'node:http';
import path from 'node:path';
import { createApp, type AppHandle } from '../../src/app';
import { PROJECT_ROOT, type Config } from '../../src/config';
import { PollSchedule } from '../../src/cli/poll-schedule';
import { closeQuietly, fixture, listen, rawRequest, testConfig } from '../helpers/service-helpers';
import { makeLongWav, until } from '../helpers/jobs-helpers';

const NSM = path.join(PROJECT_ROOT, 'bin', 'nsm.js');

function nsm(args: string[], env: Record<string, string>, cwd: string): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [NSM, ...args], { env: { ...process.env, ...env }, cwd, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    child.on('close', (code) => resolve({ code, stdout, stderr })); // 'close': after the last of its output has been read
  });
}

describe('nsm jobs against a server', () => {
  let config: Config;
  let handle: AppHandle;
  let server: http.Server;
  let base: string;
  let token: string;
  let env: Record<string, string>;
  let work: string;

  beforeAll(async () => {
    config = testConfig();
    handle = await createApp(config, { log: () => undefined });
    const l = await listen(handle.app);
    server = l.server;
    base = l.url;
    const ws = await handle.store.createWorkspace('cli', 'scale');
    token = (await handle.store.createToken({ workspaceId: ws.id, name: 'cli', scopes: ['noise-suppressor:jobs'], allowedIps: [], expiresAt: null })).token;
    env = { NSM_URL: base, NSM_TOKEN: token };
    work = fs.mkdtempSync(path.join(config.dataDir, 'cli-'));
  });

  afterAll(async () => {
    await closeQuietly(server);
    await handle.close();
    fs.rmSync(config.dataDir, { recursive: true, force: true });
  });

  test('submit --wait uploads, waits and saves the result under the server-given name', async () => {
    const r = await nsm(['jobs', 'submit', fixture('speech-noisy-44k1-stereo.wav'), '--wait', '--format', 'flac', '--model', 'nsm-1'], env, work);
    expect(r.stderr).toMatch(/submitted job_/);
    expect(r.code).toBe(0);
    const out = path.join(work, 'speech-noisy-44k1-stereo_denoised.flac');
    expect(r.stdout.trim()).toMatch(/^wrote speech-noisy-44k1-stereo_denoised\.flac \(job_[A-Za-z0-9]+\)$/);
    const id = /\((job_[A-Za-z0-9]+)\)/.exec(r.stdout)![1];
    const served = await rawRequest(`${base}/v1/noise-suppressor/jobs/${id}/result`, { headers: { Authorization: `Bearer ${token}` } });
    expect(fs.readFileSync(out).equals(served.body)).toBe(true);
    expect(served.body.subarray(0, 4).toString()).toBe('fLaC');

    const status = await nsm(['jobs', 'status', id, '--json'], env, work);
    expect(status.code).toBe(0);
    expect(JSON.parse(status.stdout)).toMatchObject({ id, status: 'succeeded', params: { model: 'nsm-1', output_format: 'flac' } });
    const list = await nsm(['jobs', 'list', '--status', 'succeeded'], env, work);
    expect(list.stdout).toContain(id);
  });

  test('submit --wait sees a short job finish soon after it does: polls start 0.1 s apart and grow, not every 2 s', async () => {
    const since = new Date().toISOString();
    const r = await nsm(['jobs', 'submit', fixture('speech-noisy-16k-mono.wav'), '--wait', '--json', '-q', '--model', 'nsm-1'], env, work);
    expect(r.code).toBe(0);
    const job = JSON.parse(r.stdout);
    // The polls of this run, from the request log (GET jobs/{id}; this test file runs one command at a time).
    const polls = (await handle.store.queryRequests({ endpoint: 'jobs/{id}', since, limit: 100 }))
      .filter((row) => row.method === 'GET')
      .map((row) => Date.parse(row.time))
      .sort((a, b) => a - b);
    expect(polls.length).toBeGreaterThanOrEqual(2);
    const gaps = polls.slice(1).map((t, i) => t - polls[i]);
    expect(gaps[0]).toBeLessThan(600); // the first wait is 0.1 s (it was 2 s)
    // Each wait is at most half the time waited before it plus 0.1 s (1.5× growth), so the poll that saw the job
    // finished came at most about half its run after the end; 300 ms of slack for the busy shared machine.
    const finished = Date.parse(job.finished_at);
    const seen = polls[polls.length - 1];
    expect(seen).toBeGreaterThanOrEqual(finished);
    expect(seen - finished).toBeLessThanOrEqual(0.5 * (finished - polls[0]) + 100 + 300);
  });

  test('the poll schedule: 0.1 s, growing by half to the cap; sooner when the progress says the job is about to end', () => {
    const s = new PollSchedule(2);
    const queued = Array.from({ length: 10 }, () => s.next({ status: 'queued', progress: 0 }, 0));
    expect(queued.map((w) => Number(w.toFixed(3)))).toEqual([0.1, 0.15, 0.225, 0.338, 0.506, 0.759, 1.139, 1.709, 2, 2]);
    // Running: the rate so far says when it ends; a poll is aimed there when that is sooner, once per progress value.
    const run = new PollSchedule(2);
    for (let i = 0; i < 6; i++) run.next({ status: 'queued' }, 0); // the schedule is at 0.759 s
    expect(run.next({ status: 'running', progress: 0.2 }, 0)).toBeCloseTo(1.139, 3);
    expect(run.next({ status: 'running', progress: 0.9 }, 1400)).toBeCloseTo(0.2, 3); // 0.7 in 1.4 s: 0.2 s left
    expect(run.next({ status: 'running', progress: 0.9 }, 1600)).toBe(2); // no progress since: the schedule (capped)
    expect(run.next({ status: 'running', progress: 0.95 }, 1800)).toBeCloseTo(0.12, 3);
    expect(run.next({ status: 'running', progress: 1 }, 1900)).toBe(2); // finishing at 1: not hammered
  });

  test('submit then wait and download -o; download resumes a partial .part file', async () => {
    const long = path.join(work, 'talk.wav');
    makeLongWav(config.ffmpegPath, long, 60);
    const sub = await nsm(['jobs', 'submit', long, '--model', 'nsm-1'], env, work);
    expect(sub.code).toBe(0);
    const id = sub.stdout.trim();
    expect(id).toMatch(/^job_/);
    const wait = await nsm(['jobs', 'wait', id, '--interval', '0.2'], env, work);
    expect(wait.code).toBe(0);
    expect(wait.stdout.trim()).toBe(`${id} succeeded`);
    const served = (await rawRequest(`${base}/v1/noise-suppressor/jobs/${id}/result`, { headers: { Authorization: `Bearer ${token}` } })).body;
    // A download that broke off after 100 kB: the rest is fetched with a Range request.
    const out = path.join(work, 'clean.wav');
    fs.writeFileSync(`${out}.part`, served.subarray(0, 100_000));
    const dl = await nsm(['jobs', 'download', id, '-o', out], env, work);
    expect(dl.code).toBe(0);
    expect(fs.readFileSync(out).equals(served)).toBe(true);
    expect(fs.existsSync(`${out}.part`)).toBe(false);
    // Only the missing bytes went over the wire (206), as the request log shows.
    const row = await until(async () => (await handle.store.queryRequests({ endpoint: 'jobs/{id}/result', status: 206, limit: 1 }))[0]);
    expect(row.bytesOut).toBe(served.length - 100_000);
    // An existing file is not written over without --force; with it, it is.
    fs.writeFileSync(out, 'precious');
    const kept = await nsm(['jobs', 'download', id, '-o', out], env, work);
    expect({ code: kept.code, stderr: kept.stderr }).toEqual({
      code: 2,
      stderr: `nsm jobs: ${out} exists; pass --force to replace it (the result stays on the server: nsm jobs download ${id} -o OTHER) (see nsm jobs --help)\n`,
    });
    expect(fs.readFileSync(out, 'utf8')).toBe('precious');
    const forced = await nsm(['jobs', 'download', id, '-o', out, '--force'], env, work);
    expect(forced.code).toBe(0);
    expect(fs.readFileSync(out).equals(served)).toBe(true);
    // A finished job's result can be deleted; downloading again then fails.
    const cancel = await nsm(['jobs', 'cancel', id], env, work);
    expect(cancel.stdout.trim()).toBe(`${id} succeeded (result deleted)`);
    const again = await nsm(['jobs', 'download', id, '-o', path.join(work, 'x.wav')], env, work);
    expect(again.code).toBe(1);
    expect(again.stderr).toMatch(/no result/);
  });

  test('submit --wait -o never names the input or the echo reference, nor an existing file without --force: refused before the upload', async () => {
    const input = path.join(work, 'keep-in.wav');
    const far = path.join(work, 'keep-far.wav');
    fs.copyFileSync(fixture('speech-noisy-16k-mono.wav'), input);
    fs.copyFileSync(fixture('speech-noisy-16k-mono.wav'), far);
    fs.symlinkSync(input, path.join(work, 'keep-link.wav'));
    const before = (await handle.store.queryRequests({ endpoint: 'jobs', limit: 1000 })).length;
    expect(before).toBeGreaterThan(0); // the earlier submits are in the log: a submit here would show
    const cases: Array<[string[], string]> = [
      [[input, '--wait', '-o', input, '--force'], `output would overwrite the input ${input}`],
      [[input, '--wait', '-o', path.join(work, 'keep-link.wav'), '--force'], `output would overwrite the input ${input}`],
      [[input, '--echo-reference', far, '--wait', '-o', far, '--force'], `output would overwrite the echo reference ${far}`],
      [[input, '--wait', '-o', far], `${far} exists; pass --force to replace it`],
    ];
    for (const [args, message] of cases) {
      const r = await nsm(['jobs', 'submit', ...args], env, work);
      expect({ code: r.code, stderr: r.stderr }).toEqual({ code: 2, stderr: `nsm jobs: ${message} (see nsm jobs --help)\n` });
    }
    // Nothing was uploaded (no job, no credit) and both files are as they were.
    expect((await handle.store.queryRequests({ endpoint: 'jobs', limit: 1000 })).length).toBe(before);
    const original = fs.readFileSync(fixture('speech-noisy-16k-mono.wav'));
    expect(fs.readFileSync(input).equals(original) && fs.readFileSync(far).equals(original)).toBe(true);
  });

  test('submit --format mp3 --loudness -16: the publishing options reach the job', async () => {
    const r = await nsm(['jobs', 'submit', fixture('speech-noisy-16k-mono.wav'), '--format', 'mp3', '--loudness', '-16', '--wait', '--json', '-q'], env, work);
    expect(r.code).toBe(0);
    const out = JSON.parse(r.stdout);
    expect(out.params).toMatchObject({ output_format: 'mp3', loudness_lufs: -16 });
    expect(path.basename(out.output)).toBe('speech-noisy-16k-mono_denoised.mp3');
    const head = fs.readFileSync(path.join(work, out.output)).subarray(0, 3);
    expect(head.toString('latin1') === 'ID3' || (head[0] === 0xff && (head[1] & 0xe0) === 0xe0)).toBe(true);
    expect((await nsm(['jobs', 'submit', fixture('speech-noisy-16k-mono.wav'), '--format', 'ogg'], env, work)).code).toBe(2);
    // Outside the range the server accepts: a usage error here, as `nsm denoise` gives, not a 400 from the server.
    const loud = await nsm(['jobs', 'submit', fixture('speech-noisy-16k-mono.wav'), '--loudness', '500'], env, work);
    expect(loud.code).toBe(2);
    expect(loud.stderr).toMatch(/--loudness must be a number from -40 to -5/);
  });

  test('submit --format video --loudness keep: a Matroska video comes back as .mkv', async () => {
    const video = path.join(work, 'talk.mkv');
    const make = spawnSync(config.ffmpegPath, ['-hide_banner', '-loglevel', 'error', '-f', 'lavfi', '-i', 'testsrc=size=96x64:rate=10:duration=3', '-i', fixture('speech-noisy-44k1-stereo.wav'), '-map', '0:v', '-map', '1:a', '-c:v', 'libvpx', '-deadline', 'realtime', '-c:a', 'libopus', '-y', video]);
    expect(make.status).toBe(0);
    const r = await nsm(['jobs', 'submit', video, '--format', 'video', '--loudness', 'keep', '--wait', '--json', '-q'], env, work);
    expect(r.code).toBe(0);
    const out = JSON.parse(r.stdout);
    expect(out.params).toMatchObject({ output_format: 'video', loudness: 'keep' });
    expect(path.basename(out.output)).toBe('talk_denoised.mkv');
    expect(out.stats).toMatchObject({ output_format: 'video', output_container: 'mkv', loudness_target_reached: true });
  });

  test('-o names the format as for nsm denoise: taken without --format, refused before the upload when it disagrees; a result is never saved under another format\'s name', async () => {
    const video = path.join(work, 'talk.mkv'); // from the test before
    expect(fs.existsSync(video)).toBe(true);
    const speech = fixture('speech-noisy-16k-mono.wav');
    const uploads = async (): Promise<number> => (await handle.store.queryRequests({ endpoint: 'jobs', limit: 1000 })).length;
    const before = await uploads();
    const refused: Array<[string[], number, string]> = [
      [[speech, '--format', 'flac', '--wait', '-o', path.join(work, 'x.mp3')], 2, `--format flac does not match the output name ${path.join(work, 'x.mp3')} (see nsm jobs --help)`],
      [[speech, '--format', 'video', '--wait', '-o', path.join(work, 'x.wav')], 2, `--format video does not match the output name ${path.join(work, 'x.wav')} (see nsm jobs --help)`],
      [[video, '--wait', '-o', path.join(work, 'x.mp4')], 3, `${video}: a Matroska/WebM video comes back as .mkv (copied, not converted): name the output .mkv`],
    ];
    for (const [args, code, message] of refused) {
      const r = await nsm(['jobs', 'submit', ...args], env, work);
      expect({ code: r.code, stderr: r.stderr }).toEqual({ code, stderr: `nsm jobs: ${message}\n` });
    }
    expect(await uploads()).toBe(before); // nothing went out, no credit spent
    expect(fs.readdirSync(work).filter((f) => f.startsWith('x.'))).toEqual([]);

    // Without --format the name says it: FLAC bytes in .flac, the video back in .mkv.
    const flac = await nsm(['jobs', 'submit', speech, '--wait', '-o', path.join(work, 'named.flac'), '--json', '-q'], env, work);
    expect(flac.code).toBe(0);
    expect(JSON.parse(flac.stdout).params.output_format).toBe('flac');
    expect(fs.readFileSync(path.join(work, 'named.flac')).subarray(0, 4).toString()).toBe('fLaC');
    const mkv = await nsm(['jobs', 'submit', video, '--wait', '-o', path.join(work, 'named.mkv'), '--json', '-q'], env, work);
    expect(mkv.code).toBe(0);
    const job = JSON.parse(mkv.stdout);
    expect(job.params.output_format).toBe('video');
    expect(fs.readFileSync(path.join(work, 'named.mkv')).readUInt32BE(0)).toBe(0x1a45dfa3); // EBML: Matroska

    // A finished result under a name of another format or container: refused, nothing written, the result kept.
    for (const [name, message] of [['y.wav', 'the result is a video, not what'], ['y.mp4', 'the result is a Matroska/WebM video: name the output .mkv']]) {
      const r = await nsm(['jobs', 'download', job.id, '-o', path.join(work, name)], env, work);
      expect(r.code).toBe(2);
      expect(r.stderr).toContain(message);
      expect(fs.existsSync(path.join(work, name))).toBe(false);
    }
    expect((await nsm(['jobs', 'download', job.id, '-o', path.join(work, 'again.mkv'), '-q'], env, work)).code).toBe(0);
  });

  test('a job that fails: wait exits 1 with the error; submit --wait too', async () => {
    const r = await nsm(['jobs', 'submit', fixture('not-audio.wav'), '--wait', '--interval', '0.2'], env, work);
    expect(r.code).toBe(1);
    expect(r.stdout).toMatch(/failed: invalid_audio/);
  });

  test('usage and input errors', async () => {
    expect((await nsm(['jobs', 'submit', fixture('speech-noisy-16k-mono.wav')], { NSM_URL: base, NSM_TOKEN: '' }, work)).code).toBe(2);
    expect((await nsm(['jobs', 'submit'], env, work)).code).toBe(2);
    expect((await nsm(['jobs', 'submit', 'a.wav', '--url', 'https://example.com/a.wav'], env, work)).code).toBe(2);
    expect((await nsm(['jobs', 'frobnicate'], env, work)).code).toBe(2);
    expect((await nsm(['jobs', 'submit', path.join(work, 'missing.wav')], env, work)).code).toBe(3);
    const unknown = await nsm(['jobs', 'status', 'job_nope'], env, work);
    expect(unknown.code).toBe(3);
    expect(unknown.stderr).toMatch(/404 job_not_found/);
    // The server refuses a loopback URL (default policy): 400 url_not_allowed.
    const refused = await nsm(['jobs', 'submit', '--url', 'http://127.0.0.1:1/a.wav'], env, work);
    expect(refused.code).toBe(3);
    expect(refused.stderr).toMatch(/400 url_not_allowed/);
    const down = await nsm(['jobs', 'status', 'job_x'], { NSM_URL: 'http://127.0.0.1:1', NSM_TOKEN: token }, work);
    expect(down.code).toBe(1);
    expect(down.stderr).toMatch(/cannot reach/);
    const help = await nsm(['jobs', '--help'], env, work);
    expect(help.code).toBe(0);
    expect(help.stdout).toMatch(/nsm jobs submit FILE/);
  });
});
