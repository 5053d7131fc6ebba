// Benchmark: speed (scripts/bench/speed.ts: engine RTF with one worker, throughput with the pool, whole-CLI RTF on a
// 10-minute 48 kHz file next to ffmpeg afftdn and RNNoise, peak RSS), server load (scripts/bench/load.ts: requests/s,
// latency and CPU split through HTTP), and quality (scripts/bench/quality.ts: DNSMOS with bootstrap CIs on the 29 real
// clips and 15 pairs, paired ladder steps, peers, SI-SDR, full band of every model) of every model chain.
//   npm run bench                      table on stdout
//   npm run bench -- --json [FILE]     also write the figures as JSON (stdout when FILE is omitted)
//   npm run bench -- --skip-quality    speed and memory only
//   npm run bench -- --quality [...]   quality only (its options: scripts/bench/quality.ts)
//   npm run bench -- --skip-cli        no whole-CLI / afftdn / RNNoise rows (they take a few minutes)
//   npm run bench -- --load            also the server load table (WORKERS=1 and N, concurrency 1/2/4/8) and 1 → N paired
//   npm run bench -- --load-only       only the server load table
//   npm run bench -- --echo            only the echo canceller's table (scripts/bench/echo.ts): ERLE, double talk, path
//                                      change, silent reference, AECMOS, CPU beside speexdsp, WebRTC and nsm-2
//   npm run bench -- --stream          only the live-stream table (scripts/bench/stream.ts): server-added latency,
//                                      underruns and CPU per stream at 25..300 streams, RNNoise side by side;
//                                      --stream-models, --stream-levels, --stream-seconds, --with-files,
//                                      --stream-encoding pcm_s16le,mulaw (side by side), --stream-rate, --stream-rounds
//   npm run bench -- --vad             only voice activity (scripts/bench/vad.ts): F1 against clean references, cost
//                                      (--vad-quality-only, --vad-cost-only)
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { loadConfig, PROJECT_ROOT, type Config } from '../src/config';
import type { LiveEncoding } from '../src/inference/types';
import { decodeAudio, writeWav16 } from './lib/audio-io';
import { evalDir } from './lib/metrics';
import { LOAD_HEADER, runLoad, runScaling } from './bench/load';
import { runStreamBench } from './bench/stream';
import { runQuality } from './bench/quality';
import { runVadBench } from './bench/vad';
import { runEchoBench } from './bench/echo';
import { CLI_HEADER, listNoisy, peakRss, speed, wholeCli } from './bench/speed';

const f = (v: number, d = 3) => v.toFixed(d);

