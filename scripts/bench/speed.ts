// Speed part of `npm run bench`: what each model costs on one core and what the pool delivers.
//   engine       RTF with ONE worker on 60 s of speech in 1 s chunks (median of 3 timed runs after a warm-up), and
//                throughput with all workers (one stream each);
//   whole CLI    `nsm denoise` on a 10-minute 48 kHz file from process start to exit, pinned to one core (taskset),
//                wall-clock RTF and CPU seconds (process + ffmpeg children), next to ffmpeg afftdn and RNNoise
//                (baselines.ts) on the same file;
//   memory       peak RSS of a child process denoising a 1- and a 30-minute file through the file pipeline.
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { loadConfig, PROJECT_ROOT, type Config } from '../../src/config';
import { createInferenceEngine } from '../../src/inference/runtime/engine';
import { MODELS } from '../../src/inference/models/specs';
import { MODEL_IDS, type InferenceEngine, type ModelId } from '../../src/inference/types';
import { decodeAudio, writeWav16 } from '../lib/audio-io';
import { evalDir } from '../lib/metrics';
import { timeAfftdn, timeProcess, timeRnnoise, type ProcessTiming } from './baselines';

const SPEECH = path.join(PROJECT_ROOT, 'node_modules/@vonage/noise-suppression/data/7729-102255-0000.wav');
const BENCH_SECONDS = 60;

export /** 60 s of speech: the LibriSpeech clip, then eval clips (when the kit is there), repeated to length. */
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

