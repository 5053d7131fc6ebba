// The echo canceller's tuning set (a development tool, not part of `npm run bench`): scenes of the bench's generator
// with seeds of their own (5000+, disjoint from the bench's), per loudspeaker model and talk type, and variants of the
// canceller's options compared on the same scenes (paired). Quicker than the bench, no baselines:
//   node dist/scripts/bench/echo-tune.js [--n 4] [--kinds st,dt] [--speakers linear,clip,sigmoid] [--aecmos]
//        [--clip-levels 0.4,0.55,0.7]           ('clip' scenes at each of these fractions of the peak; default 0.55)
//        [--v NAME:key=value,key=value]...      (the first variant is the reference of the paired differences)
//        [--dt-from S]    (double talk: the near end talks from S s, default 4, and its SDR is scored from S to the end)
//        [--st-windows]   (single talk: ERLE also over 0.5–2, 2–5 and 5–10 s, groups st-…:0.5-2, :2-5 and :5-10; no
//                          linear-only runs)
// Prints per variant and group: ERLE 10–20 s (st), near-end SDR 10–20 s (dt), and the linear filter's ERLE (st).
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { spawnSync } from 'node:child_process';
import { PROJECT_ROOT } from '../../src/config';
import type { EchoCancellerOptions } from '../../src/dsp/aec';
import { writeWavFloat } from '../lib/audio-io';
import { bootstrapMean, pairedDiff } from '../lib/stats';
import { runOurs } from './echo';
import { erle, magSdr } from './echo-metrics';
import { FS, makeScene, type Loudspeaker, type Scene, type SceneKind } from './echo-scenes';
import { loadTalkers } from './echo-talkers';
import { optionReader, settingValue } from '../lib/args';

export interface Variant {
  name: string;
  opts: Partial<EchoCancellerOptions>;
}

function aecmos(talk: string, scene: Scene, out: Float32Array, tmp: string): { echo: number; other: number } {
  const tools = path.resolve(PROJECT_ROOT, '..', 'shared', 'tools', 'aecmos');
  const files = ['lpb', 'mic', 'enh'].map((n) => path.join(tmp, `${n}.wav`));
  writeWavFloat(files[0], [scene.ref], FS);
  writeWavFloat(files[1], [scene.mic], FS);
  writeWavFloat(files[2], [out], FS);
  const r = spawnSync(process.execPath, [path.join(tools, 'aecmos.mjs'), path.join(tools, 'aecmos_v4_16k.onnx'), talk, ...files], { cwd: PROJECT_ROOT, encoding: 'utf8' });
  const j = JSON.parse(r.stdout.trim().split('\n').pop()!);
  return { echo: j.echo_mos, other: j.other_mos };
}

/** The `--v NAME:key=value,key=value` arguments: variants of the canceller's options (numbers where they parse). */
export function parseVariants(args: string[]): Variant[] {
  const variants: Variant[] = [];
  args.forEach((a, i) => {
    if (a !== '--v') return;
    const [name, rest] = args[i + 1].split(':');
    const opts: Record<string, number | boolean | string> = {};
    for (const kv of (rest ?? '').split(',').filter(Boolean)) {
      const [k, v] = kv.split('=');
      opts[k] = settingValue(v);
    }
    variants.push({ name, opts: opts as Partial<EchoCancellerOptions> });
  });
  return variants;
}

