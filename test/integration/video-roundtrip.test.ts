// Video in → video out (issue 39, item 1), with real small videos made by ffmpeg here (testsrc picture, the noisy
// speech fixture as sound, a subtitle track, chapters): /denoise output_format=video, a job and `nsm denoise -o x.mkv`.
// Measured with ffprobe and ffmpeg: the video packets identical (framemd5: data, size and timestamps), duration
// within one frame, audio start time, subtitles and chapters unchanged, the audio cleaned; refusals with a reason.
import { execFileSync, spawn } from 'node:child_process';
import type http from 'node:http';
import fs from 'node:fs';
import path from 'node:path';
import request from 'supertest';
import { createApp, type AppHandle } from '../../src/app';
import { loadConfig, PROJECT_ROOT, type Config } from '../../src/config';
import { spawnFfmpeg, waitForExit } from '../../src/audio/ffmpeg';
import { probeMedia, type MediaProbe } from '../../src/audio/probe';
import type { JobView } from '../../src/jobs/views';
import { fixture, makeTmpDir } from '../helpers/audio-helpers';
import { until } from '../helpers/jobs-helpers';
import { createToken, eventually, testConfig, tmpEntries } from '../helpers/service-helpers';

jest.setTimeout(180_000);
const config = loadConfig();
const API = '/v1/noise-suppressor';
const SPEECH = fixture('speech-noisy-44k1-stereo.wav');
const FRAME_S = 1 / 25;
let tmp: string;
const files: Record<string, string> = {};

async function ffmpeg(args: string[]): Promise<Buffer> {
  const child = spawnFfmpeg(config.ffmpegPath, ['-loglevel', 'error', ...args]);
  child.stdin!.end();
  const out: Buffer[] = [];
  const err: Buffer[] = [];
  child.stdout!.on('data', (d: Buffer) => out.push(d));
  child.stderr!.on('data', (d: Buffer) => err.push(d));
  const { code } = await waitForExit(child);
  if (code !== 0) throw new Error(`ffmpeg ${args.join(' ')}: ${Buffer.concat(err).toString()}`);
  return Buffer.concat(out);
}

/** ffmpeg's framemd5 of the given streams, copied (per packet: stream, dts, pts, duration, size, md5 of the data). */
async function packets(file: string, map: string): Promise<string[]> {
  const text = (await ffmpeg(['-i', file, '-map', map, '-c', 'copy', '-f', 'framemd5', '-'])).toString();
  return text.split('\n').filter((l) => l && !l.startsWith('#'));
}

async function chapters(file: string): Promise<string> {
  return (await ffmpeg(['-i', file, '-f', 'ffmetadata', '-'])).toString().split('[CHAPTER]').slice(1).join('[CHAPTER]');
}

beforeAll(async () => {
  tmp = makeTmpDir('nsm-video-');
  const srt = path.join(tmp, 'subs.srt');
  fs.writeFileSync(srt, '1\n00:00:00,500 --> 00:00:01,500\nHello\n\n2\n00:00:02,000 --> 00:00:02,900\nWorld\n');
  const meta = path.join(tmp, 'chapters.txt');
  fs.writeFileSync(meta, ';FFMETADATA1\ntitle=Talk\n[CHAPTER]\nTIMEBASE=1/1000\nSTART=0\nEND=1500\ntitle=One\n[CHAPTER]\nTIMEBASE=1/1000\nSTART=1500\nEND=3000\ntitle=Two\n');
  const picture = ['-f', 'lavfi', '-i', 'testsrc=size=160x120:rate=25:duration=3'];
  const common = ['-i', SPEECH, '-i', srt, '-i', meta, '-map', '0:v', '-map', '1:a', '-map', '2:s', '-map_metadata', '3', '-map_chapters', '3'];
  files.mp4 = path.join(tmp, 'talk.mp4');
  await ffmpeg([...picture, ...common, '-c:v', 'libx264', '-preset', 'ultrafast', '-c:a', 'aac', '-c:s', 'mov_text', '-metadata:s:a:0', 'language=eng', '-y', files.mp4]);
  files.mkv = path.join(tmp, 'talk.mkv');
  await ffmpeg([...picture, ...common, '-c:v', 'libvpx', '-deadline', 'realtime', '-c:a', 'libopus', '-c:s', 'srt', '-y', files.mkv]);
  // Two audio tracks: the speech, then a tone (a music bed): only the first is cleaned.
  files.twoAudio = path.join(tmp, 'two-audio.mp4');
  await ffmpeg([...picture, '-i', SPEECH, '-f', 'lavfi', '-i', 'sine=f=330:r=44100:d=3', '-map', '0:v', '-map', '1:a', '-map', '2:a', '-c:v', 'libx264', '-preset', 'ultrafast', '-c:a', 'aac', '-y', files.twoAudio]);
});
afterAll(() => fs.rmSync(tmp, { recursive: true, force: true }));

