// DTLN passes run as one batch (src/inference/models/cascade.ts, DtlnCore.processJoint) against the same passes run one
// after the other: the same samples bit for bit, whatever the chunking, for several channels and frame grids.
import { loadConfig } from '../../src/config';
import { DtlnCascade } from '../../src/inference/models/cascade';
import { Dtln16Chain } from '../../src/inference/models/dtln-chain';
import { buildChain, SerialChain } from '../../src/inference/models/chains';
import { MODEL_CHAINS } from '../../src/inference/models/specs';
import { DtlnCore, type DtlnGraphs } from '../../src/inference/models/dtln';
import { loadGraphs } from '../../src/inference/runtime/sessions';
import { AlignedStream, type ChainProcessor } from '../../src/inference/models/aligned-stream';
import { seededRandom } from '../../src/audio/synthetic-noise';

let graphs: DtlnGraphs;
beforeAll(async () => {
  graphs = await loadGraphs(loadConfig().modelsDir);
});

/** Speech-like test signal: noise bursts with pauses, different per channel. */
function signal(n: number, seed: number): Float32Array {
  const r = seededRandom(seed);
  const x = new Float32Array(n);
  let s = 0;
  for (let i = 0; i < n; i++) {
    s = 0.7 * s + (r() * 2 - 1);
    x[i] = (Math.floor(i / 4000) % 3 === 2 ? 0.003 : 0.08) * s;
  }
  return x;
}

/** Pushes `x` in chunks of the given sizes (repeated) through a fresh stream and ends it. */
async function run(chain: ChainProcessor, x: Float32Array[], sizes: number[]): Promise<Float32Array[]> {
  const stream = new AlignedStream(chain, 0);
  const parts: Float32Array[][] = [];
  for (let at = 0, k = 0; at < x[0].length; k++) {
    const n = Math.min(sizes[k % sizes.length], x[0].length - at);
    parts.push(await stream.push(x.map((ch) => ch.slice(at, at + n))));
    at += n;
  }
  parts.push(await stream.end());
  return x.map((_, c) => {
    const total = parts.reduce((s, p) => s + p[c].length, 0);
    const out = new Float32Array(total);
    let o = 0;
    for (const p of parts) {
      out.set(p[c], o);
      o += p[c].length;
    }
    return out;
  });
}

function expectSameSamples(a: Float32Array[], b: Float32Array[]): void {
  expect(a.length).toBe(b.length);
  for (let c = 0; c < a.length; c++) {
    expect(a[c].length).toBe(b[c].length);
    let differing = 0;
    for (let i = 0; i < a[c].length; i++) if (a[c][i] !== b[c][i]) differing++;
    expect(differing).toBe(0);
  }
}

test("nsm-4's passes as one batch give the passes' samples, bit for bit, however the input is chunked", async () => {
  const grids = [[0, 64], [0], [0]];
  const serial = () => new SerialChain(grids.map((g) => new Dtln16Chain(graphs, 2, true, g)));
  const x = [signal(16000 * 5 + 77, 1), signal(16000 * 5 + 77, 2)];
  const reference = await run(serial(), x, [16000 * 8]);
  expect(reference[0].length).toBe(x[0].length);
  const cascade = (blockFrames?: number) =>
    new DtlnCascade(
      grids.map((g) => new Dtln16Chain(graphs, 2, true, g)),
      blockFrames,
    );
  expect(cascade().latency).toBe(serial().latency);
  // One call, odd chunks, chunks smaller than a block, and blocks of another size.
  expectSameSamples(await run(cascade(), x, [16000 * 8]), reference);
  expectSameSamples(await run(cascade(), x, [1000, 12345, 333]), reference);
  expectSameSamples(await run(cascade(16), x, [7000]), reference);
}, 60_000);

test('buildChain runs consecutive two-stage DTLN passes as a cascade; nsm-4 builds one', () => {
  const chain = buildChain(MODEL_CHAINS['nsm-4'], 1, graphs) as SerialChain;
  expect(chain.stages[0]).toBeInstanceOf(DtlnCascade);
  expect(chain.stages).toHaveLength(3); // the cascade, the post-filter, the gate
  expect(buildChain(MODEL_CHAINS['nsm-2'], 1, graphs)).toBeInstanceOf(Dtln16Chain);
});

test('DtlnCore.processJoint: each core gets what it would alone; mismatched cores are refused', async () => {
  const mk = (batch: number) => new DtlnCore(graphs, { batch, useStage2: true });
  const a = mk(1);
  const b = mk(2);
  const aAlone = mk(1);
  const bAlone = mk(2);
  for (const n of [4096, 1280, 16000]) {
    const xa = [signal(n, n)];
    const xb = [signal(n, n + 1), signal(n, n + 2)];
    const [ja, jb] = await DtlnCore.processJoint([
      { core: a, inputs: xa },
      { core: b, inputs: xb },
    ]);
    expectSameSamples(ja.out, (await aAlone.process(xa)).out);
    expectSameSamples(jb.out, (await bAlone.process(xb)).out);
  }
  const stage1Only = new DtlnCore(graphs, { batch: 1, useStage2: false });
  await expect(DtlnCore.processJoint([{ core: a, inputs: [signal(512, 9)] }, { core: stage1Only, inputs: [signal(512, 9)] }])).rejects.toThrow(
    /same stages/,
  );
  await expect(DtlnCore.processJoint([{ core: a, inputs: [signal(512, 9)] }, { core: b, inputs: [signal(256, 9), signal(256, 9)] }])).rejects.toThrow(
    /same length/,
  );
}, 60_000);
