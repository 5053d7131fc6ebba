// The echo cancellers' shared WebAssembly heap (src/dsp/aec/heap.ts): every canceller of a thread calls the same
// instances, on slots of one memory, and that changes nothing in its output: cancellers run interleaved on the heap's
// shared FFT rows give what one alone gives, and a slot freed by a collected canceller (dirty) is reused, zeroed, with
// the same output again; a released canceller (its stream over) gives its slot back at once, once, and cannot touch it
// again. Unit tier.
import v8 from 'node:v8';
import vm from 'node:vm';
import { EchoCanceller } from '../../src/dsp/aec';
import { aecHeaps } from '../../src/dsp/aec/heap';
import { makeScene, type Scene } from '../../scripts/bench/echo-scenes';
import { talkers } from '../helpers/dsp-aec-helpers';

jest.setTimeout(30_000);

v8.setFlagsFromString('--expose-gc');
const gc = vm.runInNewContext('gc') as () => void;

let scene: Scene;
let alone: Buffer;

const CHUNK = 320;

function chunkOf(s: Scene, at: number): { mic: Float32Array; ref: Float32Array } {
  return { mic: s.mic.subarray(at, at + CHUNK), ref: s.ref.subarray(at, at + CHUNK) };
}

const bytes = (parts: Float32Array[]): Buffer => Buffer.concat(parts.map((y) => Buffer.from(y.buffer, y.byteOffset, y.byteLength)));

function run(aec: EchoCanceller, s: Scene, upTo = s.mic.length): Buffer {
  const out: Float32Array[] = [];
  for (let at = 0; at < upTo; at += CHUNK) {
    const c = chunkOf(s, at);
    out.push(aec.process([c.mic], c.ref)[0]);
  }
  return bytes(out);
}

beforeAll(async () => {
  scene = makeScene({ kind: 'dt', seed: 7, seconds: 4, speaker: 'clip', delayMs: 60, serDb: 0 }, await talkers());
  alone = run(new EchoCanceller({ channels: 1 }), scene);
});

test('cancellers share one heap and its instances', () => {
  const a = new EchoCanceller({ channels: 1 });
  const b = new EchoCanceller({ channels: 2 });
  expect(a.arena.kind).toBe('wasm');
  expect(a.arena.memory).toBe(b.arena.memory);
  expect(aecHeaps().some((h) => h.memory === a.arena.memory)).toBe(true);
});

test('cancellers interleaved chunk by chunk give what one alone gives', () => {
  const cs = [new EchoCanceller({ channels: 1 }), new EchoCanceller({ channels: 1 }), new EchoCanceller({ channels: 2 })];
  const outs: Float32Array[][] = cs.map(() => []);
  for (let at = 0; at < scene.mic.length; at += CHUNK) {
    const c = chunkOf(scene, at);
    outs[0].push(cs[0].process([c.mic], c.ref)[0]);
    outs[1].push(cs[1].process([c.mic], c.ref)[0]);
    outs[2].push(cs[2].process([c.mic, c.mic], c.ref)[0]);
  }
  for (const o of outs) expect(bytes(o).equals(alone)).toBe(true);
});

async function collect(): Promise<void> {
  gc();
  await new Promise((r) => setTimeout(r, 10));
}

test("a collected canceller's slot is reused, zeroed, with the same output", async () => {
  for (let i = 0; i < 5; i++) await collect(); // the earlier tests' cancellers
  let dropped: EchoCanceller | null = new EchoCanceller({ channels: 1 });
  run(dropped, scene, scene.mic.length / 2);
  const at = dropped.chans[0].micPrev.byteOffset;
  const heap = aecHeaps().find((h) => h.memory === dropped!.arena.memory)!;
  const used = heap.used;
  dropped = null;
  for (let i = 0; i < 100 && heap.used === used; i++) await collect();
  expect(heap.used).toBe(used - 1);
  const reused = new EchoCanceller({ channels: 1 });
  expect(reused.chans[0].micPrev.byteOffset).toBe(at);
  expect(run(reused, scene).equals(alone)).toBe(true);
});

test('release() gives the slot back at once, for the next canceller, zeroed; once only; the old one is closed', () => {
  const done = new EchoCanceller({ channels: 1 });
  run(done, scene, scene.mic.length / 2);
  const heap = aecHeaps().find((h) => h.memory === done.arena.memory)!;
  const used = heap.used;
  const at = done.chans[0].micPrev.byteOffset;
  const figures = done.stats();
  expect(figures.referenceActive).toBe(true);
  done.release();
  expect(heap.used).toBe(used - 1);
  done.release(); // idempotent: the slot is not given back twice (it would be handed to two cancellers)
  expect(heap.used).toBe(used - 1);
  const next = new EchoCanceller({ channels: 1 });
  expect(next.chans[0].micPrev.byteOffset).toBe(at);
  expect(heap.used).toBe(used);
  // The released canceller still reports its figures, and refuses to run on memory that is now the next one's.
  expect(done.stats()).toEqual(figures);
  const c = chunkOf(scene, 0);
  expect(() => done.process([c.mic], c.ref)).toThrow(/after release/);
  expect(run(next, scene).equals(alone)).toBe(true);
});

test('many cancellers one after another, each released, stay in one slot of one heap', () => {
  const heapsBefore = aecHeaps().length;
  const first = new EchoCanceller({ channels: 1 });
  const at = first.chans[0].micPrev.byteOffset;
  first.release();
  for (let i = 0; i < 300; i++) {
    const aec = new EchoCanceller({ channels: 1 });
    expect(aec.chans[0].micPrev.byteOffset).toBe(at);
    run(aec, scene, 2 * CHUNK);
    aec.release();
  }
  expect(aecHeaps().length).toBe(heapsBefore);
});
