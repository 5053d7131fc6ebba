// denoiseFile end to end: real ffmpeg decode/encode, the real inference engine (worker thread + ONNX Runtime).
import fs from 'node:fs';
import path from 'node:path';
import { loadConfig } from '../../src/config';
import { createInferenceEngine } from '../../src/inference/runtime/engine';
import type { InferenceEngine } from '../../src/inference/types';
import {
  AudioAbortedError,
  AudioInputError,
  AudioPipelineError,
  deinterleave,
  denoise,
  denoiseFile,
  interleave,
  type DenoiseFileOptions,
} from '../../src/pipeline';
import { MemoryFile } from '../../src/audio/memory-file';
import { probeAudio } from '../../src/audio/probe';
import { readPcm, writePcm } from '../../src/pipeline/clips';
import { speechSourcePath } from '../../src/audio/synthetic-noise';
import { FORMAT_FIXTURES, childProcesses, fixture, makeTmpDir, rmsOf, siSdr } from '../helpers/audio-helpers';
import { eventually } from '../helpers/service-helpers';

const config = loadConfig();
let engine: InferenceEngine;
let tmp: string;

const base: DenoiseFileOptions = { model: 'nsm-2', attenuationLimitDb: 0, outputFormat: 'wav', keepInputSampleRate: true };

/** Exact decoded length in seconds at the file's own rate (the container's duration can be an estimate). */
async function decodedSeconds(file: string): Promise<number> {
  const p = await probeAudio(config, file);
  const planar = await readPcm(config, file, p.sampleRate, p.channels);
  return planar[0].length / p.sampleRate;
}

/** The engine releases an aborted stream's worker state asynchronously; give it a moment. */
const waitFor = (condition: () => boolean): Promise<void> => eventually(condition, 2000);

beforeAll(async () => {
  tmp = makeTmpDir('nsm-pipeline-');
  engine = await createInferenceEngine({ ...config, workers: 1 });
});
afterAll(async () => {
  await engine?.close();
  fs.rmSync(tmp, { recursive: true, force: true });
});

describe('the seven input formats round-trip', () => {
  // Each input at its own rate once in one output format (WAV and FLAC alternate over the seven: the encoder does not
  // depend on the decoder, and both see 44.1 and 48 kHz), and once at the model rate.
  const outputOf = (file: string): 'wav' | 'flac' => (FORMAT_FIXTURES.findIndex((f) => f.file === file) % 2 ? 'flac' : 'wav');
  test('the outputs at the input rate cover WAV and FLAC, each at 44.1 and 48 kHz', () => {
    const seen = new Set(FORMAT_FIXTURES.map((f) => `${outputOf(f.file)}@${f.rate}`));
    expect(seen).toEqual(new Set(['wav@44100', 'flac@44100', 'wav@48000', 'flac@48000']));
  });
  test.each(FORMAT_FIXTURES)('$file → WAV or FLAC at the input rate, and WAV at the model rate', async ({ file, rate }) => {
    const input = fixture(file);
    const inputSeconds = await decodedSeconds(input);
    const outputFormat = outputOf(file);
    const out = path.join(tmp, `${file}.${outputFormat}`);
    const stats = await denoiseFile({ config, engine }, input, out, { ...base, outputFormat });
    const p = await probeAudio(config, out);
    expect(p.codec).toBe(outputFormat === 'wav' ? 'pcm_s16le' : 'flac');
    expect([p.sampleRate, p.channels]).toEqual([rate, 2]);
    expect(Math.abs((await decodedSeconds(out)) - inputSeconds)).toBeLessThan(0.05);
    expect(stats).toMatchObject({
      model: 'nsm-2', input_sample_rate: rate, output_sample_rate: rate, model_sample_rate: 16000,
      channels: 2, output_format: outputFormat, attenuation_limit_db: 0,
    });
    expect(Math.abs(stats.duration_s - inputSeconds)).toBeLessThan(0.05);
    expect(stats.processing_s).toBeGreaterThan(0);
    expect(stats.rtf).toBeCloseTo(stats.processing_s / stats.duration_s, 2);
    const atModelRate = path.join(tmp, `${file}.model-rate.wav`);
    const atModelRateStats = await denoiseFile({ config, engine }, input, atModelRate, { ...base, keepInputSampleRate: false });
    expect(atModelRateStats.output_sample_rate).toBe(16000);
    const atModelRateProbe = await probeAudio(config, atModelRate);
    expect([atModelRateProbe.sampleRate, atModelRateProbe.channels]).toEqual([16000, 2]);
    expect(Math.abs((await decodedSeconds(atModelRate)) - inputSeconds)).toBeLessThan(0.05);
  });
});

