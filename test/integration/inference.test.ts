// Inference DSP and model chains with the real ONNX graphs (models/), real ffmpeg for decoding, real ONNX Runtime.
import fs from 'node:fs';
import path from 'node:path';
import { loadConfig } from '../../src/config';
import { RealFFT } from '../../src/dsp/fft';
import { Decimator3, Interpolator3 } from '../../src/dsp/resample';
import { DtlnGraphs } from '../../src/inference/models/dtln';
import { denoiseBuffer } from '../../src/inference/models/offline';
import { loadGraphs } from '../../src/inference/runtime/sessions';
import { MODEL_IDS, ModelId } from '../../src/inference/types';
import { MODELS, NSM3_POSTFILTER, NSM4_POSTFILTER, STAGE1_FILE, STAGE2_FILE } from '../../src/inference/models/specs';
import { PostFilter, type PostFilterOptions } from '../../src/dsp/postfilter';
import { decodeAudio } from '../../scripts/lib/audio-io';
import { speechSourcePath, seededRandom } from '../../src/audio/synthetic-noise';

const config = loadConfig();

function requireModels(): void {
  for (const f of [STAGE1_FILE, STAGE2_FILE]) {
    const p = path.join(config.modelsDir, f);
    if (!fs.existsSync(p)) throw new Error(`${p} is missing: run "npm run models" (node dist/scripts/convert-models.js) first`);
  }
}

function noise(n: number, seed: number, amp = 0.05): Float32Array {
  const r = seededRandom(seed);
  const x = new Float32Array(n);
  // Slightly coloured (one-pole) noise, closer to real background noise than white.
  let s = 0;
  for (let i = 0; i < n; i++) {
    s = 0.6 * s + (r() * 2 - 1);
    x[i] = amp * s;
  }
  return x;
}

function energyDb(x: Float32Array, from = 0, to = x.length): number {
  let e = 0;
  for (let i = from; i < to; i++) e += x[i] * x[i];
  return 10 * Math.log10(e / (to - from) + 1e-20);
}

function concat(a: Float32Array, b: Float32Array): Float32Array {
  const out = new Float32Array(a.length + b.length);
  out.set(a);
  out.set(b, a.length);
  return out;
}

function maxAbsDiff(a: Float32Array, b: Float32Array): number {
  expect(a.length).toBe(b.length);
  let m = 0;
  for (let i = 0; i < a.length; i++) m = Math.max(m, Math.abs(a[i] - b[i]));
  return m;
}

describe('RealFFT', () => {
  it('matches a naive DFT and inverts exactly (N=512)', async () => {
    const n = 512;
    const fft = new RealFFT(n);
    const r = seededRandom(1);
    const x = new Float64Array(n).map(() => r() * 2 - 1);
    const re = new Float64Array(fft.bins);
    const im = new Float64Array(fft.bins);
    fft.forward(x, 0, re, im, 0);
    let maxErr = 0;
    for (let k = 0; k <= n / 2; k++) {
      let sr = 0;
      let si = 0;
      for (let t = 0; t < n; t++) {
        sr += x[t] * Math.cos((2 * Math.PI * k * t) / n);
        si -= x[t] * Math.sin((2 * Math.PI * k * t) / n);
      }
      maxErr = Math.max(maxErr, Math.abs(sr - re[k]), Math.abs(si - im[k]));
    }
    expect(maxErr).toBeLessThan(1e-9);
    const back = new Float64Array(n);
    fft.inverse(re, im, 0, back, 0);
    for (let t = 0; t < n; t++) expect(Math.abs(back[t] - x[t])).toBeLessThan(1e-12);
  });

  it('inverse matches a naive inverse DFT of an arbitrary half spectrum', async () => {
    const n = 64;
    const fft = new RealFFT(n);
    const r = seededRandom(2);
    const re = new Float64Array(n / 2 + 1).map(() => r() - 0.5);
    const im = new Float64Array(n / 2 + 1).map(() => r() - 0.5);
    im[0] = 0;
    im[n / 2] = 0;
    const out = new Float64Array(n);
    fft.inverse(re, im, 0, out, 0);
    for (let t = 0; t < n; t++) {
      let s = re[0] + re[n / 2] * Math.cos(Math.PI * t);
      for (let k = 1; k < n / 2; k++) s += 2 * (re[k] * Math.cos((2 * Math.PI * k * t) / n) - im[k] * Math.sin((2 * Math.PI * k * t) / n));
      expect(Math.abs(out[t] - s / n)).toBeLessThan(1e-12);
    }
  });

  it('rejects sizes that are not powers of two', async () => {
    expect(() => new RealFFT(500)).toThrow(/power of two/);
  });
});

describe('48 kHz <-> 16 kHz resampling', () => {
  it('down then up keeps a 1 kHz tone and removes a 12 kHz tone', async () => {
    const n = 48000;
    const tone = (f: number) => Float32Array.from({ length: n }, (_, i) => 0.5 * Math.sin((2 * Math.PI * f * i) / 48000));
    const run = (x: Float32Array) => new Interpolator3().process(new Decimator3().process(x));
    expect(energyDb(run(tone(1000)), 2000, n - 2000) - energyDb(tone(1000))).toBeGreaterThan(-0.1);
    expect(energyDb(run(tone(12000)), 2000, n - 2000) - energyDb(tone(12000))).toBeLessThan(-50);
  });
});

