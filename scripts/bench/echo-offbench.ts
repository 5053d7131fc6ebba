// Scenes unlike the echo bench's, for a check of how the canceller generalises (a development tool, not part of
// `npm run bench`): rooms by the image method or, unless --image-only, half of them by a stochastic response (the
// direct sound, then an exponentially decaying noise tail: direct-to-reverberant ratio about −12 dB); loudspeakers
// linear, tanh-saturating, hard-clipping at 30–80 % of the peak, or with a polynomial u + 0.25u² − 0.2u³, each followed
// by a resonant high-pass at 120–420 Hz and a ±6 dB peak at 2–5 kHz; the reference's peak at 0.3–0.9; the echo at
// −42..−18 dBFS; noise at −75..−55 dBFS (--low-noise: −80..−65); the bench's talker pools swapped (its near-end talkers
// play the far end); double talk with the near end from 0–2 s, dry or in the room, scored from its start. The
// canceller, what POST /denoise returns (the canceller and nsm-2's chain) and the bench's speexdsp and WebRTC AEC
// programs (their outputs shifted by their lags, as the bench does) on the same scenes, paired.
//   node dist/scripts/bench/echo-offbench.js [--n 16] [--seed-base 31000] [--kinds st,dt] [--seconds 12] [--from 6]
//        [--image-only] [--low-noise] [--set key=value]... (options of the canceller alone, `ours`; not of the chain's) [--no-chain]
// (--from: single talk's ERLE from this second to the end.) docs/echo.md, "A filter that runs away", has its figures.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { loadConfig } from '../../src/config';
import { loadGraphs } from '../../src/inference/runtime/sessions';
import { optionReader, settingsOf } from '../lib/args';
import { bootstrapMean, pairedDiff, seeded } from '../lib/stats';
import { runChain } from './echo-chain';
import { erle, magSdr } from './echo-metrics';
import { activeRms, biquadInPlace, convolve, FS, imageRir, makeScene, measuredRt60, type Scene, type Talkers } from './echo-scenes';
import { loadTalkers } from './echo-talkers';
import { buildBaselines, findLag, runBaseline, runOurs, shift } from './echo';

type Speaker = 'linear' | 'tanh' | 'clip' | 'poly';

/** The direct sound at `direct` seconds, then low-passed noise decaying by 60 dB over rt60 (a diffuse tail). */
function stochasticRir(rnd: () => number, rt60: number, len: number, direct: number): Float64Array {
  const h = new Float64Array(len);
  const d0 = Math.round(direct * FS);
  h[d0] = 1;
  const decay = Math.log(1000) / (rt60 * FS);
  let lp = 0;
  for (let i = d0 + 1; i < len; i++) {
    lp = 0.6 * lp + 0.4 * (rnd() + rnd() + rnd() - 1.5) * 2;
    h[i] = 0.35 * lp * Math.exp(-decay * (i - d0)) * Math.min(1, (i - d0) / 80);
  }
  return h;
}

/** RBJ biquad in place: a high-pass (hz, q) or a peak (hz, gain dB, q). */
function biquad(y: Float64Array, kind: 'hp' | 'peak', hz: number, q: number, gainDb = 0): void {
  const w0 = (2 * Math.PI * hz) / FS;
  const al = Math.sin(w0) / (2 * q);
  const c = Math.cos(w0);
  const A = Math.pow(10, gainDb / 40);
  const [b0, b1, b2, a0, a1, a2] =
    kind === 'hp' ? [(1 + c) / 2, -(1 + c), (1 + c) / 2, 1 + al, -2 * c, 1 - al] : [1 + al * A, -2 * c, 1 - al * A, 1 + al / A, -2 * c, 1 - al / A];
  biquadInPlace(y, b0 / a0, b1 / a0, b2 / a0, a1 / a0, a2 / a0);
}

function loudspeaker(x: Float32Array, kind: Speaker, rnd: () => number): Float64Array {
  const y = Float64Array.from(x);
  let pk = 1e-9;
  for (const v of y) pk = Math.max(pk, Math.abs(v));
  if (kind === 'tanh') {
    const drive = 1 + rnd() * 3;
    for (let i = 0; i < y.length; i++) y[i] = (Math.tanh((drive * y[i]) / pk) * pk) / Math.tanh(drive);
  } else if (kind === 'clip') {
    const c = (0.3 + rnd() * 0.5) * pk;
    for (let i = 0; i < y.length; i++) y[i] = Math.max(-c, Math.min(c, y[i]));
  } else if (kind === 'poly') {
    for (let i = 0; i < y.length; i++) {
      const u = y[i] / pk;
      y[i] = (u + 0.25 * u * u - 0.2 * u * u * u) * pk;
    }
  }
  biquad(y, 'hp', 120 + rnd() * 300, 0.9 + rnd() * 0.6);
  biquad(y, 'peak', 2000 + rnd() * 3000, 1.5, -6 + rnd() * 12);
  return y;
}

