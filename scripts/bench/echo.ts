// `npm run bench -- --echo`: the echo canceller (src/dsp/aec) beside speexdsp and WebRTC's audio processing module,
// on scenes of our own (echo-scenes.ts), side by side in one run:
//   ERLE in far-end single talk after 10 s; near-end magnitude-spectrogram SDR in double talk; the echo path change;
//   near-end single talk with a silent reference; AECMOS (../shared/tools/aecmos) per talk type; CPU per audio
//   second of each canceller and of nsm-2's live streams (batched, in this process) in the same run.
// Baselines: small C/C++ programs of ours (aec-baselines/) compiled here with cc/c++ against Debian's
// libspeexdsp-dev and libwebrtc-audio-processing-dev when installed; the table says plainly when one is not.
//   --echo-quick          3 scenes per kind, no AECMOS (for iterating)
//   --echo-scenes N       scenes per kind (default 8)
//   --echo-no-aecmos      skip AECMOS
//   --echo-no-cpu         skip the nsm-2 CPU comparison
//   --echo-spectrograms DIR   write mic / output WAVs and spectrogram PNGs of the first scene of each kind
//   --echo-set KEY=VALUE  canceller option override (repeatable), e.g. --echo-set overEstimate=3
//   --echo-oracle         also the baselines told each scene's true bulk delay (speexdsp with its reference aligned,
//                         WebRTC with the delay reported and delay-agnostic mode off): their best case
//   --echo-kinds K,K      only these kinds of scene (st, dt, path, nst, jump; default all)
//   --echo-dt-from S      double talk from the start: the near end talks from S s (default 4) and its SDR is scored
//                         from there to the end (default 10 s..end), so the filter converges while both talk
//   --echo-chain MODEL    also what POST /denoise returns: the canceller, then MODEL's chain (echo-chain.ts; default
//                         nsm-2); --echo-no-chain skips it
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { PROJECT_ROOT, loadConfig } from '../../src/config';
import { EchoCanceller, AEC_LATENCY, type EchoCancellerOptions } from '../../src/dsp/aec';
import { writeWavFloat } from '../lib/audio-io';
import { settingValue } from '../lib/args';
import { bootstrapMean, pairedDiff, type MeanCi } from '../lib/stats';
import { changesAt, FS, makeScene, type Scene, type SceneKind, type Talkers } from './echo-scenes';
import { echoBurst, erle, magSdr } from './echo-metrics';
import { loadTalkers } from './echo-talkers';
import { measureCpu, type CpuResult } from './echo-cpu';
import { runChain } from './echo-chain';
import { loadGraphs } from '../../src/inference/runtime/sessions';
import { MODEL_IDS, type ModelId } from '../../src/inference/types';

export type SystemId = 'ours' | 'chain' | 'speex' | 'webrtc' | 'speex-d' | 'webrtc-d' | 'mic';

export interface Baseline {
  id: 'speex' | 'webrtc' | 'speex-d' | 'webrtc-d';
  exe: string | null;
  why: string;
}

const BASE_DIR = path.join(PROJECT_ROOT, 'scripts', 'bench', 'aec-baselines');

function pkgConfig(name: string): string[] | null {
  const r = spawnSync('pkg-config', ['--cflags', '--libs', name], { encoding: 'utf8' });
  return r.status === 0 ? r.stdout.trim().split(/\s+/).filter(Boolean) : null;
}