/** The measurements of issue 39 between an input video and its cleaned copy. */
async function expectSameVideo(input: string, output: string): Promise<void> {
  const [a, b]: MediaProbe[] = [await probeMedia(config, input), await probeMedia(config, output)];
  expect(b.container).toBe(a.container);
  expect(b.streams.map((s) => [s.type, s.type === 'audio' && s.index === a.streams.find((x) => x.type === 'audio')!.index ? 'cleaned' : s.codec]))
    .toEqual(a.streams.map((s) => [s.type, s.type === 'audio' && s.index === a.streams.find((x) => x.type === 'audio')!.index ? 'cleaned' : s.codec]));
  // Every video packet: same bytes, same timestamps (no re-encode, no shift).
  expect(await packets(output, '0:v')).toEqual(await packets(input, '0:v'));
  expect(Math.abs(b.durationS! - a.durationS!)).toBeLessThanOrEqual(FRAME_S);
  const audioStart = (p: MediaProbe) => p.streams.find((s) => s.type === 'audio')!.startTimeS;
  expect(audioStart(b)).toBe(audioStart(a));
  if (a.streams.some((s) => s.type === 'subtitle')) expect(await packets(output, '0:s')).toEqual(await packets(input, '0:s'));
  expect(b.chapters).toBe(a.chapters);
  expect(await chapters(output)).toBe(await chapters(input));
  // The sound was cleaned: its packets differ from the input's.
  expect(await packets(output, '0:a:0')).not.toEqual(await packets(input, '0:a:0'));
}

