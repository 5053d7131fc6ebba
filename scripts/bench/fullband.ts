// Full-band figures on ../shared/eval/fullband (48 kHz clean speech + noise, mixed here at 0/5/10 dB SNR).
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { Config } from '../../src/config';
import { denoiseFile } from '../../src/pipeline';
import { createChain, FullBandChain } from '../../src/inference/models/chains';
import { createInferenceEngine } from '../../src/inference/runtime/engine';
import { DEFAULT_MODEL, type ModelId } from '../../src/inference/types';
import { Decimator3, Interpolator3 } from '../../src/dsp/resample';
import { DtlnGraphs } from '../../src/inference/models/dtln';
import { HighBandFilter } from '../../src/dsp/highband';
import { RealFFT } from '../../src/dsp/fft';
import { concatAll } from '../../src/dsp/concat';
import { AlignedStream } from '../../src/inference/models/aligned-stream';
import { decodeAudio, writeWavFloat } from '../lib/audio-io';
import { db, dnsmosCached, energy, evalDir } from '../lib/metrics';

export interface HdRow {
  model: string;
  snr_db: number;
  noise_reduction_above_8k_db: number;
  speech_kept_above_8k_db: number;
  output_vs_clean_above_8k_db: number;
  input_vs_clean_above_8k_db: number;
  dnsmos_ovrl_in: number;
  dnsmos_ovrl_out: number;
}

/** Energy above 8 kHz of a 48 kHz signal (Hann STFT, 2048 points, hop 512). */
export function energyAbove(x: Float32Array, hz = 8000): number {
  const n = 2048;
  const fft = new RealFFT(n);
  const re = new Float64Array(fft.bins);
  const im = new Float64Array(fft.bins);
  const frame = new Float64Array(n);
  const k0 = Math.ceil((hz * n) / 48000);
  let e = 0;
  for (let off = 0; off + n <= x.length; off += n / 4) {
    for (let i = 0; i < n; i++) frame[i] = x[off + i] * (0.5 - 0.5 * Math.cos((2 * Math.PI * i) / n));
    fft.forward(frame, 0, re, im, 0);
    for (let k = k0; k < fft.bins; k++) e += re[k] * re[k] + im[k] * im[k];
  }
  return e;
}

/** The crossover's high band of a signal, aligned with it: x - up(down(x)). */
export function highBand(x: Float32Array): Float32Array {
  const padded = new Float32Array(x.length + 480);
  padded.set(x);
  const lp = new Interpolator3().process(new Decimator3().process(padded));
  const hp = new Float32Array(x.length);
  for (let i = 0; i < x.length; i++) hp[i] = x[i] - lp[i + 240];
  return hp;
}

const FULL_BAND_MODELS: ModelId[] = ['nsm-1', 'nsm-2', 'nsm-3', 'nsm-4', 'nsm-2-hd'];

export interface FullBandReport {
  mixes: HdRow[];
  /** Clean fullband/ speech alone through each chain: energy above 9 kHz, output vs input (dB). */
  clean_above_9k_db: Record<string, number>;
  /** The same through the file pipeline (ffmpeg decode -> engine -> encode) with the default model, per input rate. */
  pipeline_clean_above_9k_db: { model: ModelId; sample_rate: number; kept_db: number; bands: unknown }[];
}

async function runAligned(chain: FullBandChain, x: Float32Array): Promise<Float32Array> {
  const stream = new AlignedStream(chain, 0);
  return concatAll([(await stream.push([x.slice()]))[0], (await stream.end())[0]]);
}

function fullBandChain(model: ModelId, graphs: DtlnGraphs): FullBandChain {
  return createChain(model, 1, graphs, { fullBand: true }) as FullBandChain;
}

/**
 * Every model full band on fullband/: clean speech + noise mixed at 0/5/10 dB SNR. Above 8 kHz the per-bin gains the
 * chain applied to the mix are replayed on the clean and the noise high bands separately ("frozen gains"): noise
 * removed and speech kept there. DNSMOS OVRL of the mix and the output (at 16 kHz: the low band's quality).
 */
