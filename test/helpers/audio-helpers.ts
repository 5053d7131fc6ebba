// Shared helpers of the audio and CLI tests (not a test file itself).
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { PROJECT_ROOT } from '../../src/config';

export const FIXTURES = path.join(PROJECT_ROOT, 'fixtures');
export const fixture = (name: string): string => path.join(FIXTURES, name);

/** The seven accepted formats, all 3 s of 44.1 kHz stereo noisy speech (Opus decodes at 48 kHz). */
export const FORMAT_FIXTURES: { file: string; rate: number }[] = [
  { file: 'speech-noisy-44k1-stereo.wav', rate: 44100 },
  { file: 'speech-noisy-44k1-stereo.flac', rate: 44100 },
  { file: 'speech-noisy-44k1-stereo.ogg', rate: 44100 },
  { file: 'speech-noisy-44k1-stereo.opus', rate: 48000 },
  { file: 'speech-noisy-44k1-stereo.mp3', rate: 44100 },
  { file: 'speech-noisy-44k1-stereo.m4a', rate: 44100 },
  { file: 'speech-noisy-44k1-stereo.webm', rate: 48000 },
];

export function makeTmpDir(prefix: string): string {
  return fs.mkdtempSync(path.join(os.tmpdir(), prefix));
}

/** Live child processes of `pid` with their command names, read from /proc. */
export function childProcesses(pid: number = process.pid): { pid: number; comm: string }[] {
  const out: { pid: number; comm: string }[] = [];
  for (const entry of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    let stat: string;
    try {
      stat = fs.readFileSync(`/proc/${entry}/stat`, 'utf8');
    } catch {
      continue;
    }
    const close = stat.lastIndexOf(')');
    const comm = stat.slice(stat.indexOf('(') + 1, close);
    const [state, ppid] = stat.slice(close + 2).split(' ');
    if (Number(ppid) === pid && state !== 'Z') out.push({ pid: Number(entry), comm });
  }
  return out;
}

export function rmsOf(x: Float32Array, from = 0, to = x.length): number {
  let s = 0;
  for (let i = from; i < to; i++) s += x[i] * x[i];
  return Math.sqrt(s / Math.max(1, to - from));
}

/** Scale-invariant signal-to-distortion ratio (dB) of `estimate` against `reference` (same alignment). */
export function siSdr(estimate: Float32Array, reference: Float32Array): number {
  const n = Math.min(estimate.length, reference.length);
  let dot = 0;
  let refEnergy = 0;
  for (let i = 0; i < n; i++) {
    dot += estimate[i] * reference[i];
    refEnergy += reference[i] * reference[i];
  }
  const alpha = dot / refEnergy;
  let target = 0;
  let noise = 0;
  for (let i = 0; i < n; i++) {
    const t = alpha * reference[i];
    target += t * t;
    noise += (estimate[i] - t) ** 2;
  }
  return 10 * Math.log10(target / noise);
}