describe('over HTTP and as a job', () => {
  let appConfig: Config;
  let handle: AppHandle;
  let token: string;
  beforeAll(async () => {
    appConfig = testConfig();
    handle = await createApp(appConfig, { log: () => undefined });
    token = await createToken(handle.store, ['*']);
  });
  afterAll(async () => {
    await handle.close();
    fs.rmSync(appConfig.dataDir, { recursive: true, force: true });
  });
  const auth = () => ({ Authorization: `Bearer ${token}` });
  const binary = ((res: http.IncomingMessage, cb: (err: Error | null, body: Buffer) => void): void => {
    const chunks: Buffer[] = [];
    res.on('data', (c: Buffer) => chunks.push(c));
    res.on('end', () => cb(null, Buffer.concat(chunks)));
  }) as unknown as Parameters<request.Test['parse']>[0];

  test('/denoise output_format=video: an MP4 comes back as MP4, video copied, audio cleaned, subtitles and chapters kept', async () => {
    const res = await request(handle.app).post(`${API}/denoise`).set(auth()).field('output_format', 'video').attach('file', files.mp4).buffer(true).parse(binary);
    expect(res.status).toBe(200);
    expect(res.headers['content-type']).toBe('video/mp4');
    expect(res.headers['content-disposition']).toContain('talk_denoised.mp4');
    const stats = JSON.parse(res.headers['x-ns-stats']);
    expect(stats).toMatchObject({ output_format: 'video', output_container: 'mp4', output_audio_codec: 'aac', video_streams: 1, subtitle_streams: 1, chapters: 2 });
    expect(stats.noise_removed_db).toBeGreaterThan(1);
    const out = path.join(tmp, 'http-out.mp4');
    fs.writeFileSync(out, res.body as Buffer);
    await expectSameVideo(files.mp4, out);
    // The first audio track keeps its language.
    const language = execFileSync(config.ffprobePath, ['-v', 'error', '-select_streams', 'a:0', '-show_entries', 'stream_tags=language', '-of', 'csv=p=0', out]);
    expect(language.toString().trim()).toBe('eng');
    await eventually(() => tmpEntries(appConfig).length === 0);
  });

  test('refusals: an audio-only input, a batch, a container that is not MP4/MOV/MKV/WebM', async () => {
    const audioOnly = await request(handle.app).post(`${API}/denoise`).set(auth()).field('output_format', 'video').attach('file', SPEECH);
    expect(audioOnly.status).toBe(400);
    // The model service's 400s pass through the gateway as its {"detail", "type"} (spec part 7).
    expect(audioOnly.body.detail).toMatch(/output_format=video needs an input with a video stream; this file has none/);
    const batch = await request(handle.app).post(`${API}/denoise/batch`).set(auth()).field('output_format', 'video').attach('files', files.mp4);
    expect(batch.status).toBe(400);
    expect(batch.body.detail).toMatch(/not batches/);
    const trimmed = await request(handle.app).post(`${API}/denoise`).set(auth()).field('output_format', 'video').field('trim_silence', 'true').attach('file', files.mp4);
    expect(trimmed.status).toBe(400);
    expect(trimmed.body.detail).toMatch(/trim_silence does not apply to output_format=video/);
    const asf = path.join(tmp, 'talk.wmv');
    await ffmpeg(['-f', 'lavfi', '-i', 'testsrc=size=64x48:rate=10:duration=1', '-i', SPEECH, '-t', '1', '-c:v', 'wmv2', '-c:a', 'wmav2', '-y', asf]);
    const wmv = await request(handle.app).post(`${API}/denoise`).set(auth()).field('output_format', 'video').attach('file', asf);
    expect(wmv.status).toBe(400);
    expect(wmv.body.detail).toMatch(/takes MP4, MOV, MKV or WebM input; this file is "asf"/);
    // A container the decoder does not open at all gets the same answer, not the audio upload's "send WAV, FLAC, …";
    // asked for audio, it is still the 422 of an unsupported format.
    const avi = path.join(tmp, 'talk.avi');
    await ffmpeg(['-f', 'lavfi', '-i', 'testsrc=size=64x48:rate=10:duration=1', '-i', SPEECH, '-t', '1', '-c:v', 'mpeg4', '-c:a', 'pcm_s16le', '-y', avi]);
    const aviVideo = await request(handle.app).post(`${API}/denoise`).set(auth()).field('output_format', 'video').attach('file', avi);
    expect({ status: aviVideo.status, detail: aviVideo.body.detail }).toEqual({
      status: 400,
      detail: 'output_format=video takes MP4, MOV, MKV or WebM input; this file is "avi" (ask for an audio format instead)',
    });
    const aviAudio = await request(handle.app).post(`${API}/denoise`).set(auth()).attach('file', avi);
    expect(aviAudio.status).toBe(422);
    expect(aviAudio.body.detail).toMatch(/^unsupported input format "avi"/);
  });

  test('a job with output_format=video: the MKV result, named .mkv', async () => {
    const res = await request(handle.app).post(`${API}/jobs`).set(auth()).field('output_format', 'video').attach('file', files.mkv);
    expect(res.status).toBe(202);
    expect(res.body.params.output_format).toBe('video');
    const done = await until(async () => {
      const job = (await request(handle.app).get(`${API}/jobs/${res.body.id}`).set(auth())).body as JobView;
      return job.status === 'succeeded' || job.status === 'failed' ? job : undefined;
    }, 90_000);
    expect(done.error ?? null).toBeNull();
    expect(done.status).toBe('succeeded');
    const result = await request(handle.app).get(done.result!.url).set(auth()).buffer(true).parse(binary);
    expect(result.headers['content-type']).toBe('video/x-matroska');
    expect(result.headers['content-disposition']).toContain('talk_denoised.mkv');
    const out = path.join(tmp, 'job-out.mkv');
    fs.writeFileSync(out, result.body as Buffer);
    await expectSameVideo(files.mkv, out);
    // An audio-only job asking for video fails with the reason (refunded like every failed job).
    const audio = await request(handle.app).post(`${API}/jobs`).set(auth()).field('output_format', 'video').attach('file', SPEECH);
    const failed = await until(async () => {
      const job = (await request(handle.app).get(`${API}/jobs/${audio.body.id}`).set(auth())).body as JobView;
      return job.status === 'succeeded' || job.status === 'failed' ? job : undefined;
    }, 60_000);
    expect(failed.status).toBe('failed');
    expect(failed.error).toMatchObject({ type: 'invalid_request', message: expect.stringMatching(/needs an input with a video stream/) });
  });
});

