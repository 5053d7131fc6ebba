// Relative cost of 16 kHz chains, robust to a busy machine: CPU time of this thread (process.cpuUsage, ONNX Runtime
// runs on it with one intra-op thread), interleaved runs, median ratio to nsm-2. Multiply by nsm-2's engine RTF from
// `npm run bench` to estimate a chain's engine RTF.
//   node dist/scripts/bench/chain-cost.js [--seconds 20] [--runs 5] NAME=SPEC ...   (SPEC: scripts/lib/chain-dsl.ts,
//   or a model id nsm-1..nsm-4)
import { loadConfig } from '../../src/config';
import { buildChain } from '../../src/inference/models/chains';
import { MODEL_CHAINS, type ChainSpec } from '../../src/inference/models/specs';
import { loadGraphs } from '../../src/inference/runtime/sessions';
import { AlignedStream } from '../../src/inference/models/aligned-stream';
import { decodeAudio } from '../lib/audio-io';
import { parseChainSpec } from '../lib/chain-dsl';
import { listClips } from '../lib/eval-kit';
import { evalDir } from '../lib/metrics';
import { concatAll } from '../../src/dsp/concat';

async function main(): Promise<void> {
  const argv = process.argv.slice(2);
  const num = (flag: string, d: number) => (argv.includes(flag) ? Number(argv[argv.indexOf(flag) + 1]) : d);
  const seconds = num('--seconds', 20);
  const runs = num('--runs', 5);
  const specs: [string, ChainSpec][] = [['nsm-2', MODEL_CHAINS['nsm-2']]];
  for (const a of argv.filter((x, i) => !x.startsWith('--') && !argv[i - 1]?.startsWith('--'))) {
    const eq = a.indexOf('=');
    const name = eq > 0 ? a.slice(0, eq) : a;
    const text = eq > 0 ? a.slice(eq + 1) : a;
    specs.push([name, text in MODEL_CHAINS ? MODEL_CHAINS[text as keyof typeof MODEL_CHAINS] : parseChainSpec(text)]);
  }
  const dir = evalDir();
  if (!dir) throw new Error('../shared/eval is missing');
  const x = concatAll(listClips(dir).real.map((c) => decodeAudio(c.noisy, 16000)[0])).slice(0, seconds * 16000);
  const graphs = await loadGraphs(loadConfig().modelsDir);
  const once = async (spec: ChainSpec) => {
    const s = new AlignedStream(buildChain(spec, 1, graphs), 0);
    const c0 = process.cpuUsage();
    for (let pos = 0; pos < x.length; pos += 16000) await s.push([x.slice(pos, pos + 16000)]);
    await s.end();
    const c = process.cpuUsage(c0);
    return (c.user + c.system) / 1e6 / seconds;
  };
  for (const [, spec] of specs) await once(spec); // warm-up
  const times = specs.map(() => [] as number[]);
  for (let r = 0; r < runs; r++) for (let i = 0; i < specs.length; i++) times[i].push(await once(specs[i][1]));
  const med = (v: number[]) => [...v].sort((a, b) => a - b)[v.length >> 1];
  const base = med(times[0]);
  console.log(`CPU seconds per audio second (median of ${runs}, ${seconds} s of real clips, 1 s chunks) and ratio to nsm-2`);
  for (let i = 0; i < specs.length; i++) console.log(`${specs[i][0].padEnd(12)} ${med(times[i]).toFixed(4)}  x${(med(times[i]) / base).toFixed(2)}`);
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
