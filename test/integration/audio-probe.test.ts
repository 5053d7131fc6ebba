// probeAudio and probeMedia (ffprobe's JSON) against real files with the real ffprobe and ffmpeg binaries (no engine).
import fs from 'node:fs';
import path from 'node:path';
import { loadConfig } from '../../src/config';
import { AudioInputError, probeAudio, probeMedia } from '../../src/audio/probe';
import { spawnFfmpeg, waitForExit } from '../../src/audio/ffmpeg';
import { writePcm } from '../../src/pipeline/clips';
import { FORMAT_FIXTURES, fixture, makeTmpDir } from '../helpers/audio-helpers';

const config = loadConfig();

describe('probeAudio', () => {
  let tmp: string;
  beforeAll(async () => {
    tmp = makeTmpDir('nsm-probe-');
  });
  afterAll(() => fs.rmSync(tmp, { recursive: true, force: true }));

  test.each(FORMAT_FIXTURES)('reads rate, channels, codec and duration of $file', async ({ file, rate }) => {
    const p = await probeAudio(config, fixture(file));
    expect(p.sampleRate).toBe(rate);
    expect(p.channels).toBe(2);
    expect(p.durationS).not.toBeNull();
    expect(Math.abs(p.durationS! - 3)).toBeLessThan(0.05);
    const ext = path.extname(file).slice(1);
    const expectedCodec = { wav: 'pcm_s16le', flac: 'flac', ogg: 'vorbis', opus: 'opus', mp3: 'mp3', m4a: 'aac', webm: 'opus' }[ext];
    expect(p.codec).toBe(expectedCodec);
    expect(p.container).not.toBe('unknown');
  });

  test('Opus reports the original rate from its OpusHead, not the 48 kHz it decodes at', async () => {
    // WebM has no page checksums, so the header's input-sample-rate field can be rewritten in place.
    const bytes = fs.readFileSync(fixture('speech-noisy-44k1-stereo.webm'));
    const at = bytes.indexOf('OpusHead');
    expect(at).toBeGreaterThan(0);
    expect((await probeAudio(config, fixture('speech-noisy-44k1-stereo.webm'))).sampleRate).toBe(bytes.readUInt32LE(at + 12));
    bytes.writeUInt32LE(44100, at + 12);
    const patched = path.join(tmp, 'recorded-at-44k1.webm');
    fs.writeFileSync(patched, bytes);
    const p = await probeAudio(config, patched);
    expect([p.codec, p.sampleRate, p.channels]).toEqual(['opus', 44100, 2]);
  });

  test('mono 16 kHz and 48 kHz WAVs', async () => {
    expect(await probeAudio(config, fixture('speech-noisy-16k-mono.wav'))).toEqual({
      sampleRate: 16000, channels: 1, durationS: 3, codec: 'pcm_s16le', container: 'wav',
    });
    const p48 = await probeAudio(config, fixture('speech-noisy-48k-mono.wav'));
    expect([p48.sampleRate, p48.channels, p48.durationS]).toEqual([48000, 1, 2.5]);
  });

  test('multichannel counts come from the decoded stream, not a layout name', async () => {
    // 3 and 10 channels have no common layout name; ffmpeg prints them differently.
    for (const channels of [3, 6, 10]) {
      const planar = Array.from({ length: channels }, (_, c) =>
        Float32Array.from({ length: 11025 }, (_, i) => 0.3 * Math.sin((2 * Math.PI * (220 + 50 * c) * i) / 22050)));
      const [name, codec] = channels <= 8 ? [`ch${channels}.flac`, ['-c:a', 'flac', '-f', 'flac']] : [`ch${channels}.wav`, ['-c:a', 'pcm_s16le', '-f', 'wav']];
      await writePcm(config, planar, 22050, path.join(tmp, name), codec);
      const p = await probeAudio(config, path.join(tmp, name));
      expect([p.channels, p.sampleRate, p.durationS]).toEqual([channels, 22050, 0.5]);
    }
  });

  test('empty file', async () => {
    await expect(probeAudio(config, fixture('empty.wav'))).rejects.toThrow(new AudioInputError('file is empty'));
  });

  test('text file named .wav', async () => {
    const err = await probeAudio(config, fixture('not-audio.wav')).catch((e) => e);
    expect(err).toBeInstanceOf(AudioInputError);
    expect(err.message).toMatch(/^could not decode: .*Invalid data/);
    expect(err.message).not.toContain(FIXTURE_DIR_MARK);
  });

  test('truncated MP4 (index atom missing)', async () => {
    const err = await probeAudio(config, fixture('truncated.m4a')).catch((e) => e);
    expect(err).toBeInstanceOf(AudioInputError);
    expect(err.message).toMatch(/could not decode: .*moov atom not found/);
  });

  test('missing file and a directory', async () => {
    await expect(probeAudio(config, path.join(tmp, 'nope.wav'))).rejects.toThrow(new AudioInputError('file not found'));
    await expect(probeAudio(config, tmp)).rejects.toThrow(AudioInputError);
  });

  test('a video-only Matroska file has no audio stream; an image is not an accepted format', async () => {
    const mkv = path.join(tmp, 'video-only.mkv');
    const png = path.join(tmp, 'picture.png');
    for (const [out, codec] of [[mkv, ['-c:v', 'mjpeg', '-f', 'matroska']], [png, ['-frames:v', '1']]] as const) {
      const child = spawnFfmpeg(config.ffmpegPath, ['-loglevel', 'error', '-f', 'lavfi', '-i', 'color=c=red:s=16x16:d=0.2', ...codec, '-y', out]);
      child.stdin!.end();
      expect((await waitForExit(child)).code).toBe(0);
    }
    await expect(probeAudio(config, mkv)).rejects.toThrow(new AudioInputError('no audio stream found'));
    await expect(probeAudio(config, png)).rejects.toThrow(/unsupported input format/);
  });

  test('formats are recognised by content, not by file name (uploads are stored without extensions)', async () => {
    for (const { file, rate } of FORMAT_FIXTURES) {
      const bare = path.join(tmp, `upload-${path.extname(file).slice(1)}`);
      fs.copyFileSync(fixture(file), bare);
      const p = await probeAudio(config, bare);
      expect([p.sampleRate, p.channels]).toEqual([rate, 2]);
    }
  });

  test('a playlist that points at other server files is refused, not followed', async () => {
    // Without a demuxer whitelist ffmpeg opens this as HLS and reads the referenced file.
    const playlist = path.join(tmp, 'upload.wav');
    fs.writeFileSync(playlist, `#EXTM3U\n#EXT-X-TARGETDURATION:10\n#EXTINF:3,\n${fixture('speech-noisy-16k-mono.wav')}\n#EXT-X-ENDLIST\n`);
    const err = await probeAudio(config, playlist).catch((e) => e);
    expect(err).toBeInstanceOf(AudioInputError);
    // ffmpeg 4 names the refused demuxer; ffprobe 6 does not even detect a playlist under a non-playlist name.
    expect(err.message).toMatch(/unsupported input format "hls"|not a recognised audio format/);
    const concat = path.join(tmp, 'upload2.wav');
    fs.writeFileSync(concat, `ffconcat version 1.0\nfile '${fixture('speech-noisy-16k-mono.wav')}'\n`);
    await expect(probeAudio(config, concat)).rejects.toThrow(AudioInputError);
  });
});

/** Error messages must not leak server paths. */
const FIXTURE_DIR_MARK = path.dirname(fixture('x'));
