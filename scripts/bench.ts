// Benchmark: speed (RTF with one worker, throughput with the pool), memory (peak RSS on a 30-minute file) and
// quality (scripts/bench/quality.ts: DNSMOS with CIs on the real clips and pairs, SI-SDR, full band) of every model.
//   npm run bench                      table on stdout
//   npm run bench -- --json [FILE]     also write the figures as JSON (stdout when FILE is omitted)
//   npm run bench -- --skip-quality    speed and memory only
//   npm run bench -- --quality [...]   quality only (options: scripts/bench/quality.ts)
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { loadConfig, PROJECT_ROOT, type Config } from '../src/config';
import { createInferenceEngine } from '../src/inference/engine';
import { CHAINS } from '../src/inference/catalog';
import { MODEL_IDS, type InferenceEngine, type ModelId } from '../src/inference/types';
import { decodeAudio, writeWav16 } from './lib/audio-io';
import { evalDir } from './lib/metrics';
import { runQuality } from './bench/quality';

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

const f = (v: number, d = 3) => v.toFixed(d);

async function main(): Promise<void> {
  const args = process.argv.slice(2);
  if (args[0] === '--rss-child') return rssChild(args[1], args[2], args[3] as ModelId);
  const config = loadConfig();
  const report: Record<string, unknown> = {
    machine: { cpus: os.cpus().length, cpu: os.cpus()[0]?.model, loadavg_at_start: os.loadavg(), node: process.version },
  };
  if (args.includes('--quality')) {
    report.quality = await runQuality(args);
    return writeJson(args, report);
  }
  const dir = evalDir();
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

  if (!args.includes('--skip-quality')) report.quality = await runQuality(args);
  writeJson(args, report);
}

function writeJson(args: string[], report: Record<string, unknown>): void {
  const jsonIdx = args.indexOf('--json');
  const jsonFile = jsonIdx >= 0 && args[jsonIdx + 1] && !args[jsonIdx + 1].startsWith('--') ? args[jsonIdx + 1] : null;
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
