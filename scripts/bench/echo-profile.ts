// Where the echo canceller's CPU goes (a development tool, not part of `npm run bench`): N cancellers over one
// generated double-talk scene in 320-sample chunks (as the live host feeds them), profiled by V8's sampling profiler
// (node:inspector) while they run; prints the self time of every function under EchoCanceller.process as a share,
// grouped by part of the algorithm, and the garbage collector's share. Scene generation and start-up are not counted.
//   node dist/scripts/bench/echo-profile.js [--streams 100] [--seconds 6] [--speaker clip] [--top 25]
//        [--warm S]  (S seconds run before the profiler starts: a stream's first second, the prior scale's, left out)
//        [--agent]   (a voice agent's reference: digital silence in turns of 1–4 s, about half the time)
//        [--set key=value]...  (options of the canceller, e.g. --set nlEvery=8)
//        [--lines F,G] (also the samples per line of the JavaScript functions named F, G, e.g. hop: what in them costs)
import inspector from 'node:inspector';
import { EchoCanceller } from '../../src/dsp/aec';
import { makeScene, type Loudspeaker } from './echo-scenes';
import { agentTalkers, loadTalkers } from './echo-talkers';
import { optionReader, settingsOf } from '../lib/args';

interface Node {
  id: number;
  callFrame: { functionName: string; url: string };
  children?: number[];
  /** Samples per source line (1-based) of this node's function. */
  positionTicks?: { line: number; ticks: number }[];
}
interface Profile {
  nodes: Node[];
  samples: number[];
  timeDeltas: number[];
}

/** Parts of the algorithm, by function name and file (WebAssembly functions by their export name, resolved below). */
const GROUPS: [string, RegExp][] = [
  ['partition loops (WebAssembly: filter, Kalman update, shadow filter and update)', /^wasm (filter|update|sfilter|supdate)$|aec\/(kalman-filter|shadow-filter)\.js/],
  // Before the FFTs: the model's own row FFTs are labelled with it (below).
  ['loudspeaker model (distortion, learning, its kernels and row FFTs)', /loudspeaker\.js|nl-learner\.js|^wasm (backprop|gram)$/],
  ['FFTs (RealFFT in JavaScript, or the row FFT in WebAssembly)', /dsp\/fft\.js|fft-pairs/],
  ['channel hop: suppressor, residual ratios, per-bin and per-sample passes', /aec\/(channel|suppressor|residual-ratio|hop-passes)\.js|^wasm hop /],
  ['canceller hop: reference ring, activity, ERLE, chunking', /aec\/(canceller|ref-ring)\.js/],
  ['delay estimator', /delay-estimator\.js|^wasm corr$/],
  // Only until it settles (a stream's first second of reference): its share falls with --seconds.
  ['prior scale (the first 125 hops of reference only)', /prior-scale\.js|^wasm pcross$/],
  // Only with terms bit 128, and only while the filter is young (a stream's first 5 s of reference).
  ['talker cue (terms bit 128, the first 5 s of reference only)', /talker-cue\.js|^wasm tcue$/],
  // The misses of a stream's cold state, taken at once before its first hop of a chunk (canceller.ts prefetch()).
  ['prefetch (WebAssembly touch: the state brought into cache)', /^wasm touch$/],
];

function post<T>(s: inspector.Session, method: string, params?: object): Promise<T> {
  return new Promise((resolve, reject) => s.post(method, params ?? {}, (err, res) => (err ? reject(err) : resolve(res as T))));
}

