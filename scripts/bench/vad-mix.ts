// Test material for the VAD benchmark (scripts/bench/vad.ts), made from the evaluation kit (../shared/eval; sources and
// licences in its SOURCES.md: DNS Challenge, VoiceBank+DEMAND, freesound via DeepFilterNet's assets):
//   - speech labels from a clean reference (labelSpeech);
//   - "call" mixtures: utterances of the kit's clean speech (the 15 pairs' clean references and the full-band clean
//     clip) with noise-only pauses between them, as in a call where the caller listens part of the time, in the kit's
//     noises (each pair's noisy − clean, and the full-band noise) at a chosen SNR. Labels come from each utterance's
//     clean signal; the pauses are non-speech. Deterministic for a seed.
import { decodeAudio } from '../lib/audio-io';
import { listClips } from '../lib/eval-kit';
import { seeded } from '../lib/stats';
import fs from 'node:fs';
import path from 'node:path';

export const MIX_RATE = 16000;
/** The label grid: 10 ms. */
export const GRID = 160;

/**
 * Speech labels from the clean reference, one per 10 ms: a frame is speech when its energy is at least 12 dB above the
 * clip's floor (10th percentile of frame energies) and within 30 dB of its loud end (95th percentile); gaps under
 * 200 ms between speech frames are filled (pauses inside phrases), runs under 50 ms dropped.
 */
export function labelSpeech(clean: Float32Array): Uint8Array {
  const n = Math.floor(clean.length / GRID);
  const e = new Float64Array(n);
  for (let f = 0; f < n; f++) {
    let s = 0;
    for (let i = 0; i < GRID; i++) s += clean[f * GRID + i] ** 2;
    e[f] = 10 * Math.log10(s / GRID + 1e-12);
  }
  const sorted = Float64Array.from(e).sort();
  const thr = Math.max(sorted[Math.floor(0.1 * n)] + 12, sorted[Math.floor(0.95 * n)] - 30);
  const l = Uint8Array.from(e, (v) => (v >= thr ? 1 : 0));
  let last = -1;
  for (let f = 0; f < n; f++) {
    if (!l[f]) continue;
    if (last >= 0 && f - last - 1 < 20) l.fill(1, last + 1, f);
    last = f;
  }
  for (let f = 0; f < n; ) {
    if (!l[f]) {
      f++;
      continue;
    }
    let g = f;
    while (g < n && l[g]) g++;
    if (g - f < 5) l.fill(0, f, g);
    f = g;
  }
  return l;
}

/** `noise` repeated to `length` samples from `start`, joined with 50 ms equal-power crossfades. */
export function loopNoise(noise: Float32Array, length: number, start = 0): Float32Array {
  const X = 800;
  const src = start > 0 ? Float32Array.from([...noise.subarray(start), ...noise.subarray(0, start)]) : noise;
  const out = new Float32Array(length);
  for (let pos = 0; pos < length; pos += src.length - X) {
    for (let i = 0; i < src.length && pos + i < length; i++) {
      const a = pos > 0 && i < X ? (Math.PI / 2) * (i / X) : Math.PI / 2;
      out[pos + i] = out[pos + i] * Math.cos(a) + src[i] * Math.sin(a);
    }
  }
  return out;
}

export interface Utterance {
  id: string;
  clean: Float32Array;
  label: Uint8Array;
}

export interface NoiseSource {
  id: string;
  noise: Float32Array;
}

/** The kit's clean speech (utterances, each with its labels) and noises, at 16 kHz. */
export function kitMaterial(dir: string): { utterances: Utterance[]; noises: NoiseSource[] } {
  const utterances: Utterance[] = [];
  const noises: NoiseSource[] = [];
  for (const clip of listClips(dir).pairs) {
    const clean = decodeAudio(clip.clean!, MIX_RATE)[0];
    const noisy = decodeAudio(clip.noisy, MIX_RATE)[0];
    const n = Math.floor(Math.min(clean.length, noisy.length) / GRID) * GRID;
    utterances.push({ id: clip.id, clean: clean.slice(0, n), label: labelSpeech(clean.subarray(0, n)) });
    noises.push({ id: clip.id, noise: noisy.subarray(0, n).map((v, i) => v - clean[i]) });
  }
  const full = path.join(dir, 'fullband');
  const cleanFull = path.join(full, 'clean_freesound_33711.wav');
  const noiseFull = path.join(full, 'noise_freesound_573577.wav');
  if (fs.existsSync(cleanFull)) {
    const c = decodeAudio(cleanFull, MIX_RATE)[0];
    const x = c.slice(0, Math.floor(c.length / GRID) * GRID);
    utterances.push({ id: 'fullband/clean_freesound_33711', clean: x, label: labelSpeech(x) });
  }
  if (fs.existsSync(noiseFull)) noises.push({ id: 'fullband/noise_freesound_573577', noise: decodeAudio(noiseFull, MIX_RATE)[0] });
  return { utterances, noises };
}