export function listNoisy(dir: string): string[] {
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

export interface SpeedRow {
  model: ModelId;
  /** Median of rtf_1_worker_runs. */
  rtf_1_worker: number;
  rtf_1_worker_runs: number[];
  throughput_x_realtime: number;
  workers: number;
}

export async function speed(config: Config): Promise<SpeedRow[]> {
  const audio: Record<number, Float32Array> = { 16000: benchAudio(16000), 48000: benchAudio(48000) };
  const one = await createInferenceEngine({ ...config, workers: 1 });
  const pool = await createInferenceEngine(config);
  const rows: SpeedRow[] = [];
  try {
    for (const model of MODEL_IDS) {
      const rate = MODELS[model].sampleRate;
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
export function peakRss(minutes: number, model: ModelId): { minutes: number; model: ModelId; path: string; peak_rss_mb: number; seconds: number } {
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

export async function rssChild(input: string, output: string, model: ModelId): Promise<void> {
  const config = { ...loadConfig(), workers: 1 };
  const engine = await createInferenceEngine(config);
  const t0 = process.hrtime.bigint();
  let via = 'engine';
  const pipelineJs = path.join(__dirname, '..', '..', 'src', 'pipeline', 'index.js');
  if (fs.existsSync(pipelineJs)) {
    // eslint-disable-next-line @typescript-eslint/no-var-requires
    const { denoiseFile } = require(pipelineJs) as typeof import('../../src/pipeline');
    await denoiseFile({ config, engine }, input, output, {
      model,
      attenuationLimitDb: 0,
      outputFormat: 'wav',
      keepInputSampleRate: true,
    });
    via = 'src/pipeline/index.ts denoiseFile (16 kHz WAV in and out: read and written in-process)';
  } else {
    // No pipeline yet: stream the decoded file through the engine in 1 s chunks.
    const x = decodeAudio(input, 16000)[0];
    await runThroughEngine(engine, model, x, 16000);
  }
  const seconds = Number(process.hrtime.bigint() - t0) / 1e9;
  await engine.close();
  // VmHWM, this process's own high-water mark (getrusage's maxRSS keeps the forking parent's RSS across execve).
  const hwmKb = Number(/VmHWM:\s+(\d+)/.exec(fs.readFileSync('/proc/self/status', 'utf8'))?.[1]);
  console.log(JSON.stringify({ path: via, peak_rss_mb: Math.round(hwmKb / 1024), seconds }));
}


export interface CliRow {
  tool: string;
  audio_s: number;
  /** Wall-clock seconds per audio second, the whole process pinned to one core. */
  rtf_wall: number;
  /** CPU seconds (user + system, with children) per audio second. */
  rtf_cpu: number;
}

/** A 10-minute 48 kHz mono 16-bit WAV of noisy speech (fullband/noisy_snr0.wav looped, else LibriSpeech + noise). */
export function longFile48(dir: string, minutes = 10, rate = 48000): string {
  const file = path.join(dir, `noisy-${minutes}min-${rate / 1000}k.wav`);
  const kit = evalDir();
  const src = kit && fs.existsSync(path.join(kit, 'fullband', 'noisy_snr0.wav'))
    ? decodeAudio(path.join(kit, 'fullband', 'noisy_snr0.wav'), rate)[0]
    : decodeAudio(SPEECH, rate)[0].map((v, i) => v + 0.02 * Math.sin(i * 0.37) * Math.sin(i * 0.0011));
  writeWav16(file, rate, minutes * 60 * rate, (i) => src[i % src.length]);
  return file;
}

const rowOf = (tool: string, t: ProcessTiming, audioS: number): CliRow => ({ tool, audio_s: audioS, rtf_wall: t.wall_s / audioS, rtf_cpu: t.cpu_s / audioS });

/**
 * `nsm denoise` for each model on the 10-minute 48 kHz file (output at the input's rate, WAV: full band for every
 * model), then ffmpeg afftdn and RNNoise on the same file, then the 16 kHz chains alone on the same audio at 16 kHz;
 * each a whole process pinned to core 0. The median of `runs` runs per tool.
 */
export function wholeCli(config: Config, models: readonly ModelId[], runs = 1, log: (l: string) => void = console.log): CliRow[] {
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'nsm-cli-bench-'));
  try {
    const input = longFile48(tmp);
    const audioS = 600;
    const out = path.join(tmp, 'out.wav');
    const cli = path.join(PROJECT_ROOT, 'bin', 'nsm.js');
    const med = (f: () => ProcessTiming): ProcessTiming => {
      const ts = Array.from({ length: runs }, f);
      return { wall_s: median(ts.map((t) => t.wall_s)), cpu_s: median(ts.map((t) => t.cpu_s)) };
    };
    const rows: CliRow[] = [];
    const push = (r: CliRow): void => {
      rows.push(r);
      log(formatCliRow(r));
    };
    for (const m of models) {
      push(rowOf(`nsm ${m}`, med(() => timeProcess(process.execPath, [cli, 'denoise', input, '-o', out, '-m', m, '-q', '--force'], { oneCore: true })), audioS));
    }
    push(rowOf('ffmpeg afftdn', med(() => timeAfftdn(config.ffmpegPath, input, out, true)), audioS));
    push(rowOf('RNNoise (wasm)', med(() => timeRnnoise(input, out, true)), audioS));
    const input16 = longFile48(tmp, 10, 16000);
    for (const m of models.filter((x) => x !== 'nsm-2-hd')) {
      push(rowOf(`nsm ${m} @16k`, med(() => timeProcess(process.execPath, [cli, 'denoise', input16, '-o', out, '-m', m, '-q', '--force'], { oneCore: true })), audioS));
    }
    return rows;
  } finally {
    fs.rmSync(tmp, { recursive: true, force: true });
  }
}

export const CLI_HEADER = 'tool               RTF wall (1 core)  RTF CPU  (10 min of 48 kHz mono, whole process; @16k: the same at 16 kHz)';
export function formatCliRow(r: CliRow): string {
  return `${r.tool.padEnd(18)} ${r.rtf_wall.toFixed(4).padStart(17)}  ${r.rtf_cpu.toFixed(4).padStart(7)}`;
}

if (require.main === module && process.argv[2] === '--rss-child') {
  rssChild(process.argv[3], process.argv[4], process.argv[5] as ModelId).catch((err) => {
    console.error(err);
    process.exit(1);
  });
}
