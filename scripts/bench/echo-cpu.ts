// The echo bench's cost comparison: nsm-2's live streams (the worker's LiveHost with its batching, in this process, no
// WebSocket or gateway) and our canceller on the same audio, in alternating rounds of the same length, CPU of this
// process per stream-second for each; the ratio is the canceller's share of what nsm-2 costs per stream. costRounds()
// is the round loop, also behind echo-ab.ts (two cancellers) and echo-floor.ts (the canceller beside its cost floor).
import { loadConfig } from '../../src/config';
import { EchoCanceller, type EchoCancellerOptions } from '../../src/dsp/aec';
import { LiveHost } from '../../src/inference/live/host';
import { loadGraphs } from '../../src/inference/runtime/sessions';
import { bootstrapRatio } from '../lib/stats';
import { loadTalkers } from './echo-talkers';
import { makeScene, type Scene } from './echo-scenes';

export interface CpuResult {
  streams: number;
  rounds: number;
  secondsPerRound: number;
  nsm2MsPerS: number;
  aecMsPerS: number;
  ratio: number;
  ratioLo: number;
  ratioHi: number;
}

const cpuMs = (): number => {
  const u = process.cpuUsage();
  return (u.user + u.system) / 1000;
};

/** Anything that takes a hop of microphone and reference as the canceller does. */
export interface EchoRunner {
  process(mic: Float32Array[], ref: Float32Array): unknown;
  release?(): void;
}

const FRAME = 320;

/** Seconds of scene costRounds() reads: `rounds` of `seconds` after the warm-up round. */
export const sceneSecondsFor = (rounds: number, seconds: number): number => (rounds + 1) * seconds + 1;

/**
 * `streams` nsm-2 live streams (LiveHost, batched) and each set of runners (one per stream) on the same 20 ms frames of
 * `scene`, round after round, CPU ms of this process for each; round -1 warms everything up (JIT, ONNX Runtime's first
 * runs) and is not counted. `order(r)`: the sets' order in round r (the machine's speed moves; turn it). `fresh`: new
 * sets for every round (the old ones released), each round then the scene's first `seconds` (a stream's start).
 * `noNsm`: no nsm-2 streams (nsm all 0): ONNX Runtime's threads, spinning after nsm-2's turn, count in this process's
 * CPU time during the next set's turn, the noise of a comparison of two sets.
 */
export async function costRounds(
  scene: Scene,
  sets: EchoRunner[][],
  o: { streams: number; rounds: number; seconds: number; order?: (round: number) => number[]; fresh?: () => EchoRunner[][]; noNsm?: boolean },
): Promise<{ nsm: number[]; took: number[][] }> {
  const host = o.noNsm ? null : new LiveHost(await loadGraphs(loadConfig().modelsDir));
  for (let s = 0; host && s < o.streams; s++) host.open({ streamId: s, model: 'nsm-2', channels: 1, sampleRate: 16000, encoding: 'pcm_f32le', attenuationLimitDb: 0 });
  const nsm: number[] = [];
  const took: number[][] = sets.map(() => []);
  const frames = (o.seconds * 16000) / FRAME;
  for (let r = -1; r < o.rounds; r++) {
    if (o.fresh) {
      for (const set of sets) for (const c of set) c.release?.();
      sets = o.fresh();
    }
    const start = o.fresh ? 0 : (r + 1) * o.seconds * 16000;
    let t = cpuMs();
    for (let f = 0; host && f < frames; f++) {
      const bytes = new Uint8Array(scene.mic.slice(start + f * FRAME, start + (f + 1) * FRAME).buffer);
      await host.tick(Array.from({ length: o.streams }, (_, s) => ({ streamId: s, bytes, end: false })));
    }
    const nsmMs = cpuMs() - t;
    const ms = new Array<number>(sets.length);
    for (const i of o.order ? o.order(r) : sets.map((_, k) => k)) {
      t = cpuMs();
      for (let f = 0; f < frames; f++) {
        const a = start + f * FRAME;
        const mic = scene.mic.subarray(a, a + FRAME);
        const ref = scene.ref.subarray(a, a + FRAME);
        for (const c of sets[i]) c.process([mic], ref);
      }
      ms[i] = cpuMs() - t;
    }
    if (r < 0) continue;
    nsm.push(nsmMs);
    ms.forEach((v, i) => took[i].push(v));
  }
  return { nsm, took };
}

export async function measureCpu(o: { streams?: number; rounds?: number; seconds?: number; overrides?: Partial<EchoCancellerOptions> } = {}): Promise<CpuResult> {
  const streams = o.streams ?? 100;
  const rounds = o.rounds ?? 6;
  const seconds = o.seconds ?? 2;
  const scene = makeScene({ kind: 'dt', seed: 77, seconds: sceneSecondsFor(rounds, seconds) }, loadTalkers());
  const aecs = Array.from({ length: streams }, () => new EchoCanceller({ channels: 1, ...o.overrides }));
  const { nsm, took } = await costRounds(scene, [aecs], { streams, rounds, seconds });
  const aec = took[0];
  const per = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / (rounds * seconds * streams);
  const ratio = bootstrapRatio(nsm, aec);
  return { streams, rounds, secondsPerRound: seconds, nsm2MsPerS: per(nsm), aecMsPerS: per(aec), ratio: ratio.ratio, ratioLo: ratio.lo, ratioHi: ratio.hi };
}