export interface Mixture {
  id: string;
  snrDb: number;
  noiseId: string;
  clean: Float32Array;
  noisy: Float32Array;
  /** Speech per 10 ms (GRID samples) of the clip. */
  label: Uint8Array;
}

export interface CallOptions {
  snrsDb: number[];
  perSnr: number;
  seed: number;
  /** Utterances per clip. */
  utterances?: number;
  /** Pause between utterances, s (uniform). */
  pauseS?: [number, number];
}

function activePower(x: Float32Array, label: Uint8Array): number {
  let s = 0;
  let n = 0;
  for (let f = 0; f < label.length; f++) {
    if (!label[f]) continue;
    for (let i = 0; i < GRID; i++) s += x[f * GRID + i] ** 2;
    n += GRID;
  }
  return n ? s / n : 0;
}

/**
 * Call-like clips: per SNR, `perSnr` clips of `utterances` (default 3) different utterances, each at an active speech
 * level of −26 dBFS ± 4 dB, with pauses between them (default 1.5–7 s), 0.5–3 s before the first and 1–3 s after the
 * last; the noise (the sources in turn, from a random offset, looped) runs through the whole clip at `snr` dB below the
 * clip's active speech level. Clips that would clip are scaled down, clean and noisy alike.
 */
export function callMixtures(material: { utterances: Utterance[]; noises: NoiseSource[] }, opts: CallOptions): Mixture[] {
  const { utterances, noises } = material;
  const count = opts.utterances ?? 3;
  const [pMin, pMax] = opts.pauseS ?? [1.5, 7];
  const rnd = seeded(opts.seed);
  const uniform = (a: number, b: number) => a + (b - a) * rnd();
  /** Whole 10 ms steps, so that every utterance's labels sit on the clip's grid. */
  const steps = (s: number) => Math.round((s * MIX_RATE) / GRID) * GRID;
  const out: Mixture[] = [];
  for (const snr of opts.snrsDb) {
    for (let k = 0; k < opts.perSnr; k++) {
      const picks: Utterance[] = [];
      while (picks.length < Math.min(count, utterances.length)) {
        const u = utterances[Math.floor(rnd() * utterances.length)];
        if (!picks.includes(u)) picks.push(u);
      }
      const gaps = [steps(uniform(0.5, 3)), ...picks.slice(1).map(() => steps(uniform(pMin, pMax))), steps(uniform(1, 3))];
      const total = gaps.reduce((a, b) => a + b, 0) + picks.reduce((a, u) => a + u.clean.length, 0);
      const clean = new Float32Array(total);
      const label = new Uint8Array(total / GRID);
      let at = gaps[0];
      picks.forEach((u, i) => {
        const gain = Math.pow(10, (-26 + uniform(-4, 4)) / 20) / Math.sqrt(activePower(u.clean, u.label) || 1e-12);
        for (let j = 0; j < u.clean.length; j++) clean[at + j] = u.clean[j] * gain;
        label.set(u.label, at / GRID);
        at += u.clean.length + gaps[i + 1];
      });
      const src = noises[k % noises.length];
      const noise = loopNoise(src.noise, total, Math.floor(rnd() * src.noise.length));
      let pn = 0;
      for (let i = 0; i < total; i++) pn += noise[i] ** 2;
      const g = Math.sqrt(activePower(clean, label) / Math.pow(10, snr / 10) / (pn / total));
      const noisy = clean.map((v, i) => v + g * noise[i]);
      let peak = 0;
      for (let i = 0; i < total; i++) peak = Math.max(peak, Math.abs(noisy[i]));
      if (peak > 0.99) {
        const s = 0.99 / peak;
        for (let i = 0; i < total; i++) {
          noisy[i] *= s;
          clean[i] *= s;
        }
      }
      out.push({ id: `snr${snr}-${k}`, snrDb: snr, noiseId: src.id, clean, noisy, label });
    }
  }
  return out;
}
