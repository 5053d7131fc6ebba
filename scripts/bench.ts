// Benchmark: speed (RTF with one worker, throughput with the pool), memory (peak RSS on a 30-minute file) and
// quality (DNSMOS on dns3-real / dns3-synthetic, SI-SDR, nsm-2-hd above 8 kHz) of every model chain.
//   npm run bench                      table on stdout
//   npm run bench -- --json [FILE]     also write the figures as JSON (stdout when FILE is omitted)
//   npm run bench -- --skip-quality    speed and memory only
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { loadConfig, PROJECT_ROOT, type Config } from '../src/config';
import { createChain, FullBandChain } from '../src/inference/chains';
import { Decimator3, Interpolator3 } from '../src/inference/dsp';
import { createInferenceEngine } from '../src/inference/engine';
import { HighBandFilter } from '../src/inference/highband';
import { RealFFT } from '../src/inference/fft';
import { denoiseBuffer } from '../src/inference/offline';
import { loadGraphs } from '../src/inference/sessions';
import { AlignedStream, concatAll } from '../src/inference/stream';
import { CHAINS } from '../src/inference/catalog';
import { MODEL_IDS, type InferenceEngine, type ModelId } from '../src/inference/types';
import { decodeAudio, writeWav16 } from './lib/audio-io';
import { db, dnsmos, energy, evalDir, siSdr } from './lib/metrics';

const SPEECH = path.join(PROJECT_ROOT, 'node_modules/@vonage/noise-suppression/data/7729-102255-0000.wav');
const BENCH_SECONDS = 60;

/** 60 s of speech: the LibriSpeech clip, then eval clips (when the kit is there), repeated to length. */
function benchAudio(rate: number): Float32Array {
  const parts = [decodeAudio(SPEECH, rate)[0]];
  const dir = evalDir();
  if (dir) {
    for (const sub of ['dns3-real', 'dns3-synthetic']) {
      for (const f of listNoisy(path.join(dir, sub))) parts.push(decodeAudio(f, rate)[0]);
    }
  }
  const out = new Float32Array(rate * BENCH_SECONDS);
  let pos = 0;
  while (pos < out.length) {
    for (const p of parts) {
      const n = Math.min(p.length, out.length - pos);
      out.set(p.subarray(0, n), pos);
      pos += n;
      if (pos >= out.length) break;
    }
  }
  return out;
}

function listNoisy(dir: string): string[] {
  return fs
    .readdirSync(dir)
    .filter((f) => f.endsWith('.wav') && !/_(GTCRN|RNNoise|clean)\.wav$/.test(f))
    .sort()
    .map((f) => path.join(dir, f));
}

async function runThroughEngine(engine: InferenceEngine, model: ModelId, x: Float32Array, chunk: number): Promise<number> {
  const stream = await engine.openStream({ model, channels: 1, attenuationLimitDb: 0 });
  let outLen = 0;
  for (let pos = 0; pos < x.length; pos += chunk) outLen += (await stream.push([x.slice(pos, pos + chunk)]))[0].length;
  outLen += (await stream.end())[0].length;
  if (outLen !== x.length) throw new Error(`${model}: output length ${outLen} != input ${x.length}`);
  return outLen;
}

/** Timed 1-worker runs per model (after a warm-up); the reported RTF is their median. */
const RTF_RUNS = 3;

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const mid = s.length >> 1;
  return s.length % 2 ? s[mid] : 0.5 * (s[mid - 1] + s[mid]);
}

interface SpeedRow {
  model: ModelId;
  /** Median of rtf_1_worker_runs. */
  rtf_1_worker: number;
  rtf_1_worker_runs: number[];
  throughput_x_realtime: number;
  workers: number;
}

async function speed(config: Config): Promise<SpeedRow[]> {
  const audio: Record<number, Float32Array> = { 16000: benchAudio(16000), 48000: benchAudio(48000) };
  const one = await createInferenceEngine({ ...config, workers: 1 });
  const pool = await createInferenceEngine(config);
  const rows: SpeedRow[] = [];
  try {
    for (const model of MODEL_IDS) {
      const rate = CHAINS[model].sample_rate;
      const x = audio[rate];
      await runThroughEngine(one, model, x.subarray(0, rate * 3), rate); // warm-up
      // One timed run is noisy (other processes, GC, JIT tiering): report the median of RTF_RUNS.
      const rtfs: number[] = [];
      for (let r = 0; r < RTF_RUNS; r++) {
        const t0 = process.hrtime.bigint();
        await runThroughEngine(one, model, x, rate);
        rtfs.push(Number(process.hrtime.bigint() - t0) / 1e9 / BENCH_SECONDS);
      }
      const rtf = median(rtfs);
      const n = pool.state().size;
      const t1 = process.hrtime.bigint();
      await Promise.all(Array.from({ length: n }, () => runThroughEngine(pool, model, x, rate)));
      const wall = Number(process.hrtime.bigint() - t1) / 1e9;
      rows.push({ model, rtf_1_worker: rtf, rtf_1_worker_runs: rtfs, throughput_x_realtime: (n * BENCH_SECONDS) / wall, workers: n });
    }
  } finally {
    await one.close();
    await pool.close();
  }
  return rows;
}

