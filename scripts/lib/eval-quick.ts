// Development helper: DNSMOS / SI-SDR of each chain on the shared eval kit.  node dist/scripts/lib/eval-quick.js [models...]
import fs from 'node:fs';
import path from 'node:path';
import { loadConfig } from '../../src/config';
import { loadGraphs } from '../../src/inference/sessions';
import { denoiseBuffer } from '../../src/inference/offline';
import { Dtln16Chain, PostFilteredChain } from '../../src/inference/chains';
import { AlignedStream } from '../../src/inference/stream';
import { DtlnGraphs } from '../../src/inference/dtln';
import { ModelId } from '../../src/inference/types';
import { decodeAudio } from './audio-io';
import { dnsmos, evalDir, siSdr } from './metrics';

/** Experimental chains: x:<offsets comma list>:<beta>:<floorDb>[:<noise window s>[:lift]] (beta 0 = no post-filter). */
async function experimental(graphs: DtlnGraphs, spec: string, x: Float32Array): Promise<Float32Array> {
  const [, offs, beta, floor, windowS, mode] = spec.split(':');
  let chain: import('../../src/inference/stream').ChainProcessor = new Dtln16Chain(graphs, 1, true, offs.split(',').map(Number));
  if (Number(beta) > 0) chain = new PostFilteredChain(chain, { overSubtract: Number(beta), floorDb: Number(floor), noiseWindowS: windowS ? Number(windowS) : undefined, noiseMode: mode === 'lift' ? 'lift' : undefined });
  const s = new AlignedStream(chain, 0);
  const a = await s.push([x]);
  const b = await s.end();
  const y = new Float32Array(a[0].length + b[0].length);
  y.set(a[0]);
  y.set(b[0], a[0].length);
  return y;
}

async function main(): Promise<void> {
  const dir = evalDir();
  if (!dir) throw new Error('../shared/eval is missing');
  const models = (process.argv.slice(2).length ? process.argv.slice(2) : ['none', 'nsm-1', 'nsm-2', 'nsm-3', 'nsm-4']) as (ModelId | 'none')[];
  const graphs = await loadGraphs(loadConfig().modelsDir);
  const real = fs.readdirSync(path.join(dir, 'dns3-real')).filter((f) => !/_(GTCRN|RNNoise)\.wav$/.test(f)).map((f) => path.join(dir, 'dns3-real', f));
  const syn = fs.readdirSync(path.join(dir, 'dns3-synthetic')).filter((f) => f.endsWith('_noisy.wav')).map((f) => path.join(dir, 'dns3-synthetic', f));
  for (const m of models) {
    const acc = { real: [0, 0, 0], syn: [0, 0, 0], sisdr: 0 };
    for (const [set, files] of [['real', real], ['syn', syn]] as const) {
      for (const f of files) {
        const x = decodeAudio(f, 16000)[0];
        const y = m === 'none' ? x : m.startsWith('x') ? await experimental(graphs, m, x) : (await denoiseBuffer(graphs, m, [x]))[0];
        const s = await dnsmos(y);
        acc[set][0] += s.SIG / files.length;
        acc[set][1] += s.BAK / files.length;
        acc[set][2] += s.OVRL / files.length;
        if (set === 'syn') acc.sisdr += siSdr(y, decodeAudio(f.replace('_noisy', '_clean'), 16000)[0]) / files.length;
      }
    }
    const f3 = (a: number[]) => a.map((v) => v.toFixed(3)).join('/');
    console.log(`${m}\treal SIG/BAK/OVRL ${f3(acc.real)}\tsyn ${f3(acc.syn)}\tSI-SDR ${acc.sisdr.toFixed(2)}`);
  }
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