/** Compiles the baseline programs into `dir`; a baseline whose package is missing says so. */
export function buildBaselines(dir: string): Baseline[] {
  const out: Baseline[] = [];
  const speex = pkgConfig('speexdsp');
  if (!speex) out.push({ id: 'speex', exe: null, why: 'libspeexdsp-dev is not installed (apt-get install libspeexdsp-dev)' });
  else {
    const exe = path.join(dir, 'speex-aec');
    const r = spawnSync('cc', ['-O2', '-o', exe, path.join(BASE_DIR, 'speex-aec.c'), ...speex, '-lm'], { encoding: 'utf8' });
    out.push(r.status === 0 ? { id: 'speex', exe, why: '' } : { id: 'speex', exe: null, why: `cc failed: ${r.stderr.slice(-500)}` });
  }
  const webrtc = pkgConfig('webrtc-audio-processing');
  if (!webrtc) out.push({ id: 'webrtc', exe: null, why: 'libwebrtc-audio-processing-dev is not installed (apt-get install libwebrtc-audio-processing-dev)' });
  else {
    const exe = path.join(dir, 'webrtc-aec');
    const r = spawnSync('c++', ['-O2', '-std=c++11', '-o', exe, path.join(BASE_DIR, 'webrtc-aec.cc'), ...webrtc, '-lpthread'], { encoding: 'utf8' });
    out.push(r.status === 0 ? { id: 'webrtc', exe, why: '' } : { id: 'webrtc', exe: null, why: `c++ failed: ${r.stderr.slice(-500)}` });
  }
  // The same programs told the scene's true bulk delay (the --echo-oracle rows).
  for (const b of [...out]) out.push({ ...b, id: `${b.id}-d` as Baseline['id'] });
  return out;
}

function writeRaw(file: string, x: Float32Array): void {
  fs.writeFileSync(file, Buffer.from(x.buffer, x.byteOffset, x.byteLength));
}

function readRaw(file: string): Float32Array {
  const b = fs.readFileSync(file);
  return new Float32Array(b.buffer.slice(b.byteOffset, b.byteOffset + b.byteLength));
}

/** Speex's filter covers the largest bulk delay of the scenes plus 250 ms of echo path (it has no delay estimator). */
const SPEEX_FILTER = Math.round(0.6 * FS);
/** Told the delay: speex's reference is aligned to 20 ms before the echo, and its filter covers 300 ms. */
const SPEEX_ALIGNED_FILTER = Math.round(0.3 * FS);