/** Peak RSS of a child that denoises a file of `minutes` (the full file pipeline when it exists). */
function peakRss(minutes: number, model: ModelId): { minutes: number; model: ModelId; path: string; peak_rss_mb: number; seconds: number } {
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'nsm-bench-'));
  try {
    const input = path.join(tmp, `long-${minutes}min.wav`);
    const minute = benchAudio(16000);
    // Written in pieces: the parent never holds the long file either.
    writeWav16(input, 16000, minutes * minute.length, (i) => minute[i % minute.length]);
    const r = spawnSync(process.execPath, [__filename, '--rss-child', input, path.join(tmp, 'out.wav'), model], {
      encoding: 'utf8',
      maxBuffer: 1 << 24,
    });
    if (r.status !== 0) throw new Error(`RSS child failed: ${r.stderr || r.stdout}`);
    const res = JSON.parse(r.stdout.trim().split('\n').pop()!);
    return { minutes, model, ...res };
  } finally {
    fs.rmSync(tmp, { recursive: true, force: true });
  }
}

async function rssChild(input: string, output: string, model: ModelId): Promise<void> {
  const config = { ...loadConfig(), workers: 1 };
  const engine = await createInferenceEngine(config);
  const t0 = process.hrtime.bigint();
  let via = 'engine';
  const pipelineJs = path.join(__dirname, '..', 'src', 'audio', 'pipeline.js');
  if (fs.existsSync(pipelineJs)) {
    // eslint-disable-next-line @typescript-eslint/no-var-requires
    const { denoiseFile } = require(pipelineJs) as typeof import('../src/audio/pipeline');
    await denoiseFile({ config, engine }, input, output, {
      model,
      attenuationLimitDb: 0,
      outputFormat: 'wav',
      keepInputSampleRate: true,
    });
    via = 'src/audio/pipeline.ts denoiseFile (ffmpeg decode -> engine -> ffmpeg encode)';
  } else {
    // No pipeline yet: stream the decoded file through the engine in 1 s chunks.
    const x = decodeAudio(input, 16000)[0];
    await runThroughEngine(engine, model, x, 16000);
  }
  const seconds = Number(process.hrtime.bigint() - t0) / 1e9;
  await engine.close();
  console.log(JSON.stringify({ path: via, peak_rss_mb: Math.round(process.resourceUsage().maxRSS / 1024), seconds }));
}

interface QualityRow {
  model: ModelId | 'unprocessed';
  real: { SIG: number; BAK: number; OVRL: number };
  synthetic: { SIG: number; BAK: number; OVRL: number };
  si_sdr_db: number;
}

async function quality(config: Config, dir: string): Promise<QualityRow[]> {
  const graphs = await loadGraphs(config.modelsDir);
  const real = listNoisy(path.join(dir, 'dns3-real')).map((f) => decodeAudio(f, 16000)[0]);
  const synFiles = listNoisy(path.join(dir, 'dns3-synthetic'));
  const syn = synFiles.map((f) => decodeAudio(f, 16000)[0]);
  const clean = synFiles.map((f) => decodeAudio(f.replace(/_noisy\.wav$/, '_clean.wav'), 16000)[0]);
  const rows: QualityRow[] = [];
  for (const model of ['unprocessed', 'nsm-1', 'nsm-2', 'nsm-3', 'nsm-4'] as const) {
    const run = async (x: Float32Array) => (model === 'unprocessed' ? x : (await denoiseBuffer(graphs, model, [x]))[0]);
    const mean = async (xs: Float32Array[]) => {
      const acc = { SIG: 0, BAK: 0, OVRL: 0 };
      const outs: Float32Array[] = [];
      for (const x of xs) {
        const y = await run(x);
        outs.push(y);
        const s = await dnsmos(y);
        acc.SIG += s.SIG / xs.length;
        acc.BAK += s.BAK / xs.length;
        acc.OVRL += s.OVRL / xs.length;
      }
      return { scores: acc, outs };
    };
    const r = await mean(real);
    const s = await mean(syn);
    const sisdr = s.outs.reduce((acc, y, i) => acc + siSdr(y, clean[i]), 0) / syn.length;
    rows.push({ model, real: r.scores, synthetic: s.scores, si_sdr_db: sisdr });
  }
  return rows;
}