describe('denoising quality through the pipeline', () => {
  test('removes noise from the 16 kHz mono clip, sample-aligned with the clean speech', async () => {
    const input = fixture('speech-noisy-16k-mono.wav');
    const out = path.join(tmp, 'mono16.wav');
    await denoiseFile({ config, engine }, input, out, base);
    // The fixture is speech from 1.7 s of the utterance (see fixtures/README.md), mixed at 5 dB SNR.
    const [clean] = await readPcm(config, speechSourcePath(), 16000, 1);
    const reference = clean.slice(Math.round(1.7 * 16000), Math.round(4.7 * 16000));
    const [noisy] = await readPcm(config, input, 16000, 1);
    const [denoised] = await readPcm(config, out, 16000, 1);
    expect(denoised.length).toBe(noisy.length);
    const before = siSdr(noisy, reference);
    const after = siSdr(denoised, reference);
    // A delayed or misaligned output would score far below the noisy input.
    expect(after).toBeGreaterThan(before + 5);
    // 0.1–0.28 s is noise only (after the model's first ~0.1 s of adaptation): it must come out much quieter.
    const [from, to] = [Math.round(0.1 * 16000), Math.round(0.28 * 16000)];
    expect(rmsOf(denoised, from, to)).toBeLessThan(rmsOf(noisy, from, to) * 0.35);
  });

  test('attenuation limit keeps more of the noise bed than unlimited removal', async () => {
    const input = fixture('speech-noisy-16k-mono.wav');
    const unlimited = path.join(tmp, 'lim0.wav');
    const limited = path.join(tmp, 'lim6.wav');
    await denoiseFile({ config, engine }, input, unlimited, base);
    const stats = await denoiseFile({ config, engine }, input, limited, { ...base, attenuationLimitDb: 6 });
    expect(stats.attenuation_limit_db).toBe(6);
    const lead = Math.round(0.25 * 16000);
    const [noisy] = await readPcm(config, input, 16000, 1);
    const [a] = await readPcm(config, unlimited, 16000, 1);
    const [b] = await readPcm(config, limited, 16000, 1);
    expect(rmsOf(b, 0, lead)).toBeGreaterThan(rmsOf(a, 0, lead) * 1.5);
    expect(rmsOf(b, 0, lead)).toBeLessThan(rmsOf(noisy, 0, lead));
  });

  test('nsm-2-hd runs at 48 kHz; model-rate output is 48 kHz', async () => {
    const out = path.join(tmp, 'hd.flac');
    const stats = await denoiseFile({ config, engine }, fixture('speech-noisy-44k1-stereo.wav'), out, {
      ...base, model: 'nsm-2-hd', outputFormat: 'flac', keepInputSampleRate: false,
    });
    expect([stats.model_sample_rate, stats.output_sample_rate, stats.input_sample_rate]).toEqual([48000, 48000, 44100]);
    const p = await probeAudio(config, out);
    expect([p.sampleRate, p.channels, p.codec]).toEqual([48000, 2, 'flac']);
    expect(Math.abs((await decodedSeconds(out)) - 3)).toBeLessThan(0.05);
  });
});