export function runBaseline(b: Baseline, scene: Scene, tmp: string): { out: Float32Array; cpuS: number } {
  const mic = path.join(tmp, 'mic.f32');
  const ref = path.join(tmp, 'ref.f32');
  const out = path.join(tmp, `out-${b.id}.f32`);
  writeRaw(mic, scene.mic);
  writeRaw(ref, scene.ref);
  const shiftTo = Math.max(0, Math.round(((scene.delayMs - 20) / 1000) * FS));
  const args =
    b.id === 'speex'
      ? [mic, ref, out, String(SPEEX_FILTER)]
      : b.id === 'speex-d'
        ? [mic, ref, out, String(SPEEX_ALIGNED_FILTER), String(shiftTo)]
        : b.id === 'webrtc-d'
          ? [mic, ref, out, '1', String(Math.round(scene.delayMs))]
          : [mic, ref, out];
  const r = spawnSync(b.exe!, args, { encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`${b.id} failed on ${scene.name}: ${r.stderr}`);
  return { out: readRaw(out), cpuS: Number(r.stdout.trim()) };
}

/** Our canceller over the scene in 20 ms chunks (as a live stream sends them); output aligned (latency removed). */
export function runOurs(scene: Scene, opts: Partial<EchoCancellerOptions> = {}): { out: Float32Array; cpuS: number; stats: ReturnType<EchoCanceller['stats']> } {
  const aec = new EchoCanceller({ channels: 1, ...opts });
  const n = scene.mic.length;
  const out = new Float32Array(n + AEC_LATENCY + 320);
  let w = 0;
  const chunk = 320;
  const t0 = process.cpuUsage();
  const feed = (mic: Float32Array, ref: Float32Array): void => {
    const y = aec.process([mic], ref)[0];
    out.set(y, w);
    w += y.length;
  };
  for (let pos = 0; pos < n; pos += chunk) feed(scene.mic.subarray(pos, pos + chunk), scene.ref.subarray(pos, pos + chunk));
  const tail = new Float32Array(AEC_LATENCY + 320);
  feed(tail, tail);
  const u = process.cpuUsage(t0);
  return { out: out.slice(AEC_LATENCY, AEC_LATENCY + n), cpuS: (u.user + u.system) / 1e6, stats: aec.stats() };
}

/** Lag (samples) of y against x, 0..maxLag, by the largest normalised cross-correlation. */
export function findLag(x: Float32Array, y: Float32Array, maxLag: number): number {
  let best = 0;
  let bestV = -Infinity;
  const n = Math.min(x.length, y.length) - maxLag;
  for (let l = 0; l <= maxLag; l++) {
    let s = 0;
    for (let i = 0; i < n; i++) s += x[i] * y[i + l];
    if (s > bestV) {
      bestV = s;
      best = l;
    }
  }
  return best;
}

export function shift(y: Float32Array, lag: number): Float32Array {
  const out = new Float32Array(y.length);
  out.set(y.subarray(lag));
  return out;
}

// jump last: a kind's seeds are 1000 × its place here, and the others' scenes stay what they were.
const KINDS: SceneKind[] = ['st', 'dt', 'path', 'nst', 'jump'];

export function sceneSet(perKind: number, talkers: Talkers, dtFromS?: number, kinds: SceneKind[] = KINDS): Scene[] {
  const scenes: Scene[] = [];
  for (const kind of kinds) {
    for (let i = 0; i < perKind; i++) {
      const nearFromS = kind === 'dt' ? dtFromS : undefined;
      scenes.push(makeScene({ kind, seed: 1000 * (KINDS.indexOf(kind) + 1) + i, ...(nearFromS !== undefined ? { nearFromS } : {}) }, talkers));
    }
  }
  return scenes;
}

interface Row {
  scene: string;
  kind: SceneKind;
  system: SystemId;
  /** st: ERLE 10..20 s; path: ERLE change+2 s..end; dt: near-end SDR 10 s..end (or from the near end's start with
   *  --echo-dt-from); nst: SDR against the microphone. */
  metric: number;
  /** path: ERLE over the 5 s before the change; dt: ERLE-like echo removal is not measurable (null). */
  extra: number | null;
  /** path, jump: ERLE over the first second after the change, and the echo burst (echo-metrics.ts echoBurst), s. */
  first: number | null;
  burst: number | null;
  aecmos: { echo: number; other: number } | null;
}

function aecmos(talk: 'st' | 'dt' | 'nst', scene: Scene, out: Float32Array, tmp: string): { echo: number; other: number } | null {
  const tools = path.resolve(PROJECT_ROOT, '..', 'shared', 'tools', 'aecmos');
  const model = path.join(tools, 'aecmos_v4_16k.onnx');
  if (!fs.existsSync(model)) return null;
  const lpb = path.join(tmp, 'lpb.wav');
  const mic = path.join(tmp, 'mic.wav');
  const enh = path.join(tmp, 'enh.wav');
  writeWavFloat(lpb, [scene.ref], FS);
  writeWavFloat(mic, [scene.mic], FS);
  writeWavFloat(enh, [out], FS);
  const r = spawnSync(process.execPath, [path.join(tools, 'aecmos.mjs'), model, talk, lpb, mic, enh], { cwd: PROJECT_ROOT, encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`AECMOS failed: ${r.stderr.slice(-500)}`);
  const j = JSON.parse(r.stdout.trim().split('\n').pop()!);
  return { echo: j.echo_mos, other: j.other_mos };
}

function score(scene: Scene, out: Float32Array, dtWhole: boolean): { metric: number; extra: number | null; first: number | null; burst: number | null } {
  const n = scene.mic.length;
  const none = { extra: null, first: null, burst: null };
  switch (scene.kind) {
    case 'st':
      return { metric: erle(scene, out, 10 * FS, n), ...none };
    case 'path':
    case 'jump': {
      const c = scene.changeAt!;
      return { metric: erle(scene, out, c + 2 * FS, n), extra: erle(scene, out, c - 5 * FS, c), first: erle(scene, out, c, c + FS), burst: echoBurst(scene, out, c) };
    }
    case 'dt':
      return { metric: magSdr(scene.near, out, dtWhole ? scene.nearFrom! : 10 * FS, n), ...none };
    case 'nst':
      return { metric: magSdr(scene.mic, out, 0, n), ...none };
  }
}

export interface EchoBenchResult {
  date: string;
  scenes: number;
  baselines: Array<{ id: string; available: boolean; why: string }>;
  rows: Row[];
  cpu: Record<string, number>;
  nsm2: CpuResult | null;
  identical_silent_reference: boolean;
}

export async function runEchoBench(args: string[]): Promise<EchoBenchResult> {
  const opt = (name: string): string | null => {
    const i = args.indexOf(name);
    return i >= 0 && args[i + 1] ? args[i + 1] : null;
  };
  const quick = args.includes('--echo-quick');
  const perKind = Number(opt('--echo-scenes') ?? (quick ? 3 : 8));
  const withMos = !quick && !args.includes('--echo-no-aecmos');
  // The same key=value reading as echo-tune's --v and echo-ab's --set (numbers, true / false, else the text).
  const overrides: Record<string, number | boolean | string> = {};
  args.forEach((a, i) => {
    if (a === '--echo-set' && args[i + 1]) {
      const [k, v] = args[i + 1].split('=');
      overrides[k] = settingValue(v ?? '');
    }
  });
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'nsm-echo-'));
  try {
    const baselines = buildBaselines(tmp);
    for (const b of baselines) if (!b.exe && !b.id.endsWith('-d')) console.log(`NOTE: ${b.id} baseline not run: ${b.why}`);
    const talkers = loadTalkers();
    const t0 = Date.now();
    const dtFrom = opt('--echo-dt-from');
    if (dtFrom !== null && !(Number(dtFrom) >= 0 && Number(dtFrom) < 15)) throw new Error('--echo-dt-from: seconds, 0 to 15');
    const kinds = (opt('--echo-kinds') ?? KINDS.join(',')).split(',') as SceneKind[];
    if (kinds.some((k) => !KINDS.includes(k))) throw new Error(`--echo-kinds: some of ${KINDS.join(', ')}`);
    const scenes = sceneSet(perKind, talkers, dtFrom === null ? undefined : Number(dtFrom), kinds);
    console.log(`${scenes.length} scenes generated in ${((Date.now() - t0) / 1000).toFixed(1)} s`);
    const oracle = args.includes('--echo-oracle');
    const available = baselines.filter((b) => b.exe && (oracle || !b.id.endsWith('-d')));
    // Each baseline's output lag, from a near-end-only scene with a silent reference (its output is then ~ its input).
    const calib = scenes.find((s) => s.kind === 'nst') ?? makeScene({ kind: 'nst', seed: 4000 }, talkers);
    const lags: Record<string, number> = { ours: 0, mic: 0 };
    for (const b of available) lags[b.id] = findLag(calib.mic, runBaseline(b, calib, tmp).out, 1600);
    console.log(`output lags (samples): ${Object.entries(lags).map(([k, v]) => `${k} ${v}`).join(', ')}`);
    const rows: Row[] = [];
    const chainModel = args.includes('--echo-no-chain') ? null : ((opt('--echo-chain') ?? 'nsm-2') as ModelId);
    if (chainModel && !MODEL_IDS.includes(chainModel)) throw new Error(`--echo-chain: unknown model ${chainModel}`);
    const graphs = chainModel ? await loadGraphs(loadConfig().modelsDir) : null;
    const cpu: Record<string, number> = Object.fromEntries(['ours', ...(chainModel ? ['chain'] : []), ...available.map((b) => b.id)].map((k) => [k, 0]));
    let audioS = 0;
    let identical = true;
    for (const scene of scenes) {
      const outs: Array<[SystemId, Float32Array]> = [['mic', scene.mic]];
      const ours = runOurs(scene, overrides);
      cpu.ours += ours.cpuS;
      outs.push(['ours', ours.out]);
      if (chainModel && graphs) {
        const c = await runChain(graphs, chainModel, scene);
        cpu.chain += c.cpuS;
        outs.push(['chain', c.out]);
      }
      if (scene.kind === 'nst') {
        for (let i = 0; i < scene.mic.length; i++) if (ours.out[i] !== scene.mic[i]) identical = false;
      }
      for (const b of available) {
        const r = runBaseline(b, scene, tmp);
        cpu[b.id] += r.cpuS;
        outs.push([b.id, shift(r.out, lags[b.id])]);
      }
      audioS += scene.mic.length / FS;
      for (const [system, out] of outs) {
        const s = score(scene, out, dtFrom !== null);
        const talk = changesAt(scene.kind) ? 'st' : scene.kind;
        const mos = withMos && !(system === 'mic' && scene.kind === 'nst') ? aecmos(talk, scene, out, tmp) : null;
        rows.push({ scene: scene.name, kind: scene.kind, system, ...s, aecmos: mos });
      }
      const line = rows.filter((r) => r.scene === scene.name).map((r) => `${r.system} ${r.metric.toFixed(1)}${r.aecmos ? ` (${r.aecmos.echo.toFixed(2)}/${r.aecmos.other.toFixed(2)})` : ''}`);
      console.log(`${scene.name.padEnd(8)} rt60 ${scene.rt60.toFixed(2)} delay ${scene.delayMs.toFixed(0).padStart(3)}${scene.delayAfterMs !== null ? `→${scene.delayAfterMs.toFixed(0)}` : ''} ms ${scene.speaker.padEnd(7)} ${scene.serDb !== null ? `SER ${scene.serDb.toFixed(1)} ` : ''}est ${ours.stats.delayMs ?? '-'} | ${line.join(' | ')}`);
    }
    const cpuPerS: Record<string, number> = {};
    for (const k of Object.keys(cpu)) cpuPerS[k] = (cpu[k] / audioS) * 1000;
    const nsm2 = args.includes('--echo-no-cpu') ? null : await measureCpu({ overrides });
    printTable(rows, available, cpuPerS, nsm2, identical, chainModel, dtFrom);
    const spec = opt('--echo-spectrograms');
    if (spec) writeSpectrograms(spec, scenes, available, lags, tmp, overrides);
    return {
      date: new Date().toISOString(),
      scenes: scenes.length,
      baselines: baselines.map((b) => ({ id: b.id, available: !!b.exe, why: b.why })),
      rows,
      cpu: cpuPerS,
      nsm2,
      identical_silent_reference: identical,
    };
  } finally {
    fs.rmSync(tmp, { recursive: true, force: true });
  }
}

