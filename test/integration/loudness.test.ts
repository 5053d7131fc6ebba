// The BS.1770 meter (src/dsp/loudness.ts) against ffmpeg's ebur128 filter, EBU Tech 3341-style reference signals,
// the true-peak limiter (src/dsp/normalize.ts), the loudness target's gain decisions (src/pipeline/loudness.ts), and
// the noise-removed estimate on real denoising.
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { loadConfig } from '../../src/config';
import { dbOf, gatedLoudness, LoudnessMeter, noiseRemovedDb, TruePeakInterpolator } from '../../src/dsp/loudness';
import { LoudnessNormalizer } from '../../src/dsp/normalize';
import { FloatSpool } from '../../src/audio/spool';
import { chooseGain, linearGainFor, MAX_LIMITER_COST_LU, modelInputGainDb, scaledBlocks } from '../../src/pipeline/loudness';
import { readPcm, writePcm } from '../../src/pipeline/clips';
import { denoiseFile } from '../../src/pipeline';
import { createInferenceEngine } from '../../src/inference/runtime/engine';
import type { InferenceEngine } from '../../src/inference/types';
import { fixture, makeTmpDir } from '../helpers/audio-helpers';

const config = loadConfig({ NODE_ENV: 'test', WORKERS: '1' } as NodeJS.ProcessEnv);

/** ffmpeg's EBU R128 scanner on a file: integrated loudness (LUFS) and true peak (dBTP). */
function ffmpegEbur128(file: string): Promise<{ integrated: number; truePeak: number }> {
  return new Promise((resolve, reject) => {
    execFile(
      config.ffmpegPath,
      ['-hide_banner', '-nostats', '-i', file, '-af', 'ebur128=peak=true', '-f', 'null', '-'],
      { maxBuffer: 64 * 1024 * 1024 },
      (err, _stdout, stderr) => {
        if (err) return reject(err);
        const summary = stderr.slice(stderr.lastIndexOf('Summary:'));
        const i = /I:\s+(-?[\d.]+|-inf) LUFS/.exec(summary);
        const p = /Peak:\s+(-?[\d.]+|-inf) dBFS/.exec(summary);
        if (!i || !p) return reject(new Error(`no ebur128 summary in: ${summary.slice(0, 400)}`));
        resolve({ integrated: Number(i[1].replace('-inf', '-Infinity')), truePeak: Number(p[1].replace('-inf', '-Infinity')) });
      },
    );
  });
}

function measure(planar: Float32Array[], rate: number, chunk = 4410): { meter: LoudnessMeter; peak: number } {
  const meter = new LoudnessMeter(rate, planar.length);
  const tp = new TruePeakInterpolator(rate, planar.length);
  const scratch = new Float64Array(chunk);
  // Odd chunk sizes on purpose: the result must not depend on how the stream is cut.
  for (let start = 0; start < planar[0].length; start += chunk) {
    const part = planar.map((ch) => ch.subarray(start, Math.min(ch.length, start + chunk)));
    meter.push(part);
    tp.process(part, scratch);
  }
  return { meter, peak: tp.maximum() };
}

function sine(rate: number, seconds: number, freq: number, dbfs: number, phase = 0): Float32Array {
  const a = Math.pow(10, dbfs / 20);
  const x = new Float32Array(Math.round(rate * seconds));
  for (let i = 0; i < x.length; i++) x[i] = a * Math.sin((2 * Math.PI * freq * i) / rate + phase);
  return x;
}

let tmp: string;
beforeAll(() => {
  tmp = makeTmpDir('loudness-');
});
afterAll(() => fs.rmSync(tmp, { recursive: true, force: true }));