describe('channel layouts', () => {
  test('mono 48 kHz stays mono 48 kHz', async () => {
    const out = path.join(tmp, 'mono48.wav');
    const stats = await denoiseFile({ config, engine }, fixture('speech-noisy-48k-mono.wav'), out, base);
    expect([stats.channels, stats.input_sample_rate, stats.output_sample_rate]).toEqual([1, 48000, 48000]);
    const p = await probeAudio(config, out);
    expect([p.sampleRate, p.channels]).toEqual([48000, 1]);
    expect(Math.abs((await decodedSeconds(out)) - 2.5)).toBeLessThan(0.05);
  });

  test('6 channels (5.1) at 22.05 kHz to WAV and FLAC; channels stay separate', async () => {
    // Channel c carries the noisy speech scaled by (c + 1) / 6, so the order and separation can be checked.
    const [speech] = await readPcm(config, fixture('speech-noisy-16k-mono.wav'), 22050, 1);
    const short = speech.slice(0, 22050 * 2);
    const planar = Array.from({ length: 6 }, (_, c) => short.map((v) => (v * (c + 1)) / 6));
    const input = path.join(tmp, 'six.wav');
    await writePcm(config, planar, 22050, input, ['-c:a', 'pcm_s16le', '-f', 'wav']);
    for (const outputFormat of ['wav', 'flac'] as const) {
      const out = path.join(tmp, `six-out.${outputFormat}`);
      const stats = await denoiseFile({ config, engine }, input, out, { ...base, outputFormat });
      expect(stats.channels).toBe(6);
      const p = await probeAudio(config, out);
      expect([p.sampleRate, p.channels]).toEqual([22050, 6]);
      const decoded = await readPcm(config, out, 22050, 6);
      expect(Math.abs(decoded[0].length - short.length)).toBeLessThan(0.05 * 22050);
      const levels = decoded.map((ch) => rmsOf(ch));
      for (let c = 1; c < 6; c++) expect(levels[c]).toBeGreaterThan(levels[c - 1]);
    }
  });

  test('FLAC cannot hold more than 8 channels: a clear input error; WAV works', async () => {
    const planar = Array.from({ length: 10 }, (_, c) => Float32Array.from({ length: 8000 }, (_, i) => 0.1 * Math.sin((i * (c + 1)) / 20)));
    const input = path.join(tmp, 'ten.wav');
    await writePcm(config, planar, 16000, input, ['-c:a', 'pcm_s16le', '-f', 'wav']);
    await expect(denoiseFile({ config, engine }, input, path.join(tmp, 'ten.flac'), { ...base, outputFormat: 'flac' }))
      .rejects.toThrow(/at most 8 channels/);
    const stats = await denoiseFile({ config, engine }, input, path.join(tmp, 'ten-out.wav'), base);
    expect(stats.channels).toBe(10);
    expect((await probeAudio(config, path.join(tmp, 'ten-out.wav'))).channels).toBe(10);
  });
});

describe('PCM edges', () => {
  test('a WAV read as it is and written as 16-bit WAV at the model rate goes through a PCM stream: the same bytes as the float path', async () => {
    let pcmOpened = 0;
    const pcmEngine: InferenceEngine = {
      openStream: (o) => engine.openStream(o),
      openPcmStream: (o, format) => {
        pcmOpened++;
        return engine.openPcmStream!(o, format);
      },
      state: () => engine.state(),
      close: () => Promise.resolve(),
    };
    const floatEngine: InferenceEngine = { openStream: (o) => engine.openStream(o), state: () => engine.state(), close: () => Promise.resolve() };
    const mono = fixture('speech-noisy-16k-mono.wav');
    const stereo = path.join(tmp, 'pcm-stereo-16k.wav');
    const f32 = path.join(tmp, 'pcm-mono-16k-f32.wav');
    const planar = await readPcm(config, fixture('speech-noisy-44k1-stereo.wav'), 16000, 2);
    await writePcm(config, planar, 16000, stereo, ['-c:a', 'pcm_s16le', '-f', 'wav']);
    await writePcm(config, [planar[0]], 16000, f32, ['-c:a', 'pcm_f32le', '-f', 'wav']);
    const runs: Array<[string, DenoiseFileOptions]> = [
      [mono, { ...base, chunkSeconds: 0.7 }],
      [stereo, { ...base, model: 'nsm-3', chunkSeconds: 1.3 }],
      [f32, { ...base, model: 'nsm-1' }],
    ];
    for (const [i, [input, opts]] of runs.entries()) {
      const viaPcm = path.join(tmp, `pcm-${i}.wav`);
      const viaFloat = path.join(tmp, `float-${i}.wav`);
      const before = pcmOpened;
      const a = await denoiseFile({ config, engine: pcmEngine }, input, viaPcm, opts);
      expect(pcmOpened).toBe(before + 1);
      const b = await denoiseFile({ config, engine: floatEngine }, input, viaFloat, opts);
      expect(fs.readFileSync(viaPcm).equals(fs.readFileSync(viaFloat))).toBe(true);
      expect(a.output_loudness_lufs).toBe(b.output_loudness_lufs);
      expect(a.noise_removed_db).toBe(b.noise_removed_db);
    }
    // An upload in memory, answered in memory (the server's path for short WAV clips).
    const upload = fs.readFileSync(stereo);
    const inMemory = (e: InferenceEngine) =>
      denoise({ config, engine: e }, { file: new MemoryFile(Buffer.from(upload)), spill: () => Promise.reject(new Error('no spill')) },
        { inMemory: true, path: () => Promise.reject(new Error('no path')) }, base);
    const m1 = await inMemory(pcmEngine);
    const m2 = await inMemory(floatEngine);
    if (!('memory' in m1.output) || !('memory' in m2.output)) throw new Error('expected outputs in memory');
    expect(m1.output.memory.contents().equals(m2.output.memory.contents())).toBe(true);
    const header = m1.output.memory.size - planar[0].length * 4; // every frame came back, behind the WAV header
    expect(header).toBeGreaterThanOrEqual(44);
    expect(header).toBeLessThan(100);

    // Not where the samples must be seen on this thread: a loudness target (spool, limiter), or another output format.
    const opened = pcmOpened;
    await denoiseFile({ config, engine: pcmEngine }, mono, path.join(tmp, 'pcm-target.wav'), { ...base, loudnessLufs: -20 });
    await denoiseFile({ config, engine: pcmEngine }, mono, path.join(tmp, 'pcm-flac.flac'), { ...base, outputFormat: 'flac' });
    expect(pcmOpened).toBe(opened);
  });
});

