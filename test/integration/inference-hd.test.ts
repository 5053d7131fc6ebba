// Full band: the per-bin high-band filter's exact reconstruction and streaming, and what every model's full-band chain
// does above 8 kHz on noise alone, noisy and noise-free speech-like input (real ONNX graphs, real ffmpeg decoding).
import fs from 'node:fs';
import path from 'node:path';
import { loadConfig } from '../../src/config';
import { createChain, FullBandChain } from '../../src/inference/models/chains';
import { Decimator3, Interpolator3 } from '../../src/dsp/resample';
import { DtlnGraphs } from '../../src/inference/models/dtln';
import { HighBandFilter } from '../../src/dsp/highband';
import { loadGraphs } from '../../src/inference/runtime/sessions';
import { STAGE1_FILE, STAGE2_FILE } from '../../src/inference/models/specs';
import { concatAll } from '../../src/dsp/concat';
import { AlignedStream } from '../../src/inference/models/aligned-stream';
import { decodeAudio } from '../../scripts/lib/audio-io';
import type { ModelId } from '../../src/inference/types';
import { seededRandom, speechSourcePath } from '../../src/audio/synthetic-noise';

const config = loadConfig();

function energy(x: Float32Array, from = 0, to = x.length): number {
  let e = 1e-20;
  for (let i = from; i < to; i++) e += x[i] * x[i];
  return e;
}
const db = (r: number) => 10 * Math.log10(r);

/** The crossover's high band of a signal, aligned with it: x - up(down(x)) (as the chain forms it). */
function highBand(x: Float32Array): Float32Array {
  const padded = new Float32Array(x.length + 480);
  padded.set(x);
  const lp = new Interpolator3().process(new Decimator3().process(padded));
  return x.map((v, i) => v - lp[i + 240]);
}

async function runChain(chain: FullBandChain, x: Float32Array): Promise<Float32Array> {
  const s = new AlignedStream(chain, 0);
  return concatAll([(await s.push([x.slice()]))[0], (await s.end())[0]]);
}

describe('HighBandFilter', () => {
  it.each([2, 4] as const)('reconstructs its input exactly (delayed by latency) when every gain is 1, whatever the chunking (overlap %i)', async (overlap) => {
    const rnd = seededRandom(7);
    const x = Float32Array.from({ length: 20000 }, () => rnd() * 2 - 1);
    const ones = Array.from({ length: 200 }, () => new Float32Array(513).fill(1));
    const f = new HighBandFilter({ replay: ones, overlap });
    const g = new Float32Array(x.length).fill(1);
    const parts: Float32Array[] = [];
    for (let pos = 0, i = 0; pos < x.length; i++) {
      const len = Math.min(1 + Math.floor(rnd() * 3000), x.length - pos);
      const y = f.process(x.subarray(pos, pos + len), g.subarray(pos, pos + len));
      expect(y.length).toBe(len);
      parts.push(y);
      pos += len;
    }
    const y = concatAll(parts);
    let maxDiff = 0;
    for (let i = f.latency; i < x.length; i++) maxDiff = Math.max(maxDiff, Math.abs(y[i] - x[i - f.latency]));
    for (let i = 0; i < f.latency; i++) maxDiff = Math.max(maxDiff, Math.abs(y[i]));
    expect(maxDiff).toBeLessThan(1e-5);
  });
});

