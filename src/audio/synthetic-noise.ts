// Deterministic synthetic noise for fixtures and the sample clip: a seeded PRNG, pink-ish noise, mains hum.
import path from 'node:path';
import fs from 'node:fs';
import { PROJECT_ROOT } from '../config';

/** The LibriSpeech utterance (48 kHz mono) shipped inside @vonage/noise-suppression. */
export function speechSourcePath(): string {
  const candidates = [path.join(PROJECT_ROOT, 'node_modules/@vonage/noise-suppression/data/7729-102255-0000.wav')];
  try {
    candidates.push(path.join(path.dirname(require.resolve('@vonage/noise-suppression/package.json')), 'data/7729-102255-0000.wav'));
  } catch {
    /* package.json not exported; the first candidate usually works */
  }
  const found = candidates.find((p) => fs.existsSync(p));
  if (!found) throw new Error('LibriSpeech utterance not found: is @vonage/noise-suppression installed?');
  return found;
}

// Math.imul as a module constant: the echo scene generator draws millions of numbers in the tests, where jest's vm
// context makes every lookup of a global slow (docs/testing.md).
const imul = Math.imul;

/** mulberry32: tiny, fast, seedable; returns floats in [0, 1). */
export function seededRandom(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = imul(t ^ (t >>> 15), t | 1);
    t ^= t + imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** Pink-ish noise (Paul Kellet's economy filter over white noise), roughly unit RMS. */
export function pinkNoise(frames: number, rand: () => number): Float32Array {
  const out = new Float32Array(frames);
  let b0 = 0, b1 = 0, b2 = 0;
  for (let i = 0; i < frames; i++) {
    const white = rand() * 2 - 1;
    b0 = 0.99765 * b0 + white * 0.099046;
    b1 = 0.963 * b1 + white * 0.2965164;
    b2 = 0.57 * b2 + white * 1.0526913;
    out[i] = b0 + b1 + b2 + white * 0.1848;
  }
  return scaleToRms(out, 1);
}

/** Mains hum: 50 Hz with decaying harmonics, unit RMS. */
export function hum(frames: number, sampleRate: number, fundamentalHz = 50): Float32Array {
  const out = new Float32Array(frames);
  const amps = [1, 0.5, 0.3, 0.15];
  for (let i = 0; i < frames; i++) {
    let v = 0;
    for (let h = 0; h < amps.length; h++) v += amps[h] * Math.sin((2 * Math.PI * fundamentalHz * (h + 1) * i) / sampleRate);
    out[i] = v;
  }
  return scaleToRms(out, 1);
}

export function rms(x: Float32Array): number {
  let s = 0;
  for (let i = 0; i < x.length; i++) s += x[i] * x[i];
  return Math.sqrt(s / Math.max(1, x.length));
}

export function scaleToRms(x: Float32Array, target: number): Float32Array {
  const r = rms(x);
  if (r > 0) for (let i = 0; i < x.length; i++) x[i] *= target / r;
  return x;
}

/** Noise bed (pink + hum, 4:1 in power) at `frames`, unit RMS. */
export function noiseBed(frames: number, sampleRate: number, rand: () => number): Float32Array {
  const pink = pinkNoise(frames, rand);
  const mains = hum(frames, sampleRate);
  const bed = new Float32Array(frames);
  for (let i = 0; i < frames; i++) bed[i] = 0.894 * pink[i] + 0.447 * mains[i];
  return scaleToRms(bed, 1);
}

/** speech + noise so that 20·log10(rms(speech)/rms(noise)) = snrDb; the result peaks at `peak`. */
export function mixAtSnr(speech: Float32Array, noise: Float32Array, snrDb: number, peak = 0.9): Float32Array {
  const noiseGain = rms(speech) / (rms(noise) * 10 ** (snrDb / 20));
  const out = new Float32Array(speech.length);
  for (let i = 0; i < out.length; i++) out[i] = speech[i] + noiseGain * noise[i];
  return normalizePeak([out], peak)[0];
}

/** Scales all channels by one gain so the loudest sample is `peak`. */
export function normalizePeak(planar: Float32Array[], peak = 0.9): Float32Array[] {
  let max = 0;
  for (const ch of planar) for (let i = 0; i < ch.length; i++) max = Math.max(max, Math.abs(ch[i]));
  if (max > 0) for (const ch of planar) for (let i = 0; i < ch.length; i++) ch[i] *= peak / max;
  return planar;
}
