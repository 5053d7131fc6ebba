// Two builds of the echo canceller side by side in one run (a development tool, not part of `npm run bench`): this
// checkout's and another dist's (e.g. main's), on the same scenes, each scene run by both in alternating order, scored
// the same way, paired per scene. Scenes per talk type and loudspeaker model from seeds 8000+ (disjoint from the
// bench's 1000+ and the tuning set's 5000+). Then the cost: nsm-2's live streams and both cancellers on the same audio
// in alternating rounds in this process, each as a share of nsm-2.
//   node dist/scripts/bench/echo-ab.js --other /work/main/dist [--n 4] [--kinds st,dt,path,jump] [--speakers linear,clip,sigmoid]
//        [--aecmos] [--no-cpu] [--set key=value]... (options of this checkout's canceller)
//        [--clip-levels 0.4,0.55,0.7]  ('clip' scenes at each of these fractions of the peak, a group each; default 0.55)
//        [--seed-base N]  (st scenes from seed N, dt N + 300, path N + 600, jump N + 900; default 8000. 5000 with --kinds st: echo-tune's)
//        [--other-set key=value]...    (options of the other dist's canceller)
//        [--dt-from S]    (double talk: the near end talks from S s, default 4, and its SDR is scored from S to the end)
//        [--st-windows]   (single talk: ERLE also over 2–5 and 5–10 s, groups st-…:2-5 and :5-10)
//        [--changes]      (path and jump, 16 kHz: also the echo burst after the change, s (echo-metrics.ts echoBurst, capped at
//                          4), and the first second's ERLE, groups …:burst and :first)
//        [--oracle-knot]  (this side's clip knot, with clipKnot=1, fixed from the first learning step at the scene's true
//                          clip level and counted as settled: the upper bound of the knot's search)
//        [--agent]        (a voice agent's far end: digital silence in turns of 1–4 s, about half the time; echo-talkers.ts)
//        [--narrow]       (scenes at 8 kHz, run as the narrow-band chain runs the canceller, scored at 8 kHz: echo-narrow.ts;
//                          this side with bins=72, 0–4.44 kHz, unless --set bins=...; no --aecmos)
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { spawnSync } from 'node:child_process';
import { PROJECT_ROOT } from '../../src/config';
import { AEC_LATENCY, EchoCanceller } from '../../src/dsp/aec';
import { LoudspeakerModel } from '../../src/dsp/aec/loudspeaker';
import { KNOT_LOW, SETTLE_PICKS } from '../../src/dsp/aec/clip-knot';
import { writeWavFloat } from '../lib/audio-io';
import { bootstrapMean, bootstrapRatio, pairedDiff } from '../lib/stats';
import { echoBurst, erle, magSdr } from './echo-metrics';
import { changesAt, FS, makeScene, type Loudspeaker, type Scene, type SceneKind } from './echo-scenes';
import { costRounds, sceneSecondsFor } from './echo-cpu';
import { agentTalkers, loadTalkers } from './echo-talkers';
import { optionReader, settingsOf } from '../lib/args';
import { NARROW_FS, narrowScene, runNarrow } from './echo-narrow';

interface Canceller {
  process(mic: Float32Array[], ref: Float32Array): Float32Array[];
}
type Make = () => Canceller;

function run(make: Make, scene: { mic: Float32Array; ref: Float32Array }): { out: Float32Array; cpuS: number } {
  const aec = make();
  const n = scene.mic.length;
  const out = new Float32Array(n + AEC_LATENCY + 320);
  let w = 0;
  const t0 = process.cpuUsage();
  const feed = (mic: Float32Array, ref: Float32Array): void => {
    const y = aec.process([mic], ref)[0];
    out.set(y, w);
    w += y.length;
  };
  for (let pos = 0; pos < n; pos += 320) feed(scene.mic.subarray(pos, pos + 320), scene.ref.subarray(pos, pos + 320));
  const tail = new Float32Array(AEC_LATENCY + 320);
  feed(tail, tail);
  const u = process.cpuUsage(t0);
  return { out: out.slice(AEC_LATENCY, AEC_LATENCY + n), cpuS: (u.user + u.system) / 1e6 };
}

