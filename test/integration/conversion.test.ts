// Proves the TFLite → ONNX conversion: an independent op-by-op float64 evaluation of the TFLite graphs,
// stepped frame by frame with its state fed back, must match the ONNX sequence graphs run over all
// frames at once, on real speech (the LibriSpeech utterance shipped in @vonage/noise-suppression).
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import * as ort from 'onnxruntime-node';
import { spawnSync } from 'node:child_process';
import { loadConfig } from '../../src/config';
import { VAD_FILE } from '../../src/vad/silero-graph';
import { convertAll, loadTflite, STAGE1_FILE, STAGE2_FILE, tflitePaths } from '../../scripts/convert-models';
import { NdArray, runTflite } from '../../scripts/tflite/interpreter';
import { parseTflite, type TfliteGraph } from '../../scripts/tflite/reader';

const BLOCK = 512;
const HOP = 128;
const BINS = 257;
const FRAMES = 100; // 0.8 s of speech
const TOL = 1e-4;

let outDir: string;
let speech: Float64Array;
let spectra: Array<{ mag: Float64Array; phase: Float64Array }>;
/** Stage-1 masks and final state of the TFLite graph stepped over the speech frames (the reference for both stages). */
let stage1Reference: { outputs: Float64Array[]; state: NdArray };

function loadSpeech(): Float64Array {
  // The shipped utterance is 48 kHz; the networks run at 16 kHz. Resample with the real ffmpeg.
  const pkg = path.dirname(require.resolve('@vonage/noise-suppression/package.json'));
  const wav = path.join(pkg, 'data', '7729-102255-0000.wav');
  const r = spawnSync(loadConfig().ffmpegPath, ['-v', 'error', '-i', wav, '-ac', '1', '-ar', '16000', '-f', 'f64le', 'pipe:1'], {
    maxBuffer: 64 << 20,
  });
  if (r.status !== 0) throw new Error(`ffmpeg failed: ${r.stderr}`);
  const b = Buffer.from(r.stdout);
  return new Float64Array(b.buffer, b.byteOffset, b.length / 8);
}

/** Naive DFT of one block: magnitudes and phases of the 257 non-negative bins (independent of src/inference). */
const COS = Float64Array.from({ length: BLOCK }, (_, i) => Math.cos((2 * Math.PI * i) / BLOCK));
const SIN = Float64Array.from({ length: BLOCK }, (_, i) => Math.sin((2 * Math.PI * i) / BLOCK));

function dft(block: Float64Array): { mag: Float64Array; phase: Float64Array } {
  const mag = new Float64Array(BINS);
  const phase = new Float64Array(BINS);
  for (let k = 0; k < BINS; k++) {
    let re = 0;
    let im = 0;
    for (let n = 0; n < BLOCK; n++) {
      const i = (k * n) % BLOCK;
      re += block[n] * COS[i];
      im -= block[n] * SIN[i];
    }
    mag[k] = Math.hypot(re, im);
    phase[k] = Math.atan2(im, re);
  }
  return { mag, phase };
}

function idft(mag: Float64Array, phase: Float64Array): Float64Array {
  const out = new Float64Array(BLOCK);
  for (let n = 0; n < BLOCK; n++) {
    let acc = 0;
    for (let k = 0; k < BINS; k++) {
      const w = k === 0 || k === BINS - 1 ? 1 : 2;
      const i = (k * n) % BLOCK;
      // cos(φ + θ) = cos φ cos θ − sin φ sin θ
      acc += w * mag[k] * (Math.cos(phase[k]) * COS[i] - Math.sin(phase[k]) * SIN[i]);
    }
    out[n] = acc / BLOCK;
  }
  return out;
}

function speechBlock(t: number): Float64Array {
  const start = 8000 + t * HOP; // skip the leading silence
  return speech.slice(start, start + BLOCK);
}

const zeroState = (): NdArray => ({ shape: [1, 2, 128, 2], data: new Float64Array(512) });

/** Runs a single-step TFLite graph over `frames` of `width` values, feeding each step's state into the next. */
function stepTflite(graph: TfliteGraph, inputs: [string, string], frames: Float64Array[], width: number) {
  const outputs: Float64Array[] = [];
  let state = zeroState();
  for (const frame of frames) {
    const out = runTflite(graph, { [inputs[0]]: { shape: [1, 1, width], data: frame }, [inputs[1]]: state });
    outputs.push(out.Identity.data);
    state = out.Identity_1;
  }
  return { outputs, state };
}
const zeros = (n: number) => new ort.Tensor('float32', new Float32Array(n), [2, 1, 128]);

beforeAll(async () => {
  outDir = fs.mkdtempSync(path.join(os.tmpdir(), 'nsm-convert-'));
  convertAll(outDir);
  speech = loadSpeech();
  spectra = Array.from({ length: FRAMES }, (_, t) => dft(speechBlock(t)));
  stage1Reference = stepTflite(loadTflite(tflitePaths().stage1), ['input_2', 'input_3'], spectra.map((x) => x.mag), BINS);
});

afterAll(() => fs.rmSync(outDir, { recursive: true, force: true }));

test('the TFLite reader rejects files that are not TFLite flatbuffers', async () => {
  expect(() => parseTflite(new Uint8Array(64))).toThrow(/not a TFLite/);
});

