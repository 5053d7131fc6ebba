// The echo canceller's cost floor (a development tool, not part of `npm run bench`): what the bare partitioned
// filter costs per stream-second beside nsm-2's live streams and the whole canceller, in alternating rounds in this
// process. Per stream and hop (125 a second) the floor writes one reference spectrum into a ring (no FFT) and runs the
// Kalman filter's two WebAssembly SIMD loops over its 36 partitions × 129 bins: Ŷ = Σ X_p W_p with Φ, then the update of
// W_p and P_p; the other variant runs the filter loop only. Spectra come from the scene's reference, the error from its
// microphone (the values do not change the cost). No FFTs, no suppressor, no shadow: what any canceller with this
// filter length and hop must spend at least. The non-uniform variant is the same loops over the same 282 ms split as
// the docs' next step proposes: the first 8 partitions (64 ms) every hop, the remaining 28 × 128 samples as 7 partitions
// of 512 (1024-point spectra, 513 bins) updated every 4th hop: its floor (FFTs again left out).
//   node dist/scripts/bench/echo-floor.js [--streams 100] [--rounds 6] [--seconds 2] [--other DIST]
//        [--kind st]  (the scene's kind: dt, the default, or st: far-end single talk)
//        [--agent]  (a voice agent's reference: digital silence in turns of 1–4 s, about half the time; echo-talkers.ts)
//        [--set key=value]...  (options of this checkout's canceller, e.g. --set nlQuietDb=-30)
//        [--speaker linear|clip|sigmoid]  (the scene's loudspeaker; default the seed's draw)
//        [--other-set key=value]...  (options of the other dist's canceller)
//        [--fresh]  (new cancellers every round, each round a stream's first --seconds: what a stream's start costs)
//        [--no-floor]  (the cancellers only, not the bare filter's floors)
//        [--no-nsm]  (no nsm-2 streams: a quieter this/other ratio; the shares of nsm-2 are then not printed)
import path from 'node:path';
import { EchoCanceller } from '../../src/dsp/aec';
import { PartitionedKalmanFilter } from '../../src/dsp/aec/kalman-filter';
import { AecArena } from '../../src/dsp/aec/kernel';
import { RefRing } from '../../src/dsp/aec/ref-ring';
import { RealFFT } from '../../src/dsp/fft';
import { bootstrapRatio } from '../lib/stats';
import { costRounds, sceneSecondsFor, type EchoRunner } from './echo-cpu';
import { makeScene, type Loudspeaker, type SceneKind } from './echo-scenes';
import { agentTalkers, loadTalkers } from './echo-talkers';
import { optionReader, settingsOf } from '../lib/args';

const R = 128;
const K = R + 1;
const P = 36;
const CAP = 100;


/** One stream's bare filter: ring + Kalman filter in one arena; a hop is ring write + filter (+ update). */
class Floor implements EchoRunner {
  private readonly arena: AecArena;
  private readonly ring: RefRing;
  private readonly kf: PartitionedKalmanFilter;
  private readonly psi = new Float64Array(K).fill(1e-3);
  private hop = 0;

  constructor(
    private readonly specs: Bank,
    private readonly withUpdate: boolean,
  ) {
    this.arena = new AecArena(RefRing.floats(K, CAP) + PartitionedKalmanFilter.floats(R, P), 'wasm');
    this.ring = new RefRing(this.arena, K, CAP);
    this.kf = new PartitionedKalmanFilter(this.arena, { block: R, partitions: P, step: 0.5, forget: 0.99995, priorDecay: 0.85 });
  }

  process(mic: Float32Array[]): void {
    const hops = mic[0].length / R;
    const s = this.specs;
    const S = this.ring.stride;
    const n = s.re.length / S;
    for (let h = 0; h < hops; h++) {
      const i = (this.hop++ % n) * S;
      const o = this.ring.advance();
      this.ring.re.a.set(s.re.subarray(i, i + S), o);
      this.ring.im.a.set(s.im.subarray(i, i + S), o);
      this.ring.pow.a.set(s.pow.subarray(i, i + S), o);
      this.kf.filter(this.ring, 10);
      if (!this.withUpdate) continue;
      this.kf.eRe.a.set(s.eRe.subarray(i, i + S));
      this.kf.eIm.a.set(s.eIm.subarray(i, i + S));
      this.kf.update(this.ring, this.psi);
    }
  }
}

