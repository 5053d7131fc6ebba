// The echo canceller's output pinned by a hash: changes made for speed (kernels, FFTs, memory layout) must leave it
// bit for bit as it was, so any change to what it computes shows here and has to be argued with a quality comparison
// (scripts/bench/echo-ab.ts) and a new hash. Scenes from the bench's generator with the tests' talkers (all in-process
// and deterministic); one hash per back end (the WebAssembly and the JavaScript loops agree only to float32 rounding).
// The hashes of earlier defaults stay pinned with the options that give them back.
// Unit tier.
import crypto from 'node:crypto';
import { EchoCanceller } from '../../src/dsp/aec';
import { AecArena } from '../../src/dsp/aec/kernel';
import { makeScene, type Scene } from '../../scripts/bench/echo-scenes';
import { agentTalkers } from '../../scripts/bench/echo-talkers';
import { talkers } from '../helpers/dsp-aec-helpers';

jest.setTimeout(30_000);

/** SHA-256 of the outputs (float32 bytes, 2 microphone channels, uneven chunks) of a double-talk and a path-change scene. */
let scenes: Promise<Scene[]> | null = null;
/** A voice agent's reference: digital silence in turns of 1–4 s (the canceller skips work on spectra of exact zeros). */
let agentScenes: Promise<Scene[]> | null = null;

/** The canceller before 2026-11-30 (delayFromMic off, the Kalman filter's one A²) and before the faster forgetting of that day. */
const BEFORE = { delayFromMic: false, forgetFree: 0.99995, shadowFrame: false, lostSuppress: false, residualSlope: 0 };
/** The canceller of the morning of 2026-11-30 (pinned with the WebAssembly loops only: the suite's time). */
const SLOW = { forgetFree: 0.99995, shadowFrame: false, lostSuppress: false, residualSlope: 0 };
/** The canceller before the suppressor's frame could take the shadow's error (2026-11-30, `shadowFrame`). */
const NO_FRAME = { shadowFrame: false, lostSuppress: false, residualSlope: 0 };
/** The canceller before the suppressor took the echo's incoherent power while the filter is lost (2026-11-30, `lostSuppress`). */
const NO_LOST = { lostSuppress: false, residualSlope: 0 };
/** The canceller before the residual's share as a regression slope (2026-11-30, `residualSlope`). */
const NO_SLOPE = { residualSlope: 0 };

/** `extra`: options of an earlier canceller (their hashes stay pinned: everything else is as it was). */
async function outputHash(backend: 'wasm' | 'js', agent = false, terms?: number, extra: object = {}): Promise<string> {
  // Generated once for both tests (the rooms take longer than the canceller).
  scenes ??= talkers().then((t) => [
    makeScene({ kind: 'dt', seed: 41, seconds: 5, speaker: 'clip', delayMs: 90, serDb: 0 }, t),
    makeScene({ kind: 'path', seed: 42, seconds: 12, speaker: 'sigmoid', delayMs: 150 }, t),
  ]);
  agentScenes ??= talkers().then((t) => [makeScene({ kind: 'dt', seed: 43, seconds: 12, speaker: 'clip', delayMs: 120, serDb: 0 }, agentTalkers(t, 7))]);
  const h = crypto.createHash('sha256');
  for (const s of await (agent ? agentScenes : scenes)) {
    const mic2 = s.mic.map((v, i) => 0.7 * v + 0.2 * (i >= 37 ? s.mic[i - 37] : 0));
    const aec = new EchoCanceller({ channels: 2, backend, ...(terms === undefined ? {} : { terms }), ...extra });
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
  // Since `residualSlope` (2026-11-30, the later of that day's two changes here); since `lostSuppress` the path change
  // of scene 42 moved; the agent's scenes below did not.
  expect(await outputHash('wasm', false, 511)).toBe('3084d4b4a6755c1a605349fdb87cafca918ec653c1a5162173f7b55d56cb2939');
  expect(await outputHash('wasm', false, 511, NO_SLOPE)).toBe('5a5a2bb28a81d00bfef402e725a264409ec584d040bd276d1a59bdda807ccb32');
  expect(await outputHash('wasm', false, 511, NO_LOST)).toBe('b2941f5d73af9e2db1eb3859b4b7671f01a26c992112a84dccc160bfeb389343');
  expect(await outputHash('wasm', false, 511, NO_FRAME)).toBe('6b4db590ea8a2d77ff5dc4d4df36996526057d3cb45661d261c3671d87c12582');
  expect(await outputHash('wasm', false, 511, SLOW)).toBe('e330837687c3d6b380efe761d9e301f5cf53004e3891040e34916a1f7e61e024');
  expect(await outputHash('wasm', false, 511, BEFORE)).toBe('dd354cefddc9f942bf2c788abf5bf14dc8034f1ec5b80fb89a3154458a37a293');
});

