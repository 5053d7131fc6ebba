// The echo canceller at other levels than the bench's (a development tool, not part of `npm run bench`): scenes of the
// bench's generator whose reference or echo is made quieter or louder after generation, run with variants of the
// canceller's options (paired against the first). A canceller should score the same at every level; the Kalman prior
// did not (docs/echo.md, "Levels").
//   node dist/scripts/bench/echo-levels.js [--n 5] [--seed 10000] [--speakers linear,clip,sigmoid]
//        [--v NAME:key=value,...]...     (default variants: before (priorZoneDb=1000, the prior never moves) and now)
import { pairedDiff, mean } from '../lib/stats';
import type { EchoCancellerOptions } from '../../src/dsp/aec';
import { runOurs } from './echo';
import { erle, magSdr } from './echo-metrics';
import { parseVariants } from './echo-tune';
import { FS, makeScene, type Loudspeaker, type Scene, type SceneKind } from './echo-scenes';
import { loadTalkers } from './echo-talkers';
import { optionReader } from '../lib/args';

/** Echo and near end scaled together (the signal-to-echo ratio stays; the noise does not move). */
function scaleEcho(s: Scene, g: number): Scene {
  const echo = s.echo.map((v) => v * g);
  const near = s.near.map((v) => v * g);
  return { ...s, echo, near, mic: s.mic.map((v, i) => v - s.echo[i] + echo[i] - s.near[i] + near[i]) };
}

const db = (x: number): number => Math.pow(10, x / 20);
const LEVELS: [string, (s: Scene) => Scene][] = [
  ['as generated', (s) => s],
  ['reference -20 dB', (s) => ({ ...s, ref: s.ref.map((v) => v * db(-20)) })],
  ['reference -35 dB', (s) => ({ ...s, ref: s.ref.map((v) => v * db(-35)) })],
  ['echo +15 dB', (s) => scaleEcho(s, db(15))],
  ['echo -10 dB', (s) => scaleEcho(s, db(-10))],
];

function main(args: string[]): void {
  const opt = optionReader(args);
  const n = Number(opt('--n', '5'));
  const seed0 = Number(opt('--seed', '10000'));
  const speakers = opt('--speakers', 'linear,clip,sigmoid').split(',') as Loudspeaker[];
  const variants: [string, Partial<EchoCancellerOptions>][] = parseVariants(args).map((v) => [v.name, v.opts]);
  if (variants.length === 0) variants.push(['before', { priorZoneDb: 1000 }], ['now', {}]);
  const talkers = loadTalkers();
  const res = new Map<string, number[][]>();
  const kinds: SceneKind[] = ['st', 'dt', 'path'];
  kinds.forEach((kind, ki) => {
    speakers.forEach((speaker, si) => {
      for (let i = 0; i < n; i++) {
        const base = makeScene({ kind, seed: seed0 + 100 * ki + 30 * si + i, speaker }, talkers);
        for (const [level, f] of LEVELS) {
          const s = f(base);
          const from = kind === 'path' ? s.changeAt! + 2 * FS : 10 * FS;
          const key = `${kind} ${level}`;
          if (!res.has(key)) res.set(key, variants.map(() => []));
          variants.forEach(([, o], vi) => {
            const out = runOurs(s, o).out;
            res.get(key)![vi].push(kind === 'dt' ? magSdr(s.near, out, from, 20 * FS) : erle(s, out, from, 20 * FS));
          });
        }
      }
    });
  });
  console.log(`ERLE dB (st 10–20 s, path from 2 s after the change), near-end SDR dB (dt 10–20 s); ${n * speakers.length} scenes per row; paired differences against ${variants[0][0]} [95 % CI]`);
  for (const [key, vs] of res) {
    const parts = variants.map(([name], vi) => {
      const d = vi > 0 ? pairedDiff(vs[0], vs[vi]) : null;
      return `${name} ${mean(vs[vi]).toFixed(1)}${d ? ` (${d.mean >= 0 ? '+' : ''}${d.mean.toFixed(1)} [${d.lo.toFixed(1)}, ${d.hi.toFixed(1)}])` : ''}`;
    });
    console.log(`${key.padEnd(22)} ${parts.join(' | ')}`);
  }
}

if (require.main === module) main(process.argv.slice(2));