async function main(args: string[]): Promise<void> {
  const opt = optionReader(args);
  const streams = Number(opt('--streams', '100'));
  const seconds = Number(opt('--seconds', '6'));
  const warm = Number(opt('--warm', '0'));
  const talkers = args.includes('--agent') ? agentTalkers(loadTalkers()) : loadTalkers();
  // The double-talk scene's near end starts at 4 s, so it is made at least that long even for a shorter profile.
  const scene = makeScene({ kind: 'dt', seed: 77, seconds: Math.max(seconds + warm, 5), speaker: opt('--speaker', 'clip') as Loudspeaker }, talkers);
  const opts = settingsOf(args, '--set');
  const aecs = Array.from({ length: streams }, () => new EchoCanceller({ channels: 1, ...opts }));
  const from = Math.round(warm * 50) * 320;
  for (let a = 0; a + 320 <= from; a += 320) for (const c of aecs) c.process([scene.mic.subarray(a, a + 320)], scene.ref.subarray(a, a + 320));
  const session = new inspector.Session();
  session.connect();
  await post(session, 'Profiler.enable');
  await post(session, 'Profiler.setSamplingInterval', { interval: 200 });
  await post(session, 'Profiler.start');
  const t0 = process.cpuUsage();
  const to = Math.round((warm + seconds) * 50) * 320;
  for (let a = from; a + 320 <= to; a += 320) {
    const mic = scene.mic.subarray(a, a + 320);
    const ref = scene.ref.subarray(a, a + 320);
    for (const c of aecs) c.process([mic], ref);
  }
  const used = process.cpuUsage(t0);
  const { profile } = await post<{ profile: Profile }>(session, 'Profiler.stop');
  session.disconnect();
  // WebAssembly functions show as wasm-function[i]: name the canceller's kernels by their export index.
  const wasmNames = new Map<number, string>();
  const mod = new WebAssembly.Module(require('node:fs').readFileSync(require('../../src/dsp/aec/kernel').AEC_WASM));
  const exps = WebAssembly.Module.exports(mod).filter((e) => e.kind === 'function');
  const inst = new WebAssembly.Instance(mod, { env: { memory: new WebAssembly.Memory({ initial: 1 }), abort: () => {} } });
  for (const e of exps) wasmNames.set(Number((inst.exports[e.name] as { name: string }).name), e.name);
  // The hop passes' module (hop-passes.ts), where its .wasm is built.
  const hopNames = new Map<number, string>();
  const hopMod = require('../../src/dsp/aec/hop-passes').hopModule() as WebAssembly.Module | null;
  if (hopMod) {
    const hop = new WebAssembly.Instance(hopMod, { env: { memory: new WebAssembly.Memory({ initial: 1 }), abort: () => {} } });
    for (const e of WebAssembly.Module.exports(hopMod)) if (e.kind === 'function') hopNames.set(Number((hop.exports[e.name] as { name: string }).name), e.name);
  }
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  const parent = new Map<number, number>();
  for (const n of profile.nodes) for (const c of n.children ?? []) parent.set(c, n.id);
  const under = new Map<number, boolean>();
  const inProcess = (id: number): boolean => {
    const known = under.get(id);
    if (known !== undefined) return known;
    const cf = byId.get(id)!.callFrame;
    const p = parent.get(id);
    const r = (cf.functionName === 'process' && cf.url.endsWith('aec/canceller.js')) || (p !== undefined && inProcess(p));
    under.set(id, r);
    return r;
  };
  const self = new Map<string, number>();
  let total = 0;
  let gc = 0;
  profile.samples.forEach((id, i) => {
    const t = profile.timeDeltas[i] ?? 0;
    const cf = byId.get(id)!.callFrame;
    if (cf.functionName === '(garbage collector)') gc += t;
    if (!inProcess(id)) return;
    total += t;
    // A WebAssembly function is the canceller's kernel when its caller is in kernel.js (the row FFT's are not).
    const w = /^wasm-function\[(\d+)\]$/.exec(cf.functionName);
    let up = parent.get(id);
    // Past the JS-to-WebAssembly wrappers (no URL, or the module's own).
    while (up !== undefined && /^(wasm:\/\/.*)?$/.test(byId.get(up)!.callFrame.url)) up = parent.get(up);
    const caller = up === undefined ? '' : byId.get(up)!.callFrame.url;
    let name = `${cf.functionName || '(anonymous)'} ${cf.url.split('/').slice(-2).join('/')}`;
    if (w && caller.endsWith('aec/kernel.js')) name = `wasm ${wasmNames.get(Number(w[1])) ?? w[1]}`;
    if (w && caller.endsWith('aec/hop-passes.js')) name = `wasm hop ${hopNames.get(Number(w[1])) ?? w[1]}`;
    if (name.includes('fft-pairs') || (w && caller.includes('fft-pairs'))) {
      // The row FFT serves the canceller and the loudspeaker model: name the part of the canceller that called it.
      let a = parent.get(id);
      while (a !== undefined && !/aec\/[\w-]+\.js$/.test(byId.get(a)!.callFrame.url)) a = parent.get(a);
      const from = a === undefined ? '?' : byId.get(a)!.callFrame.url.split('/').slice(-2).join('/');
      name = `${w ? 'wasm row FFT' : name} (fft-pairs, from ${from})`;
    }
    self.set(name, (self.get(name) ?? 0) + t);
  });
  const pc = (t: number): string => `${((100 * t) / total).toFixed(1).padStart(5)} %`;
  console.log(`${streams} cancellers × ${seconds} s: ${((used.user + used.system) / 1000 / (streams * seconds)).toFixed(2)} ms CPU per stream-second; garbage collector ${((100 * gc) / (total + gc)).toFixed(1)} % of process() + GC`);
  const groups = new Map<string, number>();
  for (const [name, t] of self) {
    const g = GROUPS.find(([, re]) => re.test(name))?.[0] ?? 'other';
    groups.set(g, (groups.get(g) ?? 0) + t);
  }
  for (const [g, t] of [...groups].sort((a, b) => b[1] - a[1])) console.log(`${pc(t)}  ${g}`);
  console.log('');
  for (const [name, t] of [...self].sort((a, b) => b[1] - a[1]).slice(0, Number(opt('--top', '25')))) console.log(`${pc(t)}  ${name}`);
  for (const fn of opt('--lines', '').split(',').filter(Boolean)) {
    // Samples (not time) per line of the compiled JavaScript (dist), summed over every node of the function.
    const lines = new Map<string, number>();
    let samples = 0;
    for (const n of profile.nodes) {
      if (n.callFrame.functionName !== fn || !inProcess(n.id)) continue;
      for (const t of n.positionTicks ?? []) {
        const key = `${n.callFrame.url.split('/').slice(-2).join('/')}:${t.line}`;
        lines.set(key, (lines.get(key) ?? 0) + t.ticks);
        samples += t.ticks;
      }
    }
    console.log(`\n${fn}: ${samples} samples by line (of ${profile.samples.length})`);
    for (const [k, v] of [...lines].sort((a, b) => b[1] - a[1]).slice(0, Number(opt('--line-top', '12')))) console.log(`${((100 * v) / samples).toFixed(1).padStart(5)} %  ${k}`);
  }
}

if (require.main === module) main(process.argv.slice(2)).catch((e) => {
  console.error(e);
  process.exit(1);
});