interface OffScene extends Scene {
  stochastic: boolean;
  echoDb: number;
  noiseDb: number;
  dry: boolean | null;
  kindOfSpeaker: Speaker;
}

function offScene(kind: 'st' | 'dt', seed: number, t: Talkers, o: { seconds: number; imageOnly: boolean; lowNoise: boolean }): OffScene {
  const rnd = seeded(seed);
  const n = Math.round(o.seconds * FS);
  const dims: [number, number, number] = [3 + rnd() * 5, 3 + rnd() * 4, 2.4 + rnd() * 1.2];
  const rt60 = 0.2 + rnd() * 0.6;
  const delayMs = 10 + rnd() * 290;
  const delay = Math.round((delayMs / 1000) * FS);
  const speaker = (['linear', 'tanh', 'clip', 'poly'] as const)[Math.floor(rnd() * 4)];
  const stochastic = rnd() < 0.5 && !o.imageOnly;
  const rirLen = Math.min(FS, Math.ceil(rt60 * 1.2 * FS));
  const mic: [number, number, number] = [0.5 + rnd() * (dims[0] - 1), 0.5 + rnd() * (dims[1] - 1), 0.8 + rnd()];
  const spk: [number, number, number] = [Math.min(dims[0] - 0.3, mic[0] + 0.3 + rnd()), mic[1], mic[2]];
  const room = { dims, rt60 };
  const h = stochastic ? stochasticRir(rnd, rt60, rirLen, 0.002 + rnd() * 0.004) : imageRir({ room, source: spk, mic, length: rirLen });
  const far = new Float32Array(n);
  const f0 = Math.floor(rnd() * t.near.length);
  for (let i = 0; i < n; i++) far[i] = t.near[(f0 + i) % t.near.length];
  let pk = 0;
  for (const v of far) pk = Math.max(pk, Math.abs(v));
  const refGain = (0.3 + rnd() * 0.6) / pk;
  for (let i = 0; i < n; i++) far[i] *= refGain;
  const e0 = convolve(loudspeaker(far, speaker, rnd), h);
  const echo = new Float32Array(n);
  for (let i = delay; i < n; i++) echo[i] = e0[i - delay];
  const echoDb = -42 + rnd() * 24;
  const eg = Math.pow(10, echoDb / 20) / activeRms(echo);
  for (let i = 0; i < n; i++) echo[i] *= eg;
  const near = new Float32Array(n);
  let nearFrom: number | null = null;
  let serDb: number | null = null;
  let dry: boolean | null = null;
  if (kind === 'dt') {
    nearFrom = Math.round(rnd() * 2 * FS);
    serDb = -10 + rnd() * 20;
    dry = rnd() < 0.5;
    const s0 = Math.floor(rnd() * t.far.length);
    const s = new Float32Array(n - nearFrom);
    for (let i = 0; i < s.length; i++) s[i] = t.far[(s0 + i) % t.far.length];
    const talker: [number, number, number] = [Math.max(0.3, mic[0] - 0.6), mic[1] + 0.2, mic[2]];
    const hn = dry ? null : stochastic ? stochasticRir(rnd, rt60, rirLen, 0.002) : imageRir({ room, source: talker, mic, length: rirLen });
    const sv = hn ? convolve(s, hn) : s;
    for (let i = 0; i < s.length; i++) near[nearFrom + i] = sv[i];
    const g = Math.pow(10, (echoDb + serDb) / 20) / activeRms(near, nearFrom);
    for (let i = 0; i < n; i++) near[i] *= g;
  }
  const noiseDb = o.lowNoise ? -80 + rnd() * 15 : -75 + rnd() * 20;
  const noise = new Float32Array(n);
  let lp = 0;
  let p = 0;
  for (let i = 0; i < n; i++) {
    const w = (rnd() + rnd() + rnd() - 1.5) * 2;
    lp = 0.95 * lp + 0.05 * w;
    noise[i] = lp + 0.1 * w;
    p += noise[i] * noise[i];
  }
  const ng = Math.pow(10, noiseDb / 20) / Math.sqrt(p / n);
  const m = new Float32Array(n);
  for (let i = 0; i < n; i++) m[i] = echo[i] + near[i] + noise[i] * ng;
  const linearish = speaker === 'linear' ? 'linear' : speaker === 'clip' ? 'clip' : 'sigmoid';
  return {
    name: `${kind}-${seed}`,
    kind,
    mic: m,
    ref: far,
    echo,
    near,
    rt60,
    rt60Measured: measuredRt60(h),
    delayMs: (delay / FS) * 1000,
    speaker: linearish,
    serDb,
    changeAt: null,
    delayAfterMs: null,
    nearFrom,
    stochastic,
    echoDb,
    noiseDb,
    dry,
    kindOfSpeaker: speaker,
  };
}

