// The echo canceller's streaming contract (src/dsp/aec/canceller.ts): a silent reference leaves the microphone as it
// is, bit for bit; chunking never changes the output; several microphone channels share one reference; the figures
// it reports; bad input refused. Unit tier.
import { AEC_HOP, AEC_LATENCY, EchoCanceller } from '../../src/dsp/aec';
import { erle } from '../../scripts/bench/echo-metrics';
import { convolve, imageRir, makeScene } from '../../scripts/bench/echo-scenes';
import { FS, runCanceller, talkers } from '../helpers/dsp-aec-helpers';

jest.setTimeout(30_000);

test('an all-zero reference leaves the microphone untouched, bit for bit (delayed by AEC_LATENCY)', async () => {
  const { near } = await talkers();
  const mic = near.slice(0, 3 * FS);
  const aec = new EchoCanceller({ channels: 1 });
  const out = aec.process([mic], new Float32Array(mic.length))[0];
  expect(out.length).toBe(Math.floor(mic.length / AEC_HOP) * AEC_HOP);
  for (let i = 0; i < AEC_LATENCY; i++) expect(out[i]).toBe(0);
  let same = 0;
  for (let i = AEC_LATENCY; i < out.length; i++) if (out[i] === mic[i - AEC_LATENCY]) same++;
  expect(same).toBe(out.length - AEC_LATENCY);
  expect(aec.stats()).toEqual({ delayMs: null, erleDb: null, referenceActive: false });
});

test('a reference of a few LSB of dither counts as silent too; a real one switches the canceller on', async () => {
  const { near, far } = await talkers();
  const mic = near.slice(0, 2 * FS);
  const dither = new Float32Array(mic.length).map((_, i) => ((i * 7919) % 5) - 2).map((v) => v / 32768);
  const quiet = runCanceller([mic], dither);
  expect(Array.from(quiet.out[0]).every((v, i) => v === mic[i])).toBe(true);
  expect(quiet.stats.referenceActive).toBe(false);
  const loud = runCanceller([mic], far.slice(0, mic.length));
  expect(loud.stats.referenceActive).toBe(true);
});

test('chunked output equals one-pass output, bit for bit, for any chunk sizes and two channels', async () => {
  const scene = makeScene({ kind: 'dt', seed: 31, seconds: 6, rt60: 0.3, delayMs: 70, speaker: 'clip', serDb: 3 }, await talkers());
  // A second microphone 10 cm away: its own echo path.
  const h2 = imageRir({ room: { dims: [5, 4, 3], rt60: 0.3 }, source: [2, 2, 1.5], mic: [2.6, 2.1, 1.4], length: 4000 });
  const echo2 = convolve(scene.ref, h2);
  const mic2 = scene.mic.map((v, i) => 0.5 * v + 0.3 * echo2[i]);
  const one = runCanceller([scene.mic, mic2], scene.ref, {}, [scene.ref.length]);
  const odd = runCanceller([scene.mic, mic2], scene.ref, {}, [1, 127, 128, 129, 500, 3, 4096, 77]);
  for (let c = 0; c < 2; c++) {
    expect(odd.out[c].length).toBe(one.out[c].length);
    let diff = 0;
    for (let i = 0; i < one.out[c].length; i++) if (odd.out[c][i] !== one.out[c][i]) diff++;
    expect(diff).toBe(0);
  }
  expect(odd.stats).toEqual(one.stats);
});

test('each microphone channel cancels its own echo path', async () => {
  const { far } = await talkers();
  const n = 8 * FS;
  const ref = new Float32Array(n);
  for (let i = 0; i < n; i++) ref[i] = far[i % far.length];
  const room = { dims: [6, 5, 3] as [number, number, number], rt60: 0.3 };
  const delay = Math.round(0.08 * FS);
  const mics = [[2.5, 2, 1.2], [3.5, 2.4, 1.2]].map((pos) => {
    const h = imageRir({ room, source: [3, 3, 1.5], mic: pos as [number, number, number], length: 4800 });
    const e = convolve(ref, h);
    const m = new Float32Array(n);
    for (let i = delay; i < n; i++) m[i] = e[i - delay] * 0.5;
    return m;
  });
  const r = runCanceller(mics, ref);
  for (let c = 0; c < 2; c++) {
    const scene = { mic: mics[c], echo: mics[c] } as unknown as Parameters<typeof erle>[0];
    expect(erle(scene, r.out[c], 5 * FS, n)).toBeGreaterThan(30);
  }
  expect(r.stats.referenceActive).toBe(true);
  expect(r.stats.erleDb!).toBeGreaterThan(20);
});

test('memory does not grow with the length of the stream', async () => {
  const aec = new EchoCanceller({ channels: 1 });
  const { far, near } = await talkers();
  const before = aec.arena.f32.length;
  for (let s = 0; s < 30; s++) aec.process([near.subarray(0, FS)], far.subarray(0, FS));
  expect(aec.arena.f32.length).toBe(before);
});

test('refuses mismatched input', () => {
  const aec = new EchoCanceller({ channels: 2 });
  expect(() => aec.process([new Float32Array(10)], new Float32Array(10))).toThrow(/2 microphone channels/);
  expect(() => aec.process([new Float32Array(10), new Float32Array(9)], new Float32Array(10))).toThrow(/equal length/);
  expect(() => new EchoCanceller({ channels: 0 })).toThrow(/at least one/);
});

test('the WebAssembly loops and their JavaScript fallback agree (to float32 rounding, not bit for bit)', async () => {
  const scene = makeScene({ kind: 'st', seed: 41, seconds: 5, rt60: 0.3, delayMs: 50, speaker: 'linear' }, await talkers());
  const wasm = runCanceller([scene.mic], scene.ref, { backend: 'wasm' });
  const js = runCanceller([scene.mic], scene.ref, { backend: 'js' });
  expect(wasm.aec.arena.kind).toBe('wasm'); // npm run build compiles src/dsp/wasm/aec.ts
  expect(js.aec.arena.kind).toBe('js');
  const a = erle(scene, wasm.out[0], 3 * FS, 5 * FS);
  const b = erle(scene, js.out[0], 3 * FS, 5 * FS);
  expect(a).toBeGreaterThan(25);
  expect(Math.abs(a - b)).toBeLessThan(1.5);
  expect(js.stats.delayMs).toBe(wasm.stats.delayMs);
});