function aecmos(talk: string, scene: Scene, out: Float32Array, tmp: string): { echo: number; other: number } {
  const tools = path.resolve(PROJECT_ROOT, '..', 'shared', 'tools', 'aecmos');
  const files = ['lpb', 'mic', 'enh'].map((n) => path.join(tmp, `${n}.wav`));
  writeWavFloat(files[0], [scene.ref], FS);
  writeWavFloat(files[1], [scene.mic], FS);
  writeWavFloat(files[2], [out], FS);
  const r = spawnSync(process.execPath, [path.join(tools, 'aecmos.mjs'), path.join(tools, 'aecmos_v4_16k.onnx'), talk, ...files], { cwd: PROJECT_ROOT, encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`AECMOS failed: ${r.stderr.slice(-500)}`);
  const j = JSON.parse(r.stdout.trim().split('\n').pop()!);
  return { echo: j.echo_mos, other: j.other_mos };
}

function score(scene: Scene, out: Float32Array, dtWhole: boolean, fs = FS): number {
  const n = scene.mic.length;
  if (scene.kind === 'st') return erle(scene, out, 10 * fs, n);
  if (changesAt(scene.kind)) return erle(scene, out, scene.changeAt! + 2 * fs, n);
  return magSdr(scene.near, out, dtWhole ? scene.nearFrom! : 10 * fs, n);
}

/** nsm-2's live streams, then A, then B on the same audio, per round; CPU per stream-second of each. */
async function cost(makes: Make[], streams = 100, rounds = 6, seconds = 2): Promise<{ nsm: number[]; aec: number[][] }> {
  const scene = makeScene({ kind: 'dt', seed: 77, seconds: sceneSecondsFor(rounds, seconds) }, loadTalkers());
  const aecs = makes.map((m) => Array.from({ length: streams }, m));
  // Alternate which canceller goes first.
  const order = (r: number): number[] => (r % 2 ? makes.map((_, i) => i).reverse() : makes.map((_, i) => i));
  const { nsm, took } = await costRounds(scene, aecs, { streams, rounds, seconds, order });
  const per = rounds * seconds * streams;
  return { nsm: nsm.map((v) => v / per), aec: took.map((xs) => xs.map((v) => v / per)) };
}

/** The scene's clip level in the reference's digital units (0: none) for --oracle-knot. */
let oracleLevel = 0;

/**
 * --oracle-knot: the model's knot step replaced by one that holds the knot at oracleLevel (a fraction of the model's
 * unit, so it follows the unit's octave moves) and marks it settled; the knot's statistics accumulate from its first
 * step. Scenes without a clip (oracleLevel 0) keep the search.
 */
function useOracleKnot(): void {
  type Knot = { level: number; xo: number; proj: number; stable: number };
  type Model = { knot: Knot | null; u: number; stepKnot(ridge: number): void };
  const proto = LoudspeakerModel.prototype as unknown as Model;
  const search = proto.stepKnot;
  proto.stepKnot = function (this: Model, ridge: number): void {
    const k = this.knot;
    if (!k || oracleLevel <= 0) return search.call(this, ridge);
    const level = oracleLevel / this.u;
    if (level < KNOT_LOW || level >= 1) return;
    if (k.level === 0) {
      k.xo = 0;
      k.proj = 0;
    }
    k.level = level;
    k.stable = Math.max(k.stable, SETTLE_PICKS);
  };
}

async function main(args: string[]): Promise<void> {
  const opt = optionReader(args);
  const other = path.resolve(opt('--other', path.join(PROJECT_ROOT, '..', '..', 'main', 'dist')));
  const n = Number(opt('--n', '4'));
  const kinds = opt('--kinds', 'st,dt,path').split(',') as SceneKind[];
  const speakers = opt('--speakers', 'linear,clip,sigmoid').split(',') as Loudspeaker[];
  const withMos = args.includes('--aecmos') && !args.includes('--narrow');
  const clipLevels = opt('--clip-levels', '0.55').split(',').map(Number);
  const speakerRuns = speakers.flatMap((speaker) =>
    speaker === 'clip' && (clipLevels.length > 1 || clipLevels[0] !== 0.55)
      ? clipLevels.map((c) => ({ speaker, clipAt: c as number | undefined, label: `clip${Math.round(c * 100)}` }))
      : [{ speaker, clipAt: undefined as number | undefined, label: speaker as string }],
  );
  const narrow = args.includes('--narrow');
  const rate = narrow ? NARROW_FS : FS;
  const atRate = narrow ? narrowScene : (s: Scene): Scene => s;
  const sets = { ...(narrow ? { bins: 72 } : {}), ...settingsOf(args, '--set') };
  const otherSets = settingsOf(args, '--other-set');
  const dtFrom = opt('--dt-from', '');
  const nearFromS = dtFrom === '' ? undefined : Number(dtFrom);
  const stWindows = args.includes('--st-windows');
  const changes = args.includes('--changes');
  const oracle = args.includes('--oracle-knot');
  if (oracle) useOracleKnot();
  const Other = require(path.join(other, 'src', 'dsp', 'aec')).EchoCanceller as new (o: { channels: number }) => Canceller;
  const names = ['this', 'other'];
  const makes: Make[] = [() => new EchoCanceller({ channels: 1, ...sets }), () => new Other({ channels: 1, ...otherSets })];
  console.log(`this: ${PROJECT_ROOT} ${JSON.stringify(sets)}${oracle ? ' (oracle knot)' : ''}; other: ${other} ${JSON.stringify(otherSets)}`);
  const talkers = args.includes('--agent') ? agentTalkers(loadTalkers()) : loadTalkers();
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'nsm-echo-ab-'));
  const res = new Map<string, number[][]>();
  const push = (g: string, vi: number, x: number): void => {
    if (!res.has(g)) res.set(g, [[], []]);
    res.get(g)![vi].push(x);
  };
  const cpu = [0, 0];
  const cpuPairs: number[][] = [[], []];
  let idx = 0;
  const base = Number(opt('--seed-base', '8000'));
  const seeds: Record<string, number> = { st: base, dt: base + 300, path: base + 600, jump: base + 900 };
  for (const kind of kinds) {
    for (const { speaker, clipAt, label } of speakerRuns) {
      for (let i = 0; i < n; i++) {
        const scene = atRate(makeScene({ kind, seed: seeds[kind] + 100 * speakers.indexOf(speaker) + i, speaker, clipAt, ...(kind === 'dt' && nearFromS !== undefined ? { nearFromS } : {}) }, talkers));
        // The generator scales the reference to a peak of 0.7 and clips at clipAt of it.
        oracleLevel = speaker === 'clip' ? 0.7 * (clipAt ?? 0.55) : 0;
        const order = idx++ % 2 ? [1, 0] : [0, 1];
        const outs: Float32Array[] = [];
        for (const vi of order) {
          const r = narrow ? runNarrow((s) => run(makes[vi], s), scene) : run(makes[vi], scene);
          outs[vi] = r.out;
          cpu[vi] += r.cpuS;
          cpuPairs[vi].push(r.cpuS);
        }
        const line: string[] = [];
        outs.forEach((out, vi) => {
          const m = score(scene, out, nearFromS !== undefined, rate);
          for (const g of [`${kind}-${label}`, `${kind}-all`]) push(g, vi, m);
          if (kind === 'st' && stWindows) {
            for (const [a, b] of [[2, 5], [5, 10]]) {
              const w = erle(scene, out, a * rate, b * rate);
              for (const g of [`${kind}-${label}`, `${kind}-all`]) push(`${g}:${a}-${b}`, vi, w);
            }
          }
          let s = `${names[vi]} ${m.toFixed(1)}`;
          if (changes && !narrow && changesAt(kind)) {
            const at = scene.changeAt!;
            const burst = echoBurst(scene, out, at, 4);
            const first = erle(scene, out, at, Math.min(scene.mic.length, at + rate));
            for (const g of [`${kind}-${label}`, `${kind}-all`]) {
              push(`${g}:burst`, vi, burst);
              push(`${g}:first`, vi, first);
            }
            s += ` (${burst.toFixed(1)} s, ${first.toFixed(1)})`;
          }
          if (withMos) {
            const mos = aecmos(changesAt(kind) ? 'st' : kind, scene, out, tmp);
            for (const g of [`${kind}-${label}`, `${kind}-all`]) {
              push(`${g}:mosE`, vi, mos.echo);
              push(`${g}:mosO`, vi, mos.other);
            }
            s += ` [${mos.echo.toFixed(2)}/${mos.other.toFixed(2)}]`;
          }
          line.push(s);
        });
        console.log(`${scene.name.padEnd(10)} ${label.padEnd(7)} d ${scene.delayMs.toFixed(0).padStart(3)} rt ${scene.rt60.toFixed(2)}${scene.serDb !== null ? ` ser ${scene.serDb.toFixed(1).padStart(5)}` : ''} | ${line.join(' | ')}`);
      }
    }
  }
  fs.rmSync(tmp, { recursive: true, force: true });
  console.log('\nmeans [95 % CI]; this − other paired per scene [95 % CI] (scenes this ahead)');
  const f = (x: number, d = 2): string => x.toFixed(d);
  for (const [g, [a, b]] of res) {
    const ma = bootstrapMean(a);
    const mb = bootstrapMean(b);
    const d = pairedDiff(b, a);
    console.log(`${g.padEnd(20)} this ${f(ma.mean)} [${f(ma.lo)}, ${f(ma.hi)}] | other ${f(mb.mean)} [${f(mb.lo)}, ${f(mb.hi)}] | diff ${d.mean >= 0 ? '+' : ''}${f(d.mean)} [${f(d.lo)}, ${f(d.hi)}] (${d.wins}/${d.n})`);
  }
  const sceneRatio = bootstrapRatio(cpuPairs[1], cpuPairs[0]);
  console.log(`\nCPU per audio second, one stream per scene: this ${f((cpu[0] / (idx * 20)) * 1000)} ms, other ${f((cpu[1] / (idx * 20)) * 1000)} ms; this/other ${f(sceneRatio.ratio)} [${f(sceneRatio.lo)}, ${f(sceneRatio.hi)}]`);
  if (args.includes('--no-cpu')) return;
  const c = await cost(makes);
  const sum = (xs: number[]): number => xs.reduce((s, v) => s + v, 0) / xs.length;
  c.aec.forEach((xs, vi) => {
    const r = bootstrapRatio(c.nsm, xs);
    console.log(`${names[vi]}: ${f(sum(xs))} ms per stream-second, ${f(100 * r.ratio, 0)} % [${f(100 * r.lo, 0)}, ${f(100 * r.hi, 0)}] of nsm-2 (${f(sum(c.nsm))} ms) in the same rounds`);
  });
  const r = bootstrapRatio(c.aec[1], c.aec[0]);
  console.log(`this/other in the same rounds: ${f(r.ratio)} [${f(r.lo)}, ${f(r.hi)}]`);
}

if (require.main === module) main(process.argv.slice(2)).catch((e) => {
  console.error(e);
  process.exit(1);
});