type Bank = { re: Float32Array; im: Float32Array; pow: Float32Array; eRe: Float32Array; eIm: Float32Array };

/** One uniform block size's ring and filter, fed from a bank of spectra of its stride. */
class Section {
  private readonly ring: RefRing;
  private readonly kf: PartitionedKalmanFilter;
  private readonly psi: Float64Array;
  private n = 0;

  constructor(arena: AecArena, block: number, partitions: number, capacity: number, private readonly bank: Bank) {
    this.ring = new RefRing(arena, block + 1, capacity);
    this.kf = new PartitionedKalmanFilter(arena, { block, partitions, step: 0.5, forget: 0.99995, priorDecay: 0.85 });
    this.psi = new Float64Array(block + 1).fill(1e-3);
  }

  static floats(block: number, partitions: number, capacity: number): number {
    return RefRing.floats(block + 1, capacity) + PartitionedKalmanFilter.floats(block, partitions);
  }

  step(): void {
    const s = this.bank;
    const S = this.ring.stride;
    const i = (this.n++ % (s.re.length / S)) * S;
    const o = this.ring.advance();
    this.ring.re.a.set(s.re.subarray(i, i + S), o);
    this.ring.im.a.set(s.im.subarray(i, i + S), o);
    this.ring.pow.a.set(s.pow.subarray(i, i + S), o);
    this.kf.filter(this.ring, 2);
    this.kf.eRe.a.set(s.eRe.subarray(i, i + S));
    this.kf.eIm.a.set(s.eIm.subarray(i, i + S));
    this.kf.update(this.ring, this.psi);
  }
}

/** 8 partitions of 128 every hop, then 7 of 512 every 4th hop: the same 282 ms. */
class NonUniformFloor implements EchoRunner {
  private readonly head: Section;
  private readonly tail: Section;
  private hop = 0;

  constructor(bank: Bank, tailBank: Bank) {
    const arena = new AecArena(Section.floats(R, 8, CAP) + Section.floats(4 * R, 7, 30), 'wasm');
    this.head = new Section(arena, R, 8, CAP, bank);
    this.tail = new Section(arena, 4 * R, 7, 30, tailBank);
  }

  process(mic: Float32Array[]): void {
    const hops = mic[0].length / R;
    for (let h = 0; h < hops; h++) {
      this.head.step();
      if (this.hop++ % 4 === 3) this.tail.step();
    }
  }
}

/** A bank of 4R-point spectra (4R + 1 bins, padded) made by repeating the R-point bank's rows. */
function widen(b: Bank, S: number): Bank {
  const S4 = RefRing.strideOf(4 * R + 1);
  const rows = b.re.length / S;
  const out = { re: new Float32Array(rows * S4), im: new Float32Array(rows * S4), pow: new Float32Array(rows * S4), eRe: new Float32Array(rows * S4), eIm: new Float32Array(rows * S4) };
  for (let r = 0; r < rows; r++) {
    for (let k = 0; k <= 4 * R; k++) {
      const j = r * S + (k % K);
      for (const key of ['re', 'im', 'pow', 'eRe', 'eIm'] as const) out[key][r * S4 + k] = b[key][j];
    }
  }
  return out;
}

