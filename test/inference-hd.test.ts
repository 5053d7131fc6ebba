// nsm-2-hd high band: the per-bin filter's exact reconstruction and streaming, and what it does above 8 kHz on
// noise alone and on noise-free speech-like input (real ONNX graphs, real ffmpeg decoding).
import fs from 'node:fs';
import path from 'node:path';
import { loadConfig } from '../src/config';
import { FullBandChain } from '../src/inference/chains';
import { Decimator3, Interpolator3 } from '../src/inference/dsp';
import { DtlnGraphs } from '../src/inference/dtln';
import { HighBandFilter } from '../src/inference/highband';
import { loadGraphs, STAGE1_FILE, STAGE2_FILE } from '../src/inference/sessions';
import { AlignedStream, concatAll } from '../src/inference/stream';
import { decodeAudio } from '../scripts/lib/audio-io';
import { seededRandom, speechSourcePath } from '../src/audio/synthetic-noise';

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
  it('reconstructs its input exactly (delayed by latency) when every gain is 1, whatever the chunking', async () => {
    const rnd = seededRandom(7);
    const x = Float32Array.from({ length: 20000 }, () => rnd() * 2 - 1);
    const ones = Array.from({ length: 200 }, () => new Float32Array(513).fill(1));
    const f = new HighBandFilter({ replay: ones });
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

describe('nsm-2-hd above 8 kHz (real ONNX graphs)', () => {
  let graphs: DtlnGraphs;
  beforeAll(async () => {
    for (const file of [STAGE1_FILE, STAGE2_FILE]) {
      const p = path.join(config.modelsDir, file);
      if (!fs.existsSync(p)) throw new Error(`${p} is missing: run "npm run models" first`);
    }
    graphs = await loadGraphs(config.modelsDir);
  });

  /** LibriSpeech has nothing above 8 kHz: add a copy shifted up by 10 kHz (speech's own timing and envelope). */
  const speechWithHighBand = () => {
    const clean = decodeAudio(speechSourcePath(), 48000)[0].slice(48000, 5 * 48000);
    return clean.map((v, i) => v + 0.5 * v * Math.cos((2 * Math.PI * 10000 * i) / 48000));
  };

  it('takes noise alone down above 8 kHz', async () => {
    const rnd = seededRandom(11);
    const x = Float32Array.from({ length: 3 * 48000 }, () => 0.05 * (rnd() * 2 - 1));
    const hx = highBand(x);
    const hy = highBand(await runChain(new FullBandChain(graphs, 1), x));
    // Skip the first second (the noise estimate starts from the first frame).
    expect(-db(energy(hy, 48000) / energy(hx, 48000))).toBeGreaterThan(NOISE_ONLY_REDUCTION_MIN_DB);
  });

  it('removes noise under speech above 8 kHz better than one broadband gain', async () => {
    const clean = speechWithHighBand();
    const rnd = seededRandom(12);
    const noise = highBand(Float32Array.from({ length: clean.length }, () => rnd() * 2 - 1));
    const scale = Math.sqrt(energy(highBand(clean)) / energy(noise)); // 0 dB SNR above 8 kHz
    const x = clean.map((v, i) => v + scale * noise[i]);
    const hClean = highBand(clean);
    const errorDb = async (chain: FullBandChain) => {
      const hy = highBand(await runChain(chain, x));
      return db(energy(hy.map((v, i) => v - hClean[i])) / energy(hClean));
    };
    const perBin = await errorDb(new FullBandChain(graphs, 1));
    const broadband = await errorDb(new FullBandChain(graphs, 1, null));
    expect(perBin).toBeLessThan(broadband - ERROR_GAIN_OVER_BROADBAND_DB);
  });

  it('keeps the high band of noise-free speech', async () => {
    const x = speechWithHighBand();
    const hx = highBand(x);
    const hy = highBand(await runChain(new FullBandChain(graphs, 1), x));
    const kept = db(energy(hy) / energy(hx));
    expect(kept).toBeGreaterThan(-SPEECH_LOSS_MAX_DB);
  });
});

// Measured: noise alone 42 dB; error vs clean high band -6.2 dB per bin vs -1.6 dB broadband; clean speech -0.3 dB.
const NOISE_ONLY_REDUCTION_MIN_DB = 30;
const ERROR_GAIN_OVER_BROADBAND_DB = 3;
const SPEECH_LOSS_MAX_DB = 1;