describe('model chains (real ONNX graphs)', () => {
  let graphs: DtlnGraphs;
  let speech16: Float32Array;
  let speech48: Float32Array;

  beforeAll(async () => {
    requireModels();
    graphs = await loadGraphs(config.modelsDir);
    // 3 s of LibriSpeech speech plus coloured noise at about 5 dB SNR.
    const clean16 = decodeAudio(speechSourcePath(), 16000)[0].slice(16000, 4 * 16000);
    const clean48 = decodeAudio(speechSourcePath(), 48000)[0].slice(48000, 4 * 48000);
    const n16 = noise(clean16.length, 3);
    speech16 = clean16.map((v, i) => v + n16[i]);
    const n48 = noise(clean48.length, 4);
    speech48 = clean48.map((v, i) => v + n48[i]);
  });

  const input = (m: ModelId) => (MODELS[m].sampleRate === 48000 ? speech48 : speech16);

  it.each(MODEL_IDS.map((m) => [m]))('%s: output has the input length, differs from the input, and is finite', async (m) => {
    const x = input(m);
    const [y] = await denoiseBuffer(graphs, m, [x]);
    expect(y.length).toBe(x.length);
    expect(y.every((v) => Number.isFinite(v))).toBe(true);
    expect(maxAbsDiff(y, x)).toBeGreaterThan(0.01);
    // Noisy speech in, less energy out (noise removed), but speech kept (not silence).
    expect(energyDb(y)).toBeLessThan(energyDb(x));
    expect(energyDb(y)).toBeGreaterThan(energyDb(x) - 15);
  });

  it.each(MODEL_IDS.map((m) => [m]))('%s: random-size chunks give the same output as one pass', async (m) => {
    const x = input(m).slice(0, MODELS[m].sampleRate * 2);
    const [whole] = await denoiseBuffer(graphs, m, [x]);
    const r = seededRandom(7);
    const [chunked] = await denoiseBuffer(graphs, m, [x], 0, () => 1 + Math.floor(r() * 3000));
    expect(maxAbsDiff(whole, chunked)).toBeLessThan(1e-5);
  });

  it.each([
    ['nsm-3', NSM3_POSTFILTER],
    ['nsm-4', NSM4_POSTFILTER],
  ] as [string, PostFilterOptions][])(
    "%s's post-filter takes a steady background down within 2 s of a file that starts with digital silence",
    (_m, opts) => {
      // 1 s of zeros, then steady noise. A noise floor that only rises a few dB/s from the zeros would stay idle here
      // for many seconds; lifted to the windowed minimum it reaches the floor gain by 2.5 s.
      const x = new Float32Array(16000 * 4);
      x.set(noise(16000 * 3, 11, 0.01), 16000);
      const filter = new PostFilter(opts);
      const y = concat(filter.process(x), filter.process(new Float32Array(filter.latency)));
      const from = Math.round(2.5 * 16000);
      const reduction = energyDb(x, from, x.length - 1000) - energyDb(y.subarray(filter.latency), from, x.length - 1000);
      expect(reduction).toBeGreaterThan(8);
    },
  );

  it.each(MODEL_IDS.map((m) => [m]))('%s: output is time-aligned with the input (chain latencies compensated)', async (m) => {
    const x = input(m);
    const [y] = await denoiseBuffer(graphs, m, [x]);
    const corrAt = (lag: number) => {
      let s = 0;
      for (let i = 2000; i < x.length - 2000; i++) s += y[i] * x[i - lag];
      return s;
    };
    const lags = [-384, -128, -3, -1, 0, 1, 3, 128, 384, 768];
    const best = lags.reduce((a, b) => (corrAt(b) > corrAt(a) ? b : a));
    expect(best).toBe(0);
  });

  it('channels run as a batch and each matches its mono run', async () => {
    const a = speech16.slice(0, 16000);
    const b = noise(16000, 9, 0.1);
    const [ya, yb] = await denoiseBuffer(graphs, 'nsm-2', [a, b]);
    expect(maxAbsDiff(ya, (await denoiseBuffer(graphs, 'nsm-2', [a]))[0])).toBeLessThan(1e-5);
    expect(maxAbsDiff(yb, (await denoiseBuffer(graphs, 'nsm-2', [b]))[0])).toBeLessThan(1e-5);
  });

  it.each(MODEL_IDS.map((m) => [m]))('%s: noise-only input is attenuated; attenuation_limit_db bounds it', async (m) => {
    const rate = MODELS[m].sampleRate;
    const x = noise(rate * 2, 11, 0.05);
    const inDb = energyDb(x, rate / 2);
    const [full] = await denoiseBuffer(graphs, m, [x], 0);
    expect(energyDb(full, rate / 2)).toBeLessThan(inDb - 10);
    for (const limit of [6, 12]) {
      const [limited] = await denoiseBuffer(graphs, m, [x], limit);
      const outDb = energyDb(limited, rate / 2);
      expect(outDb).toBeGreaterThanOrEqual(inDb - limit - 0.5);
      // ... and the limit is not a pass-through: it still removes most of the allowed amount.
      expect(outDb).toBeLessThan(inDb - limit + 3);
    }
  });
});