interface HdRow {
  snr_db: number;
  noise_reduction_above_8k_db: number;
  speech_kept_above_8k_db: number;
  output_vs_clean_above_8k_db: number;
  input_vs_clean_above_8k_db: number;
  dnsmos_ovrl_in: number;
  dnsmos_ovrl_out: number;
}

/** Energy above 8 kHz of a 48 kHz signal (Hann STFT, 2048 points, hop 512). */
function energyAbove8k(x: Float32Array): number {
  const n = 2048;
  const fft = new RealFFT(n);
  const re = new Float64Array(fft.bins);
  const im = new Float64Array(fft.bins);
  const frame = new Float64Array(n);
  const k0 = Math.ceil((8000 * n) / 48000);
  let e = 0;
  for (let off = 0; off + n <= x.length; off += n / 4) {
    for (let i = 0; i < n; i++) frame[i] = x[off + i] * (0.5 - 0.5 * Math.cos((2 * Math.PI * i) / n));
    fft.forward(frame, 0, re, im, 0);
    for (let k = k0; k < fft.bins; k++) e += re[k] * re[k] + im[k] * im[k];
  }
  return e;
}

/** The crossover's high band of a signal, aligned with it: x - up(down(x)). */
function highBand(x: Float32Array): Float32Array {
  const padded = new Float32Array(x.length + 480);
  padded.set(x);
  const lp = new Interpolator3().process(new Decimator3().process(padded));
  const hp = new Float32Array(x.length);
  for (let i = 0; i < x.length; i++) hp[i] = x[i] - lp[i + 240];
  return hp;
}

async function fullBand(config: Config, dir: string): Promise<HdRow[]> {
  const graphs = await loadGraphs(config.modelsDir);
  const fb = path.join(dir, 'fullband');
  const clean = decodeAudio(path.join(fb, 'clean_freesound_33711.wav'), 48000)[0];
  const noiseAll = decodeAudio(path.join(fb, 'noise_freesound_573577.wav'), 48000)[0];
  const noise = new Float32Array(clean.length).map((_, i) => noiseAll[i % noiseAll.length]);
  const rows: HdRow[] = [];
  for (const snr of [0, 5, 10]) {
    const scale = Math.sqrt(energy(clean) / energy(noise) / Math.pow(10, snr / 10));
    const n = noise.map((v) => v * scale);
    const mix = clean.map((v, i) => v + n[i]);
    const chain = createChain('nsm-2-hd', 1, graphs) as FullBandChain;
    const frames = chain.recordHighBandFrames()[0];
    const stream = new AlignedStream(chain, 0);
    const parts = [(await stream.push([mix]))[0], (await stream.end())[0]];
    const out = concatAll(parts);
    // Frozen gains: the per-bin gains the chain applied to the noisy mix's high band, replayed on the clean-only and
    // noise-only high bands (delayed like the chain delays its high band, then aligned like its output).
    const ch = highBand(clean);
    const nh = highBand(n);
    const bandLatency = chain.latency - chain.highBandLatency;
    const gained = (s: Float32Array) => {
      const filter = new HighBandFilter({ replay: frames });
      const input = new Float32Array(bandLatency + s.length + filter.latency);
      input.set(s, bandLatency);
      return filter.process(input, new Float32Array(input.length)).subarray(chain.latency, chain.latency + s.length);
    };
    // 48 -> 16 kHz for DNSMOS: the decimator delays by 40 samples at 16 kHz.
    const to16 = (x: Float32Array) => {
      const d = new Decimator3().process(concatAll([x, new Float32Array(240)]));
      return d.subarray(40, 40 + Math.floor(x.length / 3));
    };
    rows.push({
      snr_db: snr,
      noise_reduction_above_8k_db: -db(energy(gained(nh)) / energy(nh)),
      speech_kept_above_8k_db: db(energy(gained(ch)) / energy(ch)),
      output_vs_clean_above_8k_db: db(energyAbove8k(out) / energyAbove8k(clean)),
      input_vs_clean_above_8k_db: db(energyAbove8k(mix) / energyAbove8k(clean)),
      dnsmos_ovrl_in: (await dnsmos(to16(mix))).OVRL,
      dnsmos_ovrl_out: (await dnsmos(to16(out))).OVRL,
    });
  }
  return rows;
}