async function main(args: string[]): Promise<void> {
  const opt = optionReader(args);
  const n = Number(opt('--n', '16'));
  const base = Number(opt('--seed-base', '31000'));
  const kinds = opt('--kinds', 'st,dt').split(',') as Array<'st' | 'dt'>;
  const o = { seconds: Number(opt('--seconds', '12')), imageOnly: args.includes('--image-only'), lowNoise: args.includes('--low-noise') };
  const from = Number(opt('--from', '6'));
  const sets = settingsOf(args, '--set');
  const chain = !args.includes('--no-chain');
  const talkers = loadTalkers();
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'nsm-offbench-'));
  try {
    const baselines = buildBaselines(tmp).filter((b) => b.exe && !b.id.endsWith('-d'));
    const calib = makeScene({ kind: 'nst', seed: 4000 }, talkers);
    const lags = Object.fromEntries(baselines.map((b) => [b.id, findLag(calib.mic, runBaseline(b, calib, tmp).out, 1600)]));
    const graphs = await loadGraphs(loadConfig().modelsDir);
    for (const kind of kinds) {
      const rows: Array<Record<string, number>> = [];
      for (let i = 0; i < n; i++) {
        const s = offScene(kind, base + (kind === 'dt' ? 500 : 0) + i, talkers, o);
        const outs: Record<string, Float32Array> = { ours: runOurs(s, sets).out };
        if (chain) outs['ours+nsm-2'] = (await runChain(graphs, 'nsm-2', s)).out;
        for (const b of baselines) outs[b.id] = shift(runBaseline(b, s, tmp).out, lags[b.id]);
        const len = s.mic.length;
        const row = Object.fromEntries(Object.entries(outs).map(([k, y]) => [k, kind === 'st' ? erle(s, y, from * FS, len) : magSdr(s.near, y, s.nearFrom!, len)]));
        rows.push(row);
        const facts = `${s.kindOfSpeaker} ${s.stochastic ? 'stochastic' : 'image'} rt60 ${s.rt60.toFixed(2)} delay ${s.delayMs.toFixed(0)} echo ${s.echoDb.toFixed(0)} noise ${s.noiseDb.toFixed(0)}${kind === 'dt' ? ` SER ${s.serDb!.toFixed(1)} ${s.dry ? 'dry' : 'in the room'} from ${(s.nearFrom! / FS).toFixed(1)} s` : ''}`;
        console.log(`${s.name} ${facts} | ${Object.entries(row).map(([k, v]) => `${k} ${v.toFixed(1)}`).join(' | ')}`);
      }
      console.log(`\n${kind === 'st' ? `ERLE dB from ${from} s` : 'near-end magnitude-spectrogram SDR dB from its start'}: mean [95 % CI]; paired differences (scenes ahead)`);
      const col = (k: string): number[] => rows.map((r) => r[k]);
      for (const k of Object.keys(rows[0])) {
        const m = bootstrapMean(col(k));
        console.log(`  ${k.padEnd(11)} ${m.mean.toFixed(2)} [${m.lo.toFixed(2)}, ${m.hi.toFixed(2)}]`);
      }
      for (const a of chain ? ['ours', 'ours+nsm-2'] : ['ours']) {
        for (const b of baselines) {
          const d = pairedDiff(col(b.id), col(a));
          console.log(`  ${a} − ${b.id}: ${d.mean.toFixed(2)} [${d.lo.toFixed(2)}, ${d.hi.toFixed(2)}] (${d.wins}/${rows.length})`);
        }
      }
    }
  } finally {
    fs.rmSync(tmp, { recursive: true, force: true });
  }
}

if (require.main === module)
  main(process.argv.slice(2)).catch((e) => {
    console.error(e);
    process.exit(1);
  });