test('manifest lists the graphs (both DTLN stages, the VAD) with their sha256 and all five models', async () => {
  const manifest = JSON.parse(fs.readFileSync(path.join(outDir, 'manifest.json'), 'utf8'));
  expect(manifest.graphs.map((g: { file: string }) => g.file)).toEqual([STAGE1_FILE, STAGE2_FILE, VAD_FILE]);
  for (const g of manifest.graphs) expect(g.sha256).toMatch(/^[0-9a-f]{64}$/);
  expect(manifest.models.map((m: { id: string }) => m.id)).toEqual(['nsm-1', 'nsm-2', 'nsm-3', 'nsm-4', 'nsm-2-hd']);
  for (const m of manifest.models) {
    // A model's digest covers its graph files in order, so `cat FILES | sha256sum` checks an installation.
    const bytes = Buffer.concat(m.files.map((f: string) => fs.readFileSync(path.join(outDir, f))));
    expect(m.sha256).toBe(createHash('sha256').update(bytes).digest('hex'));
    expect(m.size_mb).toBeCloseTo(bytes.length / 1e6, 2);
    expect(typeof m.label).toBe('string');
    expect(typeof m.description).toBe('string');
    expect([16000, 48000]).toContain(m.sample_rate);
  }
  expect(manifest.default).toBe('nsm-2');
});

test('stage 1: ONNX masks equal the TFLite graph stepped frame by frame (speech, ≤ 1e-4)', async () => {
  const { outputs: reference, state } = stage1Reference;
  const session = await ort.InferenceSession.create(path.join(outDir, STAGE1_FILE));
  const input = new Float32Array(FRAMES * BINS);
  spectra.forEach(({ mag }, t) => input.set(mag, t * BINS));
  const result = await session.run({ mag: new ort.Tensor('float32', input, [1, FRAMES, BINS]), h0: zeros(256), c0: zeros(256) });
  const mask = result.mask.data as Float32Array;

  let maxDiff = 0;
  reference.forEach((ref, t) => ref.forEach((v, k) => (maxDiff = Math.max(maxDiff, Math.abs(v - mask[t * BINS + k])))));
  expect(maxDiff).toBeLessThanOrEqual(TOL);
  // The masks are not trivial: speech frames get a spread of gains.
  const spread = Math.max(...mask) - Math.min(...mask);
  expect(spread).toBeGreaterThan(0.5);

  // The returned state equals the reference's final state (h in slot 0, c in slot 1 of [1, layer, 128, 2]).
  const hN = result.hN.data as Float32Array;
  const cN = result.cN.data as Float32Array;
  let stateDiff = 0;
  for (let layer = 0; layer < 2; layer++) {
    for (let u = 0; u < 128; u++) {
      stateDiff = Math.max(stateDiff, Math.abs(state.data[(layer * 128 + u) * 2] - hN[layer * 128 + u]));
      stateDiff = Math.max(stateDiff, Math.abs(state.data[(layer * 128 + u) * 2 + 1] - cN[layer * 128 + u]));
    }
  }
  expect(stateDiff).toBeLessThanOrEqual(TOL);
});

test('stage 2: ONNX output blocks equal the TFLite graph stepped frame by frame (speech, ≤ 1e-4)', async () => {
  // Stage-2 inputs as in DTLN: the stage-1-masked spectrum back in the time domain.
  const blocks = spectra.map(({ mag, phase }, t) => idft(mag.map((m, k) => m * stage1Reference.outputs[t][k]), phase));
  const { outputs: reference } = stepTflite(loadTflite(tflitePaths().stage2), ['input_4', 'input_5'], blocks, BLOCK);

  const session = await ort.InferenceSession.create(path.join(outDir, STAGE2_FILE));
  const input = new Float32Array(FRAMES * BLOCK);
  blocks.forEach((b, t) => input.set(b, t * BLOCK));
  const result = await session.run({ frames: new ort.Tensor('float32', input, [1, FRAMES, BLOCK]), h0: zeros(256), c0: zeros(256) });
  const out = result.out.data as Float32Array;

  let maxDiff = 0;
  let energy = 0;
  reference.forEach((ref, t) =>
    ref.forEach((v, k) => {
      maxDiff = Math.max(maxDiff, Math.abs(v - out[t * BLOCK + k]));
      energy += v * v;
    }),
  );
  expect(energy).toBeGreaterThan(0);
  expect(maxDiff).toBeLessThanOrEqual(TOL);
});

test('state carried between chunks gives the one-pass result (stage 1, batch of 2)', async () => {
  const session = await ort.InferenceSession.create(path.join(outDir, STAGE1_FILE));
  const T = 40;
  const B = 2;
  const mags = new Float32Array(B * T * BINS);
  for (let b = 0; b < B; b++) for (let t = 0; t < T; t++) mags.set(dft(speechBlock(t + 7 * b)).mag, (b * T + t) * BINS);
  const z = () => new ort.Tensor('float32', new Float32Array(2 * B * 128), [2, B, 128]);
  const whole = await session.run({ mag: new ort.Tensor('float32', mags, [B, T, BINS]), h0: z(), c0: z() });

  const split = 13;
  const part = (from: number, to: number) => {
    const d = new Float32Array(B * (to - from) * BINS);
    for (let b = 0; b < B; b++) d.set(mags.subarray((b * T + from) * BINS, (b * T + to) * BINS), b * (to - from) * BINS);
    return new ort.Tensor('float32', d, [B, to - from, BINS]);
  };
  const first = await session.run({ mag: part(0, split), h0: z(), c0: z() });
  const second = await session.run({ mag: part(split, T), h0: first.hN, c0: first.cN });
  const wholeMask = whole.mask.data as Float32Array;
  const secondMask = second.mask.data as Float32Array;
  let maxDiff = 0;
  for (let b = 0; b < B; b++) {
    for (let t = split; t < T; t++) {
      for (let k = 0; k < BINS; k++) {
        const a = wholeMask[(b * T + t) * BINS + k];
        const c = secondMask[(b * (T - split) + (t - split)) * BINS + k];
        maxDiff = Math.max(maxDiff, Math.abs(a - c));
      }
    }
  }
  expect(maxDiff).toBeLessThan(1e-6);
});