// Every model in full-band mode (as it runs for inputs above 16 kHz with the rate kept), and nsm-2-hd.
describe.each(['nsm-1', 'nsm-2', 'nsm-3', 'nsm-4', 'nsm-2-hd'] as ModelId[])('%s full band, above 8 kHz (real ONNX graphs)', (model) => {
  let graphs: DtlnGraphs;
  beforeAll(async () => {
    for (const file of [STAGE1_FILE, STAGE2_FILE]) {
      const p = path.join(config.modelsDir, file);
      if (!fs.existsSync(p)) throw new Error(`${p} is missing: run "npm run models" first`);
    }
    graphs = await loadGraphs(config.modelsDir);
  });
  const chain = () => createChain(model, 1, graphs, { fullBand: true }) as FullBandChain;

  /** LibriSpeech has nothing above 8 kHz: add a copy shifted up by 10 kHz (speech's own timing and envelope). */
  const speechWithHighBand = () => {
    const clean = decodeAudio(speechSourcePath(), 48000)[0].slice(48000, 5 * 48000);
    return clean.map((v, i) => v + 0.5 * v * Math.cos((2 * Math.PI * 10000 * i) / 48000));
  };

  it('runs at 48 kHz around the 16 kHz chain', () => {
    const c = chain();
    expect(c.sampleRate).toBe(48000);
    expect(c.core.sampleRate).toBe(16000);
  });

  it('takes noise alone down above 8 kHz', async () => {
    const rnd = seededRandom(11);
    const x = Float32Array.from({ length: 3 * 48000 }, () => 0.05 * (rnd() * 2 - 1));
    const hx = highBand(x);
    const hy = highBand(await runChain(chain(), x));
    // Skip the first second (the noise estimate starts from the first frame).
    expect(-db(energy(hy, 48000) / energy(hx, 48000))).toBeGreaterThan(NOISE_ONLY_REDUCTION_MIN_DB);
  });

  it('brings the high band of noisy speech closer to the clean one', async () => {
    const clean = speechWithHighBand();
    const rnd = seededRandom(12);
    const noise = highBand(Float32Array.from({ length: clean.length }, () => rnd() * 2 - 1));
    const scale = Math.sqrt(energy(highBand(clean)) / energy(noise)); // 0 dB SNR above 8 kHz
    const x = clean.map((v, i) => v + scale * noise[i]);
    const hClean = highBand(clean);
    const hy = highBand(await runChain(chain(), x));
    const errorDb = db(energy(hy.map((v, i) => v - hClean[i])) / energy(hClean));
    expect(errorDb).toBeLessThan(-NOISY_ERROR_MIN_GAIN_DB); // the unprocessed mix is at 0 dB
  });

  it('keeps the high band of noise-free speech', async () => {
    const x = speechWithHighBand();
    const hx = highBand(x);
    const hy = highBand(await runChain(chain(), x));
    expect(db(energy(hy) / energy(hx))).toBeGreaterThan(-SPEECH_LOSS_MAX_DB);
  });

  it('random-size chunks give the same output as one pass', async () => {
    const x = speechWithHighBand().slice(0, 2 * 48000);
    const whole = await runChain(chain(), x);
    const rnd = seededRandom(5);
    const s = new AlignedStream(chain(), 0);
    const parts: Float32Array[] = [];
    for (let pos = 0; pos < x.length; ) {
      const len = Math.min(1 + Math.floor(rnd() * 5000), x.length - pos);
      parts.push((await s.push([x.slice(pos, pos + len)]))[0]);
      pos += len;
    }
    parts.push((await s.end())[0]);
    const chunked = concatAll(parts);
    expect(chunked.length).toBe(x.length);
    let maxDiff = 0;
    for (let i = 0; i < x.length; i++) maxDiff = Math.max(maxDiff, Math.abs(chunked[i] - whole[i]));
    expect(maxDiff).toBeLessThan(1e-5);
  });
});

// Measured (nsm-2-hd; the others within ~0.3 dB): noise alone 44 dB; high-band error of 0 dB SNR noisy speech -2.5 dB;
// noise-free speech -2.1 dB with nsm-2, -3.8 dB with nsm-4 (this frequency-shifted speech; see the bench for real speech).
// The speech bound is the one the issue sets for clean 48 kHz speech (6 dB).
const NOISE_ONLY_REDUCTION_MIN_DB = 30;
const NOISY_ERROR_MIN_GAIN_DB = 1.5;
const SPEECH_LOSS_MAX_DB = 6;
