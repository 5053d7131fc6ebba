// The residual gate (src/dsp/gate.ts) on synthetic signals: streaming equals one pass, the stated latency,
// loud passages untouched, onsets open ahead of time, quiet residue between loud passages turned down by the
// configured law and no more than the cap.
import { ResidualGate } from '../../src/dsp/gate';
import { RESIDUAL_GATE } from '../../src/inference/models/specs';
import { concatAll } from '../../src/dsp/concat';

const join = (...parts: Float32Array[]): Float32Array => concatAll(parts);
import { seededRandom } from '../../src/audio/synthetic-noise';

const RATE = 16000;

function tone(n: number, amp: number, freq = 440): Float32Array {
  const x = new Float32Array(n);
  for (let i = 0; i < n; i++) x[i] = amp * Math.sin((2 * Math.PI * freq * i) / RATE);
  return x;
}

function noise(n: number, amp: number, seed: number): Float32Array {
  const r = seededRandom(seed);
  const x = new Float32Array(n);
  for (let i = 0; i < n; i++) x[i] = amp * (2 * r() - 1);
  return x;
}

/** Whole signal through a fresh gate, then enough zeros to flush the latency; output aligned with the input. */
function run(x: Float32Array, chunks?: number[]): Float32Array {
  const g = new ResidualGate(RESIDUAL_GATE);
  const parts: Float32Array[] = [];
  const padded = join(x, new Float32Array(g.latency + 128));
  let o = 0;
  let k = 0;
  while (o < padded.length) {
    const n = chunks ? chunks[k++ % chunks.length] : padded.length;
    parts.push(g.process(padded.subarray(o, Math.min(padded.length, o + n))));
    o += n;
  }
  return concatAll(parts).subarray(g.latency, g.latency + x.length);
}

function rmsDb(x: Float32Array): number {
  let e = 0;
  for (const v of x) e += v * v;
  return 10 * Math.log10(e / x.length + 1e-20);
}

describe('ResidualGate', () => {
  const speechLike = join(tone(16000, 0.3), noise(16000, 0.003, 1), tone(8000, 0.3, 300), noise(24000, 0.001, 2));

  it('chunked output equals one-pass output, sample for sample', () => {
    const whole = run(speechLike);
    for (const chunks of [[7, 1, 50], [127, 129, 1000], [128], [4096, 3, 333]]) {
      const y = run(speechLike, chunks);
      let differing = 0;
      for (let i = 0; i < whole.length; i++) if (!Object.is(y[i], whole[i])) differing++;
      expect(y.length).toBe(whole.length);
      expect(differing).toBe(0);
    }
  });

  it('passes a loud steady signal unchanged after its latency', () => {
    const x = tone(32000, 0.2);
    const y = run(x);
    let maxErr = 0;
    for (let i = 0; i < x.length; i++) maxErr = Math.max(maxErr, Math.abs(y[i] - x[i]));
    expect(maxErr).toBe(0);
  });

  it('opens before an onset after quiet residue', () => {
    const quiet = noise(16000, 0.001, 3);
    const onset = tone(8000, 0.3);
    const y = run(join(tone(16000, 0.3), quiet, onset));
    const at = 32000;
    // The first 10 ms of the new tone come out at full level (the gain opened during the lookahead).
    for (let i = at; i < at + 160; i++) expect(Math.abs(y[i] - onset[i - at])).toBeLessThan(1e-6);
  });

  it('turns quiet residue between loud passages down by the expansion law, at most maxAttenDb', () => {
    // -20 dBFS speech peak (tone rms), residue at -80 dBFS: even after 1.5 s of the peak's decay (6 dB/s) it is
    // more than 15 dB below the threshold (peak - 20 dB): expansion 1:3 asks for more than 30 dB, the cap gives 30.
    const residue = noise(24000, 0.0001 * Math.sqrt(3), 4);
    const x = join(tone(16000, 0.1 * Math.SQRT2), residue, tone(16000, 0.1 * Math.SQRT2));
    const y = run(x);
    // Middle of the residue (past hold and release, before the next lookahead).
    const from = 16000 + 4000;
    const to = 16000 + 20000;
    const drop = rmsDb(x.subarray(from, to)) - rmsDb(y.subarray(from, to));
    expect(drop).toBeGreaterThan(RESIDUAL_GATE.maxAttenDb - 0.5);
    expect(drop).toBeLessThan(RESIDUAL_GATE.maxAttenDb + 0.5);
    // Residue only 10 dB below the peak is left alone.
    const mild = join(tone(16000, 0.1 * Math.SQRT2), noise(24000, 0.1 * Math.sqrt(3) / Math.sqrt(10), 5));
    const ym = run(mild);
    expect(Math.abs(rmsDb(mild.subarray(20000, 36000)) - rmsDb(ym.subarray(20000, 36000)))).toBeLessThan(0.01);
  });

  it('keeps working after a non-finite sample', () => {
    const loud = tone(16000, 0.1 * Math.SQRT2);
    loud[8000] = NaN;
    const x = join(loud, noise(24000, 0.0001 * Math.sqrt(3), 6), tone(16000, 0.1 * Math.SQRT2));
    const y = run(x);
    const drop = rmsDb(x.subarray(20000, 36000)) - rmsDb(y.subarray(20000, 36000));
    expect(drop).toBeGreaterThan(RESIDUAL_GATE.maxAttenDb - 0.5);
  });
});