async function main(): Promise<void> {
  const args = process.argv.slice(2);
  const jsonIdx = args.indexOf('--json');
  const jsonFile = jsonIdx >= 0 && args[jsonIdx + 1] && !args[jsonIdx + 1].startsWith('--') ? args[jsonIdx + 1] : null;
  const config = loadConfig();
  const report: Record<string, unknown> = {
    machine: { cpus: os.cpus().length, cpu: os.cpus()[0]?.model, loadavg_at_start: os.loadavg(), node: process.version },
  };
  const dir = evalDir();
  const writeJson = (): void => {
    if (jsonIdx < 0) return;
    const text = JSON.stringify(report, null, 2);
    if (jsonFile) fs.writeFileSync(jsonFile, text + '\n');
    else console.log(text);
  };
  if (args.includes('--echo')) {
    // The echo canceller beside speexdsp and WebRTC (scripts/bench/echo.ts); its options: --echo-quick, ...
    report.echo = await runEchoBench(args);
    writeJson();
    return;
  }
  if (args.includes('--quality')) {
    report.quality = await runQuality(args);
    writeJson();
    return;
  }
  if (args.includes('--vad')) {
    report.vad = await runVadBench();
    writeJson();
    return;
  }
  if (args.includes('--stream')) {
    // Live streams only (scripts/bench/stream.ts). --stream-models a,b  --stream-levels 50,100,150  --with-files
    const opt = (name: string, dflt: string): string => {
      const i = args.indexOf(name);
      return i >= 0 && args[i + 1] ? args[i + 1] : dflt;
    };
    const speech = dir ? path.join(dir, 'dns3-real', 'ms_realrec_english_headset_A1XUZFDVKP95VC_Water_Running__far_fileid_7.wav') : path.join(PROJECT_ROOT, 'fixtures', 'speech-noisy-16k-mono.wav');
    report.stream = await runStreamBench({
      models: opt('--stream-models', 'nsm-1,nsm-2,nsm-3,nsm-4').split(','),
      levels: opt('--stream-levels', '25,50,100,150,200,300').split(',').map(Number),
      seconds: Number(opt('--stream-seconds', '10')),
      withFiles: args.includes('--with-files'),
      workers: config.workers,
      ffmpeg: config.ffmpegPath,
      speechFile: speech,
      encodings: opt('--stream-encoding', 'pcm_s16le').split(',') as LiveEncoding[],
      rate: Number(opt('--stream-rate', '16000')),
      rounds: Number(opt('--stream-rounds', '1')),
      log: (line) => console.log(line),
    });
    writeJson();
    return;
  }
  if (args.includes('--load-only')) {
    report.load = await loadTable(config);
    writeJson();
    return;
  }
  if (!dir) console.log('NOTE: ../shared/eval is missing: the 60 s bench clip is the LibriSpeech utterance repeated, and quality figures are skipped.');

  console.log(
    `Speed: 60 s of speech per model in 1 s chunks; RTF = processing s / audio s with 1 worker, median of 3 timed runs after a warm-up; throughput with ${config.workers} workers, one stream each.`,
  );
  const sp = await speed(config);
  report.speed = sp;
  console.log(`model      RTF(1 worker, median)  runs                     throughput (x real time, all workers)`);
  for (const r of sp) {
    const runs = r.rtf_1_worker_runs.map((v) => f(v, 4)).join(' ');
    console.log(`${r.model.padEnd(10)} ${f(r.rtf_1_worker, 4).padStart(21)}  ${runs.padEnd(23)}  ${f(r.throughput_x_realtime, 1).padStart(8)} (${r.workers} workers)`);
  }

  if (!args.includes('--skip-cli')) {
    console.log('\nWhole CLI on one core: `nsm denoise` (output at the input rate, WAV) vs ffmpeg afftdn and RNNoise on the same file.');
    console.log(CLI_HEADER);
    report.whole_cli = wholeCli(config, ['nsm-1', 'nsm-2', 'nsm-3', 'nsm-4', 'nsm-2-hd']);
  }

  console.log('\nMemory: peak RSS of one process denoising a long 16 kHz file with nsm-2 (1 worker).');
  const mem = [peakRss(1, 'nsm-2'), peakRss(30, 'nsm-2')];
  report.memory = mem;
  for (const m of mem) console.log(`${String(m.minutes).padStart(3)} min: peak RSS ${m.peak_rss_mb} MB, ${f(m.seconds, 1)} s, via ${m.path}`);

  if (!args.includes('--skip-quality')) report.quality = dir ? await runQuality(args) : 'skipped: ../shared/eval is missing';

  if (args.includes('--load')) report.load = await loadTable(config);
  writeJson();
}

/** The server load table (a 10 s 16 kHz mono WAV clip of speech with nsm-2, WORKERS=1 and WORKERS=N), then 1 → N side by side. */
async function loadTable(config: Config): Promise<unknown> {
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'nsm-load-clip-'));
  try {
    const clip = path.join(tmp, 'clip-10s-16k.wav');
    const dir = evalDir();
    const src = dir
      ? listNoisy(path.join(dir, 'dns3-real')).map((file) => decodeAudio(file, 16000)[0])
      : [decodeAudio(path.join(PROJECT_ROOT, 'node_modules/@vonage/noise-suppression/data/7729-102255-0000.wav'), 16000)[0]];
    const all = src.flatMap((x) => Array.from(x));
    writeWav16(clip, 16000, 160000, (i) => all[i % all.length]);
    const workers = [...new Set([1, config.workers])];
    console.log(`\nServer load: POST /denoise of a 10 s 16 kHz mono WAV (nsm-2) through a real server on loopback; WORKERS=${workers.join(' and ')}, 10 s per level.`);
    console.log(LOAD_HEADER);
    const rows = await runLoad({
      clipPath: clip,
      clipSeconds: 10,
      fields: { model: 'nsm-2' },
      workers,
      concurrency: [1, 2, 4, 8],
      seconds: 10,
      log: (l) => console.log(l),
    });
    if (workers.length < 2) return { rows, scaling: null };
    const pairs = 6;
    const sliceSeconds = 8;
    console.log(`\n1 → ${config.workers} workers side by side: both servers up, 4 in flight, ${pairs} pairs of alternating ${sliceSeconds} s slices.`);
    const scaling = await runScaling({
      clipPath: clip,
      clipSeconds: 10,
      fields: { model: 'nsm-2' },
      workers: [1, config.workers],
      concurrency: 4,
      pairs,
      sliceSeconds,
      warmSeconds: sliceSeconds,
      log: (l) => console.log(l),
    });
    console.log(
      `1 → ${config.workers} workers: ${scaling.ratio.toFixed(2)}× (95 % CI ${scaling.ratio_ci95[0].toFixed(2)}–${scaling.ratio_ci95[1].toFixed(2)}, ` +
        `pairs ${scaling.pairs.map((p) => p.ratio.toFixed(2)).join(' ')})`,
    );
    return { rows, scaling };
  } finally {
    fs.rmSync(tmp, { recursive: true, force: true });
  }
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