describe('BS.1770 loudness meter', () => {
  test.each([16000, 44100, 48000])('a 1 kHz sine at -23 dBFS in both channels reads -23.0 LUFS at %i Hz (EBU Tech 3341 case 1)', (rate) => {
    const x = sine(rate, 20, 1000, -23);
    const { meter } = measure([x, x.slice()], rate, 3333);
    expect(meter.integrated()!).toBeCloseTo(-23, 1);
  });

  test('gating: loud speech-level tone with quiet and silent stretches reads the loud part (relative and absolute gates)', async () => {
    const rate = 48000;
    const quiet = sine(rate, 10, 1000, -46); // more than 10 LU below: removed by the relative gate
    const loud = sine(rate, 20, 1000, -23);
    const silence = new Float32Array(rate * 5); // below −70 LUFS: removed by the absolute gate
    const x = new Float32Array(quiet.length + loud.length + silence.length);
    x.set(quiet, 0);
    x.set(loud, quiet.length);
    const { meter } = measure([x, x.slice()], rate);
    // Tech 3341's tolerance is ±0.1 LU (blocks that straddle a level change count with their mixed level).
    expect(Math.abs(meter.integrated()! + 23)).toBeLessThanOrEqual(0.1);
    const file = path.join(tmp, 'gating.wav');
    await writePcm(config, [x, x], rate, file, ['-c:a', 'pcm_f32le', '-f', 'wav']);
    expect(Math.abs(meter.integrated()! - (await ffmpegEbur128(file)).integrated)).toBeLessThanOrEqual(0.1);
    expect(new LoudnessMeter(rate, 1).integrated()).toBeNull();
    expect(measure([new Float32Array(rate * 3)], rate).meter.integrated()).toBeNull();
    expect(gatedLoudness(new Float64Array([0, 0]))).toBeNull();
  });

  test.each([
    ['speech-noisy-16k-mono.wav', 16000, 1],
    ['speech-noisy-44k1-stereo.wav', 44100, 2],
    ['speech-noisy-48k-mono.wav', 48000, 1],
  ] as const)('%s: integrated loudness and true peak agree with ffmpeg ebur128', async (name, rate, channels) => {
    const planar = await readPcm(config, fixture(name), rate, channels);
    const { meter, peak } = measure(planar, rate);
    const ref = await ffmpegEbur128(fixture(name));
    // ffmpeg prints one decimal; its meter and ours must agree to within that rounding plus a little.
    expect(Math.abs(meter.integrated()! - ref.integrated)).toBeLessThanOrEqual(0.1);
    expect(Math.abs(dbOf(peak) - ref.truePeak)).toBeLessThanOrEqual(0.2);
  });

  test('true peak finds inter-sample peaks that the samples miss (a sine at fs/4 sampled 45° off its crests)', async () => {
    const rate = 48000;
    const x = sine(rate, 2, rate / 4, -6, Math.PI / 4); // every sample at ±0.707 of the crest: sample peak −9 dBFS
    let samplePeak = 0;
    for (const v of x) samplePeak = Math.max(samplePeak, Math.abs(v));
    expect(dbOf(samplePeak)).toBeCloseTo(-9.01, 1);
    const { peak } = measure([x], rate);
    // The truth is the sine's amplitude, −6 dBTP. (ffmpeg's scanner reads −5.4 here, its resampler ringing at fs/4;
    // on real audio the two agree, see the fixture cases above.)
    expect(Math.abs(dbOf(peak) + 6)).toBeLessThanOrEqual(0.1);
  });
});