describe('one chunk ahead', () => {
  test('the next chunk is pushed before the previous output is written; the file is the same as with one chunk', async () => {
    // The real engine, watched: each push's answer is held back until the pipeline makes its next request (the next
    // push, or `end`), so how many pushes are unanswered at once does not depend on how fast the worker is. A pipeline
    // that waited for an answer before pushing the next chunk would stall here: after 2 s the answer is let go and
    // counted as a stall.
    let unanswered = 0;
    let most = 0;
    let stalls = 0;
    let releasePrevious: (() => void) | null = null;
    const watched = {
      openStream: async (o: Parameters<InferenceEngine['openStream']>[0]) => {
        const s = await engine.openStream(o);
        return {
          sampleRate: s.sampleRate,
          bands: s.bands,
          push: (planar: Float32Array[]) => {
            most = Math.max(most, ++unanswered);
            releasePrevious?.();
            const reply = s.push(planar);
            return new Promise<Float32Array[]>((resolve, reject) => {
              const timer = setTimeout(() => {
                stalls++;
                release();
              }, 2000);
              const release = () => {
                clearTimeout(timer);
                releasePrevious = null;
                reply.then(resolve, reject);
              };
              releasePrevious = release;
            }).finally(() => unanswered--);
          },
          end: () => {
            releasePrevious?.();
            return s.end();
          },
          loudness: () => s.loudness(),
          abort: () => s.abort(),
        };
      },
      state: () => engine.state(),
      close: () => Promise.resolve(),
    };
    const input = fixture('speech-noisy-16k-mono.wav');
    const chunked = path.join(tmp, 'ahead-chunked.wav');
    const whole = path.join(tmp, 'ahead-whole.wav');
    await denoiseFile({ config, engine: watched }, input, chunked, { ...base, chunkSeconds: 0.25 });
    expect(stalls).toBe(0);
    expect(most).toBe(2);
    await denoiseFile({ config, engine }, input, whole, { ...base, chunkSeconds: 60 });
    expect(fs.readFileSync(chunked).equals(fs.readFileSync(whole))).toBe(true);
  });
});