const f = (v: number, d = 3) => v.toFixed(d);

async function main(): Promise<void> {
  const args = process.argv.slice(2);
  if (args[0] === '--rss-child') return rssChild(args[1], args[2], args[3] as ModelId);
  const jsonIdx = args.indexOf('--json');
  const jsonFile = jsonIdx >= 0 && args[jsonIdx + 1] && !args[jsonIdx + 1].startsWith('--') ? args[jsonIdx + 1] : null;
  const config = loadConfig();
  const report: Record<string, unknown> = {
    machine: { cpus: os.cpus().length, cpu: os.cpus()[0]?.model, loadavg_at_start: os.loadavg(), node: process.version },
  };
  const dir = evalDir();
  if (args.includes('--hd-only') && dir) {
    console.log(JSON.stringify(await fullBand(config, dir)));
    return;
  }
  if (!dir) console.log('NOTE: ../shared/eval is missing: the 60 s bench clip is the LibriSpeech utterance repeated, and quality figures are skipped.');

  console.log(
    `Speed: 60 s of speech per model in 1 s chunks; RTF = processing s / audio s with 1 worker, median of ${RTF_RUNS} timed runs after a warm-up; throughput with ${config.workers} workers, one stream each.`,
  );
  const sp = await speed(config);
  report.speed = sp;
  console.log(`model      RTF(1 worker, median)  runs                     throughput (x real time, all workers)`);
  for (const r of sp) {
    const runs = r.rtf_1_worker_runs.map((v) => f(v, 4)).join(' ');
    console.log(`${r.model.padEnd(10)} ${f(r.rtf_1_worker, 4).padStart(21)}  ${runs.padEnd(23)}  ${f(r.throughput_x_realtime, 1).padStart(8)} (${r.workers} workers)`);
  }

  console.log('\nMemory: peak RSS of one process denoising a long 16 kHz file with nsm-2 (1 worker).');
  const mem = [peakRss(1, 'nsm-2'), peakRss(30, 'nsm-2')];
  report.memory = mem;
  for (const m of mem) console.log(`${String(m.minutes).padStart(3)} min: peak RSS ${m.peak_rss_mb} MB, ${f(m.seconds, 1)} s, via ${m.path}`);

  if (dir && !args.includes('--skip-quality')) {
    console.log('\nQuality: DNSMOS P.835 means (SIG/BAK/OVRL) on dns3-real and dns3-synthetic; SI-SDR on dns3-synthetic.');
    const q = await quality(config, dir);
    report.quality = q;
    console.log('model         real SIG  BAK   OVRL | synth SIG  BAK   OVRL | SI-SDR dB');
    for (const r of q) {
      console.log(
        `${r.model.padEnd(12)} ${f(r.real.SIG)} ${f(r.real.BAK)} ${f(r.real.OVRL)} |     ${f(r.synthetic.SIG)} ${f(r.synthetic.BAK)} ${f(r.synthetic.OVRL)} | ${f(r.si_sdr_db, 2)}`,
      );
    }
    console.log('\nnsm-2-hd on fullband/ (clean + noise mixed here at each SNR, 48 kHz):');
    const hd = await fullBand(config, dir);
    report.nsm2hd_fullband = hd;
    console.log('SNR dB | noise reduction >8k | speech kept >8k | output vs clean >8k | input vs clean >8k | DNSMOS OVRL in -> out');
    for (const r of hd) {
      console.log(
        `${String(r.snr_db).padStart(6)} | ${f(r.noise_reduction_above_8k_db, 1).padStart(16)} dB | ${f(r.speech_kept_above_8k_db, 1).padStart(12)} dB | ${f(r.output_vs_clean_above_8k_db, 1).padStart(16)} dB | ${f(r.input_vs_clean_above_8k_db, 1).padStart(15)} dB | ${f(r.dnsmos_ovrl_in)} -> ${f(r.dnsmos_ovrl_out)}`,
      );
    }
  } else if (!dir) {
    report.quality = 'skipped: ../shared/eval is missing';
  }

  if (jsonIdx >= 0) {
    const text = JSON.stringify(report, null, 2);
    if (jsonFile) fs.writeFileSync(jsonFile, text + '\n');
    else console.log(text);
  }
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
