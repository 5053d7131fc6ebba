// The echo canceller's output pinned by a hash: changes made for speed (kernels, FFTs, memory layout) must leave it
// bit for bit as it was, so any change to what it computes shows here and has to be argued with a quality comparison
// (scripts/bench/echo-ab.ts) and a new hash. Scenes from the bench's generator with the tests' talkers (all in-process
// and deterministic); one hash per back end (the WebAssembly and the JavaScript loops agree only to float32 rounding).
// Unit tier.
import crypto from 'node:crypto';
import { EchoCanceller } from '../../src/dsp/aec';
import { makeScene, type Scene } from '../../scripts/bench/echo-scenes';
import { talkers } from '../helpers/dsp-aec-helpers';

jest.setTimeout(30_000);

/** SHA-256 of the outputs (float32 bytes, 2 microphone channels, uneven chunks) of a double-talk and a path-change scene. */
let scenes: Promise<Scene[]> | null = null;

async function outputHash(backend: 'wasm' | 'js'): Promise<string> {
  // Generated once for both tests (the rooms take longer than the canceller).
  scenes ??= talkers().then((t) => [
    makeScene({ kind: 'dt', seed: 41, seconds: 5, speaker: 'clip', delayMs: 90, serDb: 0 }, t),
    makeScene({ kind: 'path', seed: 42, seconds: 12, speaker: 'sigmoid', delayMs: 150 }, t),
  ]);
  const h = crypto.createHash('sha256');
  for (const s of await scenes) {
    const mic2 = s.mic.map((v, i) => 0.7 * v + 0.2 * (i >= 37 ? s.mic[i - 37] : 0));
    const aec = new EchoCanceller({ channels: 2, backend });
    const sizes = [320, 17, 128, 999];
    for (let a = 0, c = 0; a < s.mic.length; c++) {
      const n = sizes[c % sizes.length];
      for (const y of aec.process([s.mic.subarray(a, a + n), mic2.subarray(a, a + n)], s.ref.subarray(a, a + n))) h.update(new Uint8Array(y.buffer, y.byteOffset, y.byteLength));
      a += n;
    }
    h.update(JSON.stringify(aec.stats()));
  }
  return h.digest('hex');
}

test('the output with the WebAssembly loops is bit for bit what it was', async () => {
  const aec = new EchoCanceller({ channels: 1 });
  expect(aec.arena.kind).toBe('wasm');
  expect(await outputHash('wasm')).toBe('78be247f212ef203c27561cd69127e85eccb038b3607252fdf1853ef42d12f7c');
});

test('the output with the JavaScript loops is bit for bit what it was', async () => {
  expect(await outputHash('js')).toBe('7affc25849149e8eab31762ff111faddfae517b339f22e2aa0b37ed7b30a3862');
});