describe('normaliser: gain and true-peak limiter', () => {
  test('without limiting it is exactly the gain, same length, delayed then flushed', () => {
    const rate = 16000;
    const x = sine(rate, 1.234, 440, -30);
    const n = new LoudnessNormalizer({ sampleRate: rate, channels: 1, gainDb: 6, ceilingDbtp: -1 });
    const parts: Float32Array[] = [];
    for (let s = 0; s < x.length; s += 1000) parts.push(n.push([x.subarray(s, s + 1000)])[0]);
    parts.push(n.flush()[0]);
    const y = new Float32Array(parts.reduce((a, p) => a + p.length, 0));
    let o = 0;
    for (const p of parts) (y.set(p, o), (o += p.length));
    expect(y.length).toBe(x.length);
    const g = Math.pow(10, 6 / 20);
    let maxErr = 0;
    for (let i = 0; i < x.length; i++) maxErr = Math.max(maxErr, Math.abs(y[i] - g * x[i]));
    expect(maxErr).toBeLessThan(1e-6);
    expect(n.minimumLimiterGain).toBe(1);
  });

  test('with +20 dB on speech the limiter holds the true peak under the ceiling (checked by ffmpeg), smoothly', async () => {
    const rate = 44100;
    const planar = await readPcm(config, fixture('speech-noisy-44k1-stereo.wav'), rate, 2);
    const n = new LoudnessNormalizer({ sampleRate: rate, channels: 2, gainDb: 20, ceilingDbtp: -1.3 });
    const out: Float32Array[][] = [];
    for (let s = 0; s < planar[0].length; s += 7000) out.push(n.push(planar.map((ch) => ch.subarray(s, s + 7000))));
    out.push(n.flush());
    const joined = [0, 1].map((c) => {
      const total = out.reduce((a, p) => a + p[c].length, 0);
      const ch = new Float32Array(total);
      let o = 0;
      for (const p of out) (ch.set(p[c], o), (o += p[c].length));
      return ch;
    });
    expect(joined[0].length).toBe(planar[0].length);
    expect(n.minimumLimiterGain).toBeLessThan(0.5); // it really had to work
    const file = path.join(tmp, 'limited.wav');
    await writePcm(config, joined, rate, file, ['-c:a', 'pcm_f32le', '-f', 'wav']);
    const ref = await ffmpegEbur128(file);
    expect(ref.truePeak).toBeLessThanOrEqual(-1.0);
    // Loudness went up (most of the 20 dB; the limiter takes some back).
    const before = await ffmpegEbur128(fixture('speech-noisy-44k1-stereo.wav'));
    expect(ref.integrated - before.integrated).toBeGreaterThan(5);
    // No clicks: the gain never jumps; adjacent samples differ by less than the signal itself allows.
    let worst = 0;
    for (let i = 1; i < joined[0].length; i++) worst = Math.max(worst, Math.abs(joined[0][i] - joined[0][i - 1]));
    expect(worst).toBeLessThan(1.2);
  });
});

describe("a loudness target's gain decisions", () => {
  test('an input under -35 LUFS is lifted to -25 LUFS, less where its true peak would pass -1 dBTP; others are not', () => {
    expect(modelInputGainDb(-34.9, -15)).toBe(0);
    expect(modelInputGainDb(-20, -1)).toBe(0);
    expect(modelInputGainDb(null, -80)).toBe(0);
    expect(modelInputGainDb(-42.5, -22.8)).toBeCloseTo(17.5, 9);
    expect(modelInputGainDb(-50, -12)).toBeCloseTo(11, 9); // a click at -12 dBTP stops the lift at -1 dBTP
    expect(modelInputGainDb(-50, 0.5)).toBe(0);
  });

  test('the limiter-free gain accounts for blocks the gain lifts over the -70 LUFS gate (checked by metering the gained audio)', () => {
    // A loud part, a short part 13 LU under it (outside the relative gate), and a long one at -75 LUFS (outside the
    // absolute gate). Gained by ~38 dB the long part passes the absolute gate and pulls the relative gate down, so
    // the 13 LU part counts too.
    const rate = 16000;
    const parts = [sine(rate, 2, 1000, -54), sine(rate, 1, 1000, -67), sine(rate, 20, 1000, -75)];
    const x = new Float32Array(parts.reduce((a, p) => a + p.length, 0));
    let o = 0;
    for (const p of parts) (x.set(p, o), (o += p.length));
    const { meter } = measure([x], rate);
    const measured = meter.integrated()!;
    const naive = -16 - measured;
    const gained = (g: number) => measure([x.map((v) => v * Math.pow(10, g / 20))], rate).meter.integrated()!;
    expect(Math.abs(gained(naive) + 16)).toBeGreaterThan(0.5); // target − loudness alone misses
    const gain = linearGainFor(meter.blockPowers(), -16, measured);
    expect(Math.abs(gained(gain) + 16)).toBeLessThan(0.02);
    expect(gatedLoudness(scaledBlocks(meter.blockPowers(), gain))!).toBeCloseTo(gained(gain), 6);
  });

  test(`the limiter's budget: -5 LUFS on speech stops ${MAX_LIMITER_COST_LU} LU above the limiter-free gain, not reached; -16 is reached`, async () => {
    const rate = 16000;
    const planar = await readPcm(config, fixture('speech-noisy-16k-mono.wav'), rate, 1);
    const spool = await FloatSpool.create(path.join(tmp, 'budget.spool'), 1);
    try {
      await spool.write(planar);
      const { meter, peak } = measure(planar, rate);
      const measured = meter.integrated()!;
      const plan = { spool, sampleRate: rate, channels: 1, chunkFrames: 4000, measured, blocks: meter.blockPowers(), peak, ceilingDbtp: -1.7, check: () => undefined };
      const loud = await chooseGain({ ...plan, target: -5 });
      const over = loud.gainDb - linearGainFor(plan.blocks, -5, measured);
      expect(loud.reached).toBe(false);
      expect(over).toBeLessThanOrEqual(MAX_LIMITER_COST_LU + 1e-9);
      expect(over).toBeGreaterThan(MAX_LIMITER_COST_LU - 0.5); // it went as far as the budget allows
      expect(loud.expected!).toBeLessThan(-5.5);
      const podcast = await chooseGain({ ...plan, target: -16 });
      expect(podcast.reached).toBe(true);
      expect(Math.abs(podcast.expected! + 16)).toBeLessThan(0.05);
    } finally {
      await spool.dispose();
    }
  });
});