export async function fullBandAll(config: Config, dir: string, graphs: DtlnGraphs, models = FULL_BAND_MODELS): Promise<FullBandReport> {
  const fb = path.join(dir, 'fullband');
  const clean = decodeAudio(path.join(fb, 'clean_freesound_33711.wav'), 48000)[0];
  const noiseAll = decodeAudio(path.join(fb, 'noise_freesound_573577.wav'), 48000)[0];
  const noise = new Float32Array(clean.length).map((_, i) => noiseAll[i % noiseAll.length]);
  const to16 = (x: Float32Array) => {
    const d = new Decimator3().process(concatAll([x, new Float32Array(240)]));
    return d.subarray(40, 40 + Math.floor(x.length / 3));
  };
  const mixes: HdRow[] = [];
  for (const snr of [0, 5, 10]) {
    const scale = Math.sqrt(energy(clean) / energy(noise) / Math.pow(10, snr / 10));
    const n = noise.map((v) => v * scale);
    const mix = clean.map((v, i) => v + n[i]);
    const ch = highBand(clean);
    const nh = highBand(n);
    const ovrlIn = (await dnsmosCached(to16(mix))).OVRL;
    for (const model of models) {
      const chain = fullBandChain(model, graphs);
      const frames = chain.recordHighBandFrames()[0];
      const out = await runAligned(chain, mix);
      const bandLatency = chain.latency - chain.highBandLatency;
      const gained = (s: Float32Array) => {
        const filter = new HighBandFilter({ replay: frames });
        const input = new Float32Array(bandLatency + s.length + filter.latency);
        input.set(s, bandLatency);
        return filter.process(input, new Float32Array(input.length)).subarray(chain.latency, chain.latency + s.length);
      };
      mixes.push({
        model,
        snr_db: snr,
        noise_reduction_above_8k_db: -db(energy(gained(nh)) / energy(nh)),
        speech_kept_above_8k_db: db(energy(gained(ch)) / energy(ch)),
        output_vs_clean_above_8k_db: db(energyAbove(out) / energyAbove(clean)),
        input_vs_clean_above_8k_db: db(energyAbove(mix) / energyAbove(clean)),
        dnsmos_ovrl_in: ovrlIn,
        dnsmos_ovrl_out: (await dnsmosCached(to16(out))).OVRL,
      });
    }
  }
  const cleanKept: Record<string, number> = {};
  for (const model of models) {
    const out = await runAligned(fullBandChain(model, graphs), clean);
    cleanKept[model] = db(energyAbove(out, 9000) / energyAbove(clean, 9000));
  }
  return { mixes, clean_above_9k_db: cleanKept, pipeline_clean_above_9k_db: await throughPipeline(config, clean) };
}

/** Clean speech at 48 and 44.1 kHz through denoiseFile with the default model, rate kept: energy above 9 kHz. */
async function throughPipeline(config: Config, clean48: Float32Array): Promise<FullBandReport['pipeline_clean_above_9k_db']> {
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'nsm-fullband-'));
  const engine = await createInferenceEngine({ ...config, workers: 1 });
  const rows: FullBandReport['pipeline_clean_above_9k_db'] = [];
  try {
    for (const rate of [48000, 44100]) {
      const input = path.join(tmp, `clean-${rate}.wav`);
      const x = rate === 48000 ? clean48 : decodeAudio(path.join(evalDir()!, 'fullband', 'clean_freesound_33711.wav'), rate)[0];
      writeWavFloat(input, [x], rate);
      const output = path.join(tmp, `out-${rate}.wav`);
      const stats = await denoiseFile({ config, engine }, input, output, {
        model: DEFAULT_MODEL,
        attenuationLimitDb: 0,
        outputFormat: 'wav',
        keepInputSampleRate: true,
      });
      // Both measured at 48 kHz (the 44.1 kHz files resampled by ffmpeg the same way).
      const a = decodeAudio(input, 48000)[0];
      const b = decodeAudio(output, 48000)[0];
      rows.push({ model: DEFAULT_MODEL, sample_rate: rate, kept_db: db(energyAbove(b, 9000) / energyAbove(a, 9000)), bands: stats.bands });
    }
  } finally {
    await engine.close();
    fs.rmSync(tmp, { recursive: true, force: true });
  }
  return rows;
}

const f = (v: number, d = 3) => v.toFixed(d);

export function printFullBand(r: FullBandReport): void {
  console.log('\nFull band (48 kHz) on fullband/: clean speech + noise mixed here at each SNR; above 8 kHz the gains applied to the mix are');
  console.log('replayed on clean and noise separately (frozen gains). nsm-1..nsm-4 as they run for inputs above 16 kHz with the rate kept.');
  console.log('model      SNR dB | noise removed >8k | speech kept >8k | output vs clean >8k | input vs clean >8k | DNSMOS OVRL in -> out');
  for (const m of r.mixes) {
    console.log(
      `${m.model.padEnd(10)} ${String(m.snr_db).padStart(6)} | ${f(m.noise_reduction_above_8k_db, 1).padStart(14)} dB | ${f(m.speech_kept_above_8k_db, 1).padStart(12)} dB | ${f(m.output_vs_clean_above_8k_db, 1).padStart(16)} dB | ${f(m.input_vs_clean_above_8k_db, 1).padStart(15)} dB | ${f(m.dnsmos_ovrl_in)} -> ${f(m.dnsmos_ovrl_out)}`,
    );
  }
  console.log('\nClean speech (fullband/, 48 kHz) alone: energy above 9 kHz, output vs input');
  for (const [m, v] of Object.entries(r.clean_above_9k_db)) console.log(`  ${m.padEnd(10)} ${f(v, 1)} dB`);
  for (const p of r.pipeline_clean_above_9k_db) {
    console.log(`  ${p.model} via the file pipeline at ${p.sample_rate} Hz (rate kept): ${f(p.kept_db, 1)} dB; bands ${JSON.stringify(p.bands)}`);
  }
}
