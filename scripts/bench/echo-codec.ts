// A reference that went through a lossy codec (a development tool, not part of `npm run bench`): a recorded call's
// far-end track is often Opus, MP3 or AAC, while the loudspeaker played what the codec had before. Each scene runs
// with its exact reference and with the reference encoded and decoded by ffmpeg, through this canceller and the
// speexdsp and WebRTC baselines (as the echo bench builds them), scored as the bench scores them (single talk: ERLE
// from 10 s; double talk: the near end's magnitude-spectrogram SDR); paired differences per codec.
//   node dist/scripts/bench/echo-codec.js [--codecs opus-16,opus-32,mp3-32,mp3-64,aac-32,mulaw-8] [--n 6]
//        [--kinds st,dt] [--seed-base 93000] [--set key=value]...
// A codec is NAME-KBPS (opus, mp3, aac: the bit rate) or mulaw-8 (G.711 μ-law at 8 kHz, decoded back to 16 kHz).
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { spawnSync } from 'node:child_process';
import { loadConfig } from '../../src/config';
import { optionReader, settingsOf } from '../lib/args';
import { bootstrapMean, pairedDiff } from '../lib/stats';
import { buildBaselines, findLag, runBaseline, runOurs, shift } from './echo';
import { erle, magSdr } from './echo-metrics';
import { FS, makeScene, type Scene, type SceneKind } from './echo-scenes';
import { loadTalkers } from './echo-talkers';

/**
 * The reference through `codec` and back to 16 kHz mono float, as long as it was (ffmpeg trims the codecs' priming);
 * `tmp` holds the encoded file. Throws where ffmpeg fails.
 */
export function throughCodec(x: Float32Array, codec: string, tmp: string): Float32Array {
  const [name, rate] = codec.split('-');
  const enc: Record<string, [string, string[]]> = {
    opus: ['opus', ['-c:a', 'libopus', '-b:a', `${rate}k`]],
    mp3: ['mp3', ['-c:a', 'libmp3lame', '-b:a', `${rate}k`]],
    aac: ['m4a', ['-c:a', 'aac', '-b:a', `${rate}k`]],
    mulaw: ['wav', ['-ar', '8000', '-c:a', 'pcm_mulaw']],
  };
  const e = enc[name];
  if (!e) throw new Error(`unknown codec ${codec} (opus-N, mp3-N, aac-N, mulaw-8)`);
  const ff = loadConfig().ffmpegPath;
  const raw = path.join(tmp, 'ref.f32');
  const coded = path.join(tmp, `ref.${e[0]}`);
  fs.writeFileSync(raw, Buffer.from(x.buffer, x.byteOffset, x.byteLength));
  const a = spawnSync(ff, ['-v', 'error', '-y', '-f', 'f32le', '-ar', String(FS), '-ac', '1', '-i', raw, ...e[1], coded]);
  if (a.status !== 0) throw new Error(`ffmpeg could not encode ${codec}: ${a.stderr}`);
  const b = spawnSync(ff, ['-v', 'error', '-i', coded, '-ac', '1', '-ar', String(FS), '-f', 'f32le', 'pipe:1'], { maxBuffer: 2 ** 30 });
  if (b.status !== 0) throw new Error(`ffmpeg could not decode ${codec}: ${b.stderr}`);
  const y = new Float32Array(b.stdout.buffer.slice(b.stdout.byteOffset, b.stdout.byteOffset + b.stdout.length));
  const out = new Float32Array(x.length);
  out.set(y.subarray(0, x.length));
  return out;
}

function score(s: Scene, out: Float32Array): number {
  return s.kind === 'st' ? erle(s, out, 10 * FS, s.mic.length) : magSdr(s.near, out, s.nearFrom!, s.mic.length);
}

const fmt = (x: number): string => (x >= 0 ? ' ' : '') + x.toFixed(2);

function main(args: string[]): void {
  const opt = optionReader(args);
  const codecs = opt('--codecs', 'opus-16,opus-32,mp3-32,mp3-64,aac-32,mulaw-8').split(',');
  const n = Number(opt('--n', '6'));
  const kinds = opt('--kinds', 'st,dt').split(',') as SceneKind[];
  const seedBase = Number(opt('--seed-base', '93000'));
  const overrides = settingsOf(args, '--set');
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'nsm-echo-codec-'));
  try {
    // Each baseline compiled once; the told-the-delay variants (-d) are not run here.
    const built = buildBaselines(tmp).filter((b) => !b.id.endsWith('-d'));
    for (const b of built) if (!b.exe) console.log(`${b.id}: skipped (${b.why})`);
    const baselines = built.filter((b) => b.exe);
    const talkers = loadTalkers();
    const calib = makeScene({ kind: 'nst', seed: 4000 }, talkers);
    const lags: Record<string, number> = { ours: 0 };
    for (const b of baselines) lags[b.id] = findLag(calib.mic, runBaseline(b, calib, tmp).out, 1600);
    const systems = ['ours', ...baselines.map((b) => b.id)];
    // scores[kind][codec][system] per scene, the exact reference as codec 'exact'.
    const scores: Record<string, Record<string, Record<string, number[]>>> = {};
    for (const kind of kinds) {
      for (let i = 0; i < n; i++) {
        const scene = makeScene({ kind, seed: seedBase + (kind === 'dt' ? 500 : 0) + i }, talkers);
        const line: string[] = [];
        for (const codec of ['exact', ...codecs]) {
          const s = codec === 'exact' ? scene : { ...scene, ref: throughCodec(scene.ref, codec, tmp) };
          const got: Record<string, number> = { ours: score(s, runOurs(s, overrides).out) };
          for (const b of baselines) got[b.id] = score(s, shift(runBaseline(b, s, tmp).out, lags[b.id]));
          for (const sys of systems) ((scores[kind] ??= {})[codec] ??= {})[sys] = [...(scores[kind][codec][sys] ?? []), got[sys]];
          line.push(`${codec} ${systems.map((x) => got[x].toFixed(1)).join('/')}`);
        }
        console.log(`${scene.name} ${scene.speaker.padEnd(7)} (${systems.join('/')}): ${line.join(' | ')}`);
      }
    }
    for (const kind of kinds) {
      console.log(`\n${kind === 'st' ? 'single talk: ERLE dB from 10 s' : 'double talk: near-end SDR dB'} (${n} scenes, mean [95 % CI])`);
      const exact = scores[kind].exact;
      for (const codec of ['exact', ...codecs]) {
        const row = scores[kind][codec];
        const cells = systems.map((sys) => {
          const m = bootstrapMean(row[sys]);
          return `${sys} ${m.mean.toFixed(1)} [${m.lo.toFixed(1)}, ${m.hi.toFixed(1)}]`;
        });
        const extra: string[] = [];
        if (codec !== 'exact') {
          const d = pairedDiff(exact.ours, row.ours);
          extra.push(`ours − exact ${fmt(d.mean)} [${fmt(d.lo)}, ${fmt(d.hi)}]`);
        }
        for (const b of baselines) {
          const d = pairedDiff(row[b.id], row.ours);
          extra.push(`ours − ${b.id} ${fmt(d.mean)} [${fmt(d.lo)}, ${fmt(d.hi)}] (${d.wins}/${n})`);
        }
        console.log(`  ${codec.padEnd(8)} ${cells.join('  ')}\n           ${extra.join('  ')}`);
      }
    }
  } finally {
    fs.rmSync(tmp, { recursive: true, force: true });
  }
}

if (require.main === module) main(process.argv.slice(2));
