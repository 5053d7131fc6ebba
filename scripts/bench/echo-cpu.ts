// The echo bench's cost comparison: nsm-2's live streams (the worker's LiveHost with its batching, in this process, no
// WebSocket or gateway) and our canceller on the same audio, in alternating rounds of the same length, CPU of this
// process per stream-second for each; the ratio is the canceller's share of what nsm-2 costs per stream.
import { loadConfig } from '../../src/config';
import { EchoCanceller, type EchoCancellerOptions } from '../../src/dsp/aec';
import { LiveHost } from '../../src/inference/live/host';
import { loadGraphs } from '../../src/inference/runtime/sessions';
import { bootstrapRatio } from '../lib/stats';
import { loadTalkers } from './echo-talkers';
import { makeScene } from './echo-scenes';

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

export async function measureCpu(o: { streams?: number; rounds?: number; seconds?: number; overrides?: Partial<EchoCancellerOptions> } = {}): Promise<CpuResult> {
  const streams = o.streams ?? 100;
  const rounds = o.rounds ?? 6;
  const seconds = o.seconds ?? 2;
  const scene = makeScene({ kind: 'dt', seed: 77, seconds: rounds * seconds + 1 }, loadTalkers());
  const host = new LiveHost(await loadGraphs(loadConfig().modelsDir));
  for (let s = 0; s < streams; s++) host.open({ streamId: s, model: 'nsm-2', channels: 1, sampleRate: 16000, encoding: 'pcm_f32le', attenuationLimitDb: 0 });
  const aecs = Array.from({ length: streams }, () => new EchoCanceller({ channels: 1, ...o.overrides }));
  const FRAME = 320;
  const nsm: number[] = [];
  const aec: number[] = [];
  let pos = 0;
  for (let r = -1; r < rounds; r++) {
    // Round -1 warms both up (JIT, ONNX Runtime's first runs) and is not counted.
    const start = pos;
    const frames = (seconds * 16000) / FRAME;
    let t = cpuMs();
    for (let f = 0; f < frames; f++) {
      const chunk = scene.mic.slice(start + f * FRAME, start + (f + 1) * FRAME);
      const bytes = new Uint8Array(chunk.buffer);
      await host.tick(Array.from({ length: streams }, (_, s) => ({ streamId: s, bytes, end: false })));
    }
    const nsmMs = cpuMs() - t;
    t = cpuMs();
    for (let f = 0; f < frames; f++) {
      const a = start + f * FRAME;
      const mic = scene.mic.subarray(a, a + FRAME);
      const ref = scene.ref.subarray(a, a + FRAME);
      for (let s = 0; s < streams; s++) aecs[s].process([mic], ref);
    }
    const aecMs = cpuMs() - t;
    pos += seconds * 16000;
    if (r < 0) continue;
    nsm.push(nsmMs);
    aec.push(aecMs);
  }
  const per = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / (rounds * seconds * streams);
  const ratio = bootstrapRatio(nsm, aec);
  return { streams, rounds, secondsPerRound: seconds, nsm2MsPerS: per(nsm), aecMsPerS: per(aec), ratio: ratio.ratio, ratioLo: ratio.lo, ratioHi: ratio.hi };
}