function main(args: string[]): void {
  const opt = optionReader(args);
  const n = Number(opt('--n', '4'));
  const kinds = opt('--kinds', 'st,dt').split(',') as SceneKind[];
  const speakers = opt('--speakers', 'linear,clip,sigmoid').split(',') as Loudspeaker[];
  const withMos = args.includes('--aecmos');
  const clipLevels = opt('--clip-levels', '0.55').split(',').map(Number);
  const dtFrom = opt('--dt-from', '');
  const nearFromS = dtFrom === '' ? undefined : Number(dtFrom);
  const stWindows = args.includes('--st-windows');
  const variants = parseVariants(args);
  if (variants.length === 0) variants.push({ name: 'default', opts: {} });
  const talkers = loadTalkers();
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'nsm-echo-tune-'));
  // results[variant][group] = per-scene values
  const res = variants.map(() => new Map<string, number[]>());
  const push = (v: number, g: string, x: number): void => {
    const m = res[v];
    if (!m.has(g)) m.set(g, []);
    m.get(g)!.push(x);
  };
  let cpu = variants.map(() => 0);
  let audio = 0;
  const kindSeed: Record<string, number> = { st: 5000, dt: 6000, path: 7000 };
  // A 'clip' loudspeaker once per clipping level (a group each, e.g. st-clip40), the others once.
  const speakerRuns = speakers.flatMap((speaker) =>
    speaker === 'clip' && (clipLevels.length > 1 || clipLevels[0] !== 0.55)
      ? clipLevels.map((c) => ({ speaker, clipAt: c, label: `clip${Math.round(c * 100)}` }))
      : [{ speaker, clipAt: undefined as number | undefined, label: speaker as string }],
  );
  for (const kind of kinds) {
    for (const { speaker, clipAt, label } of speakerRuns) {
      for (let i = 0; i < n; i++) {
        const seed = kindSeed[kind] + 100 * speakers.indexOf(speaker) + i;
        const scene = makeScene({ kind, seed, speaker, clipAt, ...(kind === 'dt' && nearFromS !== undefined ? { nearFromS } : {}) }, talkers);
        audio += scene.mic.length / FS;
        const line: string[] = [];
        variants.forEach((v, vi) => {
          const r = runOurs(scene, v.opts);
          cpu[vi] += r.cpuS;
          const g = `${kind}-${label}`;
          let m: number;
          if (kind === 'st') m = erle(scene, r.out, 10 * FS, scene.mic.length);
          else if (kind === 'path') m = erle(scene, r.out, scene.changeAt! + 2 * FS, scene.mic.length);
          else m = magSdr(scene.near, r.out, nearFromS === undefined ? 10 * FS : scene.nearFrom!, scene.mic.length);
          push(vi, g, m);
          if (kind === 'st' && stWindows) {
            push(vi, `${g}:0.5-2`, erle(scene, r.out, FS / 2, 2 * FS));
            push(vi, `${g}:2-5`, erle(scene, r.out, 2 * FS, 5 * FS));
            push(vi, `${g}:5-10`, erle(scene, r.out, 5 * FS, 10 * FS));
          }
          let s = `${v.name} ${m.toFixed(1)}${vi === 0 ? ` est ${r.stats.delayMs ?? '-'}` : ''}`;
          if (kind === 'st' && !stWindows) {
            const lin = runOurs(scene, { ...v.opts, linearOnly: true });
            const l = erle(scene, lin.out, 10 * FS, scene.mic.length);
            push(vi, `${g}:linear`, l);
            s += ` (lin ${l.toFixed(1)})`;
          }
          if (withMos) {
            const mos = aecmos(kind === 'path' ? 'st' : kind, scene, r.out, tmp);
            push(vi, `${g}:mosE`, mos.echo);
            push(vi, `${g}:mosO`, mos.other);
            s += ` [${mos.echo.toFixed(2)}/${mos.other.toFixed(2)}]`;
          }
          line.push(s);
        });
        console.log(`${scene.name.padEnd(10)} ${label.padEnd(7)} d ${scene.delayMs.toFixed(0).padStart(3)} rt ${scene.rt60.toFixed(2)}${scene.serDb !== null ? ` ser ${scene.serDb.toFixed(1).padStart(5)}` : ''} | ${line.join(' | ')}`);
      }
    }
  }
  console.log('\nmeans [95 % CI]; paired differences against the first variant');
  for (const g of res[0].keys()) {
    const base = res[0].get(g)!;
    const parts = variants.map((v, vi) => {
      const xs = res[vi].get(g)!;
      const m = bootstrapMean(xs, 2000);
      const d = vi > 0 ? pairedDiff(base, xs) : null;
      return `${v.name} ${m.mean.toFixed(2)}${d ? ` (${d.mean >= 0 ? '+' : ''}${d.mean.toFixed(2)} [${d.lo.toFixed(2)}, ${d.hi.toFixed(2)}])` : ''}`;
    });
    console.log(`${g.padEnd(22)} ${parts.join(' | ')}`);
  }
  cpu = cpu.map((c) => (c / audio) * 1000);
  console.log(`CPU ms per audio second: ${variants.map((v, i) => `${v.name} ${cpu[i].toFixed(2)}`).join(', ')} (st linear-only runs not counted)`);
  fs.rmSync(tmp, { recursive: true, force: true });
}

if (require.main === module) main(process.argv.slice(2));
