// Slow ticks of many echo cancellers on one thread (a development tool, not part of `npm run bench`): what a live
// worker's echo streams see without the server, the network or the model. N cancellers are made at once and fed the
// stream bench's echo input (the fixture recording as the microphone with its echo 60 ms late at −6 dB, the recording
// 3 s later as the reference), 20 ms chunks, each tick every canceller one chunk, ticks back to back; each build runs
// in a fresh process (JIT state is per process), this dist and --other DIST alternating round by round. Before its
// cancellers, a build that has the live workers' warm-up (dsp/aec warmScene) runs it as the worker does. Prints per
// run the tick times (p50, p99, the largest in the first second and after it), the CPU of all ticks and, with
// --deopts, V8's deoptimisations (--trace-deopt) by reason.
//   node dist/scripts/bench/echo-ticks.js [--streams 40] [--seconds 10] [--rounds 3] [--other DIST] [--deopts]
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { PROJECT_ROOT } from '../../src/config';
import { optionReader } from '../lib/args';

interface Aec {
  EchoCanceller: new (o: { channels: number }) => { process(mic: Float32Array[], ref: Float32Array): Float32Array[] };
  warmScene?: (seconds: number) => { mic: Float32Array; ref: Float32Array };
}

const CHUNK = 320;

/** The stream bench's echo input (stream.ts withEchoReference) from the 16 kHz fixture, as float32. */
function echoInput(samples: number): { mic: Float32Array; ref: Float32Array } {
  const wav = fs.readFileSync(path.join(PROJECT_ROOT, 'fixtures', 'speech-noisy-16k-mono.wav'));
  let off = 12;
  while (wav.toString('ascii', off, off + 4) !== 'data') off += 8 + wav.readUInt32LE(off + 4);
  const n = wav.readUInt32LE(off + 4) / 2;
  const at = (i: number): number => wav.readInt16LE(off + 8 + 2 * (((i % n) + n) % n)) / 32768;
  const shift = 3 * 16000;
  const delay = Math.round(0.06 * 16000);
  const mic = new Float32Array(samples);
  const ref = new Float32Array(samples);
  for (let i = 0; i < samples; i++) {
    mic[i] = at(i) + 0.5 * at(i + shift - delay);
    ref[i] = at(i + shift);
  }
  return { mic, ref };
}

function child(dist: string, streams: number, seconds: number): void {
  const aec = require(path.join(path.resolve(dist), 'src', 'dsp', 'aec')) as Aec;
  let warmMs: number | null = null;
  if (aec.warmScene) {
    const t0 = performance.now();
    for (let i = 0; i < 8; i++) new aec.EchoCanceller({ channels: 1 });
    const s = aec.warmScene(3);
    const c = new aec.EchoCanceller({ channels: 1 });
    for (let a = 0; a < s.mic.length; a += CHUNK) c.process([s.mic.subarray(a, a + CHUNK)], s.ref.subarray(a, a + CHUNK));
    warmMs = performance.now() - t0;
  }
  const { mic, ref } = echoInput(seconds * 16000 + CHUNK * streams);
  const cs = Array.from({ length: streams }, () => new aec.EchoCanceller({ channels: 1 }));
  const ticks: number[] = [];
  for (let t = 0; t < seconds * 50; t++) {
    const t0 = performance.now();
    for (let k = 0; k < streams; k++) {
      const a = (t + k) * CHUNK; // each stream at another place in the recording
      cs[k].process([mic.subarray(a, a + CHUNK)], ref.subarray(a, a + CHUNK));
    }
    ticks.push(performance.now() - t0);
  }
  const sorted = [...ticks].sort((a, b) => a - b);
  const q = (p: number): number => sorted[Math.min(sorted.length - 1, Math.floor(p * sorted.length))];
  const r2 = (x: number): number => Math.round(x * 100) / 100;
  console.log(
    'RESULT ' +
      JSON.stringify({
        p50: r2(q(0.5)),
        p99: r2(q(0.99)),
        firstSecondMax: r2(Math.max(...ticks.slice(0, 50))),
        afterMax: r2(Math.max(...ticks.slice(50))),
        cpuS: r2(ticks.reduce((a, b) => a + b, 0) / 1000),
        warmMs: warmMs === null ? null : Math.round(warmMs),
      }),
  );
}

function main(): void {
  const args = process.argv.slice(2);
  const opt = optionReader(args);
  const streams = Number(opt('--streams', '40'));
  const seconds = Number(opt('--seconds', '10'));
  const childDist = opt('--child', '');
  if (childDist) return child(childDist, streams, seconds);
  const rounds = Number(opt('--rounds', '3'));
  const other = args.includes('--other') ? path.resolve(opt('--other', '')) : '';
  const deopts = args.includes('--deopts');
  const builds = [path.join(PROJECT_ROOT, 'dist'), ...(other ? [other] : [])];
  console.log(`${streams} cancellers made at once, ${seconds} s of 20 ms ticks back to back, ${rounds} rounds, builds alternating`);
  console.log('build                                       p50 ms  p99 ms  max 1st s  max after  CPU s  warm-up ms' + (deopts ? '  deopts by reason' : ''));
  for (let r = 0; r < rounds; r++) {
    for (const dist of r % 2 === 0 ? builds : [...builds].reverse()) {
      const flags = deopts ? ['--trace-deopt'] : [];
      const run = spawnSync(process.execPath, [...flags, __filename, '--child', dist, '--streams', String(streams), '--seconds', String(seconds)], { encoding: 'utf8', maxBuffer: 1 << 28 });
      const line = run.stdout.split('\n').find((l) => l.startsWith('RESULT '));
      if (!line) throw new Error(`child failed: ${run.stderr.slice(-2000)}`);
      const x = JSON.parse(line.slice(7)) as Record<string, number | null>;
      let reasons = '';
      if (deopts) {
        const counts = new Map<string, number>();
        for (const m of run.stdout.matchAll(/\[bailout \(kind: [^,]+, reason: ([^)]*)\)/g)) counts.set(m[1], (counts.get(m[1]) ?? 0) + 1);
        reasons = '  ' + [...counts].sort((a, b) => b[1] - a[1]).map(([k, v]) => `${v} ${k}`).join('; ');
      }
      console.log(
        `${dist.slice(-42).padEnd(42)} ${String(x.p50).padStart(7)} ${String(x.p99).padStart(7)} ${String(x.firstSecondMax).padStart(10)} ${String(x.afterMax).padStart(10)} ${String(x.cpuS).padStart(6)} ${String(x.warmMs ?? '-').padStart(11)}${reasons}`,
      );
    }
  }
}

main();