describe('noise removed estimate on real denoising', () => {
  let engine: InferenceEngine;
  beforeAll(async () => {
    engine = await createInferenceEngine({ ...config, workers: 1 });
  });
  afterAll(async () => {
    await engine.close();
  });

  test('it reports more removal without an attenuation limit than with a 6 dB limit, and about 6 dB with it', async () => {
    // Speech with pauses: 1.5 s of the fixture's noise-only opening (0.3 s, repeated), the 3 s clip, 1.5 s again.
    const [clip] = await readPcm(config, fixture('speech-noisy-16k-mono.wav'), 16000, 1);
    const noise = clip.subarray(0, 4800);
    const signal = new Float32Array(noise.length * 10 + clip.length);
    for (let k = 0; k < 5; k++) signal.set(noise, k * noise.length);
    signal.set(clip, 5 * noise.length);
    for (let k = 0; k < 5; k++) signal.set(noise, 5 * noise.length + clip.length + k * noise.length);
    const input = path.join(tmp, 'pauses.wav');
    await writePcm(config, [signal], 16000, input, ['-c:a', 'pcm_f32le', '-f', 'wav']);
    const run = (limit: number) =>
      denoiseFile({ config, engine }, input, path.join(tmp, `nr-${limit}.wav`), {
        model: 'nsm-2',
        attenuationLimitDb: limit,
        outputFormat: 'wav',
        keepInputSampleRate: true,
      });
    const free = await run(0);
    const limited = await run(6);
    expect(free.noise_removed_db!).toBeGreaterThan(limited.noise_removed_db! + 2);
    expect(limited.noise_removed_db!).toBeGreaterThan(3);
    expect(limited.noise_removed_db!).toBeLessThanOrEqual(6.5);
    // The same estimate from the meters' block powers, recomputed here from the files.
    const inMeter = measure([signal], 16000).meter;
    const output = measure(await readPcm(config, path.join(tmp, 'nr-0.wav'), 16000, 1), 16000).meter.blockPowers();
    expect(Math.abs(noiseRemovedDb(inMeter.blockPowers(), output)! - free.noise_removed_db!)).toBeLessThan(0.3);
    expect(Math.abs(free.input_loudness_lufs! - inMeter.integrated()!)).toBeLessThan(0.05);
  });
});
