// The echo canceller at other levels than the bench's (a development tool, not part of `npm run bench`): scenes of the
// bench's generator whose reference or echo is made quieter or louder after generation, run with variants of the
// canceller's options (paired against the first). A canceller should score the same at every level; the Kalman prior
// did not (docs/echo.md, "Levels").
//   node dist/scripts/bench/echo-levels.js [--n 5] [--seed 10000] [--speakers linear,clip,sigmoid]
//        [--v NAME:key=value,...]...     (default variants: before (priorZoneDb=1000, the prior never moves) and now)
//        [--onset]   instead: double talk from the first sample (a near-end talker over `st` scenes at signal-to-echo
//                    −10, 0, +10, +20 dB) and a playing reference with no echo, near-end SDR 10–20 s
//        [--presence] instead: a playing reference with no echo (a near-end talker: SDR 10–20 s; silence: the output
//                    against the microphone), and an echo that appears at 10 s (alone: ERLE 12–20 s; under the talker:
//                    SDR 12–20 s) beside the same audio cut at 10 s, the echo there from its start (2–10 s); default
//                    variants: before (presence=false, echo-presence.ts off) and now
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

/** The --presence rows (docs/echo.md, "A reference with no echo"). */
function presenceRows(count: number, seed0: number, speakers: Loudspeaker[], talkers: ReturnType<typeof loadTalkers>, variants: [string, Partial<EchoCancellerOptions>][], record: (key: string, vals: number[]) => void): void {
  const T = 10 * FS;
  const run = (s: Scene, score: (out: Float32Array) => number): number[] => variants.map(([, o]) => score(runOurs(s, o).out));
  for (let i = 0; i < count; i++) {
    const e = makeScene({ kind: 'st', seed: seed0 + i, speaker: speakers[i % speakers.length] }, talkers);
    const talk = makeScene({ kind: 'nst', seed: seed0 + 100 + i }, talkers);
    const none = new Float32Array(e.mic.length);
    const noise = e.mic.map((v, k) => v - e.echo[k]);
    record('no echo, talker: SDR', run({ ...e, echo: none, near: talk.near, mic: talk.mic }, (out) => magSdr(talk.near, out, T, 2 * T)));
    record('  the microphone', variants.map(() => magSdr(talk.near, talk.mic, T, 2 * T)));
    record('no echo, silent: out/mic', run({ ...e, echo: none, near: none, mic: noise }, (out) => magSdr(noise, out, T, 2 * T)));
    const late: Scene = { ...e, mic: e.mic.map((v, k) => (k >= T ? v : noise[k])) };
    const cut = (s: Scene): Scene => ({ ...s, mic: s.mic.slice(T), ref: s.ref.slice(T), echo: s.echo.slice(T), near: s.near.slice(T) });
    record('echo from 10 s: ERLE', run(late, (out) => erle(late, out, T + 2 * FS, 2 * T)));
    record('  the echo from 0 s', run(cut(late), (out) => erle(cut(late), out, 2 * FS, T)));
    const lateTalk: Scene = { ...e, near: talk.near, mic: talk.mic.map((v, k) => v + (k >= T ? e.echo[k] : 0)) };
    record('echo+talker from 10 s: SDR', run(lateTalk, (out) => magSdr(talk.near, out, T + 2 * FS, 2 * T)));
    record('  the echo from 0 s ', run(cut(lateTalk), (out) => magSdr(cut(lateTalk).near, out, 2 * FS, T)));
  }
}

function main(args: string[]): void {
  const opt = optionReader(args);
  const n = Number(opt('--n', '5'));
  const seed0 = Number(opt('--seed', '10000'));
  const speakers = opt('--speakers', 'linear,clip,sigmoid').split(',') as Loudspeaker[];
  const variants: [string, Partial<EchoCancellerOptions>][] = parseVariants(args).map((v) => [v.name, v.opts]);
  if (variants.length === 0) variants.push(args.includes('--presence') ? ['before', { presence: false }] : ['before', { priorZoneDb: 1000 }], ['now', {}]);
  const talkers = loadTalkers();
  const res = new Map<string, number[][]>();
  const record = (key: string, vals: number[]): void => {
    if (!res.has(key)) res.set(key, variants.map(() => []));
    vals.forEach((v, vi) => res.get(key)![vi].push(v));
  };
  if (args.includes('--onset')) {
    // The prior's gain estimate runs over the first second: near-end speech there must not read as echo.
    for (let i = 0; i < n * speakers.length; i++) {
      const e = makeScene({ kind: 'st', seed: seed0 + i, speaker: speakers[i % speakers.length] }, talkers);
      const talk = makeScene({ kind: 'nst', seed: seed0 + 100 + i }, talkers);
      for (const ser of [-10, 0, 10, 20]) {
        const g = Math.pow(10, (ser - 4) / 20); // the nst near end is at −26 dBFS, the echo at −30
        const near = talk.near.map((v) => v * g);
        const s: Scene = { ...e, near, mic: e.mic.map((v, k) => v + near[k]) };
        record(`dt from 0 s, SER ${ser}`, variants.map(([, o]) => magSdr(near, runOurs(s, o).out, 10 * FS, 20 * FS)));
      }
      const quiet: Scene = { ...e, echo: new Float32Array(e.mic.length), near: talk.near, mic: talk.mic };
      record('no echo, reference on', variants.map(([, o]) => magSdr(talk.near, runOurs(quiet, o).out, 10 * FS, 20 * FS)));
    }
  }
  if (args.includes('--presence')) presenceRows(n * speakers.length, seed0, speakers, talkers, variants, record);
  const kinds: SceneKind[] = args.includes('--onset') || args.includes('--presence') ? [] : ['st', 'dt', 'path'];
  kinds.forEach((kind, ki) => {
    speakers.forEach((speaker, si) => {
      for (let i = 0; i < n; i++) {
        const base = makeScene({ kind, seed: seed0 + 100 * ki + 30 * si + i, speaker }, talkers);
        for (const [level, f] of LEVELS) {
          const s = f(base);
          const from = kind === 'path' ? s.changeAt! + 2 * FS : 10 * FS;
          record(
            `${kind} ${level}`,
            variants.map(([, o]) => {
              const out = runOurs(s, o).out;
              return kind === 'dt' ? magSdr(s.near, out, from, 20 * FS) : erle(s, out, from, 20 * FS);
            }),
          );
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
    console.log(`${key.padEnd(26)} ${parts.join(' | ')}`);
  }
}

if (require.main === module) main(process.argv.slice(2));
