// Echo scenes for the echo reference's tests (files, jobs, CLI, the worker's front), generated here: the far end is
// the LibriSpeech clip shipped in @vonage/noise-suppression (48 kHz; its silences cut, looped), played through a short
// synthetic room (a direct path after a bulk delay, then 200 reflections decaying with an RT60 of 0.3 s: a sparse
// impulse response, cheap to apply at 48 kHz) into the microphone; the near end is the same clip reversed in time (the
// spectra of speech, none of its content: uncorrelated with the far end); low white noise. LibriSpeech is band-limited
// to 8 kHz, so the talker gets a generated band above 4 kHz too (white noise high-passed and shaped by the speech's
// own envelope, 12 dB below it: what fricatives put there), or nothing would be echoed above 8 kHz. 16 kHz scenes are
// the 48 kHz scene decimated by our own 3:1 decimator.
import path from 'node:path';
import { PROJECT_ROOT } from '../../src/config';
import { seededRandom } from '../../src/audio/synthetic-noise';
import { WavReader } from '../../src/audio/wav';
import { Decimator3, designLowpass } from '../../src/dsp/resample';
import { writeWav16 } from '../../scripts/lib/audio-io';

const CLIP = path.join(PROJECT_ROOT, 'node_modules', '@vonage', 'noise-suppression', 'data', '7729-102255-0000.wav');

let speech48: Float32Array | null = null;

/** The clip at 48 kHz with its leading and trailing silence cut, at an active RMS of 0.1 (−20 dBFS). */
async function clip48(): Promise<Float32Array> {
  if (speech48) return speech48;
  const r = await WavReader.open(CLIP);
  if (!r) throw new Error(`${CLIP} is not a WAV`);
  const x = (await r.read(r.info.frames))[0];
  await r.close();
  const frame = 960;
  const energies: number[] = [];
  for (let i = 0; i + frame <= x.length; i += frame) {
    let e = 0;
    for (let j = i; j < i + frame; j++) e += x[j] * x[j];
    energies.push(e);
  }
  const max = Math.max(...energies);
  const first = energies.findIndex((e) => e > max * 1e-3);
  const last = energies.length - 1 - [...energies].reverse().findIndex((e) => e > max * 1e-3);
  const cut = x.slice(first * frame, (last + 1) * frame);
  let e = 0;
  let n = 0;
  for (let i = 0; i + frame <= cut.length; i += frame) {
    let f = 0;
    for (let j = i; j < i + frame; j++) f += cut[j] * cut[j];
    if (f > max * 1e-2) {
      e += f;
      n += frame;
    }
  }
  const g = 0.1 / Math.sqrt(e / n);
  for (let i = 0; i < cut.length; i++) cut[i] *= g;
  speech48 = withHighBand(cut);
  return speech48;
}

/** x plus white noise above 4 kHz under x's envelope (10 ms), 12 dB below x's energy. */
function withHighBand(x: Float32Array): Float32Array {
  const random = seededRandom(11);
  const a = Math.exp(-1 / (0.01 * 48000));
  const shaped = new Float32Array(x.length);
  let env = 0;
  for (let i = 0; i < x.length; i++) {
    env = Math.abs(x[i]) + a * (env - Math.abs(x[i]));
    shaped[i] = env * (random() - 0.5);
  }
  const hf = highPass48(shaped, 4000, 101);
  const g = Math.sqrt((energy(x) / energy(hf)) * Math.pow(10, -12 / 10));
  return x.map((v, i) => v + g * hf[i]);
}

/**
 * x minus its linear-phase low-pass at `cutoffHz` (48 kHz, `taps` odd): what lies above the cutoff, aligned with x.
 * Samples before `from` are left 0 (callers that measure from there skip the rest). The taps' sum runs in the same
 * order at the edges and inside, without a bound check inside.
 */
export function highPass48(x: Float32Array, cutoffHz: number, taps: number, from = 0): Float32Array {
  const lp = designLowpass(taps, cutoffHz / 48000, 8);
  const mid = (taps - 1) / 2;
  const n = x.length;
  const y = new Float32Array(n);
  for (let i = from; i < n; i++) {
    let acc = 0;
    if (i - mid >= 0 && i + mid < n) {
      for (let k = 0, j = i + mid; k < taps; k++, j--) acc += lp[k] * x[j];
    } else {
      for (let k = 0; k < taps; k++) {
        const j = i + mid - k;
        if (j >= 0 && j < n) acc += lp[k] * x[j];
      }
    }
    y[i] = x[i] - acc;
  }
  return y;
}