test('the output with the JavaScript loops is bit for bit what it was', async () => {
  expect(await outputHash('js', false, 511)).toBe('a6434686c1d11b4224474ddf1d2270847c86fdae171f484db805616efa84588e');
  expect(await outputHash('js', false, 511, NO_SLOPE)).toBe('042e981ad01e64983c96bded4c7b9f059c168332e1cda8644c28d607aa4d81d2');
  expect(await outputHash('js', false, 511, NO_LOST)).toBe('e2b05602e4377be2c6d53da26f72d806bbdbfba71237e60410022f669d3aba9d');
  expect(await outputHash('js', false, 511, NO_FRAME)).toBe('ccf9fe604ed080a1cf62d492c560de9cc6b9ef19687a48a0192755ea434241d2');
  expect(await outputHash('js', false, 511, BEFORE)).toBe('370a1259d353ae3b060d0a243e4a0da398ed4e458420d55d36f67b1c13ecef9d');
});

test("a reference of digital silence in turns (a voice agent's) gives what it gave before the shortcuts for silence", async () => {
  // The scene holds silences longer than the filter's reach (282 ms after the bulk delay), where they apply.
  const [s] = await agentScenes!;
  let run = 0;
  let longest = 0;
  for (const v of s.ref) longest = Math.max(longest, (run = v === 0 ? run + 1 : 0));
  expect(longest).toBeGreaterThan(16000);
  // Hashes from main's build at 5d5d982, before the shortcuts (whose suppressor terms were 31: no near-end guard).
  expect(await outputHash('wasm', true, 31, BEFORE)).toBe('64fa5f1f42bcbd64f0da6e4f13ea6672cbb002f9e27e06172c2634f063a6b9a7');
  expect(await outputHash('js', true, 31, BEFORE)).toBe('493760a7859568831c39d9c8fd41405c7001a845026b21896008eaecc880006d');
  // With terms 63 (the near-end guard, which acts in this scene's double talk; the default until 2026-11-29).
  expect(await outputHash('wasm', true, 63, BEFORE)).toBe('fffa1ca5947d5053cca7a2e6f5af5e82269c7071d736f8040c8b1ffaaa3126e5');
  expect(await outputHash('js', true, 63, BEFORE)).toBe('c87cecb305993a8e85c382361a3f7022ebdd92b5507ea49d669229cb3507c3b9');
  // With terms 127 (the guard's evidence also holds back two residual terms and keeps the gain fuller; docs/echo.md,
  // "The near end in double talk: the estimate held back"; the default until the talker cue's). The two scenes above
  // do not move: their double talk is too short for the evidence.
  expect(await outputHash('wasm', true, 127, BEFORE)).toBe('02280b855aab0aaaceb5fe57f213b61e340883dfa71672f46ede4445244b7dbe');
  expect(await outputHash('js', true, 127, BEFORE)).toBe('371fdf16f41763c5b4fcbaed8243eb0f98e01f8feb5ef631a4cb9defed96d261');
  // With terms 255 (the default until 2026-12-01), since 2026-11-30 with the delay estimator hearing the microphone
  // (docs/echo.md; with delayFromMic off these were b67ea9ff… / 53d7a7c8…; the first two tests pin the option's output),
  // and since the same day's `shadowFrame` (without it: the NO_FRAME hashes), and since its `residualSlope` (without it:
  // NO_SLOPE).
  expect(await outputHash('wasm', true, 255)).toBe('2d8c4a77c845d19966b28b2b2346518b38da84cf6555f6a50d78b75893e4f462');
  expect(await outputHash('wasm', true, 255, NO_SLOPE)).toBe('81d57a94dab7aac91ad241f93793539e7114006bfedd9f106d377bbbdd0855ff');
  expect(await outputHash('wasm', true, 255, NO_FRAME)).toBe('4e16dc932bd8d56c1d9479e9daec360f3ed66981d13733508f9b85473aa575cd');
  expect(await outputHash('wasm', true, 255, SLOW)).toBe('bff768bd34752914b402fe025575ebc0436b8777ee1986139f3503680cb6f714');
  expect(await outputHash('js', true, 255)).toBe('fe9837114a1e8a3b981e6f0807e25da70eae170065660d254d4b92523272c551');
  expect(await outputHash('js', true, 255, NO_SLOPE)).toBe('9a766cb87867f6bf67d1ab0f4d9edc8f2ba0ad1e1fa2dba466a6ca7ae6c706d1');
  expect(await outputHash('js', true, 255, NO_FRAME)).toBe('56fd045c86efbd75b7468d064e749d55c6052d821db70fae29cad7a09bfe98eb');
  // With the default terms (511, since 2026-12-01: no overdrive after a second of sums that say "talker"; docs/echo.md,
  // "A talker the residual estimate hides"): this scene's double talk is long enough for it.
  expect(await outputHash('wasm', true, 511)).toBe('86cac2223c70fed28155503c4a4e0178dafea1ad020296f7dfaa135787c2bd75');
  expect(await outputHash('js', true, 511)).toBe('122b4f70c10a402c504ca0dd3870e931750b85995825b8a8550b21b99a977be8');
  // With terms 1023 (bit 512, off by default: on a hop with evidence of a talker the overdrive per bin; docs/echo.md,
  // "Overdrive per bin"), in both scenes; the 511 hashes above are the default's.
  expect(await outputHash('wasm', true, 1023)).toBe('bc53e71fd7816d28360d01fe6647a60e93a57b4880b4bc63b4d85136106c18b1');
  expect(await outputHash('js', true, 1023)).toBe('5eab3c4baa723bc090b5ab87e18166577428b0e9532bbedca3da8612a6d3afbc');
  expect(await outputHash('wasm', false, 1023)).toBe('5f7a6d1a15ba53509cfca7e3d0b4809eb897349a5663fce8e9911b4c86d15b25');
  expect(await outputHash('js', false, 1023)).toBe('ea081052cdc6279810b6765aa56095040510f3e490b20ed6d90aec4d311949fe');
  expect(await outputHash('wasm', true)).toBe('86cac2223c70fed28155503c4a4e0178dafea1ad020296f7dfaa135787c2bd75');
  expect(await outputHash('js', true)).toBe('122b4f70c10a402c504ca0dd3870e931750b85995825b8a8550b21b99a977be8');
});

