// Quality metrics for the benchmark: SI-SDR, DNSMOS (via the shared evaluation kit's scorer, with a content-addressed
// cache), band energies.
import crypto from 'node:crypto';
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

/**
 * DNSMOS scores are cached by the SHA-256 of the exact samples scored, per scorer version (its script and model
 * files), in node_modules/.cache/nsm-bench/ (one JSON line per score). Unchanged inputs (noisy clips, peers' outputs,
 * chains whose output did not change) are not scored again. NSM_BENCH_CACHE=off disables it; another value is used
 * as the cache folder.
 */
let cache: { file: string; scores: Map<string, MosScores> } | null | undefined;

function scorerFingerprint(): string {
  const h = crypto.createHash('sha256');
  const tool = path.resolve(PROJECT_ROOT, '..', 'shared', 'tools', 'dnsmos.mjs');
  h.update(fs.readFileSync(tool));
  const models = path.join(evalDir() ?? '', 'dnsmos');
  for (const f of ['sig_bak_ovr.onnx', 'model_v8.onnx']) {
    const p = path.join(models, f);
    if (fs.existsSync(p)) h.update(`${f}:${fs.statSync(p).size}`);
  }
  return h.digest('hex').slice(0, 16);
}

function openCache(): { file: string; scores: Map<string, MosScores> } | null {
  if (cache !== undefined) return cache;
  const setting = process.env.NSM_BENCH_CACHE;
  if (setting === 'off') return (cache = null);
  const dir = setting || path.join(PROJECT_ROOT, 'node_modules', '.cache', 'nsm-bench');
  fs.mkdirSync(dir, { recursive: true });
  const file = path.join(dir, `dnsmos-${scorerFingerprint()}.jsonl`);
  const scores = new Map<string, MosScores>();
  if (fs.existsSync(file)) {
    for (const line of fs.readFileSync(file, 'utf8').split('\n')) {
      if (!line) continue;
      try {
        const { k, s } = JSON.parse(line) as { k: string; s: MosScores };
        scores.set(k, s);
      } catch {
        // a line cut short by an interrupted run: ignore it
      }
    }
  }
  return (cache = { file, scores });
}

export function samplesKey(samples: Float32Array): string {
  return crypto.createHash('sha256').update(new Uint8Array(samples.buffer, samples.byteOffset, samples.byteLength)).digest('hex');
}

/**
 * DNSMOS P.835 alone (SIG, BAK, OVRL; P808 left at NaN): the same windows, model and mapping as the shared scorer
 * (../shared/eval/README.md: 9.01 s windows at a 1 s hop, short clips repeated, polynomials on the raw outputs, clip
 * score = window mean rounded to 3 decimals), without its P.808 mel spectrogram, which costs a third of the time and
 * is not used here. The first call checks itself against the shared scorer on that input and throws on a mismatch
 * (`selfCheck: false` skips that, e.g. under jest, which cannot load the scorer's ES module).
 */
const P835_LEN = Math.floor(9.01 * 16000);
const POLY = { SIG: [-0.08397278, 1.22083953, 0.0052439], BAK: [-0.13166888, 1.60915514, -0.39604546], OVRL: [-0.06766283, 1.11546468, 0.04602535] };
let p835Session: Promise<import('onnxruntime-node').InferenceSession> | null = null;
let p835Checked = false;

export async function dnsmosP835(samples16k: Float32Array, opts: { selfCheck?: boolean } = {}): Promise<MosScores> {
  // eslint-disable-next-line @typescript-eslint/no-var-requires
  const ort = require('onnxruntime-node') as typeof import('onnxruntime-node');
  if (!p835Session) {
    const model = path.join(evalDir() ?? '', 'dnsmos', 'sig_bak_ovr.onnx');
    p835Session = ort.InferenceSession.create(model, { intraOpNumThreads: 1 });
  }
  const session = await p835Session;
  let audio = samples16k;
  while (audio.length < P835_LEN) {
    const a = new Float32Array(audio.length * 2);
    a.set(audio);
    a.set(audio, audio.length);
    audio = a;
  }
  const hops = Math.floor(audio.length / 16000 - 9.01) + 1;
  const poly = (c: number[], x: number) => c.reduce((acc, k) => acc * x + k, 0);
  const acc = { SIG: 0, BAK: 0, OVRL: 0 };
  let n = 0;
  for (let h = 0; h < hops; h++) {
    const seg = audio.slice(h * 16000, h * 16000 + P835_LEN);
    if (seg.length < P835_LEN) continue;
    const out = await session.run({ [session.inputNames[0]]: new ort.Tensor('float32', seg, [1, P835_LEN]) });
    const [sig, bak, ovr] = Array.from(out[session.outputNames[0]].data as Float32Array);
    acc.SIG += poly(POLY.SIG, sig);
    acc.BAK += poly(POLY.BAK, bak);
    acc.OVRL += poly(POLY.OVRL, ovr);
    n++;
  }
  const r = (v: number) => +(v / n).toFixed(3);
  const scores = { SIG: r(acc.SIG), BAK: r(acc.BAK), OVRL: r(acc.OVRL), P808: NaN };
  if (!p835Checked && opts.selfCheck !== false) {
    const ref = await dnsmos(samples16k);
    if (ref.SIG !== scores.SIG || ref.BAK !== scores.BAK || ref.OVRL !== scores.OVRL) {
      throw new Error(`P.835-only scorer disagrees with ../shared/tools/dnsmos.mjs: ${JSON.stringify(scores)} vs ${JSON.stringify(ref)}`);
    }
    p835Checked = true;
  }
  return scores;
}

/** DNSMOS P.835 through the cache; `hits`/`misses` count what it saved. */
export const dnsmosCacheStats = { hits: 0, misses: 0 };
export async function dnsmosCached(samples16k: Float32Array): Promise<MosScores> {
  const c = openCache();
  if (!c) return dnsmosP835(samples16k);
  const key = samplesKey(samples16k);
  const hit = c.scores.get(key);
  if (hit) {
    dnsmosCacheStats.hits++;
    return hit;
  }
  dnsmosCacheStats.misses++;
  const s = await dnsmosP835(samples16k);
  c.scores.set(key, s);
  fs.appendFileSync(c.file, JSON.stringify({ k: key, s }) + '\n');
  return s;
}
