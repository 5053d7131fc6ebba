// Development helper: DNSMOS / SI-SDR of each chain on the shared eval kit.  node dist/scripts/lib/eval-quick.js [models...]
import fs from 'node:fs';
import path from 'node:path';
import { loadConfig } from '../../src/config';
import { loadGraphs } from '../../src/inference/sessions';
import { denoiseBuffer } from '../../src/inference/offline';
import { ModelId } from '../../src/inference/types';
import { decodeAudio } from './audio-io';
import { dnsmos, evalDir, siSdr } from './metrics';

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
        const y = m === 'none' ? x : (await denoiseBuffer(graphs, m, [x]))[0];
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