const fmt = (m: MeanCi, d = 1): string => `${m.mean.toFixed(d)} [${m.lo.toFixed(d)}, ${m.hi.toFixed(d)}]`;

function printTable(rows: Row[], baselines: Baseline[], cpu: Record<string, number>, nsm2: CpuResult | null, identical: boolean, chainModel: ModelId | null, dtFrom: string | null): void {
  const ourSystems: SystemId[] = chainModel ? ['ours', 'chain'] : ['ours'];
  const systems: SystemId[] = [...ourSystems, ...baselines.map((b) => b.id), 'mic'];
  const label: Record<SystemId, string> = {
    ours: 'ours',
    chain: `ours+${chainModel ?? ''}`,
    speex: 'speexdsp',
    webrtc: 'WebRTC AEC',
    'speex-d': 'speexdsp+d',
    'webrtc-d': 'WebRTC+d',
    mic: 'unprocessed',
  };
  const metricName: Record<SceneKind, string> = {
    st: 'ERLE dB, far-end single talk, 10 s..end',
    path: 'ERLE dB, from 2 s after the echo path change',
    jump: "ERLE dB, from 2 s after the echo's delay jumped (the same room)",
    dt: `near-end magnitude-spectrogram SDR dB, double talk, ${dtFrom === null ? '10 s..end' : `near end from ${dtFrom} s, scored from there to the end`}`,
    nst: 'magnitude-spectrogram SDR dB against the input, silent reference',
  };
  console.log('\nMean [95 % bootstrap CI] over scenes; paired differences ours − baseline with their CI.');
  for (const kind of KINDS) {
    const of = (s: SystemId) => rows.filter((r) => r.kind === kind && r.system === s);
    if (of('ours').length === 0) continue;
    console.log(`\n${kind}: ${metricName[kind]} (${of('ours').length} scenes)`);
    for (const s of systems) {
      const r = of(s);
      const m = bootstrapMean(r.map((x) => (Number.isFinite(x.metric) ? x.metric : 99)));
      const mosE = r.every((x) => x.aecmos) ? bootstrapMean(r.map((x) => x.aecmos!.echo)) : null;
      const mosO = r.every((x) => x.aecmos) ? bootstrapMean(r.map((x) => x.aecmos!.other)) : null;
      const extra = changesAt(kind)
        ? `  before the change ${bootstrapMean(r.map((x) => x.extra!)).mean.toFixed(1)}, first second ${bootstrapMean(r.map((x) => x.first!)).mean.toFixed(1)}, echo burst ${bootstrapMean(r.map((x) => x.burst!)).mean.toFixed(2)} s`
        : '';
      console.log(`  ${label[s].padEnd(12)} ${fmt(m).padEnd(22)}${mosE ? `  AECMOS echo ${fmt(mosE, 2)} other ${fmt(mosO!, 2)}` : ''}${extra}`);
    }
    for (const us of ourSystems) {
      for (const b of systems.filter((s) => !ourSystems.includes(s) && s !== 'mic')) {
        const a = of(b).map((x) => x.metric);
        const o = of(us).map((x) => (Number.isFinite(x.metric) ? x.metric : 99));
        const d = pairedDiff(a, o);
        let mos = '';
        if (of(b).every((x) => x.aecmos) && of(us).every((x) => x.aecmos)) {
          const de = pairedDiff(of(b).map((x) => x.aecmos!.echo), of(us).map((x) => x.aecmos!.echo));
          const dOther = pairedDiff(of(b).map((x) => x.aecmos!.other), of(us).map((x) => x.aecmos!.other));
          mos = `  AECMOS echo ${fmt(de, 2)}, other ${fmt(dOther, 2)}`;
        }
        console.log(`  ${label[us]} − ${label[b].padEnd(10)} ${fmt(d)} (ahead in ${d.wins}/${d.n})${mos}`);
      }
    }
  }
  console.log(`\nSilent reference: our output ${identical ? 'IS' : 'is NOT'} the input bit for bit on every nst scene.`);
  console.log('\nCPU ms per audio second (the scenes above, one stream each):');
  for (const [k, v] of Object.entries(cpu)) console.log(`  ${label[k as SystemId].padEnd(12)} ${v.toFixed(2)}`);
  if (nsm2) {
    console.log(`  nsm-2 live (${nsm2.streams} streams batched, in this process): ${nsm2.nsm2MsPerS.toFixed(2)} ms per stream-second; ` +
      `the canceller in the same rounds ${nsm2.aecMsPerS.toFixed(2)}: ratio ${(100 * nsm2.ratio).toFixed(0)} % [${(100 * nsm2.ratioLo).toFixed(0)}, ${(100 * nsm2.ratioHi).toFixed(0)}] of nsm-2`);
  }
}

function writeSpectrograms(dir: string, scenes: Scene[], baselines: Baseline[], lags: Record<string, number>, tmp: string, overrides: Partial<EchoCancellerOptions>): void {
  fs.mkdirSync(dir, { recursive: true });
  const ff = loadConfig().ffmpegPath;
  for (const kind of KINDS) {
    const scene = scenes.find((s) => s.kind === kind)!;
    const outs: Array<[string, Float32Array]> = [['mic', scene.mic], ['ours', runOurs(scene, overrides).out]];
    for (const b of baselines) outs.push([b.id, shift(runBaseline(b, scene, tmp).out, lags[b.id])]);
    if (kind === 'dt') outs.push(['near', scene.near]);
    for (const [name, x] of outs) {
      const wav = path.join(dir, `${scene.name}-${name}.wav`);
      writeWavFloat(wav, [x], FS);
      spawnSync(ff, ['-v', 'error', '-y', '-i', wav, '-lavfi', 'showspectrumpic=s=1024x256:legend=0:scale=log', path.join(dir, `${scene.name}-${name}.png`)]);
    }
  }
  console.log(`spectrograms and WAVs in ${dir}`);
}
