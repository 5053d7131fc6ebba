// Benchmark: speed (scripts/bench/speed.ts: engine RTF with one worker, throughput with the pool, whole-CLI RTF on a
// 10-minute 48 kHz file next to ffmpeg afftdn and RNNoise, peak RSS), server load (scripts/bench/load.ts: requests/s,
// latency and CPU split through HTTP), and quality (DNSMOS on dns3-real / dns3-synthetic, SI-SDR, nsm-2-hd above
// 8 kHz) of every model chain.
//   npm run bench                      table on stdout
//   npm run bench -- --json [FILE]     also write the figures as JSON (stdout when FILE is omitted)
//   npm run bench -- --skip-quality    speed and memory only
//   npm run bench -- --skip-cli        no whole-CLI / afftdn / RNNoise rows (they take a few minutes)
//   npm run bench -- --load            also the server load table (WORKERS=1 and N, concurrency 1/2/4/8)
//   npm run bench -- --load-only       only the server load table
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { loadConfig, PROJECT_ROOT, type Config } from '../src/config';
import { createChain, FullBandChain } from '../src/inference/chains';
import { Decimator3, Interpolator3 } from '../src/inference/dsp';
import { HighBandFilter } from '../src/inference/highband';
import { RealFFT } from '../src/inference/fft';
import { denoiseBuffer } from '../src/inference/offline';
import { loadGraphs } from '../src/inference/sessions';
import { AlignedStream, concatAll } from '../src/inference/stream';
import { type ModelId } from '../src/inference/types';
import { decodeAudio, writeWav16 } from './lib/audio-io';
import { db, dnsmos, energy, evalDir, siSdr } from './lib/metrics';
import { LOAD_HEADER, runLoad } from './bench/load';
import { CLI_HEADER, listNoisy, peakRss, speed, wholeCli } from './bench/speed';

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
  const writeJson = (): void => {
    if (jsonIdx < 0) return;
    const text = JSON.stringify(report, null, 2);
    if (jsonFile) fs.writeFileSync(jsonFile, text + '\n');
    else console.log(text);
  };
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

  if (args.includes('--load')) report.load = await loadTable(config);
  writeJson();
}

/** The server load table: a 10 s 16 kHz mono WAV clip of speech with nsm-2, WORKERS=1 and WORKERS=N. */
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
    return rows;
  } finally {
    fs.rmSync(tmp, { recursive: true, force: true });
  }
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
