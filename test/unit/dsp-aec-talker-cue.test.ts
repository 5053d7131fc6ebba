// The near-end talker cue (src/dsp/aec/talker-cue.ts, bit 128 of the suppressor's `terms`): the microphone's share
// explained by the reference on constructed signals (an echo, an independent talker, both), then through the canceller:
// double talk from the first second keeps more of the near end, a silent reference changes nothing, and the output
// does not depend on the chunking. Unit tier.
import { TalkerCue } from '../../src/dsp/aec/talker-cue';
import { RefRing } from '../../src/dsp/aec/ref-ring';
import { AecArena } from '../../src/dsp/aec/kernel';
import { RealFFT } from '../../src/dsp/fft';
import { createRowFft } from '../../src/dsp/fft-pairs';
import { magSdr } from '../../scripts/bench/echo-metrics';
import { makeScene } from '../../scripts/bench/echo-scenes';
import { FS, pushSpectrum, runCanceller, talkers } from '../helpers/dsp-aec-helpers';

jest.setTimeout(60_000);

const HOP = 128;
const LAGS = 40;

/** A ring and a cue in one arena of the given back end (the cue's per-lag loop is the arena's kernel). */
function ringAndCue(backend: 'wasm' | 'js'): { ring: RefRing; cue: TalkerCue } {
  const arena = new AecArena(RefRing.floats(HOP + 1, LAGS) + TalkerCue.floats(LAGS), backend);
  return { ring: new RefRing(arena, HOP + 1, LAGS), cue: new TalkerCue(arena, HOP, LAGS) };
}

/** White noise from a seeded generator (mulberry32). */
function noise(n: number, seed: number): Float32Array {
  let s = seed >>> 0;
  const out = new Float32Array(n);
  for (let i = 0; i < n; i++) {
    s = (s + 0x6d2b79f5) >>> 0;
    let t = Math.imul(s ^ (s >>> 15), 1 | s);
    t ^= t + Math.imul(t ^ (t >>> 7), 61 | t);
    out[i] = (((t ^ (t >>> 14)) >>> 0) / 4294967296 - 0.5) * 0.5;
  }
  return out;
}

/** The cue's explained share after `hops` hops of reference x and microphone d. */
function explained(x: Float32Array, d: Float32Array, hops: number, backend: 'wasm' | 'js' = 'wasm'): number {
  const { ring, cue } = ringAndCue(backend);
  const fft = new RealFFT(2 * HOP);
  const rows = createRowFft(2 * HOP, backend);
  const frame = new Float64Array(2 * HOP);
  const re = new Float64Array(HOP + 1);
  const im = new Float64Array(HOP + 1);
  const micPrev = new Float64Array(HOP);
  for (let h = 1; h < hops; h++) {
    for (let i = 0; i < 2 * HOP; i++) frame[i] = x[(h - 1) * HOP + i];
    fft.forward(frame, 0, re, im);
    pushSpectrum(ring, re, im);
    const block = d.subarray(h * HOP, (h + 1) * HOP);
    cue.update(micPrev, block, ring, rows);
    micPrev.set(block);
  }
  return cue.explained;
}

test('the explained share: an echo is explained, an independent talker is not, both in between', () => {
  const hops = 300;
  const n = (hops + 1) * HOP;
  const x = noise(n, 1);
  const near = noise(n, 987654);
  // The echo: the reference 20 hops (160 ms) late, with two reflections, at a gain of 0.3.
  const echo = new Float32Array(n);
  for (let i = 0; i < n; i++) {
    const at = (j: number): number => (i - j >= 0 ? x[i - j] : 0);
    echo[i] = 0.3 * (at(20 * HOP) + 0.5 * at(20 * HOP + 37) + 0.25 * at(20 * HOP + 300));
  }
  const single = explained(x, echo, hops);
  const alone = explained(x, near, hops);
  const both = new Float32Array(n);
  // The near end 6 dB above the echo.
  const g = Math.sqrt(4 * (echo.reduce((s, v) => s + v * v, 0) / near.reduce((s, v) => s + v * v, 0)));
  for (let i = 0; i < n; i++) both[i] = echo[i] + g * near[i];
  const mixed = explained(x, both, hops);
  expect(single).toBeGreaterThan(0.6);
  expect(Math.abs(alone)).toBeLessThan(0.1);
  expect(mixed).toBeGreaterThan(alone + 0.05);
  expect(mixed).toBeLessThan(single * 0.4);
  // The WebAssembly kernel (two lags per operation) and the JavaScript loop give the same sums, bit for bit.
  expect(explained(x, both, hops, 'js')).toBe(mixed);
  expect(explained(x, echo, hops, 'js')).toBe(single);
});

test('through the canceller: early double talk keeps more of the near end; a silent reference and the chunking change nothing', async () => {
  const t = await talkers();
  // Double talk from half a second (tuning seed 6101's kind of scene: clipping, SER 8 dB).
  const dt = makeScene({ kind: 'dt', seed: 6101, seconds: 8, speaker: 'clip', nearFromS: 0.5 }, t);
  const from = dt.nearFrom!;
  const off = runCanceller([dt.mic], dt.ref, { terms: 127 }).out[0];
  const on = runCanceller([dt.mic], dt.ref, { terms: 255 }).out[0];
  expect(magSdr(dt.near, on, from, dt.mic.length)).toBeGreaterThan(magSdr(dt.near, off, from, dt.mic.length) + 0.3);
  const chunked = runCanceller([dt.mic], dt.ref, { terms: 255 }, [17, 999, 128, 320]).out[0];
  expect(Buffer.from(chunked.buffer).equals(Buffer.from(on.buffer))).toBe(true);
  // A silent reference: the cue never runs, the output is the canceller's without it.
  const silent = new Float32Array(dt.ref.length);
  const a = runCanceller([dt.mic], silent, { terms: 127 }).out[0];
  const b = runCanceller([dt.mic], silent, { terms: 255 }).out[0];
  expect(Buffer.from(a.buffer).equals(Buffer.from(b.buffer))).toBe(true);
  expect(FS).toBe(16000);
});
