// The echo bench's quality measures (also used by the canceller's unit tests): ERLE over the frames where the echo is
// active, and the magnitude-spectrogram SDR of an output against a clean reference.
import type { Scene } from './echo-scenes';

// Math as a module constant: under jest (a vm context) every lookup of a global in a hot loop goes through the
// context's interceptor; imageRir ran 12× slower there (790 against 67 ms) until its loops read it from here.
const M = Math;

const FRAME = 320;

/** ERLE over [from, to): microphone over output energy in the 20 ms frames where the echo is within 40 dB of its loudest. */
export function erle(scene: Scene, out: Float32Array, from: number, to: number): number {
  const frames: number[] = [];
  let max = 0;
  for (let i = from; i + FRAME <= to; i += FRAME) {
    let e = 0;
    for (let j = i; j < i + FRAME; j++) e += scene.echo[j] * scene.echo[j];
    frames.push(e);
    max = M.max(max, e);
  }
  let num = 0;
  let den = 0;
  frames.forEach((e, f) => {
    if (e < max * 1e-4) return;
    const i = from + f * FRAME;
    for (let j = i; j < i + FRAME; j++) {
      num += scene.mic[j] * scene.mic[j];
      den += out[j] * out[j];
    }
  });
  return 10 * M.log10(num / M.max(den, 1e-20));
}

/**
 * Seconds from `from` until the echo is cancelled again: the first 0.1 s window from which three in a row have an ERLE
 * of 20 dB or more (a window whose echo is under −70 dBFS counts as cancelled), capped at `cap` s. What a listener hears of a change
 * of the echo path as a burst of echo, which ERLE from 2 s after the change does not show.
 */
export function echoBurst(scene: Scene, out: Float32Array, from: number, cap = 3): number {
  const step = FRAME * 5;
  const ok: boolean[] = [];
  for (let i = 0; i < cap * 10 + 2; i++) {
    const a = from + i * step;
    if (a + step > scene.mic.length) break;
    let echo = 0;
    for (let j = a; j < a + step; j++) echo += scene.echo[j] * scene.echo[j];
    // Echo under −70 dBFS (the generated scenes' noise floor is at −78): nothing to hear.
    ok.push(echo / step < 1e-7 || erle(scene, out, a, a + step) >= 20);
  }
  for (let i = 0; i + 3 <= ok.length && i < cap * 10; i++) if (ok[i] && ok[i + 1] && ok[i + 2]) return i / 10;
  return cap;
}

/** Magnitude STFT (512, hop 128, Hann) of x[from, to). */
function magSpec(x: Float32Array, from: number, to: number): Float64Array[] {
  const N = 512;
  const win = new Float64Array(N).map((_, i) => 0.5 - 0.5 * M.cos((2 * M.PI * i) / N));
  const frames: Float64Array[] = [];
  const re = new Float64Array(N);
  const im = new Float64Array(N);
  for (let s = from; s + N <= to; s += 128) {
    for (let i = 0; i < N; i++) {
      re[i] = x[s + i] * win[i];
      im[i] = 0;
    }
    dft512(re, im);
    const m = new Float64Array(N / 2 + 1);
    for (let k = 0; k <= N / 2; k++) m[k] = M.hypot(re[k], im[k]);
    frames.push(m);
  }
  return frames;
}

function dft512(re: Float64Array, im: Float64Array): void {
  const n = re.length;
  for (let i = 1, j = 0; i < n; i++) {
    let bit = n >> 1;
    for (; j & bit; bit >>= 1) j ^= bit;
    j ^= bit;
    if (i < j) {
      [re[i], re[j]] = [re[j], re[i]];
      [im[i], im[j]] = [im[j], im[i]];
    }
  }
  for (let len = 2; len <= n; len <<= 1) {
    const ang = (-2 * M.PI) / len;
    for (let i = 0; i < n; i += len) {
      for (let j = 0; j < len / 2; j++) {
        const wr = M.cos(ang * j);
        const wi = M.sin(ang * j);
        const a = i + j;
        const b = a + len / 2;
        const tr = re[b] * wr - im[b] * wi;
        const ti = re[b] * wi + im[b] * wr;
        re[b] = re[a] - tr;
        im[b] = im[a] - ti;
        re[a] += tr;
        im[a] += ti;
      }
    }
  }
}

/** Magnitude-spectrogram SDR of `est` against `ref` over [from, to): 10 log Σ|S|² / Σ(|Ŝ| − |S|)². */
export function magSdr(ref: Float32Array, est: Float32Array, from: number, to: number): number {
  const S = magSpec(ref, from, to);
  const E = magSpec(est, from, to);
  let num = 0;
  let den = 0;
  for (let f = 0; f < S.length; f++) {
    for (let k = 0; k < S[f].length; k++) {
      num += S[f][k] * S[f][k];
      const d = E[f][k] - S[f][k];
      den += d * d;
    }
  }
  return 10 * M.log10(num / M.max(den, 1e-20));
}