describe('nsm denoise -o OUT.mkv / .mp4', () => {
  const nsm = (args: string[]) =>
    new Promise<{ code: number | null; stderr: string }>((resolve) => {
      const child = spawn(process.execPath, [path.join(PROJECT_ROOT, 'bin/nsm.js'), ...args], { env: { ...process.env, WORKERS: '1' } });
      let stderr = '';
      child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
      child.stdout.resume();
      child.on('close', (code) => resolve({ code, stderr }));
    });

  test('Matroska: the same checks; several audio tracks: the first cleaned, the others copied', async () => {
    const out = path.join(tmp, 'cli-out.mkv');
    expect((await nsm(['denoise', files.mkv, '-o', out, '-q'])).code).toBe(0);
    await expectSameVideo(files.mkv, out);
    const two = path.join(tmp, 'cli-two.mp4');
    expect((await nsm(['denoise', files.twoAudio, '-o', two, '-q'])).code).toBe(0);
    expect(await packets(two, '0:a:1')).toEqual(await packets(files.twoAudio, '0:a:1'));
    expect(await packets(two, '0:a:0')).not.toEqual(await packets(files.twoAudio, '0:a:0'));
    expect(await packets(two, '0:v')).toEqual(await packets(files.twoAudio, '0:v'));
    const mismatch = await nsm(['denoise', files.mkv, '-o', path.join(tmp, 'x.mp4')]);
    expect(mismatch.code).toBe(3);
    expect(mismatch.stderr).toMatch(/the input is Matroska\/WebM: name the output \.mkv/);
    const trim = await nsm(['denoise', files.mkv, '-o', path.join(tmp, 'x.mkv'), '--trim-silence']);
    expect(trim.code).toBe(2);
    expect(trim.stderr).toMatch(/--trim-silence does not apply to a video output/);
    const webm = await nsm(['denoise', files.mkv, '-o', path.join(tmp, 'x.webm')]);
    expect(webm.code).toBe(3);
    expect(webm.stderr).toMatch(/WebM cannot hold this file's subtitle stream \(subrip\): name the output \.mkv/);
  });

  test('every stream keeps its language, title and flags; an attached font keeps its name (Matroska needs it)', async () => {
    // A release as players see it: a titled video, the main track (French, default), subtitles (Spanish, forced), a
    // commentary track (German, not default) and a font. The remux once named only the first audio track's metadata,
    // which turned ffmpeg's copying of every other stream's off: the attachment lost its filename and the write
    // failed; without one, every title and language but the first track's was gone.
    const srt = path.join(tmp, 'subs.srt');
    const font = path.join(tmp, 'Caption.ttf');
    fs.writeFileSync(font, Buffer.alloc(512, 7));
    const input = path.join(tmp, 'release.mkv');
    const tag = (spec: string, pairs: Record<string, string>) => Object.entries(pairs).flatMap(([k, v]) => [`-metadata:s:${spec}`, `${k}=${v}`]);
    await ffmpeg([
      '-f', 'lavfi', '-i', 'testsrc=size=160x120:rate=25:duration=3', '-i', SPEECH, '-i', srt, '-f', 'lavfi', '-i', 'sine=f=330:r=44100:d=3',
      '-map', '0:v', '-map', '1:a', '-map', '2:s', '-map', '3:a', '-c:v', 'libvpx', '-deadline', 'realtime', '-c:a', 'libopus', '-c:s', 'srt',
      ...tag('v:0', { language: 'eng', title: 'Camera A' }), ...tag('a:0', { language: 'fra', title: 'Main' }),
      ...tag('s:0', { language: 'spa', title: 'Subtitles' }), ...tag('a:1', { language: 'deu', title: 'Commentary' }),
      '-disposition:a:0', 'default', '-disposition:s:0', 'forced', '-disposition:a:1', '0',
      '-attach', font, '-metadata:s:t', 'mimetype=application/x-truetype-font', '-y', input,
    ]);
    const out = path.join(tmp, 'release-clean.mkv');
    const run = await nsm(['denoise', input, '-o', out, '-q']);
    expect(run.stderr).toBe('');
    expect(run.code).toBe(0);
    const streams = (file: string): string[] => {
      const json = JSON.parse(execFileSync(config.ffprobePath, ['-v', 'error', '-show_entries', 'stream=codec_type:stream_tags:stream_disposition', '-of', 'json', file]).toString());
      return (json.streams as Array<{ codec_type: string; tags?: Record<string, string>; disposition: Record<string, number> }>).map((s) => {
        const t = s.tags ?? {};
        const flags = Object.keys(s.disposition).filter((k) => s.disposition[k] === 1);
        return JSON.stringify([s.codec_type, t.language, t.title, t.filename, t.mimetype, flags]);
      }).sort();
    };
    const before = streams(input);
    expect(before).toHaveLength(5);
    expect(before).toContain(JSON.stringify(['audio', 'fra', 'Main', null, null, ['default']]));
    expect(before).toContain(JSON.stringify(['audio', 'deu', 'Commentary', null, null, []]));
    expect(before).toContain(JSON.stringify(['subtitle', 'spa', 'Subtitles', null, null, ['forced']]));
    expect(streams(out)).toEqual(before);
    expect(await packets(out, '0:t')).toEqual(await packets(input, '0:t'));
  });
});