/** `x` looped (with 0.3 s of silence between repeats) to `n` samples, starting at sample `from` (zeros before). */
function looped(x: Float32Array, n: number, from: number, gap: number): Float32Array {
  const out = new Float32Array(n);
  for (let i = from, j = 0; i < n; i++, j = (j + 1) % (x.length + gap)) out[i] = j < x.length ? x[j] : 0;
  return out;
}

/** A sparse room response at 48 kHz: taps (sample offsets) and gains. */
function room48(delayMs: number, gain: number, seed: number): { at: Int32Array; g: Float64Array } {
  const random = seededRandom(seed);
  const taps = 200;
  const at = new Int32Array(taps + 1);
  const g = new Float64Array(taps + 1);
  const d0 = Math.round((delayMs / 1000) * 48000);
  at[0] = d0;
  g[0] = gain;
  const rt60 = 0.3;
  for (let k = 1; k <= taps; k++) {
    const t = 0.002 + random() * 0.15; // reflections over 150 ms after the direct sound
    at[k] = d0 + Math.round(t * 48000);
    g[k] = gain * 0.35 * Math.exp((-6.9 * t) / rt60) * (random() < 0.5 ? -1 : 1);
  }
  return { at, g };
}

function convolveSparse(x: Float32Array, h: { at: Int32Array; g: Float64Array }): Float32Array {
  const y = new Float32Array(x.length);
  for (let k = 0; k < h.at.length; k++) {
    const d = h.at[k];
    const g = h.g[k];
    for (let i = d; i < x.length; i++) y[i] += g * x[i - d];
  }
  return y;
}

export interface EchoScene {
  rate: number;
  /** The microphone: echo + near end + noise. */
  mic: Float32Array;
  /** What the loudspeaker played (the far end), from 0 s. */
  ref: Float32Array;
  echo: Float32Array;
  near: Float32Array;
}

export interface SceneOptions {
  rate: 16000 | 48000;
  seconds: number;
  /** The near end talks from here on (seconds; default: never). */
  nearFrom?: number;
  /** Bulk delay of the echo behind the reference, ms (default 60). */
  delayMs?: number;
  /** Echo path gain of the direct sound (default 0.5: the echo some 6-8 dB below the reference). */
  echoGain?: number;
  seed?: number;
}

/** A far end played through a room into a microphone, with a near-end talker from `nearFrom` (see the header). */
export async function echoScene(o: SceneOptions): Promise<EchoScene> {
  const x = await clip48();
  const n48 = Math.round(o.seconds * 48000);
  const far = looped(x, n48, 0, Math.round(0.3 * 48000));
  const echo48 = convolveSparse(far, room48(o.delayMs ?? 60, o.echoGain ?? 0.5, o.seed ?? 7));
  const reversed = x.slice().reverse();
  const near48 = o.nearFrom === undefined ? new Float32Array(n48) : looped(reversed, n48, Math.round(o.nearFrom * 48000), Math.round(0.2 * 48000));
  for (let i = 0; i < n48; i++) near48[i] *= 0.5; // about −26 dBFS, like the echo
  const random = seededRandom((o.seed ?? 7) + 1);
  const mic48 = new Float32Array(n48);
  for (let i = 0; i < n48; i++) mic48[i] = echo48[i] + near48[i] + (random() - 0.5) * 0.002; // noise about −65 dBFS
  if (o.rate === 48000) return { rate: 48000, mic: mic48, ref: far, echo: echo48, near: near48 };
  const down = (s: Float32Array): Float32Array => new Decimator3().process(s);
  return { rate: 16000, mic: down(mic48), ref: down(far), echo: down(echo48), near: down(near48) };
}

/** Writes a mono 16-bit WAV. */
export function writeMono(file: string, rate: number, x: Float32Array): void {
  writeWav16(file, rate, x.length, (i) => x[i]);
}

/** Energy of x[from..to) (samples). */
export function energy(x: Float32Array, from = 0, to = x.length): number {
  let e = 0;
  for (let i = from; i < to; i++) e += x[i] * x[i];
  return e;
}

/** 10 log10(a / b). */
export function db(a: number, b: number): number {
  return 10 * Math.log10(a / b);
}