test('without the talker cue (terms 127, the default before it) the output is pinned as well', async () => {
  // docs/echo.md, "Double talk from the first second". The cue's per-lag loop is a kernel (float32 since 2026-11-29,
  // bit-identical in both back ends) and only moves the guard's per-hop share, which both suppressor kernels take as a
  // scalar. The default's four hashes differ from these (the cue counts for the first 5 s of far end, where these
  // scenes' talkers and loudspeakers are); these are the canceller's before the cue.
  expect(await outputHash('wasm', false, 127, BEFORE)).toBe('78be247f212ef203c27561cd69127e85eccb038b3607252fdf1853ef42d12f7c');
  expect(await outputHash('js', false, 127, BEFORE)).toBe('7affc25849149e8eab31762ff111faddfae517b339f22e2aa0b37ed7b30a3862');
});

test('with many cancellers on the thread (where a stream prefetches its state) the output is the same', async () => {
  // The prefetch (canceller.ts) runs once 8 or more cancellers hold a slot of the thread's heap; it only reads.
  const others = Array.from({ length: 8 }, () => new EchoCanceller({ channels: 1 }));
  const touch = jest.spyOn(AecArena.prototype, 'touch');
  try {
    expect(await outputHash('wasm', false, 511)).toBe('3084d4b4a6755c1a605349fdb87cafca918ec653c1a5162173f7b55d56cb2939');
    expect(await outputHash('wasm', true, 63, BEFORE)).toBe('fffa1ca5947d5053cca7a2e6f5af5e82269c7071d736f8040c8b1ffaaa3126e5');
    expect(await outputHash('wasm', true, 511)).toBe('86cac2223c70fed28155503c4a4e0178dafea1ad020296f7dfaa135787c2bd75');
    expect(touch.mock.calls.length).toBeGreaterThan(500);
  } finally {
    touch.mockRestore();
    for (const c of others) c.release();
  }
});
