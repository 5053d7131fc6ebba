// Helpers of the echo canceller's unit tests: talkers from the LibriSpeech clip shipped in @vonage/noise-suppression
// (read in-process, 48 → 16 kHz by our own decimator; no child process), scenes from the bench's generator
// (scripts/bench/echo-scenes.ts: image-method rooms), and the canceller run over a scene in chunks.
import path from 'node:path';
import { WavReader } from '../../src/audio/wav';
import { AEC_LATENCY, EchoCanceller, type EchoCancellerOptions, type EchoCancellerStats } from '../../src/dsp/aec';
import type { RefRing } from '../../src/dsp/aec/ref-ring';
import { Decimator3 } from '../../src/dsp/resample';
import { activeRms, FS, makeScene, type Scene, type Talkers } from '../../scripts/bench/echo-scenes';

export { FS };

const CLIP = path.join(__dirname, '..', '..', '..', 'node_modules', '@vonage', 'noise-suppression', 'data', '7729-102255-0000.wav');

let cached: Talkers | null = null;

/**
 * Far end: the clip's speech (its leading and trailing silence cut) looped; near end: the same speech reversed in time
 * (the spectra of speech, none of its content: uncorrelated with the far end).
 */
export async function talkers(): Promise<Talkers> {
  if (cached) return cached;
  const r = await WavReader.open(CLIP);
  if (!r) throw new Error(`${CLIP} is not a WAV`);
  const x48 = (await r.read(r.info.frames))[0];
  await r.close();
  const x = new Decimator3().process(x48);
  const frame = 320;
  let max = 0;
  const energies: number[] = [];
  for (let i = 0; i + frame <= x.length; i += frame) {
    let e = 0;
    for (let j = i; j < i + frame; j++) e += x[j] * x[j];
    energies.push(e);
    max = Math.max(max, e);
  }
  const first = energies.findIndex((e) => e > max * 1e-3);
  const last = energies.length - 1 - [...energies].reverse().findIndex((e) => e > max * 1e-3);
  const speech = x.slice(first * frame, (last + 1) * frame);
  const g = 0.1 / activeRms(speech);
  for (let i = 0; i < speech.length; i++) speech[i] *= g;
  cached = { far: speech, near: speech.slice().reverse() };
  return cached;
}

/**
 * A single-talk scene whose echo's delay jumps from `from` to `to` ms at `atS` seconds: the same room, loudspeaker and
 * far end (the generator draws the same room for a seed whatever the delay), the microphone and its echo switching from
 * one scene's to the other's. The reference is the first scene's (both scenes have the same).
 */
export function delayJump(t: Talkers, seed: number, seconds: number, from: number, to: number, atS: number): Scene {
  const a = makeScene({ kind: 'st', seed, seconds, speaker: 'linear', delayMs: from }, t);
  const b = makeScene({ kind: 'st', seed, seconds, speaker: 'linear', delayMs: to }, t);
  const at = atS * FS;
  return { ...a, mic: a.mic.map((v, i) => (i < at ? v : b.mic[i])), echo: a.echo.map((v, i) => (i < at ? v : b.echo[i])) };
}

export interface Run {
  /** Output aligned with the input (the canceller's latency removed), as long as the input. */
  out: Float32Array[];
  stats: EchoCancellerStats;
  aec: EchoCanceller;
}

/**
 * The canceller over mic/ref in chunks of `chunk` samples (or the sizes `chunks` cycles through), then flushed;
 * `beforeChunk` sees the canceller before each chunk (at input sample `pos`), e.g. to spoil its state.
 */
export function runCanceller(
  mic: Float32Array[],
  ref: Float32Array,
  opts: Partial<EchoCancellerOptions> = {},
  chunks: number[] = [320],
  beforeChunk?: (aec: EchoCanceller, pos: number) => void,
): Run {
  const aec = new EchoCanceller({ channels: mic.length, ...opts });
  const n = ref.length;
  const out = mic.map(() => new Float32Array(n + AEC_LATENCY + 2 * 128));
  let w = 0;
  let pos = 0;
  let c = 0;
  const feed = (m: Float32Array[], r: Float32Array): void => {
    const y = aec.process(m, r);
    y.forEach((ch, i) => out[i].set(ch, w));
    w += y[0].length;
  };
  while (pos < n) {
    const len = Math.min(chunks[c++ % chunks.length], n - pos);
    beforeChunk?.(aec, pos);
    feed(
      mic.map((ch) => ch.subarray(pos, pos + len)),
      ref.subarray(pos, pos + len),
    );
    pos += len;
  }
  const tail = new Float32Array(AEC_LATENCY + 128);
  feed(
    mic.map(() => tail),
    tail,
  );
  return { out: out.map((ch) => ch.slice(AEC_LATENCY, AEC_LATENCY + n)), stats: aec.stats(), aec };
}

/** A reference spectrum (bins 0..re.length-1) into the ring's next entry with its power, as the canceller's hop writes it. */
export function pushSpectrum(ring: RefRing, re: Float64Array, im: Float64Array): void {
  const o = ring.advance();
  for (let k = 0; k < re.length; k++) {
    ring.re.a[o + k] = re[k];
    ring.im.a[o + k] = im[k];
    ring.pow.a[o + k] = re[k] * re[k] + im[k] * im[k];
  }
}
