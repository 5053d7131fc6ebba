// Fast regression check of what the quality benchmark measures at length (npm run bench -- --quality): the model
// ladder nsm-1 < nsm-2 < nsm-3 < nsm-4 in DNSMOS OVRL on a few development clips, and full band through the file
// pipeline (48 and 44.1 kHz clean speech keeps its band above 9 kHz with the default model). Real ONNX graphs, the
// real DNSMOS model, real ffmpeg. It needs the evaluation kit ../shared/eval and says so when it is missing.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { loadConfig } from '../../src/config';
import { denoiseFile } from '../../src/pipeline';
import { createInferenceEngine } from '../../src/inference/runtime/engine';
import { denoiseBuffer } from '../../src/inference/models/offline';
import { loadGraphs } from '../../src/inference/runtime/sessions';
import type { DtlnGraphs } from '../../src/inference/models/dtln';
import type { InferenceEngine, ModelId } from '../../src/inference/types';
import { asInt16, decodeAudio, writeWavFloat } from '../../scripts/lib/audio-io';
import { energyAbove } from '../../scripts/bench/fullband';
import { listClips } from '../../scripts/lib/eval-kit';
import { dnsmosP835, evalDir } from '../../scripts/lib/metrics';

const config = loadConfig();
const kit = evalDir();
const withKit = kit ? describe : describe.skip;
if (!kit) console.warn('../shared/eval is missing: the model-ladder and full-band regression checks are skipped');

const LADDER: ModelId[] = ['nsm-1', 'nsm-2', 'nsm-3', 'nsm-4'];
/**
 * Development clips: the 17 real recordings of the benchmark's tune half, first 9.5 s of each (one DNSMOS window).
 * Five clips were too few: on the dns3-real ones alone nsm-4 scores below nsm-3 (one water-noise clip decides it),
 * while over the tune half and the held-out half it wins 76 % and 100 % of the clips.
 */
const CLIP_SECONDS = 9.5;
// Measured on these excerpts as dithered 16-bit output, as the API delivers it (2026-11-23): steps +0.109, +0.073,
// +0.089 (+0.119, +0.038, +0.068 before the output dither). The expected steps are about half the measured ones, so
// a chain that stops improving on the one below it fails.
const MIN_STEP: Record<string, number> = { 'nsm-2': 0.055, 'nsm-3': 0.035, 'nsm-4': 0.045 };

withKit('model ladder on development clips (DNSMOS P.835)', () => {
  let graphs: DtlnGraphs;
  const ovrl: Record<string, number[]> = {};

  beforeAll(async () => {
    graphs = await loadGraphs(config.modelsDir);
    const clips = listClips(kit!).real.filter((c) => c.split === 'tune');
    expect(clips.length).toBe(17);
    // Every output first, then every score: DNSMOS run between the chains took 0.33 s a clip against 0.21 s run back
    // to back (its weights stay in the caches), 23 → 14.5 s for the 68 (2026-12-02, plain Node, same scores).
    const outputs: Array<{ m: ModelId; y: Float32Array }> = [];
    for (const c of clips) {
      const x = decodeAudio(c.noisy, 16000)[0].slice(0, CLIP_SECONDS * 16000);
      for (const m of LADDER) {
        const [y] = await denoiseBuffer(graphs, m, [x.slice()]);
        outputs.push({ m, y: asInt16(y) });
      }
    }
    for (const { m, y } of outputs) (ovrl[m] ??= []).push((await dnsmosP835(y, { selfCheck: false })).OVRL);
  }, 300_000);

  const mean = (v: number[]) => v.reduce((a, b) => a + b, 0) / v.length;

  it.each([
    ['nsm-1', 'nsm-2', MIN_STEP['nsm-2']],
    ['nsm-2', 'nsm-3', MIN_STEP['nsm-3']],
    ['nsm-3', 'nsm-4', MIN_STEP['nsm-4']],
  ] as [ModelId, ModelId, number][])('%s < %s by at least the expected step', (lo, hi, step) => {
    const d = mean(ovrl[hi]) - mean(ovrl[lo]);
    if (d < step) console.log(`OVRL ${lo} ${mean(ovrl[lo]).toFixed(3)}, ${hi} ${mean(ovrl[hi]).toFixed(3)}: step ${d.toFixed(3)}`);
    expect(d).toBeGreaterThan(step);
  });
});

withKit('full band through the file pipeline (default model)', () => {
  let engine: InferenceEngine;
  let tmp: string;
  beforeAll(async () => {
    engine = await createInferenceEngine({ ...config, workers: 1 });
    tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'nsm-fullband-'));
  });
  afterAll(async () => {
    await engine?.close();
    fs.rmSync(tmp, { recursive: true, force: true });
  });

  it.each([48000, 44100])('clean speech at %i Hz keeps its energy above 9 kHz within 6 dB, and the stats say so', async (rate) => {
    const clean = decodeAudio(path.join(kit!, 'fullband', 'clean_freesound_33711.wav'), rate)[0].slice(0, 6 * rate);
    const input = path.join(tmp, `clean-${rate}.wav`);
    const output = path.join(tmp, `out-${rate}.wav`);
    writeWavFloat(input, [clean], rate);
    const stats = await denoiseFile({ config, engine }, input, output, {
      model: 'nsm-2',
      attenuationLimitDb: 0,
      outputFormat: 'wav',
      keepInputSampleRate: true,
    });
    // Both compared at 48 kHz (ffmpeg resamples the 44.1 kHz files the same way).
    const a = decodeAudio(input, 48000)[0];
    const b = decodeAudio(output, 48000)[0];
    const keptDb = 10 * Math.log10(energyAbove(b, 9000) / energyAbove(a, 9000));
    expect(keptDb).toBeGreaterThan(-6);
    expect(stats.output_sample_rate).toBe(rate);
    expect(stats.processing_sample_rate).toBe(48000);
    expect(stats.bands).toEqual([
      { from_hz: 0, to_hz: 8000, processing: 'denoised_16k' },
      { from_hz: 8000, to_hz: rate / 2, processing: 'guided_high_band' },
    ]);
  });

  it('at the model rate (keep_input_sample_rate false) a 16 kHz model returns 16 kHz audio, no high band', async () => {
    const clean = decodeAudio(path.join(kit!, 'fullband', 'clean_freesound_33711.wav'), 48000)[0].slice(0, 3 * 48000);
    const input = path.join(tmp, 'clean-model-rate.wav');
    writeWavFloat(input, [clean], 48000);
    const stats = await denoiseFile({ config, engine }, input, path.join(tmp, 'model-rate.wav'), {
      model: 'nsm-2',
      attenuationLimitDb: 0,
      outputFormat: 'wav',
      keepInputSampleRate: false,
    });
    expect([stats.output_sample_rate, stats.processing_sample_rate, stats.model_sample_rate]).toEqual([16000, 16000, 16000]);
    expect(stats.bands).toEqual([{ from_hz: 0, to_hz: 8000, processing: 'denoised_16k' }]);
  });
});