describe('progress, bad inputs, failures, abort', () => {
  test('onProgress reports increasing seconds up to the duration', async () => {
    const calls: [number, number | null][] = [];
    await denoiseFile({ config, engine }, fixture('speech-noisy-44k1-stereo.ogg'), path.join(tmp, 'p.wav'), {
      ...base, chunkSeconds: 0.5, onProgress: (d, t) => calls.push([d, t]),
    });
    expect(calls.length).toBeGreaterThanOrEqual(6);
    for (let i = 1; i < calls.length; i++) expect(calls[i][0]).toBeGreaterThan(calls[i - 1][0]);
    expect(calls[calls.length - 1][0]).toBeCloseTo(3, 1);
    expect(calls[0][1]).toBeCloseTo(3, 1);
  });

  test.each([
    ['empty.wav', /file is empty/],
    ['not-audio.wav', /could not decode/],
    ['truncated.m4a', /moov atom not found/],
  ])('%s → AudioInputError and no output left behind', async (name, message) => {
    const out = path.join(tmp, `bad-${name}.wav`);
    const err = await denoiseFile({ config, engine }, fixture(name), out, base).catch((e) => e);
    expect(err).toBeInstanceOf(AudioInputError);
    expect(err.message).toMatch(message);
    expect(fs.existsSync(out)).toBe(false);
    expect(childProcesses().filter((c) => c.comm === 'ffmpeg')).toEqual([]);
  });

  test('a zero-length WAV has no audio to process', async () => {
    const input = path.join(tmp, 'zero.wav');
    await writePcm(config, [new Float32Array(0)], 16000, input, ['-c:a', 'pcm_s16le', '-f', 'wav']);
    await expect(denoiseFile({ config, engine }, input, path.join(tmp, 'zero-out.wav'), base)).rejects.toThrow(AudioInputError);
  });

  test.each([
    [true, /cannot write the output file \(ENOENT\)/],
    [false, /ffmpeg encoder/],
  ])('an unwritable output is an internal AudioPipelineError and leaves no children (in-process WAV: %s)', async (inProcessWav, message) => {
    const err = await denoiseFile({ config, engine }, fixture('speech-noisy-16k-mono.wav'), path.join(tmp, 'no/such/dir/out.wav'), {
      ...base, inProcessWav,
    }).catch((e) => e);
    expect(err).toBeInstanceOf(AudioPipelineError);
    expect(err.message).toMatch(message);
    expect(childProcesses().filter((c) => c.comm === 'ffmpeg')).toEqual([]);
    await waitFor(() => engine.state().streams === 0);
  });

  test('abort kills both ffmpeg children, frees the engine stream and removes the partial output', async () => {
    // 60 s of noisy speech loops, long enough to still be running when we abort.
    const input = path.join(tmp, 'minute.flac');
    const [speech] = await readPcm(config, fixture('speech-noisy-16k-mono.wav'), 16000, 1);
    const long = new Float32Array(speech.length * 20);
    for (let k = 0; k < 20; k++) long.set(speech, k * speech.length);
    await writePcm(config, [long, long], 16000, input, ['-c:a', 'flac', '-f', 'flac']);

    // FLAC out: an encoder child too (16 kHz WAV out would be written in-process).
    const out = path.join(tmp, 'aborted.flac');
    const controller = new AbortController();
    let runningChildren: string[] = [];
    const promise = denoiseFile({ config, engine }, input, out, {
      ...base,
      outputFormat: 'flac',
      signal: controller.signal,
      onProgress: (done) => {
        if (done >= 2 && !controller.signal.aborted) {
          // Both children must be running when we abort: under load a progress report can come while the encoder is
          // still between fork and exec (its comm not yet "ffmpeg"; a fresh-clone CI run failed so once). Later reports
          // wait for it; by 30 s of the minute both must have been seen.
          const now = childProcesses().map((c) => c.comm);
          if (now.filter((c) => c === 'ffmpeg').length < 2 && done < 30) return;
          runningChildren = now;
          controller.abort();
        }
      },
    });
    const err = await promise.catch((e) => e);
    expect(err).toBeInstanceOf(AudioAbortedError);
    expect(err.name).toBe('AbortError');
    expect(runningChildren.filter((c) => c === 'ffmpeg')).toHaveLength(2);
    expect(childProcesses().filter((c) => c.comm === 'ffmpeg')).toEqual([]);
    expect(fs.existsSync(out)).toBe(false);
    await waitFor(() => engine.state().streams === 0);
  });

  test.each([1, 5, 20, 40, 80])('abort %i ms after the start (while the decoder, stream or encoder is being opened) leaks nothing', async (ms) => {
    const controller = new AbortController();
    const out = path.join(tmp, `early-abort-${ms}.flac`);
    const promise = denoiseFile({ config, engine }, fixture('speech-noisy-44k1-stereo.mp3'), out, {
      ...base, outputFormat: 'flac', signal: controller.signal,
    });
    setTimeout(() => controller.abort(), ms);
    const err = await promise.catch((e) => e);
    // A short file may also finish first; either way nothing may be left running.
    if (err instanceof Error) expect(err).toBeInstanceOf(AudioAbortedError);
    await waitFor(() => engine.state().streams === 0);
    await waitFor(() => childProcesses().filter((c) => c.comm === 'ffmpeg').length === 0);
  });

  test('an already-aborted signal stops before any work', async () => {
    const controller = new AbortController();
    controller.abort();
    await expect(
      denoiseFile({ config, engine }, fixture('speech-noisy-16k-mono.wav'), path.join(tmp, 'x.wav'), { ...base, signal: controller.signal }),
    ).rejects.toBeInstanceOf(AudioAbortedError);
  });
});

test('interleave/deinterleave are inverse and handle unaligned buffers', async () => {
  const planar = [Float32Array.from([1, 2, 3]), Float32Array.from([-1, -2, -3]), Float32Array.from([0.5, 0.25, 0])];
  const bytes = interleave(planar);
  expect(Array.from(new Float32Array(bytes.buffer, bytes.byteOffset, 9))).toEqual([1, -1, 0.5, 2, -2, 0.25, 3, -3, 0]);
  const unaligned = Buffer.concat([Buffer.from([7]), bytes]).subarray(1);
  expect(deinterleave(unaligned, 3).map((c) => Array.from(c))).toEqual(planar.map((c) => Array.from(c)));
});
