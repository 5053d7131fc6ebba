// Quality metrics for the benchmark: SI-SDR, DNSMOS (via the shared evaluation kit's scorer), band energies.
import fs from 'node:fs';
import path from 'node:path';
import { PROJECT_ROOT } from '../../src/config';

export function siSdr(estimate: Float32Array, reference: Float32Array): number {
  const n = Math.min(estimate.length, reference.length);
  let dot = 0;
  let refPow = 0;
  for (let i = 0; i < n; i++) {
    dot += estimate[i] * reference[i];
    refPow += reference[i] * reference[i];
  }
  const a = dot / (refPow || 1e-12);
  let sig = 0;
  let err = 0;
  for (let i = 0; i < n; i++) {
    const s = a * reference[i];
    const e = estimate[i] - s;
    sig += s * s;
    err += e * e;
  }
  return 10 * Math.log10(sig / (err || 1e-12));
}

export function energy(x: Float32Array): number {
  let e = 0;
  for (let i = 0; i < x.length; i++) e += x[i] * x[i];
  return e;
}

export function db(ratio: number): number {
  return 10 * Math.log10(Math.max(ratio, 1e-20));
}

/** The shared evaluation kit, ../shared/eval beside the project, or null when absent. */
export function evalDir(): string | null {
  const dir = path.resolve(PROJECT_ROOT, '..', 'shared', 'eval');
  return fs.existsSync(dir) ? dir : null;
}

export interface MosScores {
  SIG: number;
  BAK: number;
  OVRL: number;
  P808: number;
}

type DnsmosModule = { dnsmos(samples: Float32Array): Promise<MosScores> };
let dnsmosModule: Promise<DnsmosModule> | null = null;

/** DNSMOS of a 16 kHz mono signal, using ../shared/tools/dnsmos.mjs (it loads ONNX Runtime from this project). */
export async function dnsmos(samples16k: Float32Array): Promise<MosScores> {
  if (!dnsmosModule) {
    const tool = path.resolve(PROJECT_ROOT, '..', 'shared', 'tools', 'dnsmos.mjs');
    if (!fs.existsSync(tool)) throw new Error(`DNSMOS scorer not found at ${tool}`);
    // A real ESM import from CommonJS output (tsc would turn a plain import() into require()).
    const esmImport = new Function('p', 'return import(p)') as (p: string) => Promise<DnsmosModule>;
    const cwd = process.cwd();
    process.chdir(PROJECT_ROOT); // the scorer resolves onnxruntime-node from the current directory
    dnsmosModule = esmImport('file://' + tool).finally(() => process.chdir(cwd));
  }
  return (await dnsmosModule).dnsmos(samples16k);
}