async function main(args: string[]): Promise<void> {
  const opt = optionReader(args);
  const streams = Number(opt('--streams', '100'));
  const rounds = Number(opt('--rounds', '6'));
  const seconds = Number(opt('--seconds', '2'));
  const other = args.includes('--other') ? path.resolve(opt('--other', '')) : null;
  const opts = settingsOf(args, '--set');
  const talkers = args.includes('--agent') ? agentTalkers(loadTalkers()) : loadTalkers();
  const scene = makeScene({ kind: opt('--kind', 'dt') as SceneKind, seed: 77, seconds: args.includes('--fresh') ? seconds + 1 : sceneSecondsFor(rounds, seconds), speaker: args.includes('--speaker') ? (opt('--speaker', '') as Loudspeaker) : undefined }, talkers);
  console.log(`scene: ${scene.name}, ${scene.speaker} loudspeaker`);
  // Spectrum bank: the reference's and the microphone's spectra of the first 4 s, rows of the ring's stride.
  const S = RefRing.strideOf(K);
  const hopsBank = 500;
  const bank = { re: new Float32Array(hopsBank * S), im: new Float32Array(hopsBank * S), pow: new Float32Array(hopsBank * S), eRe: new Float32Array(hopsBank * S), eIm: new Float32Array(hopsBank * S) };
  const fft = new RealFFT(2 * R);
  const re = new Float64Array(K);
  const im = new Float64Array(K);
  for (let h = 0; h < hopsBank; h++) {
    fft.forward(scene.ref, h * R, re, im, 0);
    for (let k = 0; k < K; k++) {
      bank.re[h * S + k] = re[k];
      bank.im[h * S + k] = im[k];
      bank.pow[h * S + k] = re[k] * re[k] + im[k] * im[k];
    }
    fft.forward(scene.mic, h * R, re, im, 0);
    for (let k = 0; k < K; k++) {
      bank.eRe[h * S + k] = 1e-2 * re[k];
      bank.eIm[h * S + k] = 1e-2 * im[k];
    }
  }
  const wide = widen(bank, S);
  const variants: { name: string; make: () => EchoRunner }[] = [
    { name: 'canceller', make: () => new EchoCanceller({ channels: 1, ...opts }) },
    { name: 'floor: filter + update', make: () => new Floor(bank, true) },
    { name: 'floor: filter only', make: () => new Floor(bank, false) },
    { name: 'floor: non-uniform 8+7×4', make: () => new NonUniformFloor(bank, wide) },
  ];
  if (other) {
    const Other = require(path.join(other, 'src', 'dsp', 'aec')).EchoCanceller as new (o: { channels: number }) => EchoRunner;
    const otherOpts = settingsOf(args, '--other-set');
    variants.splice(1, 0, { name: `canceller of ${other}`, make: () => new Other({ channels: 1, ...otherOpts }) });
  }
  if (args.includes('--no-floor')) variants.splice(other ? 2 : 1);
  const makeSets = (): EchoRunner[][] => variants.map((v) => Array.from({ length: streams }, v.make));
  const sets = makeSets();
  const fresh = args.includes('--fresh') ? makeSets : undefined;
  // Rotate the variants' order from round to round.
  const order = (r: number): number[] => variants.map((_, i) => (i + Math.max(r, 0)) % variants.length);
  const { nsm, took } = await costRounds(scene, sets, { streams, rounds, seconds, order, fresh, noNsm: args.includes('--no-nsm') });
  const per = rounds * seconds * streams;
  const mean = (xs: number[]): number => xs.reduce((a, b) => a + b, 0) / xs.length / (per / rounds);
  const f = (x: number, d = 2): string => x.toFixed(d);
  console.log(`${streams} streams, ${rounds} rounds of ${seconds} s; nsm-2 ${f(mean(nsm))} ms per stream-second`);
  variants.forEach((v, i) => {
    const q = bootstrapRatio(nsm, took[i]);
    const share = args.includes('--no-nsm') ? '' : `, ${f(100 * q.ratio, 1)} % [${f(100 * q.lo, 1)}, ${f(100 * q.hi, 1)}] of nsm-2`;
    console.log(`${v.name.padEnd(30)} ${f(mean(took[i]))} ms per stream-second${share}`);
  });
  if (other) {
    const q = bootstrapRatio(took[1], took[0]);
    console.log(`this/other canceller in the same rounds: ${f(q.ratio, 3)} [${f(q.lo, 3)}, ${f(q.hi, 3)}]`);
  }
}

if (require.main === module) main(process.argv.slice(2)).catch((e) => {
  console.error(e);
  process.exit(1);
});
